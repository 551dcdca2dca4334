/**
 * Management API views derived from the role index: what each policy selects,
 * which policies select an entity, identity ↔ service ↔ edge router reachability, role attribute
 * lists, policy advice, service configs per identity, posture data, failed service requests and
 * the resource summary. Every list pages and filters like any other list (runList over the
 * candidate ids the index yields).
 */
import type { Ctx, Entry, Handler } from '../../core/context.js';
import type { Reply } from '../../core/operation.js';
import { errors } from '../../core/errors.js';
import { ok, empty, list as listEnvelope } from '../../core/envelope.js';
import { parseListParams, runList } from '../../core/query.js';
import { listRecords } from '../../resources/list.js';
import { type Registry } from '../../resources/registry.js';
import { renderRecord, entityRef } from '../../resources/render.js';
import { write } from '../../resources/write.js';
import type { Rec, Store, IdentityRecord, CollectionName, RecordOf } from '../../store/store.js';
import { IDENTITY_TYPES } from '../../resources/identities.js';
import { POSTURE_CHECK_TYPES } from '../../resources/posture.js';
import type { Kind, PolicyColl, Side } from '../../policy/role-index.js';
import { isPermitted } from '../../auth/permissions.js';
import { routerLive } from '../../policy/router-view.js';

const KIND_COLLECTION: Record<Kind, CollectionName> = { identities: 'identities', services: 'services', edgeRouters: 'edgeRouters', postureChecks: 'postureChecks' };

function must<C extends CollectionName>(ctx: Ctx, collection: C, id: string): RecordOf<C> {
  const rec = ctx.app.store.get(collection, id);
  if (!rec) throw errors.notFound();
  return rec;
}

/** List the records of `collection` among `ids` (undefined: the whole collection). */
function listAmong(reg: Registry, ctx: Ctx, collection: CollectionName, ids: Iterable<string> | undefined): Reply | Promise<Reply> {
  return listRecords(reg, reg.def(collection), ctx, ids === undefined ? {} : { candidates: ids });
}

/** What one side of a policy selects (`#all` lists the whole collection without materialising it). */
function sideList(reg: Registry, coll: PolicyColl, kind: Kind): Handler {
  return (ctx) => {
    must(ctx, coll, ctx.params.id);
    const side = ctx.app.policy.index.policy(ctx.params.id)?.sides.get(kind) as Side | undefined;
    if (!side) return listAmong(reg, ctx, KIND_COLLECTION[kind], []);
    return listAmong(reg, ctx, KIND_COLLECTION[kind], side.all ? undefined : side.members);
  };
}

/** The policies of a collection that select an entity. */
function policiesOf(reg: Registry, kind: Kind, coll: PolicyColl): Handler {
  return (ctx) => {
    must(ctx, KIND_COLLECTION[kind], ctx.params.id);
    const ids = [...ctx.app.policy.index.policiesOf(kind, ctx.params.id, coll)].map((p) => p.id);
    return listAmong(reg, ctx, coll, ids);
  };
}

function policyType(ctx: Ctx): 'Dial' | 'Bind' | undefined {
  const v = ctx.req.query.get('policyType');
  if (v === null || v === '') return undefined;
  const t = v.toLowerCase();
  if (t === 'dial') return 'Dial';
  if (t === 'bind') return 'Bind';
  throw errors.field('policyType', 'must be one of dial, bind', v);
}

/**
 * Role attributes in use, through the list engine as records `{id: <attribute>}`: filter (`id`)
 * and paging apply (a filter's `sort by` too); the `sort` parameter is ignored like upstream, which
 * answers in attribute order.
 */
function attributeList(ctx: Ctx, values: Iterable<string>): Reply {
  const symbols = { id: { type: 'string' as const } };
  const p = parseListParams(ctx.req.query, symbols, { sortParamIgnored: true });
  const records = Array.from(values, (id) => ({ id }) as Rec).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const { page, pagination } = runList(ctx.app.store, { collection: '', symbols, filterableFields: ['id'], records }, p);
  return listEnvelope(page.map((r) => (typeof r === 'string' ? r : r.id)), pagination, ['id']);
}

type Count = (store: Store) => number;
const coll = (name: CollectionName): Count => (store) => store.count(name);

/**
 * Entity counts under upstream's keys (one per upstream store; a store that extends another, like
 * edge routers of routers, counts under `<parent>.edge`), only those the caller may read. Every
 * service is an edge service here; routers are the transit and edge ones. Upstream's internal
 * stores without a counterpart here (eventual events, MFA records) are left out.
 */
