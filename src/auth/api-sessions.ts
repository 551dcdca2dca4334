/**
 * API sessions: the token a client holds is a JWT signed with the controller's key (tokens.ts:
 * `sub` identity, `jti` API-session id, `z_t: "api-session"`); the API session's state (MFA,
 * config types, activity) is a record persisted in the store (so a restart keeps logins) and
 * mirrored in memory by id. The store keeps only a SHA-256 of the token (`token`), so a copied
 * data directory holds nothing a client could present.
 *
 * Authenticating a request: a verified token is remembered (token → id), so its signature is
 * checked once, then every request is two Map lookups. A token is valid while its record is in
 * the mirror: the mirror follows store change events, so every write path that ends an API
 * session (logout, admin delete, identity disable or delete, authenticator delete or re-enroll,
 * auth-policy change, idle sweep) refuses its token from the next request on, on every controller
 * the store's changes reach (docs/auth.md).
 *
 * Last activity is kept in memory and flushed in one batched write every `activityFlushMs`,
 * never one commit per request. In a cluster each controller flushes only the API sessions it keeps
 * for itself, and tells the others which API sessions it saw used in a coarse activity beat
 * (src/cluster/sessions.ts), never per request.
 */
import type { ChangeEvent, Rec, Store, Tx, ApiSessionRecord, IdentityRecord } from '../store/store.js';
import { timeOrderedId } from '../store/ids.js';
import { tokenDigest, type SigningKeys, type TokenClaims } from './tokens.js';
import { allowsPrimary, type PrimaryMethod } from './login-policy.js';
import { fingerprintOf } from '../pki/certs.js';
import type { CoreApp, Ctx } from '../core/context.js';

export const API_SESSION_TOKEN = 'api-session';
/** `z_t` of OIDC access and refresh tokens, as upstream names them. */
export const ACCESS_TOKEN = 'a';
export const REFRESH_TOKEN = 'r';


/** A token in the format stored before tokens were signed (a random UUID kept in clear). */
const PLAIN_TOKEN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** A handler's context once the router has resolved the caller's API session (when one was presented). */
export interface SessionCtx<A extends CoreApp = CoreApp> extends Ctx<A> {
  session?: ApiSession;
}

/** An API session record (its fields: src/store/stored-fields.ts). */
export type ApiSession = ApiSessionRecord;

/** The unverified `z_t` of a compact JWS; undefined when it has none or is not one. */
function claimedType(token: string): unknown {
  const first = token.indexOf('.');
  const second = token.indexOf('.', first + 1);
  if (first <= 0 || second <= first || token.length > 4096) return undefined;
  try {
    return JSON.parse(Buffer.from(token.slice(first + 1, second), 'base64url').toString('utf8'))?.z_t;
  } catch {
    return undefined;
  }
}

interface VerifiedToken {
  token: string;
  id: string;
  /** Access tokens: when the token expires (ms). */
  exp?: number;
  /** Access tokens bound to certificates (`z_cfs`): the fingerprints, one of which the request must present. */
  bound?: string[];
}

/** What a request shows of its client certificate (the certificate listener's `Req`). */
export interface PeerCertificate {
  peerLeaf?: Buffer;
  peerCertificates?: Buffer[];
}

/**
 * The verified-token cache's key: the token's last 24 characters, inside its signature. A header
 * value is a fresh string on every request, so a Map lookup hashes it every time, character by
 * character, an order of magnitude more for a whole JWS than for 24 characters. The entry keeps
 * the whole token, compared in full on every hit (a flat memory compare).
 */
const cacheKey = (token: string) => (token.length > 24 ? token.slice(-24) : token);

/** What a token made here carries of its API session, for another controller to take it on. */
export type SessionClaimsOf = Omit<ApiSession, 'token' | 'lastActivityAt' | 'updatedAt' | 'tags' | 'isMfaComplete'>;

