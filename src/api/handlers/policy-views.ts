/**
 * Management API views derived from the role index: what each policy selects,
 * which policies select an entity, identity ↔ service ↔ edge router reachability, role attribute
 * lists, policy advice, service configs per identity (their writes: src/managers/identities.ts),
 * posture data, failed service requests and the resource summary. The related lists are declared
 * in one table (RELATED) and their entries generated; every list pages and filters like any other
 * list (runList over the candidate ids the index yields).
 */
import type { Ctx, Entry } from '../context.js';
import type { ManagementOperationId } from '../../core/operation-ids.js';
import { entryOfAnyOperation, type Reply } from '../../core/operation.js';
import { errors } from '../../core/errors.js';
import { ok, empty, list as listEnvelope } from '../../core/envelope.js';
import { parseListParams, runList } from '../../core/query.js';
import { listRecords } from '../../resources/list.js';
import { type Registry } from '../../resources/registry.js';
import { entityRef } from '../../resources/render.js';
import type { Rec, Store, IdentityRecord, CollectionName, RecordOf } from '../../store/store.js';
import { IDENTITY_TYPES } from '../../resources/identities.js';
import { POSTURE_CHECK_TYPES } from '../../resources/posture.js';
import type { Kind, PolicyColl, Side } from '../../policy/role-index.js';
import { isPermitted } from '../../auth/permissions.js';
import { serviceConfigPairs, type ServiceConfigPair } from '../../managers/identities.js';
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

function policyType(ctx: Ctx): 'Dial' | 'Bind' | undefined {
  const v = ctx.req.query.get('policyType');
  if (v === null || v === '') return undefined;
  const t = v.toLowerCase();
  if (t === 'dial') return 'Dial';
  if (t === 'bind') return 'Bind';
  throw errors.field('policyType', 'must be one of dial, bind', v);
}

/**
 * A related list `/<owner>/{id}/<list>`: a 404 unless the owner exists, then the records of `lists`
 * among the ids the role index yields (undefined: the whole collection), read under the listed
 * family's `read` permission.
 */
interface Related {
  op: ManagementOperationId;
  of: CollectionName;
  lists: CollectionName;
  ids(ctx: Ctx, id: string): Iterable<string> | undefined;
}

/** What one side of a policy selects (`#all` lists the whole collection without materialising it). */
const side = (op: ManagementOperationId, coll: PolicyColl, kind: Kind): Related => ({
  op, of: coll, lists: KIND_COLLECTION[kind],
  ids: (ctx, id) => {
    const s = ctx.app.policy.index.policy(id)?.sides.get(kind) as Side | undefined;
    if (!s) return [];
    return s.all ? undefined : s.members;
  },
});

/** The policies of a collection that select an entity. */
const policiesOf = (op: ManagementOperationId, kind: Kind, coll: PolicyColl): Related => ({
  op, of: KIND_COLLECTION[kind], lists: coll,
  ids: (ctx, id) => [...ctx.app.policy.index.policiesOf(kind, id, coll)].map((p) => p.id),
});

const RELATED: Related[] = [
  side('listServicePolicyIdentities', 'servicePolicies', 'identities'),
  side('listServicePolicyServices', 'servicePolicies', 'services'),
  side('listServicePolicyPostureChecks', 'servicePolicies', 'postureChecks'),
  side('listEdgeRouterPolicyIdentities', 'edgeRouterPolicies', 'identities'),
  side('listEdgeRouterPolicyEdgeRouters', 'edgeRouterPolicies', 'edgeRouters'),
  side('listServiceEdgeRouterPolicyServices', 'serviceEdgeRouterPolicies', 'services'),
  side('listServiceEdgeRouterPolicyEdgeRouters', 'serviceEdgeRouterPolicies', 'edgeRouters'),

  policiesOf('listIdentityServicePolicies', 'identities', 'servicePolicies'),
  policiesOf('listIdentitysEdgeRouterPolicies', 'identities', 'edgeRouterPolicies'),
  policiesOf('listServiceServicePolicies', 'services', 'servicePolicies'),
  policiesOf('listServiceServiceEdgeRouterPolicies', 'services', 'serviceEdgeRouterPolicies'),
  policiesOf('listEdgeRouterEdgeRouterPolicies', 'edgeRouters', 'edgeRouterPolicies'),
  policiesOf('listEdgeRouterServiceEdgeRouterPolicies', 'edgeRouters', 'serviceEdgeRouterPolicies'),

  // Reachability.
  { op: 'listIdentityServices', of: 'identities', lists: 'services',
    ids: (ctx, id) => {
      const type = policyType(ctx);
      const engine = ctx.app.policy;
      const all = engine.accessibleServices(id);
      return type ? all.filter((sid) => engine.hasAccess(id, sid, type)) : all;
    } },
  { op: 'listIdentityEdgeRouters', of: 'identities', lists: 'edgeRouters', ids: (ctx, id) => ctx.app.policy.identityRouters(id) },
  { op: 'listServiceIdentities', of: 'services', lists: 'identities', ids: (ctx, id) => ctx.app.policy.serviceIdentities(id, policyType(ctx)) },
  { op: 'listServiceEdgeRouters', of: 'services', lists: 'edgeRouters', ids: (ctx, id) => ctx.app.policy.serviceRoutersOf(id) },
  { op: 'listEdgeRouterIdentities', of: 'edgeRouters', lists: 'identities', ids: (ctx, id) => ctx.app.policy.routerIdentities(id) },
  { op: 'listEdgeRouterServices', of: 'edgeRouters', lists: 'services', ids: (ctx, id) => ctx.app.policy.routerServices(id) },
];

/** The role attributes in use per kind, read under that kind's family's `read` permission. */
const ROLE_ATTRIBUTES: [ManagementOperationId, Kind][] = [
  ['listIdentityRoleAttributes', 'identities'],
  ['listServiceRoleAttributes', 'services'],
  ['listEdgeRouterRoleAttributes', 'edgeRouters'],
  ['listPostureCheckRoleAttributes', 'postureChecks'],
];

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

export function policyViewEntries(reg: Registry): Entry[] {
  return [
    ...RELATED.map((r) => entryOfAnyOperation<Ctx>({
      api: 'management', operationId: r.op, auth: 'admin', permission: { family: reg.def(r.lists).family, action: 'read' },
      handler: (ctx) => {
        must(ctx, r.of, ctx.params.id);
        return listAmong(reg, ctx, r.lists, r.ids(ctx, ctx.params.id));
      } })),
    ...ROLE_ATTRIBUTES.map(([op, kind]) => entryOfAnyOperation<Ctx>({
      api: 'management', operationId: op, auth: 'admin', permission: { family: reg.def(KIND_COLLECTION[kind]).family, action: 'read' },
      handler: (ctx) => attributeList(ctx, ctx.app.policy.index.attributes(kind)) })),

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
        await ctx.app.identities.associateServiceConfigs(ctx.params.id, serviceConfigPairs(ctx.body, true));
        return empty();
      } },
    { api: 'management', operationId: 'disassociateIdentitysServiceConfigs', auth: 'admin', permission: { family: 'identity', action: 'update' }, reaches: { from: 'path' },
      handler: async (ctx) => {
        // No body: remove every override.
        const pairs = ctx.body === undefined || ctx.body === null ? undefined : serviceConfigPairs(ctx.body, false);
        await ctx.app.identities.disassociateServiceConfigs(ctx.params.id, pairs);
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