const SUMMARY: [key: string, count: Count, family: string][] = [
  ['identities', coll('identities'), 'identity'],
  ['identityTypes', () => IDENTITY_TYPES.length, 'identity'],
  ['authenticators', coll('authenticators'), 'authenticator'],
  ['enrollments', coll('enrollments'), 'enrollment'],
  ['services', coll('services'), 'service'],
  ['services.edge', coll('services'), 'service'],
  ['servicePolicies', coll('servicePolicies'), 'service-policy'],
  ['routers', (store) => store.count('routers') + store.count('edgeRouters'), 'router'],
  ['routers.edge', coll('edgeRouters'), 'router'],
  ['edgeRouterPolicies', coll('edgeRouterPolicies'), 'edge-router-policy'],
  ['serviceEdgeRouterPolicies', coll('serviceEdgeRouterPolicies'), 'service-edge-router-policy'],
  ['terminators', coll('terminators'), 'terminator'],
  ['configs', coll('configs'), 'config'],
  ['configTypes', coll('configTypes'), 'config-type'],
  ['postureChecks', coll('postureChecks'), 'posture-check'],
  ['postureCheckTypes', () => POSTURE_CHECK_TYPES.length, 'posture-check'],
  ['authPolicies', coll('authPolicies'), 'auth-policy'],
  ['cas', coll('cas'), 'ca'],
  ['externalJwtSigners', coll('externalJwtSigners'), 'external-jwt-signer'],
  ['apiSessions', coll('apiSessions'), 'ops'],
  ['apiSessionCertificates', coll('apiSessionCertificates'), 'ops'],
  ['sessions', coll('sessions'), 'ops'],
];

interface ServiceConfigPair {
  serviceId: string;
  configId: string;
}

/** Validate `[{serviceId, configId}]`: both must exist (404 otherwise). */
function pairsOf(ctx: Ctx, body: unknown, requireAll: boolean): ServiceConfigPair[] {
  if (body === undefined || body === null) {
    if (requireAll) throw errors.field('(root)', 'an array of service config pairs is required', body);
    return [];
  }
  if (!Array.isArray(body)) throw errors.field('(root)', 'must be an array of {serviceId, configId}', body);
  const out: ServiceConfigPair[] = [];
  body.forEach((p, i) => {
    if (!p || typeof p !== 'object') throw errors.field(`[${i}]`, 'must be an object', p);
    const { serviceId, configId } = p as Record<string, unknown>;
    if (typeof serviceId !== 'string' || serviceId === '') throw errors.field(`[${i}].serviceId`, 'is required', serviceId);
    if (typeof configId !== 'string' || configId === '') throw errors.field(`[${i}].configId`, 'is required', configId);
    out.push({ serviceId, configId });
  });
  return out;
}

