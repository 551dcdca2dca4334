/**
 * Logins: the primary login methods (password, certificate, external JWT), the rules every login
 * shares, and the API session a login makes. `POST /authenticate` and the OIDC login steps both
 * call `Logins.login`, so lockout, auth policy and secondary factors are decided in one place.
 *
 * The common path: the method identifies the caller, then — for every method — a disabled
 * identity is refused, the auth policy must allow the primary method (and the signer, and an
 * expired certificate), wrong passwords count towards the lockout, and the policy plus the
 * identity's verified MFA decide the secondary factors of the new API session.
 *
 * Example: `await logins.login({ method: 'password', fields: { username, password }, req })`
 * → `{ identity, session, token, … }` or throws INVALID_AUTH.
 */
import { errors } from '../core/errors.js';
import type { Req } from '../core/operation.js';
import type { IdentityRecord, Store } from '../store/store.js';
import type { WorkerPool } from '../pool.js';
import type { ApiSession, ApiSessions } from '../auth/api-sessions.js';
import { bearerTokens, type ExtJwtVerifier } from '../auth/ext-jwt.js';
import { checkUsername } from '../auth/passwords.js';
import { checkPrimary, isDisabledAt, secondaryFactors, type PrimaryMethod } from '../auth/login-policy.js';
import { clearFailedPasswords, recordFailedPassword } from '../auth/disable.js';
import { isDisabled } from '../resources/identities.js';
import { write } from '../resources/write.js';
import { fingerprintOf } from '../pki/certs.js';
import { chainsTo, externalIdOf, isExpired, x509 } from '../pki/chain.js';


/** What a login method reads of the request: the TLS client certificate and the Authorization header. */
export type LoginRequest = Pick<Req, 'headers' | 'remoteAddress' | 'peerLeaf' | 'peerCertificates'>;

export interface LoginResult {
  identity: IdentityRecord;
  authenticatorId: string;
  /** For ext-jwt: the signer that verified the token (auth policy `allowedSigners`). */
  externalJwtSignerId?: string;
  /** For cert: the presented certificate is past its notAfter (auth policy `allowExpiredCerts`). */
  certExpired?: boolean;
  /** Extra fields stored on the new API session (e.g. `isCertExtendable`, `improperClientCertChain`). */
  sessionFields?: Record<string, unknown>;
  /** Extra response headers of the login (e.g. `mesh-authenticator-extend-requested`). */
  headers?: Record<string, string>;
}

export interface LoginAttempt {
  /** `password`, `cert` or `ext-jwt`; anything else is a 400 on `method`. */
  method: string;
  /** The method's fields (password: `username`, `password`). */
  fields: Record<string, unknown>;
  req: LoginRequest;
  /** Config types asked for (names or ids), kept on the API session. */
  configTypes?: unknown;
  /** What the client says of itself, kept on the identity. */
  envInfo?: Record<string, unknown>;
  sdkInfo?: Record<string, unknown>;
  /**
   * Prove the auth policy's secondary external-JWT factor now, from the request's Bearer tokens,
   * instead of leaving it to later requests (the OIDC flow: its tokens then stand for it).
   */
  extJwtAtLogin?: boolean;
}

export interface LoginsDeps {
  store: Store;
  /** Only `run('verifyPassword', …)`: the argon2id check, off the event loop. */
  pool: Pick<WorkerPool, 'run'>;
  extJwt: ExtJwtVerifier;
  sessions: ApiSessions;
  /** A hash of this controller's cost of a password nobody knows (auth/passwords.ts `dummyPasswordHash`). */
  dummyHash: () => Promise<string>;
  /** The minute `lockoutDurationMinutes` counts in (config `minuteMs`; default a real one). */
  minuteMs?: number;
}

export class Logins {
  private readonly methods: Record<PrimaryMethod, (fields: Record<string, unknown>, req: LoginRequest) => Promise<LoginResult>>;

  constructor(private readonly deps: LoginsDeps) {
    this.methods = { password: (f) => this.password(f), cert: (_f, req) => this.cert(req), 'ext-jwt': (_f, req) => this.extJwt(req) };
  }

