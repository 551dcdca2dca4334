/**
 * `/oidc/keys`: the JSON Web Key Set of every controller's token signing keys (current and
 * retired-but-still-verifying), where upstream's OIDC provider publishes it. Routers and other
 * controllers verify API-session and session tokens with it.
 */
import Negotiator from 'negotiator';
import type { RawRoute, Reply, Req } from '../core/operation.js';
import { ApiError, errors } from '../core/errors.js';
import { qrPng } from '../auth/mfa.js';
import type { SigningKeys } from '../auth/tokens.js';
import { OAuthError, parseFields, type OidcProvider } from './provider.js';
import { enrollPage, enrollStartPage, loginPage, totpPage } from './pages.js';

const JWKS_PATH = '/oidc/keys';

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

/** Whether the client asked for HTML before JSON (a browser); no Accept header means JSON, as upstream. */
function wantsHtml(req: Req): boolean {
  return new Negotiator({ headers: { accept: req.headers.accept } }).mediaType(['application/json', 'text/html']) === 'text/html';
}

const html = (body: string, status = 200, headers: Record<string, string> = {}): Reply => ({
  status,
  body,
  contentType: 'text/html; charset=utf-8',
  headers: { 'cache-control': 'no-store', ...headers },
});

/** A login step for a browser: its redirect as it is, its refusal as the step's page again with the reason. */
async function browserStep(run: () => Promise<Reply>, again: (reason: string) => string | Promise<string>): Promise<Reply> {
  try {
    return await run();
  } catch (e) {
    if (e instanceof ApiError) return html(await again(e.message), e.status, e.headers);
    if (e instanceof OAuthError) return html(await again(e.description), e.status);
    throw e;
  }
}

/** The request id a login form posted (the page shown again keeps it). */
function postedId(req: Req): string {
  try {
    const f = parseFields(req);
    return String(f.id ?? f.authRequestID ?? req.query.get('authRequestID') ?? req.query.get('id') ?? '');
  } catch {
    return '';
  }
}

const EXT_JWT_NEEDED = 'This login also needs a token of an external identity provider, which this form cannot send; use a client that sends it with the login.';

/**
 * A step's answer for a browser: its redirect as it is; auth queries still open as the page of
 * the next step (the TOTP form, or the offer to set TOTP up; a pending external-JWT factor cannot
 * be passed from a form).
 */
function browserNext(reply: Reply, id: string): Reply {
  if (reply.status !== 200) return reply;
  const queries = (reply.body as { authQueries: { typeId: string; isTotpEnrolled?: boolean }[] }).authQueries;
  const totp = queries.find((q) => q.typeId === 'TOTP');
  if (!totp) return html(loginPage(id, EXT_JWT_NEEDED), 401);
  return html(totp.isTotpEnrolled === false ? enrollStartPage(id) : totpPage(id), 200, reply.headers);
}

async function enrollmentPage(oidc: OidcProvider, req: Req, id: string, reason?: string): Promise<string> {
  let e: ReturnType<OidcProvider['pendingEnrollment']>;
  try {
    e = oidc.pendingEnrollment(req);
  } catch {
    e = undefined;
  }
  if (!e) return enrollStartPage(id, reason);
  return enrollPage(id, { ...e, qrDataUri: `data:image/png;base64,${(await qrPng(e.provisioningUrl)).toString('base64')}` }, reason);
}

/** The origin a request came to (`https://<Host>`), as a URL's `origin` spells it; undefined without a usable Host. */
function requestOrigin(req: Req): string | undefined {
  const host = req.headers.host;
  if (!host || !URL.canParse(`https://${host}`)) return undefined;
  return new URL(`https://${host}`).origin;
}

/**
 * Other names clients send an endpoint to, and the endpoint: upstream's admin console revokes at
 * `/oidc/oauth/revoke` (upstream's OIDC library serves `/oidc/revoke`, the name its discovery
 * document gives), and the `oauth2` security definition of upstream's edge specs names
 * `/oidc/token` as the token URL (the library serves `/oidc/oauth/token`).
 */
const ALIASES: Record<string, string> = {
  '/oidc/oauth/revoke': '/oidc/revoke',
  '/oidc/token': '/oidc/oauth/token',
};

const DISCOVERY = '/.well-known/openid-configuration';

/**
 * Everything else under `/oidc` (provider.ts): OAuth failures answer the RFC 6749 error JSON;
 * the login steps fail as `/authenticate` does (the error envelope), as upstream's do — or, for
 * a browser (Accept: text/html first), with the step's HTML page again (pages.ts). Also the
 * discovery document at the host root, where upstream serves it too.
 */
