/**
 * `/oidc/keys`: the JSON Web Key Set of every controller's token signing keys (current and
 * retired-but-still-verifying), where upstream's OIDC provider publishes it. Routers and other
 * controllers verify API-session and session tokens with it.
 */
import type { RawRoute } from '../core/operation.js';
import { errors } from '../core/errors.js';
import type { SigningKeys } from '../auth/tokens.js';

export const JWKS_PATH = '/oidc/keys';

export function jwksRoute(keys: SigningKeys): RawRoute {
  return {
    method: '*',
    path: JWKS_PATH,
    handle(req) {
      if (req.method !== 'get' && req.method !== 'head') throw errors.methodNotAllowed();
      // Short caching: a verifier that meets an unknown kid fetches again anyway.
      return { status: 200, body: keys.jwks(), headers: { 'cache-control': 'max-age=60' }, contentType: 'application/json' };
    },
  };
}
