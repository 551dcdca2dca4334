/**
 * The router: finds the Operation for a request, authenticates it (token → API session from
 * memory), checks the permission, parses and validates the body, runs the handler and renders
 * every failure through the one error catalog. Transport-independent: both the uWS and the
 * node:https adapters call `handle`.
 */
import { ClusterUnavailable, WriteContention } from '../cluster/errors.js';
import { ApiError, defaultRetryAfter, errors } from '../core/errors.js';
import { renderError } from '../core/envelope.js';
import { shortId } from '../store/ids.js';
import type { App, Ctx, Op } from './context.js';
import type { ServedOperation } from '../core/context.js';
import type { ApiName, RawRoute, Reach, Reply, Req } from '../core/operation.js';
import type { IdentityRecord } from '../store/store.js';
import { dominates, isPermitted } from '../auth/permissions.js';
import { isDisabledAt } from '../auth/login-policy.js';
import { bearerTokens } from '../auth/ext-jwt.js';
import { duplicateKey } from './json-keys.js';

export const BASE_PATHS: Record<ApiName, string> = {
  client: '/edge/client/v1',
  management: '/edge/management/v1',
  fabric: '/fabric/v1',
};

const API_PREFIXES = (['client', 'management', 'fabric'] as const).map((api) => [api, BASE_PATHS[api], BASE_PATHS[api] + '/'] as const);

interface Route {
  op: Op;
  segments: string[]; // literal segments, or '{name}'
  /** segments joined with '/' */
  shape: string;
}

const WWW_MISSING =
  'zt-session realm="zt-session" error="missing" error_description="no matching token was provided"';
const WWW_INVALID = 'zt-session realm="zt-session" error="invalid" error_description="token is invalid"';

/** The formatted second of the last goTime call: every request of that second reuses it. */
let goSecond = NaN;
let goSecondText = '';

/** Go's time.String() form, which upstream uses for the `expires-at` header: `2026-03-10 12:00:00.123 +0000 UTC`. */
function goTime(ms: number): string {
  ms = Math.trunc(ms);
  const sec = Math.floor(ms / 1000);
  if (sec !== goSecond) {
    const iso = new Date(sec * 1000).toISOString(); // 2026-03-10T12:00:00.000Z
    goSecondText = `${iso.slice(0, 10)} ${iso.slice(11, 19)}.`;
    goSecond = sec;
  }
  const frac = ms - sec * 1000;
  return `${goSecondText}${frac < 10 ? '00' : frac < 100 ? '0' : ''}${frac} +0000 UTC`;
}

/** One served request, as the request hook sees it (metrics, access log). Carries no body, query or header values. */
export interface RequestRecord {
  requestId: string;
  method: string;
  /** Normalized path, without the query string. */
  path: string;
  /** The upstream API and operation served, or the raw route's path; undefined when nothing matched. */
  api?: ApiName;
  operationId?: string;
  rawRoute?: string;
  status: number;
  durationMs: number;
  remoteAddress: string;
  identityId?: string;
}

/** What the router serves besides the operation table, and whom it tells of requests. */
export interface RouterOptions {
  /** Routes outside the upstream APIs (see RawRoute), tried in this order. */
  raw?: RawRoute[];
  /** Called once per request after its reply is ready; replaces the built-in debug log when set. */
  onRequest?: (r: RequestRecord) => void;
  /** Called for every answered Upstream-API request other than a read (the audit trail keeps the successful ones). */
  onChange?: (ctx: Ctx, reply: Reply) => void;
}

export class Router {
  private readonly onRequest?: (r: RequestRecord) => void;
  private readonly onChange?: (ctx: Ctx, reply: Reply) => void;
  private readonly routes: Record<ApiName, Map<number, Route[]>> = { client: new Map(), management: new Map(), fabric: new Map() };
  /** method → path → operation, for paths without parameters: Map lookups instead of the segment walk. */
  private readonly literal: Record<ApiName, Map<string, Map<string, Op>>> = { client: new Map(), management: new Map(), fabric: new Map() };
  /** Operations whose spec `produces` a JSON media type with parameters (see handle). */
  private readonly jsonMedia = new Map<Op, string>();
  private readonly raw: RawRoute[];
  private readonly serverHeader: string;