export function policyViewEntries(reg: Registry): Entry[] {
  return [
    // What each policy selects.
    { api: 'management', operationId: 'listServicePolicyIdentities', auth: 'admin', permission: { family: 'identity', action: 'read' },
      handler: sideList(reg, 'servicePolicies', 'identities') },
    { api: 'management', operationId: 'listServicePolicyServices', auth: 'admin', permission: { family: 'service', action: 'read' },
      handler: sideList(reg, 'servicePolicies', 'services') },
    { api: 'management', operationId: 'listServicePolicyPostureChecks', auth: 'admin', permission: { family: 'posture-check', action: 'read' },
      handler: sideList(reg, 'servicePolicies', 'postureChecks') },
    { api: 'management', operationId: 'listEdgeRouterPolicyIdentities', auth: 'admin', permission: { family: 'identity', action: 'read' },
      handler: sideList(reg, 'edgeRouterPolicies', 'identities') },
    { api: 'management', operationId: 'listEdgeRouterPolicyEdgeRouters', auth: 'admin', permission: { family: 'router', action: 'read' },
      handler: sideList(reg, 'edgeRouterPolicies', 'edgeRouters') },
    { api: 'management', operationId: 'listServiceEdgeRouterPolicyServices', auth: 'admin', permission: { family: 'service', action: 'read' },
      handler: sideList(reg, 'serviceEdgeRouterPolicies', 'services') },
    { api: 'management', operationId: 'listServiceEdgeRouterPolicyEdgeRouters', auth: 'admin', permission: { family: 'router', action: 'read' },
      handler: sideList(reg, 'serviceEdgeRouterPolicies', 'edgeRouters') },

    // Which policies select an entity.
    { api: 'management', operationId: 'listIdentityServicePolicies', auth: 'admin', permission: { family: 'service-policy', action: 'read' },
      handler: policiesOf(reg, 'identities', 'servicePolicies') },
    { api: 'management', operationId: 'listIdentitysEdgeRouterPolicies', auth: 'admin', permission: { family: 'edge-router-policy', action: 'read' },
      handler: policiesOf(reg, 'identities', 'edgeRouterPolicies') },
    { api: 'management', operationId: 'listServiceServicePolicies', auth: 'admin', permission: { family: 'service-policy', action: 'read' },
      handler: policiesOf(reg, 'services', 'servicePolicies') },
    { api: 'management', operationId: 'listServiceServiceEdgeRouterPolicies', auth: 'admin', permission: { family: 'service-edge-router-policy', action: 'read' },
      handler: policiesOf(reg, 'services', 'serviceEdgeRouterPolicies') },
    { api: 'management', operationId: 'listEdgeRouterEdgeRouterPolicies', auth: 'admin', permission: { family: 'edge-router-policy', action: 'read' },
      handler: policiesOf(reg, 'edgeRouters', 'edgeRouterPolicies') },
    { api: 'management', operationId: 'listEdgeRouterServiceEdgeRouterPolicies', auth: 'admin', permission: { family: 'service-edge-router-policy', action: 'read' },
      handler: policiesOf(reg, 'edgeRouters', 'serviceEdgeRouterPolicies') },

    // Reachability.
    { api: 'management', operationId: 'listIdentityServices', auth: 'admin', permission: { family: 'service', action: 'read' },
      handler: (ctx) => {
        must(ctx, 'identities', ctx.params.id);
        const type = policyType(ctx);
        const engine = ctx.app.policy;
        const all = engine.accessibleServices(ctx.params.id);
        const ids = type ? all.filter((sid) => engine.hasAccess(ctx.params.id, sid, type)) : all;
        return listAmong(reg, ctx, 'services', ids);
      } },
    { api: 'management', operationId: 'listIdentityEdgeRouters', auth: 'admin', permission: { family: 'router', action: 'read' },
      handler: (ctx) => {
        must(ctx, 'identities', ctx.params.id);
        return listAmong(reg, ctx, 'edgeRouters', ctx.app.policy.identityRouters(ctx.params.id));
      } },
    { api: 'management', operationId: 'listServiceIdentities', auth: 'admin', permission: { family: 'identity', action: 'read' },
      handler: (ctx) => {
        must(ctx, 'services', ctx.params.id);
        return listAmong(reg, ctx, 'identities', ctx.app.policy.serviceIdentities(ctx.params.id, policyType(ctx)));
      } },
    { api: 'management', operationId: 'listServiceEdgeRouters', auth: 'admin', permission: { family: 'router', action: 'read' },
      handler: (ctx) => {
        must(ctx, 'services', ctx.params.id);
        return listAmong(reg, ctx, 'edgeRouters', ctx.app.policy.serviceRoutersOf(ctx.params.id));
      } },
    { api: 'management', operationId: 'listEdgeRouterIdentities', auth: 'admin', permission: { family: 'identity', action: 'read' },
      handler: (ctx) => {
        must(ctx, 'edgeRouters', ctx.params.id);
        return listAmong(reg, ctx, 'identities', ctx.app.policy.routerIdentities(ctx.params.id));
      } },
    { api: 'management', operationId: 'listEdgeRouterServices', auth: 'admin', permission: { family: 'service', action: 'read' },
      handler: (ctx) => {
        must(ctx, 'edgeRouters', ctx.params.id);
        return listAmong(reg, ctx, 'services', ctx.app.policy.routerServices(ctx.params.id));
      } },

    // Role attributes in use.
    { api: 'management', operationId: 'listIdentityRoleAttributes', auth: 'admin', permission: { family: 'identity', action: 'read' },
      handler: (ctx) => attributeList(ctx, ctx.app.policy.index.attributes('identities')) },
    { api: 'management', operationId: 'listServiceRoleAttributes', auth: 'admin', permission: { family: 'service', action: 'read' },
      handler: (ctx) => attributeList(ctx, ctx.app.policy.index.attributes('services')) },
    { api: 'management', operationId: 'listEdgeRouterRoleAttributes', auth: 'admin', permission: { family: 'router', action: 'read' },
      handler: (ctx) => attributeList(ctx, ctx.app.policy.index.attributes('edgeRouters')) },
    { api: 'management', operationId: 'listPostureCheckRoleAttributes', auth: 'admin', permission: { family: 'posture-check', action: 'read' },
      handler: (ctx) => attributeList(ctx, ctx.app.policy.index.attributes('postureChecks')) },

    { api: 'management', operationId: 'getIdentityPolicyAdvice', auth: 'admin', permission: { family: 'service', action: 'read' },
      handler: (ctx) => {
        const identity = must(ctx, 'identities', ctx.params.id);
        const service = must(ctx, 'services', ctx.params.serviceId);
        const engine = ctx.app.policy;
        const common = engine.commonRouters(identity.id, service.id);
        return ok({
          identityId: identity.id,
          identity: entityRef(ctx.app.store, reg.def('identities'), identity.id),
          serviceId: service.id,
          service: entityRef(ctx.app.store, reg.def('services'), service.id),
          isDialAllowed: engine.hasAccess(identity.id, service.id, 'Dial'),
          isBindAllowed: engine.hasAccess(identity.id, service.id, 'Bind'),
          identityRouterCount: engine.identityRouters(identity.id).size,
          serviceRouterCount: engine.serviceRoutersOf(service.id).size,
          commonRouters: common.map((rid) => ({ ...entityRef(ctx.app.store, reg.def('edgeRouters'), rid), isOnline: routerLive(ctx.app, rid).isOnline })),
        });
      } },

    // Per-identity service config overrides.
    { api: 'management', operationId: 'listIdentitysServiceConfigs', auth: 'admin', permission: { family: 'identity', action: 'read' },
      handler: (ctx) => {
        const identity = must(ctx, 'identities', ctx.params.id);
        // Pairs of a deleted service are left on the identity (no index leads there) but never shown or applied.
        const pairs = ((identity.serviceConfigs as ServiceConfigPair[] | undefined) ?? []).filter((p) => ctx.app.store.has('services', p.serviceId));
        const data = pairs.map((p) => ({
          serviceId: p.serviceId,
          service: entityRef(ctx.app.store, reg.def('services'), p.serviceId),
          configId: p.configId,
          config: entityRef(ctx.app.store, reg.def('configs'), p.configId),
        }));
        return listEnvelope(data, { limit: -1, offset: 0, totalCount: data.length }, []);
      } },
    { api: 'management', operationId: 'associateIdentitysServiceConfigs', auth: 'admin', permission: { family: 'identity', action: 'update' }, reaches: { from: 'path' },
      handler: async (ctx) => {
        const pairs = pairsOf(ctx, ctx.body, true);
        await write(ctx.app.store, (tx) => {
          const identity = tx.get('identities', ctx.params.id);
          if (!identity) throw errors.notFound();
          const current = [...((identity.serviceConfigs as ServiceConfigPair[] | undefined) ?? [])];
          for (const p of pairs) {
            if (!tx.exists('services', p.serviceId)) throw errors.notFound();
            const cfg = tx.get('configs', p.configId);
            if (!cfg) throw errors.notFound();
            // One override per (service, config type): a new one replaces the previous of its type.
            for (let i = current.length - 1; i >= 0; i--) {
              const c = current[i];
              if (c.serviceId !== p.serviceId) continue;
              if (c.configId === p.configId || tx.get('configs', c.configId)?.configTypeId === cfg.configTypeId) current.splice(i, 1);
            }
            current.push({ serviceId: p.serviceId, configId: p.configId });
          }
          tx.put('identities', { ...identity, serviceConfigs: current, overrideConfigIds: [...new Set(current.map((c) => c.configId))], updatedAt: Date.now() });
        });
        return empty();
      } },
    { api: 'management', operationId: 'disassociateIdentitysServiceConfigs', auth: 'admin', permission: { family: 'identity', action: 'update' }, reaches: { from: 'path' },
      handler: async (ctx) => {
        const pairs = pairsOf(ctx, ctx.body, false);
        await write(ctx.app.store, (tx) => {
          const identity = tx.get('identities', ctx.params.id);
          if (!identity) throw errors.notFound();
          const current = (identity.serviceConfigs as ServiceConfigPair[] | undefined) ?? [];
          // No body: remove every override. A pair removes the override of its config's type for that service.
          const next =
            ctx.body === undefined || ctx.body === null
              ? []
              : current.filter((c) => {
                  return !pairs.some((p) => {
                    if (p.serviceId !== c.serviceId) return false;
                    if (p.configId === c.configId) return true;
                    const a = tx.get('configs', p.configId)?.configTypeId;
                    return a !== undefined && a === tx.get('configs', c.configId)?.configTypeId;
                  });
                });
          if (next.length === current.length) return;
          tx.put('identities', { ...identity, serviceConfigs: next, overrideConfigIds: [...new Set(next.map((c) => c.configId))], updatedAt: Date.now() });
        });
        return empty();
      } },

    { api: 'management', operationId: 'getIdentityPostureData', auth: 'admin', permission: { family: 'identity', action: 'read' },
      handler: (ctx) => {
        const identity = must(ctx, 'identities', ctx.params.id);
        return ok(renderPostureData(ctx, identity));
      } },
    { api: 'management', operationId: 'getIdentityFailedServiceRequests', auth: 'admin', permission: { family: 'identity', action: 'read' },
      handler: (ctx) => {
        must(ctx, 'identities', ctx.params.id);
        const data = ctx.app.policy.failures.of(ctx.params.id).map((f) => ({
          apiSessionId: f.apiSessionId,
          serviceId: f.serviceId,
          serviceName: f.serviceName,
          sessionType: f.sessionType,
          when: new Date(f.when).toISOString(),
          policyFailures: f.policyFailures,
        }));
        return ok(data);
      } },

    { api: 'management', operationId: 'listSummary', auth: 'session',
      handler: (ctx) => {
        const data: Record<string, number> = {};
        for (const [key, count, family] of SUMMARY) {
          if (!isPermitted(ctx.identity!, { family, action: 'read' })) continue;
          data[key] = count(ctx.app.store);
        }
        return ok(data);
      } },

    { api: 'management', operationId: 'detailSessionRoutePath', auth: 'admin', permission: { family: 'ops', action: 'read' },
      handler: (ctx) => {
        const s = ctx.app.store.get('sessions', ctx.params.id);
        if (!s || ctx.app.policy.sessions.doomed.has(s.id)) throw errors.notFound();
        // A route path exists once a circuit is dialed through edge routers; this controller keeps no
        // circuits (the data plane is the routers'), so the path of every session is empty.
        return ok({ routePath: [] });
      } },
  ];
}

