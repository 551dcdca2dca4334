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
 * Signing and verifying use node:crypto with KeyObjects parsed once (a verify costs a few times a
 * sign); callers cache verified tokens (ApiSessions) so a signature is checked once per
 * token, not once per request. Tokens minted at request rates (sessions) are signed in batches,
 * one signature over a Merkle tree of many (`signSessionBatch`).
 */
import crypto, { type KeyObject } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { ChangeEvent, Store, SigningKeyRecord, CollectionName } from '../store/store.js';

const SIGNING_KEYS = 'signingKeys' satisfies CollectionName;

export type SigningKeyRec = SigningKeyRecord;

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
const jwsHeader = (kid: string) => b64url(JSON.stringify({ alg: 'ES256', kid, typ: 'JWT' }));

/** A compact JWS (ES256) of the claims: the one encoding used on the event loop and in the workers. */
function signJws(key: KeyObject, header: string, claims: TokenClaims | Record<string, unknown>): string {
  const input = `${header}.${b64url(JSON.stringify(claims))}`;
  const sig = crypto.sign('sha256', Buffer.from(input), { key, dsaEncoding: 'ieee-p1363' });
  return `${input}.${sig.toString('base64url')}`;
}

/** What the store keeps of a token: its SHA-256, enough to match a presented token, useless to present. */
export const tokenDigest = (token: string) => crypto.createHash('sha256').update(token).digest('base64url');

export const SESSION_TOKEN = 'session';
/** `z_t` of the signed part of a session token: the root of a batch of sessions' claims. */
const SESSION_BATCH = 'session-batch';

export interface SessionTokenFacts {
  id: string;
  identityId: string;
  apiSessionId: string;
  serviceId: string;
  type: string;
}

/**
 * A session's (dial or bind) token, carrying what a router needs to admit the dial or bind
 * without asking the controller — identity (`sub`), service (`z_svc`), type (`z_st`), API session
 * (`z_asid`), `exp` — verifiable with the JWKS. Valid while the session exists and until `exp`:
 * the session's record ends it, and routers are told (the control channel's `session-removed`);
 * `exp` bounds what a router that missed that message would still admit. Nothing of the token is
 * stored (its `jti` is the session's id).
 *
 * Sessions are minted at request rates, so their tokens are signed in batches: one ES256
 * signature covers the Merkle tree (RFC 9162 §2.1) of every session's claims asked for together,
 * and each token carries its claims and their inclusion proof (see `signSessionBatch`).
 */
export function signSessionToken(keys: SigningKeys, issuer: string, s: SessionTokenFacts, lifetimeSeconds: number): PendingToken {
  return keys.signSession(sessionTokenClaims(issuer, s, lifetimeSeconds));
}

export function sessionTokenClaims(issuer: string, s: SessionTokenFacts, lifetimeSeconds: number, now = Date.now()): TokenClaims {
  const iat = Math.floor(now / 1000);
  return { iss: issuer, sub: s.identityId, jti: s.id, iat, exp: iat + lifetimeSeconds, z_t: SESSION_TOKEN, z_asid: s.apiSessionId, z_svc: s.serviceId, z_st: s.type };
}

// Merkle tree hashes as RFC 9162 §2.1.1 defines them: a leaf and an interior node hash under
// different prefixes, so a leaf can never pose as a node. A hash is a 32-character latin1 string,
// one character a byte: a Buffer each would be an ArrayBuffer of its own (crypto.hash does not
// pool), two or three per session token for the collector; a node's input goes through the
// Buffer pool. (crypto.hash, one call each: a third cheaper than createHash().update().digest().)
export type MerkleHash = string;
export const merkleLeafHash = (leaf: string): MerkleHash => crypto.hash('sha256', `\u0000${leaf}`, 'binary');
const nodeHash = (left: MerkleHash, right: MerkleHash): MerkleHash => crypto.hash('sha256', Buffer.from(`\u0001${left}${right}`, 'latin1'), 'binary');
/** A root as the batch JWS carries it (`z_root`). */
const rootClaim = (root: MerkleHash) => Buffer.from(root, 'latin1').toString('base64url');

/**
 * The Merkle tree hash of the leaf hashes (RFC 9162 §2.1.1: the left subtree holds the largest
 * power of two below the count) and each leaf's inclusion path (§2.1.3.1), nearest sibling first.
 */