  constructor(private readonly app: App, ops: Op[], opts: RouterOptions = {}) {
    this.raw = opts.raw ?? [];
    this.onRequest = opts.onRequest;
    this.onChange = opts.onChange;
    for (const op of ops) {
      const segments = op.path.split('/').filter(Boolean);
      const byLen = this.routes[op.api];
      if (!byLen.has(segments.length)) byLen.set(segments.length, []);
      byLen.get(segments.length)!.push({ op, segments, shape: segments.join('/') });
      if (!op.path.includes('{')) {
        const byMethod = this.literal[op.api];
        if (!byMethod.has(op.method)) byMethod.set(op.method, new Map());
        byMethod.get(op.method)!.set(`/${segments.join('/')}`, op);
      }
      const json = (op.spec.produces as string[] | undefined)?.find((m) => m.startsWith('application/json;'));
      if (json) this.jsonMedia.set(op, json);
    }
    // Literal segments win over parameters: `/identities/{id}` must not shadow `/current-identity/mfa`-like paths.
    for (const byLen of Object.values(this.routes)) {
      for (const list of byLen.values()) list.sort((a, b) => specificity(b) - specificity(a));
    }
    this.serverHeader = `mesh-controller/${app.version}`;
  }

  private rawRoute(req: Req): RawRoute | undefined {
    for (const r of this.raw) {
      if (r.method !== '*' && r.method !== req.method) continue;
      if (r.prefix ? req.path === r.path || req.path.startsWith(r.path.endsWith('/') ? r.path : r.path + '/') : req.path === r.path) return r;
    }
    return undefined;
  }

  /** Resolve the API and the path inside it; host-root aliases go to the Client API. */
  private locate(path: string): { api: ApiName; rest: string } | undefined {
    for (const [api, base, prefix] of API_PREFIXES) {
      if (path === base || path.startsWith(prefix)) return { api, rest: path.slice(base.length) || '/' };
    }
    if (path === '/edge/v1' || path.startsWith('/edge/v1/')) return { api: 'client', rest: path.slice('/edge/v1'.length) || '/' };
    if (path === '/' || path === '/version' || path === '/.well-known/est/cacerts') return { api: 'client', rest: path };
    return undefined;
  }

  private match(api: ApiName, rest: string, method: string): { op?: Op; params: Record<string, string>; pathKnown: boolean } {
    // A literal route is the most specific shape for its path, so the walk below would pick it too.
    if (!rest.includes('%')) {
      const op = this.literal[api].get(method)?.get(rest);
      if (op) return { op, params: {}, pathKnown: true };
    }
    let segs: string[];
    try {
      segs = rest.split('/').filter(Boolean).map(decodeURIComponent);
    } catch {
      return { params: {}, pathKnown: false };
    }
    const candidates = this.routes[api].get(segs.length) ?? [];
    let pathKnown = false;
    let pathParams: Record<string, string> | undefined;
    let pathShape: string | undefined;
    for (const route of candidates) {
      const params: Record<string, string> = {};
      let ok = true;
      for (let i = 0; i < segs.length; i++) {
        const s = route.segments[i];
        if (s.startsWith('{')) params[s.slice(1, -1)] = segs[i];
        else if (s !== segs[i]) {
          ok = false;
          break;
        }
      }
      if (!ok) continue;
      // The first (most specific) matching shape decides; other methods on it only make a 405.
      if (pathShape !== undefined && route.shape !== pathShape) continue;
      pathShape = route.shape;
      pathKnown = true;
      pathParams = params;
      if (route.op.method === method) return { op: route.op, params, pathKnown };
    }
    return { params: pathParams ?? {}, pathKnown };
  }

  /**
   * Never rejects: every failure becomes an error envelope. Runs synchronously up to the first
   * step that really waits (most reads never do): a chain of awaits costs a measurable share of a
   * service-update poll (docs/policy.md).
   */
  handle(req: Req): Promise<Reply> {
    const t: InProgress = { requestId: shortId(), started: performance.now(), matched: {} };
    let out: Reply | Promise<Reply>;
    try {
      out = this.run(req, t);
    } catch (e) {
      out = this.failure(e, req, t.requestId);
    }
    if (isPromise(out)) return out.then((r) => this.finish(req, t, r), (e) => this.finish(req, t, this.failure(e, req, t.requestId)));
    try {
      return Promise.resolve(this.finish(req, t, out));
    } catch (e) {
      // As from an async function: a failing request hook rejects (the adapter answers 500).
      return Promise.reject(e);
    }
  }

