/**
 * The fabric API (`/fabric/v1`, upstream's fabric spec): routers, services and terminators over the
 * same records, resource definitions and write rules as the Management API (so the same checks,
 * change events and audit records follow), rendered in the fabric shapes; the writes and their
 * fabric rules are src/managers/fabric.ts. Links, circuits,
 * inspections and the cluster operations are in ./fabric-ops.ts; the database operations are the
 * Management API's own handlers (./datastore.ts). docs/fabric.md says what each answers here.
 *
 * - Routers: every router, edge and transit alike (upstream's fabric router is the base of both).
 *   `connected`, `versionInfo`, `interfaces` and `listenerAddresses` come from the control
 *   channel's presence. A router created here is a transit router with the id the body names.
 * - Services: `name`, `terminatorStrategy`, `maxIdleTimeMillis`; the edge fields (role attributes,
 *   configs) are neither shown nor changed here, also by PUT.
 * - Terminators: upstream's fabric `instanceId`/`instanceSecret` are the Management API's
 *   `identity`/`identitySecret`.
 */
import type { Ctx, Entry, Handler } from '../context.js';
import type { Permission, Reply, WithBody } from '../../core/operation.js';
import type { FabricBodies } from '../../core/bodies.js';
import { errors } from '../../core/errors.js';
import { created, empty, ok, list } from '../../core/envelope.js';
import { parseListParams, runList } from '../../core/query.js';
import type { SymbolTable } from '../../core/filter/index.js';
import type { Rec, Store, Tx, CollectionName, TerminatorRecord } from '../../store/store.js';
import { mustGet, type Registry } from '../../resources/registry.js';
import { listRecords } from '../../resources/list.js';
import { iso } from '../../resources/render.js';
import { edgeRouters } from '../../resources/routers.js';
import { routerCollection } from '../../resources/services.js';
import type { FabricUpdate } from '../../managers/fabric.js';
import { fabricOpsEntries } from './fabric-ops.js';

type FabricEntity = 'routers' | 'services' | 'terminators';

/** An entityRef with fabric paths (`./routers/<id>`). */
function ref(store: Store | Tx, entity: FabricEntity, collection: CollectionName | undefined, id: string) {
  return { _links: { self: { href: `./${entity}/${id}` } }, entity, id, name: (collection && store.nameOf(collection, id)) ?? '' };
}

function base(rec: Rec, entity: FabricEntity, nested: string[] = []) {
  const self = `./${entity}/${rec.id}`;
  const links: Record<string, { href: string }> = { self: { href: self } };
  for (const n of nested) links[n] = { href: `${self}/${n}` };
  return { id: rec.id, createdAt: iso(rec.createdAt), updatedAt: iso(rec.updatedAt), _links: links, tags: rec.tags ?? {} };
}

/** Only these body properties reach the resource definitions: the fabric view of each family. */
function pick(body: Readonly<Record<string, unknown>>, names: string[], renames: Record<string, string> = {}): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const n of names) if (Object.prototype.hasOwnProperty.call(body, n)) out[renames[n] ?? n] = body[n];
  return out;
}

// ---- services ----

const SERVICE_FIELDS = ['name', 'terminatorStrategy', 'maxIdleTimeMillis', 'tags'];

function serviceView(rec: Rec) {
  return {
    ...base(rec, 'services', ['terminators']),
    name: rec.name,
    terminatorStrategy: rec.terminatorStrategy ?? 'smartrouting',
    maxIdleTimeMillis: rec.maxIdleTimeMillis ?? 0,
  };
}

// ---- terminators ----

const TERMINATOR_FIELDS = ['service', 'router', 'binding', 'address', 'cost', 'precedence', 'tags'];
const TERMINATOR_RENAMES = { instanceId: 'identity', instanceSecret: 'identitySecret' };

function terminatorView(store: Store, rec: TerminatorRecord) {
  return {
    ...base(rec, 'terminators'),
    serviceId: rec.serviceId,
    service: ref(store, 'services', 'services', rec.serviceId),
    routerId: rec.routerId,
    router: ref(store, 'routers', routerCollection(store, rec.routerId), rec.routerId),
    binding: rec.binding,
    address: rec.address,
    instanceId: rec.identity ?? '',
    cost: rec.cost ?? 0,
    precedence: rec.precedence ?? 'default',
    // No data plane reports costs: the dynamic cost is the static one, as on the Management API.
    dynamicCost: rec.cost ?? 0,
    // Upstream's hosting-SDK host id: not kept here (docs/fabric.md).
    hostId: '',
  };
}