/**
 * Cluster mode (src/cluster/sessions.ts): API sessions stay on the controller that made them;
 * their tokens carry what another controller needs to take them on (`claims`), and an unknown
 * but validly signed token is taken on there (`learn`: the session, held here from then on, or
 * undefined when it was revoked or may no longer log in).
 */
export interface SessionSharing {
  claims(s: SessionClaimsOf): Record<string, unknown>;
  learn(claims: TokenClaims, token: string): ApiSession | undefined;
  /**
   * How late another controller may learn of a request here (the activity beat's interval):
   * an OIDC API session, one record for the whole cluster, is ended as idle only when no
   * controller can have used it for the timeout plus this.
   */
  readonly beatMs: number;
}

export class ApiSessions {
  /**
   * Tokens whose signature was checked (API-session and OIDC access tokens), by `cacheKey`, with
   * their API-session id and, for access tokens, expiry (ms); bounded (cleared when full).
   */
  private readonly verified = new Map<string, VerifiedToken>();
  private readonly byId = new Map<string, ApiSession>();
  /** Live last-activity times not yet written: id → ms. */
  private readonly activity = new Map<string, number>();
  /** Decoded identity records of callers, dropped whenever the identity changes. */
  private readonly identities = new Map<string, IdentityRecord>();
  private flushTimer?: NodeJS.Timeout;
  private sweepTimer?: NodeJS.Timeout;
  readonly timeoutMs: number;

  /** Cluster mode: what the other controllers said of API sessions (`SessionSharing`). */
  private readonly shared?: SessionSharing;
  /**
   * Cluster mode: the API sessions whose activity was flushed since the last activity beat
   * (src/cluster/sessions.ts), which tells the other controllers of them at a coarse interval.
   * Gathered per flush, not per request (a Set insertion per request cost ~85 ns here).
   */
  readonly used?: Set<string>;
  private lastBeatAt = 0;
  /** The `iss` of new tokens (the API's base URL, known once the listener is bound). */
  private readonly issuer: () => string;

  /** `keys` sign and verify the tokens; `shared`: cluster mode (src/cluster/sessions.ts). */
  constructor(
    private readonly store: Store,
    private readonly keys: SigningKeys,
    opts: { timeoutMinutes: number; flushMs: number; issuer?: () => string; shared?: SessionSharing; /** config `minuteMs` */ minuteMs?: number },
  ) {
    this.issuer = opts.issuer ?? (() => '');
    this.shared = opts.shared;
    if (opts.shared) this.used = new Set();
    this.timeoutMs = opts.timeoutMinutes * (opts.minuteMs ?? 60_000);
    for (const rec of store.scan('apiSessions')) this.remember(rec as ApiSession);
    store.on('change', (events: ChangeEvent[]) => {
      for (const ev of events) {
        if (ev.collection === 'identities') this.identities.delete(ev.id);
        if (ev.collection === 'authPolicies' && ev.type === 'update') this.recheckMethods(() => true);
        if (ev.collection === 'identities' && ev.before && ev.after && ev.before.authPolicyId !== ev.after.authPolicyId) this.recheckMethods((s) => s.identityId === ev.id);
        if (ev.collection !== 'apiSessions') continue;
        // The activity known here outlives a rewrite of the record (a flush, an MFA step, a
        // refresh made on another controller).
        const known = this.byId.get(ev.id)?.lastActivityAt;
        if (ev.before) this.forget(ev.before as ApiSession);
        if (ev.after) this.remember(ev.after as ApiSession, known);
        else this.activity.delete(ev.id);
      }
    });
    this.flushTimer = setInterval(() => void this.flush().catch(() => {}), opts.flushMs);
    this.sweepTimer = setInterval(() => void this.sweep().catch(() => {}), Math.min(60_000, this.timeoutMs));
    this.flushTimer.unref();
    this.sweepTimer.unref();
  }

  get timeoutSeconds(): number {
    return Math.round(this.timeoutMs / 1000);
  }