  /**
   * A whole login: the primary step, then the client's self-description on the identity, then the
   * API session with its secondary factors.
   */
  async login(a: LoginAttempt): Promise<{ identity: IdentityRecord; result: LoginResult; session: ApiSession; token: string }> {
    const { store, sessions, extJwt } = this.deps;
    const { identity, result } = await this.primary(a.method, a.fields, a.req);
    if (a.envInfo || a.sdkInfo) {
      await write(store, (tx) => {
        const cur = tx.get('identities', identity.id);
        if (!cur) throw errors.invalidAuth();
        tx.put('identities', { ...cur, envInfo: a.envInfo ?? cur.envInfo, sdkInfo: a.sdkInfo ?? cur.sdkInfo });
      });
    }
    const secondary = secondaryFactors(store, identity);
    const extJwtPassed = a.extJwtAtLogin === true && secondary.extJwtSignerId !== undefined && (await extJwt.satisfiesSecondary(a.req.headers['authorization'], secondary.extJwtSignerId, identity.id));
    const { session, token } = await sessions.create({
      identityId: identity.id,
      authenticatorId: result.authenticatorId,
      method: a.method,
      primarySignerId: result.externalJwtSignerId,
      ipAddress: a.req.remoteAddress,
      configTypes: this.configTypes(a.configTypes),
      isMfaRequired: secondary.isMfaRequired,
      extJwtSignerId: extJwtPassed ? undefined : secondary.extJwtSignerId,
      extra: result.sessionFields,
    });
    return { identity, result, session, token };
  }

  /**
   * The primary step alone: the method identifies the caller, then the disabled-identity and
   * auth-policy rules apply and a good password clears the failure count.
   */
  async primary(method: string, fields: Record<string, unknown>, req: LoginRequest): Promise<{ identity: IdentityRecord; result: LoginResult }> {
    const login = Object.hasOwn(this.methods, method) ? this.methods[method as PrimaryMethod] : undefined;
    if (!login) throw errors.field('method', 'must be one of password, cert, ext-jwt', method);
    const result = await login(fields, req);
    const { store } = this.deps;
    // Re-read: a lockout or disable may have landed while the method was verifying.
    const identity = store.get('identities', result.identity.id);
    if (!identity) throw errors.invalidAuth();
    checkPrimary(store, { method: method as PrimaryMethod, identity, signerId: result.externalJwtSignerId, certExpired: result.certExpired });
    if (method === 'password') await clearFailedPasswords(store, result.authenticatorId);
    return { identity, result };
  }

  /** Config types asked for at login: names or ids; unknown ones are dropped; `all` stays. */
  configTypes(wanted: unknown): string[] {
    if (!Array.isArray(wanted)) return [];
    const { store } = this.deps;
    const out = new Set<string>();
    for (const w of wanted) {
      if (typeof w !== 'string') continue;
      if (w === 'all') out.add('all');
      else if (store.get('configTypes', w)) out.add(w);
      else {
        const byName = store.findUnique('configTypes', 'name', w);
        if (byName) out.add(byName.id);
      }
    }
    return [...out];
  }

  /** Does this request's Authorization header carry the secondary ext-JWT the session requires (or need none)? */
  async extJwtSatisfied(authorization: string | undefined, s: ApiSession): Promise<boolean> {
    if (!s.extJwtSignerId) return true;
    return this.deps.extJwt.satisfiesSecondary(authorization, s.extJwtSignerId, s.identityId);
  }

  private async password(fields: Record<string, unknown>): Promise<LoginResult> {
    const { store, pool } = this.deps;
    const { username, password } = fields;
    // Missing or out-of-range fields are a validation error, not a failed login.
    checkUsername(username);
    if (typeof password !== 'string' || password.length === 0) throw errors.field('password', 'password is required', password ?? null);
    if (password.length < 5 || password.length > 100) throw errors.field('password', 'password must be 5 to 100 characters long', undefined);
    const auth = store.findUnique('authenticators', 'username', username as string);
    // An unknown username verifies against a hash nobody knows, so timing does not reveal users.
    const hash = auth?.method === 'updb' ? (auth.passwordHash as string) : await this.deps.dummyHash();
    const good = await pool.run('verifyPassword', { hash, password });
    const identity = auth?.method === 'updb' ? store.get('identities', auth.identityId) : undefined;
    if (!auth || !identity) {
      await store.commitMark();
      throw errors.invalidAuth();
    }
    if (!good) {
      // Attempts against a disabled (e.g. already locked) identity are not counted again; they,
      // like unknown usernames above, wait for a commit all the same: a wrong password's answer
      // waits for its count to be durable, and a faster refusal would tell which usernames exist.
      if (!isDisabledAt(identity)) await recordFailedPassword(store, auth.id, this.deps.minuteMs);
      else await store.commitMark();
      throw errors.invalidAuth();
    }
    return { identity, authenticatorId: auth.id };
  }