  private run(req: Req, t: InProgress): Reply | Promise<Reply> {
    req.path = normalizePath(req.path);
    const raw = (t.raw = this.raw.length ? this.rawRoute(req) : undefined);
    if (req.method === 'options') return { status: 200, body: '', headers: corsPreflight() };
    if (raw) return raw.handle(req, t.requestId);
    const prepared = this.prepare(req, t.requestId, t.matched);
    // The operation matched is the one the context carries (which shows handlers no handler).
    const op = t.matched.op!;
    if (isPromise(prepared))
      return prepared.then((ctx) => {
        t.ctx = ctx;
        return op.handler(ctx);
      });
    t.ctx = prepared;
    return op.handler(prepared);
  }

  /** Response headers and the request hook, once the reply is known. */
  private finish(req: Req, t: InProgress, reply: Reply): Reply {
    const { ctx, requestId, started, matched, raw } = t;
    // A few upstream operations declare `produces: application/json; charset=utf-8`; upstream (go-openapi)
    // answers with exactly that media type, and spec-checking clients compare it literally.
    // Lists arrive already serialised (a string or pieces typed application/json), other JSON as an object.
    const isJson = reply.contentType === undefined ? reply.body !== null && typeof reply.body === 'object' && !Buffer.isBuffer(reply.body) : reply.contentType === 'application/json';
    if (ctx && isJson) {
      const json = this.jsonMedia.get(matched.op!);
      if (json) reply.contentType = json;
    }
    const headers: Record<string, string> = reply.headers
      ? { server: this.serverHeader, 'access-control-allow-origin': '*', ...reply.headers }
      : { server: this.serverHeader, 'access-control-allow-origin': '*' };
    if (ctx?.op.api === 'client' || !ctx) headers['mesh-instance-id'] = this.app.instanceId;
    // Raw routes (health, search) answer 429/503 outside the error catalog: the same back-off.
    if (headers['retry-after'] === undefined) {
      const retryAfter = defaultRetryAfter(reply.status);
      if (retryAfter) headers['retry-after'] = retryAfter;
    }
    if (ctx?.session && !this.app.sessions.isEnded(ctx.session)) {
      headers['expiration-seconds'] = String(this.app.sessions.timeoutSeconds);
      headers['expires-at'] = goTime(this.app.sessions.expiresAt(ctx.session));
    }
    reply.headers = headers;
    if (ctx && this.onChange && ctx.op.method !== 'get') this.onChange(ctx, reply);
    if (this.onRequest) {
      this.onRequest({
        requestId, method: req.method, path: req.path, api: matched.op?.api, operationId: matched.op?.operationId, rawRoute: raw?.path,
        status: reply.status, durationMs: performance.now() - started, remoteAddress: req.remoteAddress,
        identityId: ctx?.identity?.id,
      });
      return reply;
    }
    const log = this.app.log;
    if (log.isLevelEnabled('debug') || reply.status >= 500) {
      const ms = performance.now() - started;
      // Never log bodies, tokens or query strings that may carry secrets: method, path, status only.
      (reply.status >= 500 ? log.error.bind(log) : log.debug.bind(log))(
        { requestId, method: req.method, path: req.path, operationId: ctx?.op.operationId, status: reply.status, ms },
        'request',
      );
    }
    return reply;
  }

  private failure(e: unknown, req: Req, requestId: string): Reply {
    if (e instanceof ApiError) return renderError(e, requestId);
    // Cluster mode: etcd could not take the write (no leader, unreachable), or others kept changing what it read.
    if (e instanceof ClusterUnavailable) return renderError(new ApiError('CLUSTER_HAS_NO_LEADER', undefined, undefined, { 'retry-after': String(e.retryAfterSeconds) }), requestId);
    if (e instanceof WriteContention) return renderError(new ApiError('SERVER_TOO_MANY_REQUESTS', undefined, undefined, { 'retry-after': '1' }), requestId);
    this.app.log.error({ requestId, method: req.method, path: req.path, err: e }, 'unhandled error');
    return renderError(errors.unhandled(), requestId);
  }