export function oidcRoutes(oidc: OidcProvider): RawRoute[] {
  const rootDiscovery: RawRoute = {
    method: '*',
    path: DISCOVERY,
    handle(req) {
      if (req.method !== 'get' && req.method !== 'head') throw errors.methodNotAllowed();
      return { status: 200, body: oidc.discovery(), contentType: 'application/json' };
    },
  };
  return [rootDiscovery, oidcRoute(oidc)];
}

function oidcRoute(oidc: OidcProvider): RawRoute {
  return {
    method: '*',
    path: '/oidc',
    prefix: true,
    async handle(req) {
      const m = req.method;
      const trimmed = req.path.replace(/\/$/, '');
      const p = Object.hasOwn(ALIASES, trimmed) ? ALIASES[trimmed] : trimmed;
      try {
        if (p === `/oidc${DISCOVERY}` && (m === 'get' || m === 'head'))
          return { status: 200, body: oidc.discovery(), contentType: 'application/json' };
        if (p === '/oidc/authorize') {
          if (m === 'get') return oidc.authorize(req.query, requestOrigin(req));
          if (m === 'post') return oidc.authorize(parseFields(req), requestOrigin(req));
        }
        if (p === '/oidc/authorize/callback' && m === 'get') return oidc.authorizeCallback(req.query.get('id'));
        if (p === '/oidc/oauth/token' && m === 'post') return await oidc.token(req);
        if (p === '/oidc/revoke' && m === 'post') return await oidc.revoke(req);
        if (p === '/oidc/oauth/introspect' && m === 'post') return oidc.introspect(req);
        if (p === '/oidc/end_session' && (m === 'get' || m === 'post')) return await oidc.endSession(req, requestOrigin(req));
        if (p === '/oidc/userinfo' && (m === 'get' || m === 'post')) return oidc.userinfo(req);
        if (p === '/oidc/login/auth-queries' && m === 'get') return oidc.authQueries(req.query.get('id'));
        const browser = wantsHtml(req);
        if (p === '/oidc/login/totp' && m === 'post') {
          if (!browser) return await oidc.totp(req);
          const id = postedId(req);
          return await browserStep(async () => browserNext(await oidc.totp(req), id), (reason) => totpPage(id, reason));
        }
        if (p === '/oidc/login/totp/enroll' && m === 'post') {
          if (!browser) return await oidc.startTotpEnrollment(req);
          const id = postedId(req);
          // The page shows the new secret; a second post (a reload) shows the enrollment already started.
          return await browserStep(
            async () => (await oidc.startTotpEnrollment(req), html(await enrollmentPage(oidc, req, id), 201)),
            (reason) => enrollmentPage(oidc, req, id, reason),
          );
        }
        if (p === '/oidc/login/totp/enroll' && m === 'delete') return await oidc.deleteTotpEnrollment(req);
        if (p === '/oidc/login/totp/enroll/verify' && m === 'post') {
          if (!browser) return await oidc.verifyTotpEnrollment(req);
          const id = postedId(req);
          return await browserStep(async () => browserNext(await oidc.verifyTotpEnrollment(req), id), (reason) => enrollmentPage(oidc, req, id, reason));
        }
        const step = p.startsWith('/oidc/login/') ? p.slice('/oidc/login/'.length) : undefined;
        if (step && Object.hasOwn(LOGIN_METHODS, step)) {
          const method = LOGIN_METHODS[step];
          if (m === 'get') {
            const id = req.query.get('authRequestID') ?? req.query.get('id') ?? '';
            return method === 'password'
              ? html(loginPage(id), 200, { 'auth-request-id': id })
              : { status: 200, body: 'please POST to this URL', contentType: 'text/plain', headers: { 'auth-request-id': id } };
          }
          if (m === 'post') {
            if (!browser || method !== 'password') return await oidc.login(method, req);
            const id = postedId(req);
            return await browserStep(async () => browserNext(await oidc.login(method, req), id), (reason) => loginPage(id, reason));
          }
        }
      } catch (e) {
        if (e instanceof OAuthError) return { status: e.status, body: { error: e.error, error_description: e.description }, headers: { 'cache-control': 'no-store' } };
        throw e;
      }
      return { status: 404, body: { error: 'not_found', error_description: `no OIDC endpoint ${m.toUpperCase()} ${trimmed}` } };
    },
  };
}
