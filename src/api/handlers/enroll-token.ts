/**
 * `POST /enroll/token`: an identity enrolls itself with a JWT from an
 * external JWT signer in `Authorization: Bearer …`. The signer is the one named by the
 * `mesh-token-issuer-id` header, else the one whose `kid` matches the token header, else the one
 * whose `issuer` matches `iss`; it must be enabled, and the token must verify against its
 * certificate or JWKS with its issuer and audience.
 *
 * With `clientCsr` (signer `enrollToCertEnabled`): a new identity with a cert authenticator,
 * reply `{cert, ca}`. Without (signer `enrollToTokenEnabled`): a new identity that logs in with
 * such tokens (ext-jwt), reply `{}`. The identity gets `externalId` = the signer's claim
 * (`claimsProperty`, default `sub`), a name from `enrollNameClaimsSelector` (default: that
 * claim; collisions get a counter), role attributes from `enrollAttributeClaimsSelector`, and the
 * auth policy `enrollAuthPolicyId`. A token whose identity already exists → 409.
 */
import crypto from 'node:crypto';
import * as jose from 'jose';
import type { Ctx, Entry } from '../../core/context.js';
import type { Reply } from '../../core/operation.js';
import { ApiError } from '../../core/errors.js';
import { ok } from '../../core/envelope.js';
import { newId, write } from '../../resources/write.js';
import type { Rec, ExternalJwtSignerRecord } from '../../store/store.js';
import { signCsrs, VALIDITY, withChain } from '../../pki/sign-csr.js';
import { certAuthenticator } from './enroll-flows.js';
import { DEFAULT_AUTH_POLICY_ID } from '../../resources/credentials.js';

const invalid = (why: string) => new ApiError('INVALID_ENROLLMENT_TOKEN', undefined, { code: 'INVALID_ENROLLMENT_TOKEN', message: why });

/** Remote key sets, one per signer endpoint (jose caches and refetches on unknown kids). */
const jwksSets = new Map<string, ReturnType<typeof jose.createRemoteJWKSet>>();

function findSigner(ctx: Ctx, token: string): ExternalJwtSignerRecord {
  const store = ctx.app.store;
  const named = ctx.req.headers['mesh-token-issuer-id']?.trim();
  let signer: ExternalJwtSignerRecord | undefined;
  if (named) signer = store.get('externalJwtSigners', named);
  else {
    let header: jose.ProtectedHeaderParameters;
    let claims: jose.JWTPayload;
    try {
      header = jose.decodeProtectedHeader(token);
      claims = jose.decodeJwt(token);
    } catch {
      throw invalid('the token is not a JWT; name its issuer with the mesh-token-issuer-id header');
    }
    if (header.kid) signer = store.findUnique('externalJwtSigners', 'kid', header.kid);
    if (!signer && typeof claims.iss === 'string') signer = store.findUnique('externalJwtSigners', 'issuer', claims.iss);
  }
  if (!signer) throw invalid('no external JWT signer matches the token');
  if (!signer.enabled) throw invalid('the external JWT signer of the token is disabled');
  return signer;
}

async function verify(signer: ExternalJwtSignerRecord, token: string): Promise<jose.JWTPayload> {
  const opts: jose.JWTVerifyOptions = { issuer: signer.issuer };
  if (signer.audience) opts.audience = signer.audience;
  try {
    if (signer.certPem) {
      const key = crypto.createPublicKey(signer.certPem);
      return (await jose.jwtVerify(token, key, opts)).payload;
    }
    let set = jwksSets.get(signer.jwksEndpoint!);
    if (!set) jwksSets.set(signer.jwksEndpoint!, (set = jose.createRemoteJWKSet(new URL(signer.jwksEndpoint!), { timeoutDuration: 5000 })));
    return (await jose.jwtVerify(token, set, opts)).payload;
  } catch (e) {
    throw invalid(`the token did not verify: ${(e as Error).message}`);
  }
}

