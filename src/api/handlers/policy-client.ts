/**
 * Client API operations of the policy engine: the caller's services (with
 * permissions, configs and posture queries), their edge routers and terminators, the caller's edge
 * routers, service sessions (list/detail; create and delete: src/managers/service-sessions.ts), the
 * service-update timestamp and posture responses (src/managers/posture-responses.ts).
 */
import type { Ctx, Entry, Handler } from '../context.js';
import type { Reply, WithBody } from '../../core/operation.js';
import type { ClientBodies } from '../../core/bodies.js';
import { errors } from '../../core/errors.js';
import { ok, okWithRaw, empty, envelope } from '../../core/envelope.js';
import { listRecords, listSource } from '../../resources/list.js';
import { type Registry } from '../../resources/registry.js';
import { renderRecord } from '../../resources/render.js';
import { standardHandlers } from '../../resources/standard.js';
import { parseListParams, runList } from '../../core/query.js';
import { SESSION_TOKEN } from '../../auth/tokens.js';
import type { Rec, ServiceRecord, SessionRecord, EdgeRouterRecord } from '../../store/store.js';
import { commonEdgeRouter, routerLive, routersOnlineFirst } from '../../policy/router-view.js';
import { serviceVisible } from '../../managers/service-sessions.js';
import { callerServiceList } from './service-list.js';

/** At most this many edge routers are listed for a service (connected first). */
const MAX_SERVICE_ROUTERS = 25;

const isAdmin = (ctx: Ctx) => ctx.identity?.isAdmin === true;

/** A service the caller may see (admins: every service), else 404. */
function visibleService(ctx: Ctx, id: string): ServiceRecord {
  const svc = ctx.app.store.get('services', id);
  if (!svc || !serviceVisible(ctx.app.policy, ctx.identity!, id)) throw errors.notFound();
  return svc;
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

/** A service session for the caller (src/managers/service-sessions.ts), with its token beside the record. */
async function createSession(reg: Registry, ctx: WithBody<Ctx, ClientBodies['createSession']>): Promise<Reply> {
  const { rec, token } = await ctx.app.serviceSessions.create(ctx.identity!, ctx.session!, ctx.body);
  return okWithRaw(renderRecord(reg, reg.def('sessions'), rec, { store: ctx.app.store, ctx }), 'token', token, 201);
}

/** ISO strings of recent `lastChangeAt` values: clients poll the same few values over and over. */
const isoCache = new Map<number, string>();
function isoTime(ms: number): string {
  let s = isoCache.get(ms);
  if (s === undefined) {
    if (isoCache.size >= 4096) isoCache.clear();
    isoCache.set(ms, (s = new Date(ms).toISOString()));
  }
  return s;
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
        await ctx.app.serviceSessions.remove(visibleSession(ctx, ctx.params.id).id);
        return empty();
      } },

    { api: 'client', operationId: 'listServiceUpdates', auth: 'session',
      handler: (ctx) => ok({ lastChangeAt: isoTime(ctx.app.policy.updateTimes.lastChangeAt(ctx.session!, ctx.app.startedAt)) }) },

    { api: 'client', operationId: 'createPostureResponse', auth: 'session',
      handler: (ctx) => ok({ services: ctx.app.postureResponses.report(ctx.identity!, ctx.session!.id, [ctx.body]) }, 201) },
    { api: 'client', operationId: 'createPostureResponseBulk', auth: 'session',
      handler: (ctx) => {
        if (!Array.isArray(ctx.body)) throw errors.field('(root)', 'must be an array of posture responses', ctx.body);
        return ok({ services: ctx.app.postureResponses.report(ctx.identity!, ctx.session!.id, ctx.body) }, 201);
      } },
  ];
}
