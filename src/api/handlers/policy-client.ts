/**
 * Client API operations of the policy engine: the caller's services (with
 * permissions, configs and posture queries), their edge routers and terminators, the caller's edge
 * routers, service sessions (create with the reference's check order, list/detail/delete), the
 * service-update timestamp and posture responses.
 */
import type { Ctx, Entry, Handler } from '../../core/context.js';
import type { Reply } from '../../core/operation.js';
import { ApiError, errors } from '../../core/errors.js';
import { ok, okWithRaw, empty, envelope } from '../../core/envelope.js';
import { listRecords, listSource } from '../../resources/list.js';
import { type Registry } from '../../resources/registry.js';
import { renderRecord } from '../../resources/render.js';
import { standardHandlers } from '../../resources/standard.js';
import { write } from '../../resources/write.js';
import { parseListParams, runList } from '../../core/query.js';
import { SESSION_TOKEN, signSessionToken, type PendingToken, type SessionTokenFacts } from '../../auth/tokens.js';
import type { Rec, ServiceRecord, SessionRecord, EdgeRouterRecord } from '../../store/store.js';
import type { PolicyType } from '../../policy/access.js';
import { timeOrderedId } from '../../store/ids.js';
import { commonEdgeRouter, routerLive, routersOnlineFirst } from '../../policy/router-view.js';
import type { PostureReport } from '../../policy/posture.js';
import { callerServiceList } from './service-list.js';

/** At most this many edge routers are listed for a service (connected first). */
const MAX_SERVICE_ROUTERS = 25;

const isAdmin = (ctx: Ctx) => ctx.identity?.isAdmin === true;

/** A service the caller may see (admins: every service), else 404. */
function visibleService(ctx: Ctx, id: string): ServiceRecord {
  const svc = ctx.app.store.get('services', id);
  if (!svc) throw errors.notFound();
  mayAccess(ctx, id);
  return svc;
}

/** visibleService without decoding the record (session creates need only the id). */
function assertVisible(ctx: Ctx, id: string): void {
  if (!ctx.app.store.has('services', id)) throw errors.notFound();
  mayAccess(ctx, id);
}

function mayAccess(ctx: Ctx, id: string): void {
  if (!isAdmin(ctx) && !ctx.app.policy.hasAccess(ctx.identity!.id, id)) throw errors.notFound();
}

/** A session the caller may see: its own (admins: any), not being removed. */
function visibleSession(ctx: Ctx, id: string): SessionRecord {
  const s = ctx.app.store.get('sessions', id);
  if (!s || ctx.app.policy.sessions.doomed.has(s.id)) throw errors.notFound();
  if (!isAdmin(ctx) && s.identityId !== ctx.identity!.id) throw errors.notFound();
  return s;
}

/** A list condition hiding sessions whose removal is committing (none: the fast list paths stay open). */
function hideDoomed(ctx: Ctx): { where?: (r: Rec) => boolean } {
  const doomed = ctx.app.policy.sessions.doomed;
  return doomed.size ? { where: (r: Rec) => !doomed.has(r.id) } : {};
}

/** Concurrent creates of the same (API session, service, type) share one write and one token. */
const inFlight = new Map<string, Promise<{ rec: SessionRecord; token: string }>>();

