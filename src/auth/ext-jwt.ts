/**
 * External JWT signers: verifying a bearer token issued by an
 * identity provider the administrator registered, and finding the identity it speaks for.
 *
 * Signer selection: a certificate-backed signer whose `kid` equals the token's `kid` header;
 * otherwise the JWKS-backed signer whose `issuer` equals the token's `iss`. The token must carry a
 * `kid` and an `exp`, be signed with an asymmetric algorithm, and match the signer's issuer and
 * (when set) audience. The signer must be enabled. The identity is read from the claim named by
 * `claimsProperty` (default `sub`): an identity id, or an `externalId` when `useExternalId`.
 *
 * Keys are never parsed per request: certificate keys are kept as KeyObjects and JWKS endpoints
 * as jose remote key sets (fetched on first use, cached, refetched when an unknown `kid` shows up,
 * at most once per cooldown), both dropped when the signer changes.
 *
 * Example: `await app.auth.extJwt.verify(token)` → `{ signer, claims, identity }`, or throws 401.
 */
import crypto, { type KeyObject } from 'node:crypto';
import { createRemoteJWKSet, decodeJwt, decodeProtectedHeader, jwtVerify, type JWTPayload, type JWSAlgorithm } from 'jose';
import type { Rec, Store, ExternalJwtSignerRecord, IdentityRecord } from '../store/store.js';

type RemoteSet = ReturnType<typeof createRemoteJWKSet>;

const ALGORITHMS: JWSAlgorithm[] = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'];

export interface ExtJwtOptions {
  /** Least time between two JWKS fetches of one signer (a burst of unknown kids fetches once). */
  jwksCooldownMs: number;
  /** JWKS HTTP fetch timeout. */
  jwksTimeoutMs: number;
  /** How long a fetched JWKS is trusted before it is fetched again. */
  jwksMaxAgeMs: number;
  /** Allowed clock skew for exp/nbf/iat, seconds. */
  clockToleranceS: number;
}

export interface VerifiedExtJwt {
  signer: ExternalJwtSignerRecord;
  claims: JWTPayload;
  /** The identity named by the signer's claims property, when one exists. */
  identity?: IdentityRecord;
}

/** Thrown for every verification failure; the caller turns it into INVALID_AUTH or UNAUTHORIZED. */
export class ExtJwtError extends Error {}

/** Bearer tokens of an `Authorization` header (several may be joined by commas). */
export function bearerTokens(header: string | undefined): string[] {
  if (!header) return [];
  const out: string[] = [];
  for (const part of header.split(',')) {
    const m = /^\s*Bearer\s+(\S+)\s*$/i.exec(part);
    if (m) out.push(m[1]);
  }
  return out;
}

export class ExtJwtVerifier {
  private readonly certKeys = new Map<string, { version: string; key: KeyObject }>();
  private readonly remoteSets = new Map<string, { version: string; set: RemoteSet }>();
  /** Verified tokens (secondary factors are sent with every request): token → until (ms), signer, identity. */
  private readonly verified = new Map<string, { until: number; signerId: string; identityId?: string }>();

  constructor(
    private readonly store: Store,
    private readonly opts: ExtJwtOptions,
  ) {
    store.on('change', (events: { collection: string; id: string }[]) => {
      for (const ev of events) {
        if (ev.collection === 'externalJwtSigners') {
          this.certKeys.delete(ev.id);
          this.remoteSets.delete(ev.id);
          this.verified.clear();
        } else if (ev.collection === 'identities') this.verified.clear();
      }
    });
  }