// ---- routers ----

/**
 * A router write reaches an edge router's own identity (its certificate logs in as it): held to the
 * same containment as the Management API's edge router writes (docs/auth.md).
 */
const EDGE_ROUTER_IDENTITY = edgeRouters.reaches;

const ROUTER_FIELDS = ['name', 'cost', 'noTraversal', 'disabled', 'ctrlChanListeners', 'tags'];

function routerView(ctx: Ctx, rec: Rec) {
  const conn = ctx.app.presence.get(rec.id);
  const out: Record<string, unknown> = {
    ...base(rec, 'routers', ['terminators']),
    name: rec.name,
    fingerprint: rec.fingerprint ?? '',
    connected: conn !== undefined,
    cost: rec.cost ?? 0,
    noTraversal: rec.noTraversal ?? false,
    disabled: rec.disabled ?? false,
    ctrlChanListeners: rec.ctrlChanListeners ?? {},
  };
  if (conn) {
    // What the router reported it listens on (protocol → address) over the control channel.
    out.listenerAddresses = Object.entries(conn.protocols).map(([protocol, address]) => ({ address, protocol }));
    if (conn.versionInfo) out.versionInfo = conn.versionInfo;
    if (conn.interfaces) out.interfaces = conn.interfaces;
  }
  return out;
}

function routerSymbols(ctx: Ctx): SymbolTable {
  return {
    id: { type: 'string' },
    name: { type: 'string' },
    fingerprint: { type: 'string' },
    cost: { type: 'number' },
    noTraversal: { type: 'bool' },
    disabled: { type: 'bool' },
    connected: { type: 'bool', get: (r: Rec) => ctx.app.presence.isOnline(r.id) },
    createdAt: { type: 'datetime' },
    updatedAt: { type: 'datetime' },
    tags: { type: 'map' },
  };
}

/** Every router, edge and transit, through the list engine (filter, sort, paging); id order by default. */
const listRouters: Handler = (ctx) => {
  const store = ctx.app.store;
  const symbols = routerSymbols(ctx);
  const p = parseListParams(ctx.req.query, symbols);
  if (p.sort.length === 0) p.sort = [{ field: 'id', desc: false }];
  const records = (function* () {
    yield* store.scan('edgeRouters');
    yield* store.scan('routers');
  })();
  const { page, pagination } = runList(store, { collection: '', symbols, filterableFields: Object.keys(symbols), records }, p);
  return list(page.map((r) => routerView(ctx, r as Rec)), pagination, Object.keys(symbols));
};