  private prepare(req: Req, requestId: string, matched: { op?: Op }): Ctx | Promise<Ctx> {
    const where = this.locate(req.path);
    if (!where) throw errors.notFound();
    const { op, params, pathKnown } = this.match(where.api, where.rest, req.method === 'head' ? 'get' : req.method);
    if (!op) throw pathKnown ? errors.methodNotAllowed() : errors.notFound();
    matched.op = op;
    const ctx: Ctx = { app: this.app, req, op, params, body: undefined, requestId };
    const waiting = op.auth !== 'none' ? this.authenticate(ctx) : undefined;
    if (waiting) return waiting.then(() => this.withBody(ctx));
    return this.withBody(ctx);
  }

  private withBody(ctx: Ctx): Ctx {
    if (ctx.op.bodyDefinition || ctx.op.bodySchema) ctx.body = this.parseBody(ctx);
    if (ctx.op.reaches) contain(ctx, ctx.op.reaches);
    return ctx;
  }

  /** Throws when the request may not proceed; a promise only when a secondary token must be verified. */
  private authenticate(ctx: Ctx): Promise<void> | undefined {
    const { op, req } = ctx;
    // `zt-session` (apiSession scheme) or, without it, `Authorization: Bearer` (oauth2 scheme).
    // With both, the Bearer tokens are the secondary ext-JWT factor's.
    const token = req.headers['zt-session']?.trim() || sessionBearer(req.headers['authorization']);
    if (!token) throw errors.unauthorized({ 'www-authenticate': WWW_MISSING });
    const session = this.app.sessions.resolve(token, req);
    if (!session) throw errors.unauthorized({ 'www-authenticate': WWW_INVALID });
    ctx.token = token;
    const identity = this.app.sessions.identityOf(session);
    // A disabled identity's sessions end at disable time; any still in flight are refused too.
    if (!identity || isDisabledAt(identity)) throw errors.unauthorized({ 'www-authenticate': WWW_INVALID });
    ctx.session = session;
    ctx.identity = identity;
    if (op.auth === 'partial') return undefined;
    // Secondary factors still pending (TOTP, or the policy's ext-JWT signer's token missing from
    // this request): only the operations marked `partial` are open. Admin rights and every
    // permission therefore need a fully authenticated session.
    if (!this.app.sessions.isFullyAuthenticated(session)) throw errors.unauthorized();
    const signerId = session.extJwtSignerId;
    if (signerId)
      return this.app.auth.extJwt.satisfiesSecondary(req.headers['authorization'], signerId, session.identityId).then((ok) => {
        if (!ok)
          throw errors.unauthorized({ 'www-authenticate': `Bearer realm="mesh-secondary-ext-jwt" error="missing" error_description="a token of the required external signer was not provided" id="${signerId}"` });
        permit(op, identity);
      });
    permit(op, identity);
    return undefined;
  }