  /** The signer a token claims to come from (by `kid`, then by issuer), enabled or not. */
  selectSigner(token: string, signerId?: string): ExternalJwtSignerRecord {
    let header: { kid?: unknown };
    let claims: JWTPayload;
    try {
      header = decodeProtectedHeader(token);
      claims = decodeJwt(token);
    } catch {
      throw new ExtJwtError('malformed token');
    }
    if (signerId !== undefined) {
      const s = this.store.get('externalJwtSigners', signerId);
      if (!s) throw new ExtJwtError('unknown signer');
      return s;
    }
    if (typeof header.kid !== 'string' || header.kid === '') throw new ExtJwtError('token has no kid header');
    const byKid = this.store.findUnique('externalJwtSigners', 'kid', header.kid);
    const cert = byKid && byKid.certPem ? byKid : undefined;
    if (cert && cert.issuer === claims.iss) return cert;
    if (typeof claims.iss === 'string') {
      const byIssuer = this.store.findUnique('externalJwtSigners', 'issuer', claims.iss);
      if (byIssuer && byIssuer.jwksEndpoint) return byIssuer;
    }
    // A certificate signer with this kid but another issuer: verification will refuse the issuer.
    if (cert) return cert;
    throw new ExtJwtError('no signer for this token');
  }

  private keyFor(signer: ExternalJwtSignerRecord): KeyObject | RemoteSet {
    const version = `${signer.updatedAt}`;
    if (signer.certPem) {
      const c = this.certKeys.get(signer.id);
      if (c && c.version === version) return c.key;
      const key = new crypto.X509Certificate(signer.certPem).publicKey;
      this.certKeys.set(signer.id, { version, key });
      return key;
    }
    const r = this.remoteSets.get(signer.id);
    if (r && r.version === version) return r.set;
    const set = createRemoteJWKSet(new URL(signer.jwksEndpoint!), {
      cooldownDuration: this.opts.jwksCooldownMs,
      timeoutDuration: this.opts.jwksTimeoutMs,
      cacheMaxAge: this.opts.jwksMaxAgeMs,
    });
    this.remoteSets.set(signer.id, { version, set });
    return set;
  }

  /** The identity a verified token names under its signer's rules. */
  identityFor(signer: ExternalJwtSignerRecord, claims: JWTPayload): IdentityRecord | undefined {
    const prop = typeof signer.claimsProperty === 'string' && signer.claimsProperty !== '' ? signer.claimsProperty : 'sub';
    const value = (claims as Record<string, unknown>)[prop];
    if (typeof value !== 'string' || value === '') return undefined;
    return signer.useExternalId === true ? this.store.findUnique('identities', 'externalId', value) : this.store.get('identities', value);
  }

  /** Verify signature, issuer, audience and lifetime with the selected (or given) signer. */
  async verify(token: string, opts: { signerId?: string } = {}): Promise<VerifiedExtJwt> {
    const signer = this.selectSigner(token, opts.signerId);
    if (signer.enabled !== true) throw new ExtJwtError('signer is disabled');
    const key = this.keyFor(signer);
    let claims: JWTPayload;
    try {
      const options = {
        issuer: signer.issuer as string,
        audience: typeof signer.audience === 'string' && signer.audience !== '' ? signer.audience : undefined,
        algorithms: ALGORITHMS,
        clockTolerance: this.opts.clockToleranceS,
        requiredClaims: ['exp'],
      };
      const res = typeof key === 'function' ? await jwtVerify(token, key, options) : await jwtVerify(token, key, options);
      claims = res.payload;
    } catch (e) {
      throw new ExtJwtError((e as Error).message);
    }
    return { signer, claims, identity: this.identityFor(signer, claims) };
  }

  /**
   * A secondary factor (auth policy `secondary.requireExtJwtSigner`): does this request carry a
   * valid token of `signerId` that names `identityId`? Successful checks are remembered until the
   * token expires, so a client sending the same token with every request is verified once.
   */
  async satisfiesSecondary(authorization: string | undefined, signerId: string, identityId: string): Promise<boolean> {
    const now = Date.now();
    for (const token of bearerTokens(authorization)) {
      const hit = this.verified.get(token);
      if (hit && hit.until > now) {
        if (hit.signerId === signerId && hit.identityId === identityId) return true;
        continue;
      }
      try {
        const v = await this.verify(token, { signerId });
        const until = typeof v.claims.exp === 'number' ? v.claims.exp * 1000 : now;
        if (this.verified.size > 10_000) this.verified.clear();
        this.verified.set(token, { until, signerId: v.signer.id, identityId: v.identity?.id });
        if (v.identity?.id === identityId) return true;
      } catch {
        // not this one; try the next bearer token
      }
    }
    return false;
  }
}