async function createSession(reg: Registry, ctx: Ctx): Promise<Reply> {
  const body = (ctx.body ?? {}) as { serviceId?: unknown; type?: unknown; tags?: unknown };
  const engine = ctx.app.policy;
  const identity = ctx.identity!;
  const apiSession = ctx.session!;
  if (typeof body.serviceId !== 'string' || body.serviceId === '') throw errors.field('serviceId', 'serviceId is required', body.serviceId ?? null);
  const type: PolicyType = body.type === undefined || body.type === null || body.type === '' ? 'Dial' : (body.type as PolicyType);
  if (type !== 'Dial' && type !== 'Bind') throw errors.field('type', 'must be one of Dial, Bind', body.type);
  // 1. The service must be visible to the caller.
  const serviceId = body.serviceId;
  assertVisible(ctx, serviceId);
  // 2. The caller must hold the requested permission.
  if (!engine.hasAccess(identity.id, serviceId, type)) throw errors.field('ServiceId', 'service not found', serviceId);
  // 3. At least one granting policy must have all its posture checks passing.
  const decision = engine.postureDecision(identity.id, apiSession.id, serviceId, type);
  if (!decision.passing) {
    // The record is read only here, to name the service.
    const serviceName = ctx.app.store.nameOf('services', serviceId) ?? '';
    const failure = { apiSessionId: apiSession.id, serviceId, serviceName, sessionType: type, when: Date.now(), policyFailures: decision.failures };
    engine.failures.record(identity.id, failure);
    const detail = { ...failure, when: new Date(failure.when).toISOString() };
    // The failure is both the cause's `data` and, as upstream renders it, its top-level fields.
    throw new ApiError('INVALID_POSTURE', undefined, {
      ...detail,
      code: 'INVALID_POSTURE',
      message: `posture checks failed for service ${serviceName}`,
      data: detail,
    } as { code: string; message: string; data: unknown });
  }
  // 4. The identity's and the service's edge router policies must share a router.
  if (!engine.hasCommonRouter(identity.id, serviceId)) throw new ApiError('NO_EDGE_ROUTERS_AVAILABLE');
  // Idempotent per (API session, service, type).
  const key = `${apiSession.id}\u0000${serviceId}\u0000${type}`;
  let pending = inFlight.get(key);
  if (!pending) {
    const existing = engine.sessions.find(apiSession.id, serviceId, type);
    const found = existing ? ctx.app.store.get('sessions', existing) : undefined;
    if (found) {
      // The same session again, with a fresh token: any unexpired token naming a live session is
      // valid, and keeping each issued token (~1 KB) would triple a session's memory.
      const token = await sessionToken(ctx, found).need();
      return okWithRaw(renderRecord(reg, reg.def('sessions'), found, { store: ctx.app.store, ctx }), 'token', token, 201);
    }
    const now = Date.now();
    // Time-ordered, like every entity id: the write appends to the ends of the session B-trees
    // instead of dirtying a random page of each (a commit of 32 sessions 2.5× faster).
    const id = timeOrderedId();
    // The record holds nothing of the token (its jti is the session id, its signature proves the
    // rest), so the token is asked for now and signed, at the latest when the write lands, in one
    // batch with every token asked for meanwhile (SigningKeys.signSession).
    const signing = sessionToken(ctx, { id, identityId: identity.id, apiSessionId: apiSession.id, serviceId, type });
    const rec: SessionRecord = {
      id,
      createdAt: now,
      updatedAt: now,
      tags: body.tags && typeof body.tags === 'object' ? (body.tags as Record<string, unknown>) : {},
      type,
      apiSessionId: apiSession.id,
      serviceId: serviceId,
      identityId: identity.id,
      servicePolicyIds: decision.policies.map((p) => p.id),
    };
    const writing = write(ctx.app.store, (tx) => {
      // The API session or the service may have gone meanwhile.
      if (!tx.exists('apiSessions', apiSession.id)) throw errors.unauthorized();
      if (!tx.exists('services', serviceId)) throw errors.notFound();
      tx.put('sessions', rec);
      return rec;
    });
    pending = writing.then(async (rec) => ({ rec, token: await signing.need() }));
    inFlight.set(key, pending);
    pending.finally(() => inFlight.delete(key)).catch(() => {});
  }
  const { rec, token } = await pending;
  return okWithRaw(renderRecord(reg, reg.def('sessions'), rec, { store: ctx.app.store, ctx }), 'token', token, 201);
}

/**
 * A session token lives as long as an API session does without a request (the inactivity
 * timeout): like upstream's service access tokens, which expire with the access token that asked
 * for them.
 */
function sessionToken(ctx: Ctx, s: SessionTokenFacts | Rec): PendingToken {
  return signSessionToken(ctx.app.keys, ctx.app.baseUrl, s as SessionTokenFacts, ctx.app.sessions.timeoutSeconds);
}

/** ISO strings of recent `lastChangeAt` values: clients poll the same few values over and over, and toISOString costs ~1 µs. */
const isoCache = new Map<number, string>();
function isoTime(ms: number): string {
  let s = isoCache.get(ms);
  if (s === undefined) {
    if (isoCache.size >= 4096) isoCache.clear();
    isoCache.set(ms, (s = new Date(ms).toISOString()));
  }
  return s;
}

