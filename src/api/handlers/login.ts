/**
 * The primary login methods of `POST /authenticate?method=…`. Each identifies the caller and
 * returns the identity and the authenticator used; session.ts then applies what is common to all
 * of them (disabled identities, auth policy, lockout, secondary factors) and creates the API session.
 *
 * Example: `LOGIN_METHODS.password(ctx)` → `{ identity, authenticatorId }` or throws INVALID_AUTH.
 */
import type { Ctx } from '../context.js';
import type { Rec } from '../../store/store.js';
import { errors } from '../errors.js';
import { bearerTokens } from '../../auth/ext-jwt.js';

export interface LoginResult {
  identity: Rec;
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

/** Certificate login over the mutual-TLS listener (issue #5). */
export const certLogin: LoginMethod = async () => {
  throw errors.notImplemented(5);
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