  private parseBody(ctx: Ctx): unknown {
    const { req, op } = ctx;
    let value: unknown;
    if (req.body.length > 0) {
      // The media types the operation consumes (upstream: JSON, except PEM-taking operations); a
      // request without a content type is read as JSON.
      const media = (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
      const consumes = (op.spec.consumes as string[] | undefined) ?? ['application/json'];
      if (media && !consumes.includes(media))
        throw new ApiError('INVALID_CONTENT_TYPE', `content type ${media} is not accepted here; send ${consumes.join(' or ')}`);
      // A string body (CA verify) and a PEM body the operation consumes (legacy `POST /enroll`
      // with a raw CSR) reach the handler as text.
      if (op.bodySchema?.type === 'string' || (media && media !== 'application/json' && !media.endsWith('+json'))) return req.body.toString('utf8');
      try {
        value = JSON.parse(req.body.toString('utf8'));
      } catch (e) {
        throw errors.parseBody((e as Error).message);
      }
      const problem = hostileJson(value);
      if (problem) throw errors.parseBody(problem);
      const dup = duplicateKey(req.body, value);
      if (dup) throw errors.field(dup, `${dup} is given more than once`, dup.slice(dup.lastIndexOf('.') + 1));
    }
    const v = this.app.validators[op.api];
    if (op.bodyDefinition) return v.validate(op.bodyDefinition, value, op.bodyIsArray, op.bodyRequired);
    return v.validateSchema(op.bodySchema!, value, op.bodyRequired ?? false);
  }

  /** The answer to a request still running when the shutdown grace ends. */
  shuttingDown(): Reply {
    const reply = renderError(errors.shuttingDown(), shortId());
    reply.headers = { ...reply.headers, server: this.serverHeader, connection: 'close' };
    return reply;
  }

  tooLarge(): Reply {
    const reply = renderError(errors.tooLarge(this.app.config.maxBodyBytes), shortId());
    reply.headers = { ...reply.headers, server: this.serverHeader, connection: 'close' };
    return reply;
  }
}

/** Permission before any lookup: the answer never depends on whether the entity exists. */
function permit(op: ServedOperation, identity: IdentityRecord) {
  if (op.auth === 'admin' && !isPermitted(identity, op.permission)) throw errors.unauthorized();
}

/**
 * Containment (docs/auth.md): a write that reaches an identity needs a caller that dominates it.
 * Decided here, for every such operation, from its entry's `reaches`; an identity or record that
 * does not exist is left to the handler (404 or a field error). Checked against the committed
 * store before the handler's write: a target promoted in between is no escape, as the same write
 * made a moment earlier, before the promotion, would have been allowed and left the same state.
 */
function contain(ctx: Ctx, reach: Reach) {
  const caller = ctx.identity;
  if (caller?.isAdmin === true) return;
  const store = ctx.app.store;
  const id =
    reach.from === 'path' ? ctx.params.id
    : reach.from === 'body' ? (ctx.body as Record<string, unknown> | undefined)?.[reach.field]
    : reach.from === 'record' ? store.get(reach.collection, ctx.params.id)?.[reach.field]
    : store.idsByIndex('identities', reach.field, ctx.params.id)[0];
  if (typeof id !== 'string') return;
  const target = store.get('identities', id);
  if (target && !dominates(caller, target)) throw errors.unauthorized();
}

/** The first Bearer token of an Authorization header, when it has the shape of a JWS. */
function sessionBearer(authorization: string | undefined): string | undefined {
  if (!authorization) return undefined;
  for (const t of bearerTokens(authorization)) if (t.split('.').length === 3) return t;
  return undefined;
}

/** A request on its way through `handle`. */
interface InProgress {
  requestId: string;
  started: number;
  /** The operation, once matched (known to the request hook even when authentication fails). */
  matched: { op?: Op };
  raw?: RawRoute;
  /** Set once authentication and the body passed, before the handler runs. */
  ctx?: Ctx;
}

const isPromise = <T>(v: T | Promise<T>): v is Promise<T> => typeof (v as { then?: unknown } | undefined)?.then === 'function';

/** Deeper JSON than any upstream body needs; bounded so storing it can never exhaust the stack. */
const MAX_BODY_DEPTH = 32;

const wellFormed = (s: string) => (s as string & { isWellFormed(): boolean }).isWellFormed();

/**
 * What a parsed JSON body may not hold, checked iteratively (the value may be hostile): nesting
 * deeper than MAX_BODY_DEPTH, strings or keys with lone UTF-16 surrogates (they cannot be stored
 * as UTF-8 and would come back altered), and `__proto__` keys (the record encoder renames them).
 */
export function hostileJson(value: unknown): string | undefined {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length) {
    const [v, d] = stack.pop()!;
    if (typeof v === 'string') {
      if (!wellFormed(v)) return 'the body holds a string that is not valid Unicode';
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    if (d + 1 > MAX_BODY_DEPTH) return `the body is nested more than ${MAX_BODY_DEPTH} levels deep`;
    if (Array.isArray(v)) for (const child of v) stack.push([child, d + 1]);
    else
      for (const [k, child] of Object.entries(v)) {
        if (k === '__proto__') return 'the body may not use the key "__proto__"';
        if (!wellFormed(k)) return 'the body holds a key that is not valid Unicode';
        stack.push([child, d + 1]);
      }
  }
  return undefined;
}

function specificity(r: Route): number {
  return r.segments.reduce((n, s, i) => n + (s.startsWith('{') ? 0 : 1 << (16 - i)), 0);
}

function normalizePath(p: string): string {
  if (!p.includes('//') && (p.length === 1 || !p.endsWith('/'))) return p;
  let out = p.replace(/\/{2,}/g, '/');
  if (out.length > 1 && out.endsWith('/')) out = out.slice(0, -1);
  return out;
}

function corsPreflight(): Record<string, string> {
  return {
    'access-control-allow-methods': 'GET, HEAD, POST, PUT, PATCH, DELETE',
    'access-control-allow-headers': 'content-type, accept, authorization, zt-session, mfa-validation-code, session-token, mesh-token-issuer-id',
    'access-control-allow-credentials': 'true',
    'access-control-max-age': '600',
  };
}