  private remember(s: ApiSession, known?: number) {
    const live = Math.max(this.activity.get(s.id) ?? 0, known ?? 0);
    const merged = live > s.lastActivityAt ? { ...s, lastActivityAt: live } : s;
    this.byId.set(s.id, merged);
  }

  /**
   * Cluster mode: another controller's activity beat says the API session was used there until
   * `at`; the copy held here is not idle before that (kept in memory, never written).
   */
  noteActivity(id: string, at: number) {
    const s = this.byId.get(id);
    if (s && s.lastActivityAt < at) s.lastActivityAt = at;
  }

  /** Cluster mode: the API sessions used here since the last call (flushed or not yet). */
  takeUsed(): string[] {
    const used = this.used;
    if (!used) return [];
    for (const [id, at] of this.activity) if (at >= this.lastBeatAt) used.add(id);
    this.lastBeatAt = Date.now();
    const ids = [...used];
    used.clear();
    return ids;
  }

  private forget(s: ApiSession) {
    this.byId.delete(s.id);
  }

  /**
   * After an auth-policy change: API sessions whose primary method the identity's policy no
   * longer allows leave the mirror at once (their tokens are refused from the next request on)
   * and are deleted from the store in a following write.
   */
  private recheckMethods(which: (s: ApiSession) => boolean) {
    const ended: string[] = [];
    for (const s of this.byId.values()) {
      if (!s.method || !which(s)) continue;
      const identity = this.store.get('identities', s.identityId);
      if (!identity) continue;
      if (!allowsPrimary(this.store, { method: s.method as PrimaryMethod, identity, signerId: s.primarySignerId })) ended.push(s.id);
    }
    if (ended.length === 0) return;
    for (const id of ended) this.byId.delete(id);
    // Every controller sees the policy change and ends its own: nothing to revoke elsewhere.
    void this.store.write((tx) => ApiSessions.deleteInTx(tx, ended), { revoke: false }).catch(() => {});
  }

  /**
   * Whether an API session created before `t` still lives: a key retired at `t` signed nothing
   * newer, and a session (dial/bind) token lives no longer than its API session.
   */
  anyCreatedBefore(t: number): boolean {
    for (const s of this.byId.values()) if (s.createdAt < t) return true;
    return false;
  }

  /**
   * API sessions and sessions stored before tokens were signed kept their token in clear: they are
   * ended at start (their clients log in again) so that no usable token stays at rest.
   */
  async endPlainTokenSessions(): Promise<number> {
    const plain = [...this.byId.values()].filter((s) => PLAIN_TOKEN.test(s.token)).map((s) => s.id);
    const plainSessions: string[] = [];
    for (const rec of this.store.scan('sessions')) if (typeof rec.token === 'string' && PLAIN_TOKEN.test(rec.token)) plainSessions.push(rec.id);
    if (plain.length || plainSessions.length)
      await this.store.write((tx) => {
        ApiSessions.deleteInTx(tx, plain);
        for (const id of plainSessions) tx.delete('sessions', id);
      });
    return plain.length + plainSessions.length;
  }

  get(id: string): ApiSession | undefined {
    return this.byId.get(id);
  }

  /**
   * The live session for a token, refreshing its activity; undefined when unknown, idle too long,
   * or — for an access token bound to certificates — when the request does not present one of
   * them (proof of possession, as upstream: a bound token alone opens nothing).
   */
  resolve(token: string, peer?: PeerCertificate): ApiSession | undefined {
    const now = Date.now();
    const key = cacheKey(token);
    let hit = this.verified.get(key);
    if (hit !== undefined && hit.token === token) {
      if (hit.exp !== undefined && hit.exp <= now) {
        this.verified.delete(key);
        return undefined;
      }
    } else {
      hit = this.verifyAccess(token, now);
      if (hit === undefined) {
        const claims = this.keys.verify(token, API_SESSION_TOKEN);
        if (!claims) return undefined;
        const rec = this.byId.get(claims.jti) ?? this.takeOn(claims, token);
        if (!rec || rec.identityId !== claims.sub || rec.token !== tokenDigest(token)) return undefined;
        hit = this.cacheVerified({ token, id: claims.jti });
      }
    }
    if (hit.bound && !presentsOneOf(peer, hit.bound)) return undefined;
    const s = this.byId.get(hit.id);
    if (!s) {
      this.verified.delete(key);
      return undefined;
    }
    if (now - s.lastActivityAt > this.timeoutMs) return undefined;
    s.lastActivityAt = now;
    this.activity.set(s.id, now);
    return s;
  }

