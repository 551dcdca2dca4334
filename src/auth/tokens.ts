/**
 * The controller's token signing keys and the compact JWS tokens made with them (API sessions,
 * sessions).
 *
 * Each controller signs with its own P-256 key. The private key is a file under
 * `<dataDir>/signing-keys/` (never in the store, never sent anywhere); the public key, its `kid`
 * and its lifetime are a `signingKeys` record in the store, so every controller that reads the
 * store (a replica included) verifies every controller's tokens and publishes them all in the
 * JWKS. A restart reads both back, so every token issued before it stays valid.
 *
 * Rotation: when the current key is older than `rotationMs` a new key becomes current; the old one
 * is marked retired and keeps verifying until nothing signed with it can still be valid (the
 * `stillNeeded` callback: an API session created before it retired still lives — every token it
 * signed is such an API session's or one of its sessions'), then its record and file are removed.
 *
 * Signing and verifying use node:crypto with KeyObjects parsed once (ES256 sign ~26–37 µs, verify
 * ~70–110 µs here); callers cache verified tokens (ApiSessions) so a signature is checked once per
 * token, not once per request. Tokens minted at request rates (sessions) are signed in the worker
 * pool, many per task (`signInPool`), so the event loop does not pay for the signature.
 */
import crypto, { type KeyObject } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { ChangeEvent, Rec, Store } from '../store/store.js';
import type { WorkerPool } from '../pool.js';

declare module '../core/context.js' {
  interface Services {
    /** Token signing keys of every controller (API sessions, sessions); the JWKS. */
    keys: SigningKeys;
  }
}

export const SIGNING_KEYS = 'signingKeys';

export interface SigningKeyRec extends Rec {
  /** The controller that holds the private key. */
  controllerId: string;
  alg: 'ES256';
  /** Public key as a JWK (kty, crv, x, y). */
  jwk: { kty: string; crv: string; x: string; y: string };
  /** When another key of the same controller became current; absent while current. */
  retiredAt?: number;
}

interface Verifier {
  key: KeyObject;
  rec: SigningKeyRec;
}

/** Claims every token carries; `z_t` says what the token is ("api-session", "session"). */
export interface TokenClaims {
  iss: string;
  sub: string;
  jti: string;
  iat: number;
  exp?: number;
  z_t: string;
  [claim: string]: unknown;
}

const b64url = (b: Buffer | string) => Buffer.from(b).toString('base64url');

/** The protected header of every token signed with `kid`, encoded. */
export const jwsHeader = (kid: string) => b64url(JSON.stringify({ alg: 'ES256', kid, typ: 'JWT' }));

/** A compact JWS (ES256) of the claims: the one encoding used on the event loop and in the workers. */
export function signJws(key: KeyObject, header: string, claims: TokenClaims): string {
  const input = `${header}.${b64url(JSON.stringify(claims))}`;
  const sig = crypto.sign('sha256', Buffer.from(input), { key, dsaEncoding: 'ieee-p1363' });
  return `${input}.${sig.toString('base64url')}`;
}

/** What the store keeps of a token: its SHA-256, enough to match a presented token, useless to present. */
export const tokenDigest = (token: string) => crypto.createHash('sha256').update(token).digest('base64url');

export const SESSION_TOKEN = 'session';

export interface SessionTokenFacts {
  id: string;
  identityId: string;
  apiSessionId: string;
  serviceId: string;
  type: string;
}

/**
 * A session's (dial or bind) token: signed with the controller's key, carrying what a router needs
 * to admit the dial or bind without asking the controller — identity (`sub`), service (`z_svc`),
 * type (`z_st`), API session (`z_asid`) — verifiable with the JWKS. Valid while the session
 * exists and until `exp`: the session's record ends it, as an API session's record ends its
 * token, and routers are told (the control channel's `session-removed`); `exp` bounds what a
 * router that missed that message would still admit. Nothing of the token is stored (its `jti`
 * is the session's id), so it is signed in the worker pool while the session's write commits.
 */