/** Services whose MFA checks a wake/unlock affects, with the grace time left. */
function promptedServices(ctx: Ctx, r: PostureReport) {
  if (r.typeId !== 'ENDPOINT_STATE' || (r.woken !== true && r.unlocked !== true)) return [];
  const engine = ctx.app.policy;
  const identity = ctx.identity!;
  const out: Record<string, unknown>[] = [];
  for (const sid of engine.accessibleServices(identity.id)) {
    const seen = new Set<string>();
    for (const t of ['Dial', 'Bind'] as const) {
      for (const p of engine.grantingPolicies(identity.id, sid, t)) {
        for (const cid of engine.policyChecks(p)) {
          if (seen.has(cid)) continue;
          const check = ctx.app.store.get('postureChecks', cid);
          if (check?.typeId !== 'MFA') continue;
          if (!((r.woken === true && check.promptOnWake) || (r.unlocked === true && check.promptOnUnlock))) continue;
          seen.add(cid);
          const res = engine.posture.evaluate(check, identity.id, ctx.session!.id, identity);
          out.push({ id: sid, name: ctx.app.store.nameOf('services', sid) ?? '', postureQueryType: 'MFA', timeout: check.timeoutSeconds ?? -1, timeoutRemaining: res.timeoutRemaining });
        }
      }
    }
  }
  return out;
}

function postureResponses(ctx: Ctx, reports: PostureReport[]): unknown[] {
  const engine = ctx.app.policy;
  let changed = false;
  const services: unknown[] = [];
  for (const r of reports) {
    if (!r || typeof r !== 'object') throw errors.field('(root)', 'a posture response must be an object', r);
    if (typeof r.id !== 'string' || r.id === '') throw errors.field('id', 'id is required', r.id ?? null);
  }
  for (const r of reports) {
    changed = engine.posture.report(ctx.identity!.id, ctx.session!.id, r) || changed;
    services.push(...promptedServices(ctx, r));
  }
  if (changed) engine.postureChanged(ctx.identity!.id);
  return services;
}