export function fabricEntries(reg: Registry): Entry[] {
  const services = reg.def('services');
  const terminators = reg.def('terminators');
  const perm = (family: string, action: Permission['action']): Permission => ({ family, action });

  const serviceList: Handler = (ctx) => listRecords(reg, services, ctx, undefined, serviceView);
  const terminatorList = (candidates?: (ctx: Ctx) => string[]): Handler => (ctx) =>
    listRecords(reg, terminators, ctx, candidates ? { candidates: candidates(ctx) } : undefined, (r) => terminatorView(ctx.app.store, r));

  /** The router's collection, or 404. */
  const routerOf = (ctx: Ctx) => {
    const coll = routerCollection(ctx.app.store, ctx.params.id);
    if (!coll) throw errors.notFound();
    return coll;
  };

  const updateRouter = (mode: FabricUpdate) => async (ctx: WithBody<Ctx, FabricBodies['updateRouter'] | FabricBodies['patchRouter']>) => {
    await ctx.app.fabric.updateRouter(ctx.params.id, mode, ctx.body.fingerprint, pick(ctx.body, ROUTER_FIELDS));
    return empty();
  };

  const updateService = (mode: FabricUpdate) => async (ctx: WithBody<Ctx, FabricBodies['updateService'] | FabricBodies['patchService']>) => {
    await ctx.app.fabric.updateService(ctx.params.id, mode, pick(ctx.body, SERVICE_FIELDS));
    return empty();
  };

  const updateTerminator = (mode: FabricUpdate) => async (ctx: WithBody<Ctx, FabricBodies['updateTerminator'] | FabricBodies['patchTerminator']>) => {
    await ctx.app.fabric.updateTerminator(ctx.params.id, mode, pick(ctx.body, TERMINATOR_FIELDS));
    return empty();
  };

  const remove = (collection: (ctx: Ctx) => CollectionName): Handler => async (ctx) => {
    await ctx.app.fabric.remove(collection(ctx), ctx.params.id);
    return empty();
  };

  const createRouter = async (ctx: WithBody<Ctx, FabricBodies['createRouter']>): Promise<Reply> => {
    const rec = await ctx.app.fabric.createRouter(ctx.body.id, ctx.body.fingerprint, pick(ctx.body, ROUTER_FIELDS));
    return created(rec.id, `./routers/${rec.id}`);
  };

  return [
    { api: 'fabric', operationId: 'listServices', auth: 'admin', permission: perm('service', 'read'),
      handler: serviceList },
    { api: 'fabric', operationId: 'createService', auth: 'admin', permission: perm('service', 'create'),
      handler: async (ctx) => {
        const rec = await ctx.app.fabric.createService(pick(ctx.body, SERVICE_FIELDS));
        return created(rec.id, `./services/${rec.id}`);
      } },
    { api: 'fabric', operationId: 'detailService', auth: 'admin', permission: perm('service', 'read'),
      handler: (ctx) => ok(serviceView(mustGet(ctx.app.store, services, ctx.params.id))) },
    { api: 'fabric', operationId: 'updateService', auth: 'admin', permission: perm('service', 'update'),
      handler: updateService('put') },
    { api: 'fabric', operationId: 'patchService', auth: 'admin', permission: perm('service', 'update'),
      handler: updateService('patch') },
    { api: 'fabric', operationId: 'deleteService', auth: 'admin', permission: perm('service', 'delete'),
      handler: remove(() => 'services') },
    { api: 'fabric', operationId: 'listServiceTerminators', auth: 'admin', permission: perm('terminator', 'read'),
      handler: (ctx) => {
        mustGet(ctx.app.store, services, ctx.params.id);
        return terminatorList((c) => c.app.store.idsByIndex('terminators', 'serviceId', c.params.id))(ctx);
      } },

    { api: 'fabric', operationId: 'listRouters', auth: 'admin', permission: perm('router', 'read'),
      handler: listRouters },
    { api: 'fabric', operationId: 'createRouter', auth: 'admin', permission: perm('router', 'create'),
      handler: createRouter },
    { api: 'fabric', operationId: 'detailRouter', auth: 'admin', permission: perm('router', 'read'),
      handler: (ctx) => ok(routerView(ctx, ctx.app.store.get(routerOf(ctx), ctx.params.id)!)) },
    { api: 'fabric', operationId: 'updateRouter', auth: 'admin', permission: perm('router', 'update'), reaches: EDGE_ROUTER_IDENTITY,
      handler: updateRouter('put') },
    { api: 'fabric', operationId: 'patchRouter', auth: 'admin', permission: perm('router', 'update'), reaches: EDGE_ROUTER_IDENTITY,
      handler: updateRouter('patch') },
    { api: 'fabric', operationId: 'deleteRouter', auth: 'admin', permission: perm('router', 'delete'), reaches: EDGE_ROUTER_IDENTITY,
      handler: remove(routerOf) },
    { api: 'fabric', operationId: 'listRouterTerminators', auth: 'admin', permission: perm('terminator', 'read'),
      handler: (ctx) => {
        routerOf(ctx);
        return terminatorList((c) => c.app.store.idsByIndex('terminators', 'routerId', c.params.id))(ctx);
      } },

    { api: 'fabric', operationId: 'listTerminators', auth: 'admin', permission: perm('terminator', 'read'),
      handler: terminatorList() },
    { api: 'fabric', operationId: 'createTerminator', auth: 'admin', permission: perm('terminator', 'create'),
      handler: async (ctx) => {
        const rec = await ctx.app.fabric.createTerminator(pick(ctx.body, [...TERMINATOR_FIELDS, 'instanceId', 'instanceSecret'], TERMINATOR_RENAMES));
        return created(rec.id, `./terminators/${rec.id}`);
      } },
    { api: 'fabric', operationId: 'detailTerminator', auth: 'admin', permission: perm('terminator', 'read'),
      handler: (ctx) => ok(terminatorView(ctx.app.store, mustGet(ctx.app.store, terminators, ctx.params.id))) },
    { api: 'fabric', operationId: 'updateTerminator', auth: 'admin', permission: perm('terminator', 'update'),
      handler: updateTerminator('put') },
    { api: 'fabric', operationId: 'patchTerminator', auth: 'admin', permission: perm('terminator', 'update'),
      handler: updateTerminator('patch') },
    { api: 'fabric', operationId: 'deleteTerminator', auth: 'admin', permission: perm('terminator', 'delete'),
      handler: remove(() => 'terminators') },

    ...fabricOpsEntries(),
  ];
}
