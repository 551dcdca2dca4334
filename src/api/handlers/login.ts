/**
 * The primary login methods of `POST /authenticate?method=…`. Each identifies the caller and
 * returns the identity and the authenticator used; session.ts then applies what is common to all
 * of them (disabled identities, auth policy, secondary factors) and creates the API session.
 *
 * Example: `LOGIN_METHODS.password(ctx)` → `{ identity, authenticatorId }` or throws INVALID_AUTH.
 */
import type { Ctx } from '../context.js';
import type { Rec } from '../../store/store.js';
import { errors } from '../errors.js';

export interface LoginResult {
  identity: Rec;
  authenticatorId: string;
  /** For ext-jwt: the signer that verified the token. */
  externalJwtSignerId?: string;
}

export type LoginMethod = (ctx: Ctx) => Promise<LoginResult>;

/** Certificate login over the mutual-TLS listener (issue #5). */
export const certLogin: LoginMethod = async () => {
  throw errors.notImplemented(5);
};

/** External JWT login (issue #6). */
export const extJwtLogin: LoginMethod = async () => {
  throw errors.notImplemented(6);
};