/** A claim by name or JSON-pointer-like path (`/a/b`, `a.b`). */
function claimAt(claims: Record<string, unknown>, selector: string): unknown {
  const parts = selector.startsWith('/') ? selector.slice(1).split('/') : selector.split('.');
  let v: unknown = claims;
  for (const p of parts) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<string, unknown>)[p];
  }
  return v;
}

export async function enrollToken(ctx: Ctx): Promise<Reply> {
  const auth = ctx.req.headers.authorization ?? '';
  const m = /^Bearer\s+(\S+)\s*$/i.exec(auth);
  if (!m) throw invalid('an Authorization: Bearer <token> header is required');
  const token = m[1];
  const signer = findSigner(ctx, token);
  const claims = await verify(signer, token);
  const claimName = signer.claimsProperty || 'sub';
  const externalId = claimAt(claims, claimName);
  if (typeof externalId !== 'string' || externalId === '') throw invalid(`the token has no ${claimName} claim`);
  const csr = ctx.body?.clientCsr;
  const wantsCert = typeof csr === 'string' && csr.trim() !== '';
  if (wantsCert ? !signer.enrollToCertEnabled : !signer.enrollToTokenEnabled)
    throw new ApiError('INVALID_ENROLLMENT_NOT_ALLOWED', `the signer does not allow enrolling to ${wantsCert ? 'certificate' : 'token'} credentials`);
  const store = ctx.app.store;
  if (store.findUnique('identities', 'externalId', externalId) || (!signer.useExternalId && store.get('identities', externalId)))
    throw new ApiError('ENROLLMENT_IDENTITY_ALREADY_ENROLLED');

  const nameClaim = signer.enrollNameClaimsSelector ? claimAt(claims, signer.enrollNameClaimsSelector) : undefined;
  const name0 = typeof nameClaim === 'string' && nameClaim !== '' ? nameClaim : externalId;
  const attrClaim = signer.enrollAttributeClaimsSelector ? claimAt(claims, signer.enrollAttributeClaimsSelector) : undefined;
  const attrs = (Array.isArray(attrClaim) ? attrClaim : typeof attrClaim === 'string' ? [attrClaim] : [])
    .filter((a): a is string => typeof a === 'string' && a !== '' && a[0] !== '#' && a[0] !== '@');
  const cert = wantsCert ? (await signCsrs(ctx.app, [{ csr, profile: 'client', validityMs: VALIDITY.client, field: 'clientCsr' }]))[0] : undefined;
  await write(store, (tx) => {
    if (tx.findUnique('identities', 'externalId', externalId)) throw new ApiError('ENROLLMENT_IDENTITY_ALREADY_ENROLLED');
    if (cert && tx.findUnique('authenticators', 'fingerprint', cert.fingerprint)) throw new ApiError('CERT_IN_USE');
    let name = name0;
    for (let n = 1; tx.findUnique('identities', 'name', name); n++) name = name0 + String(n).padStart(6, '0');
    const policy = signer.enrollAuthPolicyId && tx.exists('authPolicies', signer.enrollAuthPolicyId) ? signer.enrollAuthPolicyId : DEFAULT_AUTH_POLICY_ID;
    const now = Date.now();
    const id = newId();
    tx.put('identities', {
      id, createdAt: now, updatedAt: now, tags: {}, name, typeId: 'Default', isAdmin: false, isDefaultAdmin: false, authPolicyId: policy,
      roleAttributes: [...new Set(attrs)].sort(), externalId, defaultHostingCost: 0, defaultHostingPrecedence: 'default',
      serviceHostingCosts: {}, serviceHostingPrecedences: {},
    });
    if (cert) tx.put('authenticators', certAuthenticator(id, cert.pem, cert.fingerprint, cert.notAfter));
  });
  return cert ? ok({ cert: withChain(ctx.app, cert.pem), ca: ctx.app.pki.caBundlePem }) : ok({});
}

export function enrollTokenEntries(): Entry[] {
  return [
    { api: 'client', operationId: 'enrollToken', auth: 'none', limit: 'heavy', body: 'optional', handler: enrollToken },
  ];
}