export function merkleTree(leaves: MerkleHash[]): { root: MerkleHash; paths: MerkleHash[][] } {
  const paths = leaves.map((): MerkleHash[] => []);
  const mth = (lo: number, hi: number): MerkleHash => {
    if (hi - lo === 1) return leaves[lo];
    let k = 1;
    while (k * 2 < hi - lo) k *= 2;
    const left = mth(lo, lo + k);
    const right = mth(lo + k, hi);
    for (let i = lo; i < lo + k; i++) paths[i].push(right);
    for (let i = lo + k; i < hi; i++) paths[i].push(left);
    return nodeHash(left, right);
  };
  return { root: mth(0, leaves.length), paths };
}

/** The root an inclusion path leads to from leaf `index` of a tree of `size` leaves (RFC 9162 §2.1.3.2); undefined when it cannot. */
export function merkleRootOf(index: number, size: number, leaf: MerkleHash, path: MerkleHash[]): MerkleHash | undefined {
  if (!(index >= 0 && index < size)) return undefined;
  let fn = index;
  let sn = size - 1;
  let r = leaf;
  for (const p of path) {
    if (sn === 0) return undefined;
    if (fn % 2 === 1 || fn === sn) {
      r = nodeHash(p, r);
      if (fn % 2 === 0) {
        while (fn % 2 === 0 && fn !== 0) {
          fn = Math.floor(fn / 2);
          sn = Math.floor(sn / 2);
        }
      }
    } else r = nodeHash(r, p);
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 ? r : undefined;
}

/**
 * Session tokens for a batch of claims, one signature for all of them:
 *   `<batch JWS>~<claims>~<proof>`
 * - claims: the session's claims, base64url JSON (as a JWT payload);
 * - batch JWS: a compact ES256 JWS (header `kid`, `typ: JWT`) of `{ iss, iat, exp, z_t:
 *   "session-batch", z_n: leaves, z_root: base64url root }`, the root being the RFC 9162 Merkle
 *   tree hash over the leaves SHA-256(0x00 ‖ claims) of the batch, in order;
 * - proof: base64url of the leaf's index (4 bytes, big-endian) followed by its inclusion path
 *   (32 bytes per level, nearest sibling first).
 * A verifier checks the batch JWS with the JWKS (once per batch: it is the same in every token of
 * the batch), then that the proof leads from the claims' leaf hash to `z_root`.
 */
function signSessionBatch(key: KeyObject, header: string, claims: TokenClaims[]): string[] {
  return signClaimsBatch(key, header, batchFacts(claims), claims.map((c) => JSON.stringify(c)));
}

/** What a batch JWS says of its tokens: the issuer, the earliest `iat`, the latest `exp`. */
export interface BatchFacts {
  iss: string;
  iat: number;
  exp: number;
}

function batchFacts(claims: TokenClaims[]): BatchFacts {
  let iat = Infinity;
  let exp = 0;
  for (const c of claims) {
    iat = Math.min(iat, c.iat);
    exp = Math.max(exp, c.exp ?? 0);
  }
  return { iss: claims[0].iss, iat, exp };
}

/** `signSessionBatch` from the claims already serialized (each one JSON text). */
function signClaimsBatch(key: KeyObject, header: string, facts: BatchFacts, jsons: string[]): string[] {
  const payloads = jsons.map((j) => b64url(j));
  const { root, paths } = merkleTree(payloads.map(merkleLeafHash));
  const batch = signJws(key, header, { ...facts, z_t: SESSION_BATCH, z_n: jsons.length, z_root: rootClaim(root) });
  return payloads.map((payload, i) => {
    const index = String.fromCharCode((i >>> 24) & 255, (i >>> 16) & 255, (i >>> 8) & 255, i & 255);
    return `${batch}~${payload}~${Buffer.from(index + paths[i].join(''), 'latin1').toString('base64url')}`;
  });
}

/** Most sessions one signature covers: a token carries one 32-byte hash per doubling (8 at most). */
const MAX_SESSION_BATCH = 256;
/** How long a token nobody said it needs waits at most before its batch is signed anyway. */
const SIGN_WAIT_MS = 50;

interface WaitingToken {
  claims: TokenClaims;
  resolve: (token: string) => void;
  signed: boolean;
}

/**
 * A batch of session tokens for a worker (workers/tokens.ts): the key as PKCS#8 PEM (parsed once
 * per worker), the batch JWS header and facts, the claims as JSON texts joined by newlines (JSON
 * text holds none unescaped): one string crosses the thread boundary cheaper than as many
 * objects, and the worker encodes each claim as it came, without parsing and serializing it again.
 */
export interface SessionBatchTask {
  keyPem: string;
  header: string;
  facts: BatchFacts;
  claims: string;
}

function sessionBatchTask(keyPem: string, header: string, claims: TokenClaims[]): SessionBatchTask {
  return { keyPem, header, facts: batchFacts(claims), claims: claims.map((c) => JSON.stringify(c)).join('\n') };
}

/** A batch of session tokens signed in a worker, joined by newlines (a token holds none). */
export function signSessionsTask(task: SessionBatchTask, key: KeyObject): string {
  return signClaimsBatch(key, task.header, task.facts, task.claims.split('\n')).join('\n');
}

/** A session token being signed: `need` signs its batch now unless that is done, and gives the token. */
export interface PendingToken {
  token: Promise<string>;
  need(): Promise<string>;
}

/** RFC 7638 thumbprint of an EC public JWK: the key's id, the same on every controller. */
function thumbprint(jwk: { crv: string; x: string; y: string }): string {
  return crypto.createHash('sha256').update(JSON.stringify({ crv: jwk.crv, kty: 'EC', x: jwk.x, y: jwk.y })).digest('base64url');
}

export class SigningKeys {
  private readonly verifiers = new Map<string, Verifier>();
  private current!: { kid: string; key: KeyObject; header: string; pem: string };
  /** Session tokens asked for and not yet signed (see `signSession`). */
  private waiting: WaitingToken[] = [];
  private flushTimer?: NodeJS.Timeout;
  private readonly dir: string;
  private timer?: NodeJS.Timeout;
  private closed = false;

  constructor(
    private readonly store: Store,
    dataDir: string,
    private readonly opts: {
      controllerId: string;
      rotationMs: number;
      /** Whether something signed with a retired key may still be valid. */
      stillNeeded?: (key: SigningKeyRec) => boolean;
      onError?: (err: unknown) => void;
      /**
       * Sign a batch of session tokens off the event loop (the worker pool's signing thread):
       * `signSessionsTask` in, the tokens joined by newlines out. Inline when absent or failing.
       */
      offload?: (task: SessionBatchTask) => Promise<string>;
      /** The offload failed while this controller runs (a broken signing thread): the batch was signed inline. */
      onOffloadError?: (err: unknown) => void;
    },
  ) {
    this.dir = path.join(dataDir, 'signing-keys');
    fs.mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    for (const rec of store.scan(SIGNING_KEYS)) this.remember(rec as SigningKeyRec);
    store.on('committing', () => {
      if (this.waiting.length > 0) this.flushSigning();
    });
    store.on('change', (events: ChangeEvent[]) => {
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
    this.closed = true;
    clearInterval(this.timer);
    // Nothing waits for a batch timer past the close.
    if (this.waiting.length > 0) this.flushSigning();
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
    this.current = { kid, key, header: jwsHeader(kid), pem: key.export({ format: 'pem', type: 'pkcs8' }) as string };
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

  /** Session tokens for these claims, under one signature with the current key (`signSessionBatch`). */
  signSessions(claims: TokenClaims[]): string[] {
    return signSessionBatch(this.current.key, this.current.header, claims);
  }

  /**
   * A session's token, signed in a batch (`signSessionBatch`) with every other token asked for
   * and not signed yet. A batch goes to be signed when the store starts the commit that carries
   * its sessions' writes (the store's `committing`: the signing thread works while LMDB commits,
   * and the tokens are there when the writes land), or when one of its tokens is needed first
   * (`need`: a token without a write), at most MAX_SESSION_BATCH a batch; a token nobody needs,
   * its write having failed, goes with the next batch or after SIGN_WAIT_MS.
   */
  signSession(claims: TokenClaims): PendingToken {
    const w: WaitingToken = { claims, resolve: () => {}, signed: false };
    const token = new Promise<string>((resolve) => (w.resolve = resolve));
    this.waiting.push(w);
    if (this.waiting.length >= MAX_SESSION_BATCH) this.flushSigning();
    else this.flushTimer ??= setTimeout(() => this.flushSigning(), SIGN_WAIT_MS);
    return {
      token,
      need: () => {
        if (!w.signed) this.flushSigning();
        return token;
      },
    };
  }

  /** Session tokens signed, and the batches (signatures) that signed them. */
  readonly signingStats = { tokens: 0, batches: 0 };

  private flushSigning() {
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    while (this.waiting.length > 0) {
      const group = this.waiting.splice(0, MAX_SESSION_BATCH);
      const claims = group.map((w) => w.claims);
      this.signingStats.batches++;
      this.signingStats.tokens += group.length;
      for (const w of group) w.signed = true;
      const deliver = (tokens: string[]) => {
        for (let i = 0; i < group.length; i++) group[i].resolve(tokens[i]);
      };
      const { key, header, pem } = this.current;
      if (!this.opts.offload) deliver(signSessionBatch(key, header, claims));
      else {
        // A worker that fails leaves the batch to this thread: expected once closing (the pool
        // closes after the keys), told otherwise, so a broken signing thread is not silent.
        const inline = (err: unknown) => {
          if (!this.closed) this.opts.onOffloadError?.(err);
          deliver(signSessionBatch(key, header, claims));
        };
        this.opts.offload(sessionBatchTask(pem, header, claims)).then((joined) => {
          const tokens = joined.split('\n');
          if (tokens.length === group.length) deliver(tokens);
          else inline(new Error(`the signing thread answered ${tokens.length} tokens for ${group.length}`));
        }, inline);
      }
    }
  }

  /**
   * The claims of a token signed by a known key, of the wanted type and not expired; undefined
   * otherwise (malformed, `alg` other than ES256 — `none` included —, unknown `kid`, bad signature;
   * for a session token also a proof that does not lead to its batch's signed root).
   */
  verify(token: string, type: string, now = Date.now()): (TokenClaims & { kid: string }) | undefined {
    if (token.length > 4096) return undefined;
    if (type === SESSION_TOKEN) return this.verifySession(token, now);
    const signed = this.verifyJws(token);
    return signed && admit(signed.claims, signed.kid, type, now);
  }

  /** A session token (`signSessionBatch`): its batch's JWS, then its claims' place under the signed root. */
  private verifySession(token: string, now: number): (TokenClaims & { kid: string }) | undefined {
    const parts = token.split('~');
    if (parts.length !== 3) return undefined;
    const [jws, payload, proof] = parts;
    const batch = this.verifyJws(jws);
    if (!batch) return undefined;
    const { z_t, z_n, z_root } = batch.claims;
    if (z_t !== SESSION_BATCH || typeof z_n !== 'number' || !Number.isInteger(z_n) || typeof z_root !== 'string') return undefined;
    const raw = Buffer.from(proof, 'base64url');
    // Strictly the encoding of those bytes (node's decoder skips what it cannot read).
    if (raw.length < 4 || (raw.length - 4) % 32 !== 0 || raw.toString('base64url') !== proof) return undefined;
    const path: MerkleHash[] = [];
    for (let at = 4; at < raw.length; at += 32) path.push(raw.toString('latin1', at, at + 32));
    const root = merkleRootOf(raw.readUInt32BE(0), z_n, merkleLeafHash(payload), path);
    if (!root || rootClaim(root) !== z_root) return undefined;
    let claims: unknown;
    try {
      claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    } catch {
      return undefined;
    }
    return admit(claims, batch.kid, SESSION_TOKEN, now);
  }

  /** The header's `kid` and the claims of a compact ES256 JWS whose signature a known key verifies. */
  private verifyJws(token: string): { kid: string; claims: Record<string, unknown> } | undefined {
    const first = token.indexOf('.');
    const second = token.indexOf('.', first + 1);
    if (first <= 0 || second <= first + 1 || second === token.length - 1 || token.indexOf('.', second + 1) !== -1) return undefined;
    let header: { alg?: unknown; kid?: unknown };
    let claims: unknown;
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
    if (claims === null || typeof claims !== 'object') return undefined;
    return { kid: header.kid, claims: claims as Record<string, unknown> };
  }
}

/** Signed claims as a token of `type`: the claims every token carries, and not expired. */
function admit(claims: unknown, kid: string, type: string, now: number): (TokenClaims & { kid: string }) | undefined {
  const c = claims as TokenClaims | null;
  if (c === null || typeof c !== 'object' || c.z_t !== type) return undefined;
  if (typeof c.sub !== 'string' || typeof c.jti !== 'string' || typeof c.iat !== 'number') return undefined;
  if (c.exp !== undefined && (typeof c.exp !== 'number' || c.exp * 1000 <= now)) return undefined;
  return { ...c, kid };
}