export function policyClientEntries(reg: Registry): Entry[] {
  const svcDef = reg.def('services');
  const adminServiceOps = standardHandlers(reg, svcDef);
  const adminOnly = (h: Handler): Handler => (ctx) => {
    // Upstream documents these as admin operations; on the Client API only admins may use them.
    if (!isAdmin(ctx)) throw errors.unauthorized();
    return h(ctx);
  };
  return [
    { api: 'client', operationId: 'listServices', auth: 'session',
      handler: (ctx) => {
        if (isAdmin(ctx)) return listRecords(reg, svcDef, ctx, {});
        const candidates = ctx.app.policy.accessibleServices(ctx.identity!.id);
        return callerServiceList(reg, svcDef, ctx, candidates) ?? listRecords(reg, svcDef, ctx, { candidates });
      } },
    { api: 'client', operationId: 'detailService', auth: 'session',
      handler: (ctx) => ok(renderRecord(reg, svcDef, visibleService(ctx, ctx.params.id), { store: ctx.app.store, ctx })) },
    { api: 'client', operationId: 'deleteService', auth: 'session',
      handler: adminOnly(adminServiceOps.delete) },
    { api: 'client', operationId: 'patchService', auth: 'session',
      handler: adminOnly(adminServiceOps.patch) },
    { api: 'client', operationId: 'updateService', auth: 'session',
      handler: adminOnly(adminServiceOps.update) },

    { api: 'client', operationId: 'listServiceEdgeRouters', auth: 'session',
      handler: (ctx) => {
        const svc = visibleService(ctx, ctx.params.id);
        const token = ctx.req.headers['session-token'];
        if (token !== undefined) {
          const claims = ctx.app.keys.verify(token.trim(), SESSION_TOKEN);
          const s = claims && ctx.app.policy.sessions.live(claims.sub, claims.jti);
          if (!s || s.apiSessionId !== ctx.session!.id || s.serviceId !== svc.id) throw errors.unauthorized();
        }
        const src = listSource(reg, reg.def('edgeRouters'), { records: routersOnlineFirst(ctx.app, ctx.app.policy.commonRouters(ctx.identity!.id, svc.id)) });
        const p = parseListParams(ctx.req.query, src.symbols);
        // Without paging asked for, SDKs get the connected routers first, at most MAX_SERVICE_ROUTERS.
        if (!ctx.req.query.has('limit') && p.filter.limit === undefined) p.limit = MAX_SERVICE_ROUTERS;
        const { page, pagination } = runList(ctx.app.store, src, p);
        const edgeRouters = page.map((r) => commonEdgeRouter(ctx.app, r as EdgeRouterRecord));
        return envelope({ edgeRouters }, { pagination, filterableFields: src.filterableFields });
      } },
    { api: 'client', operationId: 'listServiceTerminators', auth: 'session',
      handler: (ctx) => {
        const svc = visibleService(ctx, ctx.params.id);
        const def = reg.def('terminators');
        return listRecords(reg, def, ctx, { candidates: ctx.app.store.idsByIndex('terminators', 'serviceId', svc.id) }, (t) => {
          const full = renderRecord(reg, def, t, { store: ctx.app.store, ctx });
          return { id: full.id, createdAt: full.createdAt, updatedAt: full.updatedAt, _links: full._links, tags: full.tags, identity: t.identity ?? '', routerId: t.routerId, serviceId: t.serviceId, service: full.service };
        });
      } },

    { api: 'client', operationId: 'getCurrentIdentityEdgeRouters', auth: 'session',
      handler: (ctx) => {
        const def = reg.def('edgeRouters');
        // Enrolled routers only; admins get every one, others those their edge router policies allow.
        const where = (r: Rec) => r.isVerified === true;
        const extra = isAdmin(ctx) ? { where } : { where, candidates: ctx.app.policy.identityRouters(ctx.identity!.id) };
        return listRecords(reg, def, ctx, extra, (r) => {
          const live = routerLive(ctx.app, r.id);
          return {
            id: r.id,
            createdAt: new Date(r.createdAt).toISOString(),
            updatedAt: new Date(r.updatedAt).toISOString(),
            _links: { self: { href: `./edge-routers/${r.id}` } },
            tags: r.tags ?? {},
            name: r.name,
            appData: r.appData ?? {},
            cost: r.cost ?? 0,
            disabled: r.disabled === true,
            noTraversal: r.noTraversal === true,
            ...live,
          };
        });
      } },

    { api: 'client', operationId: 'createSession', auth: 'session',
      handler: (ctx) => createSession(reg, ctx) },
    { api: 'client', operationId: 'listSessions', auth: 'session',
      handler: (ctx) => {
        if (isAdmin(ctx)) return listRecords(reg, reg.def('sessions'), ctx, hideDoomed(ctx));
        return listRecords(reg, reg.def('sessions'), ctx, { ...hideDoomed(ctx), candidates: [...ctx.app.policy.sessions.of(ctx.identity!.id)].map((s) => s.id) });
      } },
    // Management views of sessions hide those whose removal is committing, like the Client API.
    { api: 'management', operationId: 'listSessions', auth: 'admin', permission: { family: 'ops', action: 'read' },
      handler: (ctx) => listRecords(reg, reg.def('sessions'), ctx, hideDoomed(ctx)) },
    { api: 'management', operationId: 'detailSession', auth: 'admin', permission: { family: 'ops', action: 'read' },
      handler: (ctx) => {
        const s = ctx.app.store.get('sessions', ctx.params.id);
        if (!s || ctx.app.policy.sessions.doomed.has(s.id)) throw errors.notFound();
        return ok(renderRecord(reg, reg.def('sessions'), s, { store: ctx.app.store, ctx }));
      } },
    { api: 'client', operationId: 'detailSession', auth: 'session',
      handler: (ctx) => ok(renderRecord(reg, reg.def('sessions'), visibleSession(ctx, ctx.params.id), { store: ctx.app.store, ctx })) },
    { api: 'client', operationId: 'deleteSession', auth: 'session',
      handler: async (ctx) => {
        const s = visibleSession(ctx, ctx.params.id);
        await write(ctx.app.store, (tx) => {
          if (!tx.delete('sessions', s.id)) throw errors.notFound();
        });
        return empty();
      } },

    { api: 'client', operationId: 'listServiceUpdates', auth: 'session',
      handler: (ctx) => ok({ lastChangeAt: isoTime(ctx.app.policy.updateTimes.lastChangeAt(ctx.session!, ctx.app.startedAt)) }) },

    { api: 'client', operationId: 'createPostureResponse', auth: 'session',
      handler: (ctx) => ok({ services: postureResponses(ctx, [ctx.body as PostureReport]) }, 201) },
    { api: 'client', operationId: 'createPostureResponseBulk', auth: 'session',
      handler: (ctx) => {
        if (!Array.isArray(ctx.body)) throw errors.field('(root)', 'must be an array of posture responses', ctx.body);
        return ok({ services: postureResponses(ctx, ctx.body as PostureReport[]) }, 201);
      } },
  ];
}