const ZERO_TIME = '0001-01-01T00:00:00.000Z';
const iso = (ms: number | undefined) => (ms === undefined ? ZERO_TIME : new Date(ms).toISOString());

function renderPostureData(ctx: Ctx, identity: IdentityRecord) {
  const { posture } = ctx.app.policy;
  const d = posture.identities.get(identity.id);
  const stamp = (s: { postureCheckId: string; at: number } | undefined) => ({ postureCheckId: s?.postureCheckId ?? '', timedOut: false, lastUpdatedAt: iso(s?.at) });
  const apiSessionPostureData: Record<string, unknown> = {};
  for (const asid of ctx.app.store.idsByIndex('apiSessions', 'identityId', identity.id)) {
    const s = posture.sessions.get(asid);
    const passed = s?.passedMfaAt !== undefined;
    apiSessionPostureData[asid] = {
      mfa: {
        apiSessionId: asid,
        passedMfa: passed,
        passedAt: passed ? iso(s!.passedMfaAt) : null,
        passedOnWake: passed && s!.wokenAt !== undefined && s!.passedMfaAt! > s!.wokenAt,
        passedOnUnlock: passed && s!.unlockedAt !== undefined && s!.passedMfaAt! > s!.unlockedAt,
      },
      endpointState: { wokenAt: s?.wokenAt ? iso(s.wokenAt) : null, unlockedAt: s?.unlockedAt ? iso(s.unlockedAt) : null },
      sdkInfo: identity.sdkInfo ?? {},
    };
  }
  return {
    mac: { ...stamp(d?.mac), addresses: d?.mac?.addresses ?? [] },
    domain: { ...stamp(d?.domain), domain: d?.domain?.domain ?? '' },
    os: { ...stamp(d?.os), type: d?.os?.type ?? '', version: d?.os?.version ?? '', build: d?.os?.build ?? '' },
    processes: [...(d?.processes.values() ?? [])].map((p) => ({
      ...stamp(p),
      path: p.path,
      isRunning: p.isRunning,
      binaryHash: p.hash,
      signerFingerprints: p.signerFingerprints,
    })),
    apiSessionPostureData,
  };
}

export { renderRecord };
