/**
 * The primary login methods of `POST /authenticate?method=…`. Each identifies the caller and
 * returns the identity and the authenticator used; session.ts then applies what is common to all
 * of them (disabled identities, auth policy, lockout, secondary factors) and creates the API session.
 *
 * Example: `LOGIN_METHODS.password(ctx)` → `{ identity, authenticatorId }` or throws INVALID_AUTH.
 */
import type { Ctx } from '../../core/context.js';
import type { IdentityRecord } from '../../store/store.js';
import { errors } from '../../core/errors.js';
import { bearerTokens } from '../../auth/ext-jwt.js';
import { isDisabled } from '../../resources/identities.js';
import { fingerprintOf } from '../../pki/certs.js';
import { chainsTo, externalIdOf, isExpired, x509 } from '../../pki/chain.js';

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

export type LoginMethod = (ctx: Ctx) => Promise<LoginResult>;

/**
 * Certificate login over the mutual-TLS listener. The TLS
 * handshake proved possession of the key; the leaf then identifies the caller:
 * - by fingerprint, pinned on a cert authenticator (controller-issued, ottca/CA-enrolled, or
 *   created by an admin); one from a third-party CA needs that CA still verified and auth-enabled;
 * - otherwise through a verified, auth-enabled CA with an `externalIdClaim` that signed the chain,
 *   by the external id it names.
 * The certificate rules of the identity's auth policy (`cert.allowed`, `allowExpiredCerts`) and a
 * disabled identity fail here too, so the method is safe on its own; session.ts may re-apply them.
 */
export const certLogin: LoginMethod = async (ctx) => {
  const leafDer = ctx.req.peerLeaf ?? ctx.req.peerCertificates?.[0];
  if (!leafDer) throw errors.invalidAuth();
  const { store } = ctx.app;
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
    const chain = ctx.req.peerCertificates ?? [leafDer];
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
};

/**
 * External JWT login: `Authorization: Bearer <jwt>` from an enabled external JWT signer
 * (src/auth/ext-jwt.ts). Every failure — malformed token, unknown kid or issuer, disabled signer,
 * bad signature, wrong audience, expired, no such identity — is the same 401 INVALID_AUTH.
 */
export const extJwtLogin: LoginMethod = async (ctx) => {
  const tokens = bearerTokens(ctx.req.headers['authorization']);
  if (tokens.length === 0) throw errors.invalidAuth();
  for (const token of tokens) {
    try {
      const v = await ctx.app.auth.extJwt.verify(token);
      if (!v.identity) continue;
      return { identity: v.identity, authenticatorId: v.signer.id, externalJwtSignerId: v.signer.id };
    } catch {
      // try the next bearer token, if any
    }
  }
  throw errors.invalidAuth();
};