  /** Cluster mode: an API session made on another controller, held here from now on (when it may be). */
  private takeOn(claims: TokenClaims, token: string): ApiSession | undefined {
    const rec = this.shared?.learn(claims, token);
    if (rec) this.remember(rec);
    return rec;
  }

  /**
   * An OIDC access token: signed by a known key, unexpired, naming a live API session of its
   * subject. It carries `exp`, so the cache keeps the expiry with it, and its certificate binding.
   */
  private verifyAccess(token: string, now: number): VerifiedToken | undefined {
    // Only a token that says it is an access token pays for a signature check here (a legacy
    // API-session token is verified once, below, not twice).
    if (claimedType(token) !== ACCESS_TOKEN) return undefined;
    const claims = this.keys.verify(token, ACCESS_TOKEN, now);
    if (!claims || typeof claims.exp !== 'number' || typeof claims.z_asid !== 'string') return undefined;
    const rec = this.byId.get(claims.z_asid);
    if (!rec || rec.identityId !== claims.sub || !rec.oidc) return undefined;
    const bound = Array.isArray(claims.z_cfs) ? claims.z_cfs.filter((x): x is string => typeof x === 'string') : [];
    return this.cacheVerified({ token, id: rec.id, exp: claims.exp * 1000, bound: bound.length > 0 ? bound : undefined });
  }

  private cacheVerified(v: VerifiedToken): VerifiedToken {
    if (this.verified.size >= 200_000) this.verified.clear();
    this.verified.set(cacheKey(v.token), v);
    return v;
  }

  /** The session's identity record (cached; every request needs it). */
  identityOf(s: ApiSession): IdentityRecord | undefined {
    let rec = this.identities.get(s.identityId);
    if (!rec) {
      rec = this.store.get('identities', s.identityId);
      if (rec) {
        if (this.identities.size > 100_000) this.identities.clear();
        this.identities.set(s.identityId, rec);
      }
    }
    return rec;
  }

  isEnded(s: ApiSession): boolean {
    return !this.byId.has(s.id);
  }

  isFullyAuthenticated(s: ApiSession): boolean {
    return !s.isMfaRequired || s.isMfaComplete;
  }

  expiresAt(s: ApiSession): number {
    return s.lastActivityAt + this.timeoutMs;
  }

  /** Create and persist a session; resolves once durable (and mirrored), with its signed token. */
  async create(fields: {
    identityId: string;
    authenticatorId: string;
    method: string;
    primarySignerId?: string;
    ipAddress: string;
    configTypes: string[];
    isMfaRequired: boolean;
    extJwtSignerId?: string;
    oidc?: ApiSession['oidc'];
    /** Extra wire fields from the login method (cert extension flags, improperClientCertChain…). */
    extra?: Record<string, unknown>;
  }): Promise<{ session: ApiSession; token: string }> {
    const { extra, ...own } = fields;
    const now = Date.now();
    const id = timeOrderedId();
    const token = this.keys.sign({ iss: this.issuer(), sub: fields.identityId, jti: id, iat: Math.floor(now / 1000), z_t: API_SESSION_TOKEN, ...this.shared?.claims({ id, createdAt: now, ...own }) });
    const rec: ApiSession = {
      id,
      createdAt: now,
      updatedAt: now,
      tags: {},
      token: tokenDigest(token),
      lastActivityAt: now,
      isMfaComplete: false,
      ...extra,
      ...own,
    };
    if (rec.extJwtSignerId === undefined) delete rec.extJwtSignerId;
    if (rec.primarySignerId === undefined) delete rec.primarySignerId;
    if (rec.oidc === undefined) delete rec.oidc;
    await this.store.write((tx) => tx.put('apiSessions', rec));
    const session = this.byId.get(rec.id) ?? rec;
    this.cacheVerified({ token, id: rec.id });
    return { session, token };
  }