  /**
   * Certificate login over the mutual-TLS listener. The TLS handshake proved possession of the
   * key; the leaf then identifies the caller:
   * - by fingerprint, pinned on a cert authenticator (controller-issued, ottca/CA-enrolled, or
   *   created by an admin); one from a third-party CA needs that CA still verified and auth-enabled;
   * - otherwise through a verified, auth-enabled CA with an `externalIdClaim` that signed the chain,
   *   by the external id it names.
   * The certificate rules of the identity's auth policy (`cert.allowed`, `allowExpiredCerts`) and a
   * disabled identity fail here too, so the method is safe on its own; `primary` re-applies them.
   */
  private async cert(req: LoginRequest): Promise<LoginResult> {
    const leafDer = req.peerLeaf ?? req.peerCertificates?.[0];
    if (!leafDer) throw errors.invalidAuth();
    const { store } = this.deps;
    const now = Date.now();
    const fp = fingerprintOf(leafDer);
    const auth = store.findUnique('authenticators', 'fingerprint', fp);
    let identity: IdentityRecord | undefined;
    let authenticatorId: string;
    let certExpired: boolean;
    let sessionFields: Record<string, unknown>;
    const headers: Record<string, string> = {};
    if (auth?.method === 'cert') {
      if (auth.caId) {
        const ca = store.get('cas', auth.caId);
        if (!ca || !ca.isVerified || !ca.isAuthEnabled) throw errors.invalidAuth();
      }
      identity = store.get('identities', auth.identityId);
      authenticatorId = auth.id;
      certExpired = typeof auth.certNotAfter === 'number' ? auth.certNotAfter < now : isExpired(x509(leafDer), now);
      sessionFields = {
        isCertExtendable: auth.isIssuedByNetwork === true,
        isCertExtendRequested: auth.isExtendRequested === true,
        isCertKeyRollRequested: auth.isKeyRollRequested === true,
        // The certificate is pinned and the TLS handshake proved its key; whether the client sent
        // its intermediates can not be told here (node completes the peer chain from the server's
        // own certificates), so this stays false.
        improperClientCertChain: false,
      };
      if (auth.isExtendRequested) headers['mesh-authenticator-extend-requested'] = 'true';
      if (auth.isKeyRollRequested) headers['mesh-authenticator-roll-key-requested'] = 'true';
    } else {
      const chain = req.peerCertificates ?? [leafDer];
      const leaf = x509(leafDer);
      let found: { identity: IdentityRecord; caId: string } | undefined;
      for (const ca of store.scan('cas')) {
        if (!ca.isVerified || !ca.isAuthEnabled || !ca.externalIdClaim) continue;
        if (!chainsTo(chain, x509(ca.certPem), now)) continue;
        const externalId = externalIdOf(leaf, ca.externalIdClaim);
        const ident = externalId === undefined ? undefined : store.findUnique('identities', 'externalId', externalId);
        if (ident) {
          found = { identity: ident, caId: ca.id };
          break;
        }
      }
      if (!found) throw errors.invalidAuth();
      identity = found.identity;
      authenticatorId = found.caId;
      certExpired = isExpired(leaf, now);
      sessionFields = { isCertExtendable: false, isCertExtendRequested: false, isCertKeyRollRequested: false, improperClientCertChain: false };
    }
    if (!identity || isDisabled(identity, now)) throw errors.invalidAuth();
    const policy = store.get('authPolicies', identity.authPolicyId ?? 'default');
    const rules = policy?.primary?.cert;
    if (rules?.allowed === false) throw errors.invalidAuth();
    if (certExpired && rules?.allowExpiredCerts === false) throw errors.invalidAuth();
    return { identity, authenticatorId, certExpired, sessionFields, headers };
  }

  /**
   * External JWT login: `Authorization: Bearer <jwt>` from an enabled external JWT signer
   * (src/auth/ext-jwt.ts). Every failure — malformed token, unknown kid or issuer, disabled signer,
   * bad signature, wrong audience, expired, no such identity — is the same 401 INVALID_AUTH.
   */
  private async extJwt(req: LoginRequest): Promise<LoginResult> {
    const tokens = bearerTokens(req.headers['authorization']);
    if (tokens.length === 0) throw errors.invalidAuth();
    for (const token of tokens) {
      try {
        const v = await this.deps.extJwt.verify(token);
        if (!v.identity) continue;
        return { identity: v.identity, authenticatorId: v.signer.id, externalJwtSignerId: v.signer.id };
      } catch {
        // try the next bearer token, if any
      }
    }
    throw errors.invalidAuth();
  }
}