export function signSessionToken(keys: SigningKeys, issuer: string, s: SessionTokenFacts, lifetimeSeconds: number): Promise<string> {
  return keys.signInPool(sessionTokenClaims(issuer, s, lifetimeSeconds));
}

export function sessionTokenClaims(issuer: string, s: SessionTokenFacts, lifetimeSeconds: number, now = Date.now()): TokenClaims {
  const iat = Math.floor(now / 1000);
  return { iss: issuer, sub: s.identityId, jti: s.id, iat, exp: iat + lifetimeSeconds, z_t: SESSION_TOKEN, z_asid: s.apiSessionId, z_svc: s.serviceId, z_st: s.type };
}

/** The `exp` (seconds) a compact JWS claims, unverified (undefined when it has none or is not one). */
export function claimedExpiry(token: string): number | undefined {
  const first = token.indexOf('.');
  const second = token.indexOf('.', first + 1);
  if (first <= 0 || second <= first) return undefined;
  try {
    const exp = JSON.parse(Buffer.from(token.slice(first + 1, second), 'base64url').toString('utf8'))?.exp;
    return typeof exp === 'number' ? exp : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Most tokens in one pool task (~2 ms of a worker): a task costs the event loop ~40 µs of
 * messaging however many tokens it carries, so tokens travel together (see `signInPool`).
 */
const MAX_SIGN_BATCH = 64;
/** How long a token waits at most for a commit to land before its signing task goes anyway. */
const SIGN_WAIT_MS = 5;

interface WaitingToken {
  claims: TokenClaims;
  resolve: (token: string) => void;
}

/** RFC 7638 thumbprint of an EC public JWK: the key's id, the same on every controller. */
function thumbprint(jwk: { crv: string; x: string; y: string }): string {
  return crypto.createHash('sha256').update(JSON.stringify({ crv: jwk.crv, kty: 'EC', x: jwk.x, y: jwk.y })).digest('base64url');
}

export class SigningKeys {
  private readonly verifiers = new Map<string, Verifier>();
  private current!: { kid: string; key: KeyObject; header: string; pem?: string };
  /** Where `signInPool` signs; unset (tests of the keys alone), it signs on the calling thread. */
  pool?: WorkerPool;
  private waiting: WaitingToken[] = [];
  private flushTimer?: NodeJS.Timeout;
  /** Signing tasks in the pool now. */
  private signing = 0;
  private readonly dir: string;
  private timer?: NodeJS.Timeout;

  constructor(
    private readonly store: Store,
    dataDir: string,
    private readonly opts: {
      controllerId: string;
      rotationMs: number;
      /** Whether something signed with a retired key may still be valid. */
      stillNeeded?: (key: SigningKeyRec) => boolean;
      onError?: (err: unknown) => void;
    },
  ) {
    this.dir = path.join(dataDir, 'signing-keys');
    fs.mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    for (const rec of store.scan(SIGNING_KEYS)) this.remember(rec as SigningKeyRec);
    store.on('change', (events: ChangeEvent[]) => {
      // A commit landed: the tokens asked for while it committed go now, alongside the next
      // commit, which carries their sessions' writes (see signInPool).
      if (this.waiting.length > 0) this.flushSigning();
      for (const ev of events) {
        if (ev.collection !== SIGNING_KEYS) continue;
        if (ev.before && !ev.after) this.verifiers.delete(ev.id);
        if (ev.after) this.remember(ev.after as SigningKeyRec);
      }
    });
  }

  /** Load this controller's current key (making one when there is none or it is due), start the rotation timer. */
  async start(): Promise<void> {
    const own = this.ownCurrent();
    const key = own && this.readPrivate(own.id);
    if (own && key && Date.now() - own.createdAt < this.opts.rotationMs) this.use(own.id, key);
    else await this.rotate();
    const every = Math.min(3_600_000, Math.max(1000, Math.floor(this.opts.rotationMs / 4)));
    this.timer = setInterval(() => void this.maintain().catch((err) => this.opts.onError?.(err)), every);
    this.timer.unref();
  }

  close(): void {
    clearInterval(this.timer);
  }

  get currentKid(): string {
    return this.current.kid;
  }

  private ownCurrent(): SigningKeyRec | undefined {
    let best: SigningKeyRec | undefined;
    for (const { rec } of this.verifiers.values()) {
      if (rec.controllerId !== this.opts.controllerId || rec.retiredAt !== undefined) continue;
      if (!best || rec.createdAt > best.createdAt) best = rec;
    }
    return best;
  }

  private remember(rec: SigningKeyRec) {
    if (rec.alg !== 'ES256' || rec.jwk?.kty !== 'EC' || rec.jwk.crv !== 'P-256') return;
    try {
      const key = crypto.createPublicKey({ key: rec.jwk, format: 'jwk' });
      this.verifiers.set(rec.id, { key, rec });
    } catch {
      // A record this controller cannot read verifies nothing.
    }
  }

  private keyFile(kid: string): string {
    return path.join(this.dir, `${kid}.pem`);
  }

  private readPrivate(kid: string): KeyObject | undefined {
    try {
      return crypto.createPrivateKey(fs.readFileSync(this.keyFile(kid)));
    } catch {
      return undefined;
    }
  }

  private use(kid: string, key: KeyObject) {
    this.current = { kid, key, header: jwsHeader(kid) };
  }

  /** Make a new current key now; the previous one is retired (it keeps verifying). */
  async rotate(): Promise<string> {
    const { privateKey, publicKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const jwk = publicKey.export({ format: 'jwk' }) as { kty: string; crv: string; x: string; y: string };
    const kid = thumbprint(jwk);
    // The file first: a record whose private key is missing could never sign.
    const file = this.keyFile(kid);
    fs.writeFileSync(`${file}.tmp`, privateKey.export({ format: 'pem', type: 'pkcs8' }), { mode: 0o600 });
    fs.renameSync(`${file}.tmp`, file);
    const now = Date.now();
    await this.store.write((tx) => {
      for (const rec of tx.scan(SIGNING_KEYS)) {
        if (rec.controllerId === this.opts.controllerId && rec.retiredAt === undefined) tx.put(SIGNING_KEYS, { ...rec, retiredAt: now, updatedAt: now });
      }
      const rec: SigningKeyRec = { id: kid, createdAt: now, updatedAt: now, controllerId: this.opts.controllerId, alg: 'ES256', jwk: { kty: 'EC', crv: jwk.crv, x: jwk.x, y: jwk.y } };
      tx.put(SIGNING_KEYS, rec);
    });
    this.use(kid, privateKey);
    return kid;
  }

  /** Rotate when due; drop this controller's retired keys nothing valid was signed with any more. */
  async maintain(now = Date.now()): Promise<void> {
    const own = this.verifiers.get(this.current.kid)?.rec;
    if (!own || now - own.createdAt >= this.opts.rotationMs) await this.rotate();
    const done = [...this.verifiers.values()]
      .map((v) => v.rec)
      .filter((r) => r.controllerId === this.opts.controllerId && r.retiredAt !== undefined && !(this.opts.stillNeeded?.(r) ?? false));
    if (done.length === 0) return;
    await this.store.write((tx) => {
      for (const r of done) tx.delete(SIGNING_KEYS, r.id);
    });
    for (const r of done) fs.rmSync(this.keyFile(r.id), { force: true });
  }

  /** The JWKS every controller publishes: all keys of all controllers that may still verify a token. */
  jwks(): { keys: Record<string, string>[] } {
    return { keys: [...this.verifiers.values()].map(({ rec }) => ({ ...rec.jwk, kid: rec.id, alg: rec.alg, use: 'sig' })) };
  }

  sign(claims: TokenClaims): string {
    return signJws(this.current.key, this.current.header, claims);
  }

  /**
   * `sign`, in the worker pool, batched like the store's group commit. A session's token is asked
   * for as its write is queued; that write waits for the commit in flight to land and then goes
   * in the next one. So the tokens asked for while a commit is in flight wait for it too, and
   * travel in one task when it lands (its change events), to be signed while the next commit —
   * the one carrying their writes — runs. A task costs the event loop ~15–45 µs of messaging
   * however many tokens it carries (more than signing one inline), so the batches must be large:
   * they grow with the load as the commit groups do. At most MAX_SIGN_BATCH per task (sent at
   * once when reached), at most one task per worker in flight; with no commit landing within
   * SIGN_WAIT_MS (an idle store, or a repeated create with no write) the tokens go anyway.
   * The private key crosses as PKCS#8 PEM, parsed once per worker. Should the pool refuse (its
   * queue full) or fail, the tokens are signed here instead: a token is never refused for that.
   */
  signInPool(claims: TokenClaims): Promise<string> {
    if (!this.pool) return Promise.resolve(this.sign(claims));
    return new Promise((resolve) => {
      this.waiting.push({ claims, resolve });
      if (this.waiting.length >= MAX_SIGN_BATCH) this.flushSigning();
      else this.scheduleSigning();
    });
  }

  private scheduleSigning() {
    if (this.flushTimer || this.waiting.length === 0) return;
    this.flushTimer = setTimeout(() => this.flushSigning(), SIGN_WAIT_MS);
  }

  private flushSigning() {
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    const pool = this.pool!;
    const { kid, key } = this.current;
    const keyPem = (this.current.pem ??= key.export({ format: 'pem', type: 'pkcs8' }) as string);
    while (this.waiting.length > 0 && this.signing < pool.threads) {
      const group = this.waiting.splice(0, MAX_SIGN_BATCH);
      this.signing++;
      pool.run('signTokens', { kid, keyPem, claims: group.map((w) => w.claims) }).then(
        (tokens) => {
          for (let j = 0; j < group.length; j++) group[j].resolve(tokens[j]);
        },
        () => {
          for (const w of group) w.resolve(signJws(key, jwsHeader(kid), w.claims));
        },
      ).finally(() => {
        this.signing--;
        this.scheduleSigning();
      });
    }
  }

  /**
   * The claims of a token signed by a known key, of the wanted type and not expired; undefined
   * otherwise (malformed, `alg` other than ES256 — `none` included —, unknown `kid`, bad signature).
   */
  verify(token: string, type: string, now = Date.now()): (TokenClaims & { kid: string }) | undefined {
    if (token.length > 4096) return undefined;
    const first = token.indexOf('.');
    const second = token.indexOf('.', first + 1);
    if (first <= 0 || second <= first + 1 || second === token.length - 1 || token.indexOf('.', second + 1) !== -1) return undefined;
    let header: { alg?: unknown; kid?: unknown };
    let claims: TokenClaims;
    try {
      header = JSON.parse(Buffer.from(token.slice(0, first), 'base64url').toString('utf8'));
      claims = JSON.parse(Buffer.from(token.slice(first + 1, second), 'base64url').toString('utf8'));
    } catch {
      return undefined;
    }
    if (header === null || typeof header !== 'object' || header.alg !== 'ES256' || typeof header.kid !== 'string') return undefined;
    const v = this.verifiers.get(header.kid);
    if (!v) return undefined;
    const sig = Buffer.from(token.slice(second + 1), 'base64url');
    if (sig.length !== 64) return undefined;
    if (!crypto.verify('sha256', Buffer.from(token.slice(0, second)), { key: v.key, dsaEncoding: 'ieee-p1363' }, sig)) return undefined;
    if (claims === null || typeof claims !== 'object' || claims.z_t !== type) return undefined;
    if (typeof claims.sub !== 'string' || typeof claims.jti !== 'string' || typeof claims.iat !== 'number') return undefined;
    if (claims.exp !== undefined && (typeof claims.exp !== 'number' || claims.exp * 1000 <= now)) return undefined;
    return { ...claims, kid: header.kid };
  }
}