  /** Delete API sessions (and their service sessions) inside a larger write. */
  static deleteInTx(tx: Tx, apiSessionIds: Iterable<string>) {
    for (const id of apiSessionIds) {
      for (const sid of tx.idsByIndex('sessions', 'apiSessionId', id)) tx.delete('sessions', sid);
      // Ephemeral certificates of the API session end with it.
      for (const cid of tx.idsByIndex('apiSessionCertificates', 'apiSessionId', id)) tx.delete('apiSessionCertificates', cid);
      tx.delete('apiSessions', id);
    }
  }

  /**
   * End everything an identity is logged in with, inside a larger write (identity disable,
   * lockout): its API sessions and every session (service dial/bind) of the identity, including
   * any not tied to one of those API sessions.
   */
  static endForIdentityInTx(tx: Tx, identityId: string) {
    ApiSessions.deleteInTx(tx, tx.idsByIndex('apiSessions', 'identityId', identityId));
    for (const sid of tx.idsByIndex('sessions', 'identityId', identityId)) tx.delete('sessions', sid);
  }

  async delete(id: string): Promise<boolean> {
    return this.store.write((tx) => {
      if (!tx.exists('apiSessions', id)) return false;
      ApiSessions.deleteInTx(tx, [id]);
      return true;
    });
  }

  /** Write batched last-activity times. */
  async flush(): Promise<void> {
    if (this.activity.size === 0) return;
    const pending = [...this.activity];
    this.activity.clear();
    if (this.used) for (const [id, at] of pending) if (at >= this.lastBeatAt) this.used.add(id);
    // This controller's own environment only: in a cluster an OIDC API session is a replicated
    // record, and writing its activity would be an etcd write per flush; it stays in memory here
    // and reaches the other controllers in the activity beats (src/cluster/sessions.ts).
    await this.store.writeLocal((tx) => {
      for (const [id, at] of pending) {
        const rec = tx.get('apiSessions', id);
        if (rec && rec.lastActivityAt < at && !(this.shared && rec.oidc)) tx.put('apiSessions', { ...rec, lastActivityAt: at });
      }
    });
  }

  /** End sessions idle longer than the timeout, with their service sessions. */
  async sweep(now = Date.now()): Promise<number> {
    const shared = this.shared;
    const expired = [...this.byId.values()].filter((s) => now - s.lastActivityAt > this.timeoutMs + (shared && s.oidc ? shared.beatMs : 0)).map((s) => s.id);
    if (expired.length === 0) return 0;
    // Idle here, counting what the other controllers' activity beats told: another controller
    // holding a copy of the same API session expires its copy by the same rule (no revocation); an
    // OIDC API session (one replicated record) ends everywhere, once no controller can have used it.
    await this.store.write((tx) => ApiSessions.deleteInTx(tx, expired), { revoke: false });
    return expired.length;
  }

  async close(): Promise<void> {
    clearInterval(this.flushTimer);
    clearInterval(this.sweepTimer);
    await this.flush();
  }
}

/** Whether the request's client certificate (its leaf) is one of these fingerprints. */
function presentsOneOf(peer: PeerCertificate | undefined, fingerprints: string[]): boolean {
  const leaf = peer?.peerLeaf ?? peer?.peerCertificates?.[0];
  return leaf !== undefined && fingerprints.includes(fingerprintOf(leaf));
}
