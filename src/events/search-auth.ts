/**
 * Who calls `/search`: HTTP basic credentials of an identity with a password (its UPDB
 * authenticator), as search clients send them, or the token of a fully authenticated API session
 * (`zt-session` or `Authorization: Bearer`). Reads need admin or `ops.read` (`admin_readonly` too); ingest needs admin or
 * `ops.update`.
 *
 * Verifying a password costs an argon2 hash on the worker pool; clients send the credentials
 * with every request, so a verified pair is remembered for a few minutes under an HMAC of it
 * (never the password itself) and only while the authenticator still holds the same hash.
 */
import crypto from 'node:crypto';
import type { EventsApp as App } from './context.js';
import type { Req } from '../core/operation.js';
import type { Rec, IdentityRecord } from '../store/store.js';
import { isPermitted } from '../auth/permissions.js';
import { dummyPasswordHash } from '../auth/passwords.js';
import { SearchError } from './query.js';

/** Verified for an unknown user, so the answer time does not tell which users exist. */
const CACHE_MS = 5 * 60_000;
const CACHE_MAX = 10_000;

export class Unauthenticated extends SearchError {
  constructor(reason: string) {
    super(401, 'security_exception', reason);
  }
}

export class SearchAuth {
  private readonly secret = crypto.randomBytes(32);
  private readonly verified = new Map<string, { authenticatorId: string; hash: string; until: number }>();

  constructor(private readonly app: App) {}

  /** The calling identity; throws Unauthenticated. */
  async identify(req: Req): Promise<IdentityRecord> {
    const { store, sessions } = this.app;
    const header = req.headers.authorization ?? '';
    // An API-session token as `zt-session` or as `Authorization: Bearer` (the oauth2 scheme).
    const token = req.headers['zt-session']?.trim() || /^bearer\s+(\S+)\s*$/i.exec(header)?.[1];
    if (token) {
      const s = sessions.resolve(token, req);
      const identity = s && sessions.isFullyAuthenticated(s) ? sessions.identityOf(s) : undefined;
      if (!identity) throw new Unauthenticated('the API-session token is invalid or expired');
      return identity;
    }
    const m = /^basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header);
    if (!m) throw new Unauthenticated(`missing authentication credentials for REST request [${req.path}]`);
    const decoded = Buffer.from(m[1], 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) throw new Unauthenticated('malformed basic credentials');
    const username = decoded.slice(0, colon);
    const password = decoded.slice(colon + 1);
    const fail = () => new Unauthenticated(`unable to authenticate user [${username.slice(0, 100)}] for REST request [${req.path}]`);
    if (username.length === 0 || username.length > 100 || password.length === 0 || password.length > 100) throw fail();

    const auth = store.findUnique('authenticators', 'username', username);
    const hash = auth?.method === 'updb' && typeof auth.passwordHash === 'string' ? (auth.passwordHash as string) : undefined;
    const key = crypto.createHmac('sha256', this.secret).update(username).update('\u0000').update(password).digest('base64');
    const hit = this.verified.get(key);
    const now = Date.now();
    let good = hit !== undefined && hit.until > now && hash !== undefined && hit.authenticatorId === auth!.id && hit.hash === hash;
    if (!good) {
      this.verified.delete(key);
      good = await this.app.pool.run('verifyPassword', { hash: hash ?? (await dummyPasswordHash(this.app)), password });
      if (!good || !hash) throw fail();
      if (this.verified.size >= CACHE_MAX) this.verified.clear();
      this.verified.set(key, { authenticatorId: auth!.id, hash, until: now + CACHE_MS });
    }
    const identity = store.get('identities', auth!.identityId);
    if (!identity || isDisabled(identity, now)) throw fail();
    const policy = store.get('authPolicies', identity.authPolicyId ?? 'default');
    if (policy?.primary?.updb?.allowed === false) throw fail();
    return identity;
  }

  /** Throws 403 unless the identity may do `action` on the event indices. */
  authorize(identity: IdentityRecord, action: 'read' | 'update', what: string) {
    if (isPermitted(identity, { family: 'ops', action })) return;
    throw new SearchError(403, 'security_exception', `action [${what}] is unauthorized for user [${String(identity.name)}]; it needs admin or ops.${action}`);
  }
}

function isDisabled(r: Rec, now: number): boolean {
  if (!r.disabledAt) return false;
  return r.disabledUntil === undefined || r.disabledUntil === null || Number(r.disabledUntil) > now;
}
