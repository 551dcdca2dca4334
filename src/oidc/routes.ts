/**
 * `/oidc/keys`: the JSON Web Key Set of every controller's token signing keys (current and
 * retired-but-still-verifying), where upstream's OIDC provider publishes it. Routers and other
 * controllers verify API-session and session tokens with it.
 */
import type { RawRoute } from '../core/operation.js';
import { errors } from '../core/errors.js';
import type { SigningKeys } from '../auth/tokens.js';
import { OAuthError, parseFields, type OidcProvider } from './provider.js';

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

const LOGIN_METHODS: Record<string, string> = { password: 'password', username: 'password', cert: 'cert', 'ext-jwt': 'ext-jwt' };

const LOGIN_PAGE = (id: string) =>
  `<!doctype html><html><head><meta charset="utf-8"><title>Login</title></head><body>` +
  `<form method="post" action="/oidc/login/password"><input type="hidden" name="id" value="${id.replace(/[^A-Za-z0-9_-]/g, '')}">` +
  `<label>Username <input name="username" autocomplete="username"></label> <label>Password <input name="password" type="password" autocomplete="current-password"></label>` +
  `<button type="submit">Log in</button></form></body></html>`;

/**
 * Everything else under `/oidc` (provider.ts): OAuth failures answer the RFC 6749 error JSON;
 * the login steps fail as `/authenticate` does (the error envelope), as upstream's do.
 */
export function oidcRoute(oidc: OidcProvider): RawRoute {
  return {
    method: '*',
    path: '/oidc',
    prefix: true,
    async handle(req, requestId) {
      const m = req.method;
      const p = req.path.replace(/\/$/, '');
      try {
        if (p === '/oidc/.well-known/openid-configuration' && (m === 'get' || m === 'head'))
          return { status: 200, body: oidc.discovery(), contentType: 'application/json' };
        if (p === '/oidc/authorize') {
          if (m === 'get') return oidc.authorize(req.query);
          if (m === 'post') return oidc.authorize(parseFields(req));
        }
        if (p === '/oidc/authorize/callback' && m === 'get') return oidc.authorizeCallback(req.query.get('id'));
        if (p === '/oidc/oauth/token' && m === 'post') return await oidc.token(req);
        if (p === '/oidc/revoke' && m === 'post') return await oidc.revoke(req);
        if (p === '/oidc/end_session' && (m === 'get' || m === 'post')) return await oidc.endSession(req);
        if (p === '/oidc/userinfo' && (m === 'get' || m === 'post')) return oidc.userinfo(req);
        if (p === '/oidc/login/auth-queries' && m === 'get') return oidc.authQueries(req.query.get('id'));
        if (p === '/oidc/login/totp' && m === 'post') return await oidc.totp(req);
        const step = p.startsWith('/oidc/login/') ? p.slice('/oidc/login/'.length) : undefined;
        if (step && Object.hasOwn(LOGIN_METHODS, step)) {
          const id = req.query.get('authRequestID') ?? req.query.get('id') ?? '';
          if (m === 'get')
            return LOGIN_METHODS[step] === 'password'
              ? { status: 200, body: LOGIN_PAGE(id), contentType: 'text/html; charset=utf-8', headers: { 'auth-request-id': id } }
              : { status: 200, body: 'please POST to this URL', contentType: 'text/plain', headers: { 'auth-request-id': id } };
          if (m === 'post') return await oidc.login(LOGIN_METHODS[step], req, requestId);
        }
      } catch (e) {
        if (e instanceof OAuthError) return { status: e.status, body: { error: e.error, error_description: e.description }, headers: { 'cache-control': 'no-store' } };
        throw e;
      }
      return { status: 404, body: { error: 'not_found', error_description: `no OIDC endpoint ${m.toUpperCase()} ${p}` } };
    },
  };
}
