/**
 * The fabric API's operations beyond its resources (docs/fabric.md):
 * - Links and circuits, as routers report them over the control channel. This controller has no
 *   data plane and its control channel carries no link or circuit reports (docs/router-protocol.md),
 *   so the lists are empty — well-formed, filterable and paged, never a 404 — a detail or patch
 *   names no link or circuit (404), and deleting a link or circuit is the no-op deleting an
 *   unknown link is upstream (200; neither delete declares a 404).
 * - `POST /inspections`: the apps an inspection reaches are this controller (its id) and the
 *   connected routers; the controller answers `connected-routers` and `cluster-config` /
 *   `connected-peers`, and a matched router is reported in `errors` (the control channel has no
 *   inspect request).
 * - Cluster: a standalone controller answers all four as upstream's non-Raft controller does
 *   (400 SERVER_NOT_RUNNING_IN_HA_MODE). In cluster mode the members are the live controllers;
 *   controllers join by starting against the same etcd and leave by stopping, and none leads (etcd
 *   orders the writes, every controller takes them), so add, remove and transfer are refused with
 *   the reason (400 INVALID_FIELD), or 404 for a member id that is not live.
 */
import type { Ctx, Entry, Handler } from '../context.js';
import type { Reply, WithBody } from '../../core/operation.js';
import type { FabricBodies } from '../../core/bodies.js';
import { ApiError, causeValue, errors } from '../../core/errors.js';
import { empty, list, ok } from '../../core/envelope.js';
import { parseListParams } from '../../core/query.js';
import type { SymbolTable } from '../../core/filter/index.js';

const LINK_SYMBOLS: SymbolTable = {
  id: { type: 'string' },
  protocol: { type: 'string' },
  state: { type: 'string' },
  down: { type: 'bool' },
  staticCost: { type: 'number' },
  cost: { type: 'number' },
  iteration: { type: 'number' },
};

const CIRCUIT_SYMBOLS: SymbolTable = {
  id: { type: 'string' },
  clientId: { type: 'string' },
  service: { type: 'string' },
  terminator: { type: 'string' },
  createdAt: { type: 'datetime' },
  updatedAt: { type: 'datetime' },
  tags: { type: 'map' },
};

/** An empty list that still reads its query: a bad filter, sort or paging is a 400 as on any list. */
/** Detail (or change) of a link or circuit: none exists here (docs/fabric.md). */
const noSuch = (kind: 'link' | 'circuit'): Handler => (ctx) => {
  throw errors.notFound(kind, ctx.params.id);
};

const emptyList = (symbols: SymbolTable): Handler => (ctx) => {
  const p = parseListParams(ctx.req.query, symbols);
  return list([], { limit: p.limit, offset: p.offset, totalCount: 0 }, Object.keys(symbols));
};

const invalidField = (field: string, reason: string, value: unknown) =>
  new ApiError('INVALID_FIELD', undefined, { field, reason, value: causeValue(value) });

const MAX_APP_REGEX = 1024;

/** The values this controller answers for an inspection, by lower-cased name. */
function controllerValue(ctx: Ctx, name: string): Record<string, unknown> | undefined {
  const { app } = ctx;
  switch (name) {
    case 'connected-routers':
      return {
        routers: [...app.presence.ids()].map((id) => {
          const c = app.presence.get(id)!;
          return {
            id,
            name: app.store.nameOf('edgeRouters', id) ?? app.store.nameOf('routers', id) ?? '',
            version: c.versionInfo?.version ?? '',
            connected: new Date(c.connectedAt).toISOString(),
          };
        }),
      };
    case 'cluster-config':
    case 'connected-peers': {
      const members = app.cluster?.members() ?? [];
      return { clustered: app.cluster !== undefined, members: members.map((m) => ({ id: m.id, address: m.ctrlAddress, version: m.versionInfo.version ?? '' })) };
    }
    default:
      return undefined;
  }
}

const inspect = (ctx: WithBody<Ctx, FabricBodies['inspect']>): Reply => {
  const { appRegex, requestedValues } = ctx.body;
  if (appRegex.length > MAX_APP_REGEX) throw errors.field('appRegex', `must be at most ${MAX_APP_REGEX} characters`, appRegex);
  let re: RegExp;
  try {
    // Upstream matches the whole id, case-insensitively.
    re = new RegExp(`^(?:${appRegex})$`, 'i');
  } catch (e) {
    throw errors.field('appRegex', `is not a valid regular expression: ${(e as Error).message}`, appRegex);
  }
  const values: { appId: string; name: string; value: unknown }[] = [];
  const errs: string[] = [];
  const { app } = ctx;
  if (re.test(app.controllerId)) {
    for (const requested of requestedValues) {
      const name = requested.toLowerCase();
      const value = controllerValue(ctx, name);
      if (value !== undefined) values.push({ appId: app.controllerId, name, value });
    }
  }
  for (const id of app.presence.ids()) {
    if (re.test(id)) errs.push(`router ${id}: not inspectable, the control channel has no inspect request`);
  }
  // Not enveloped: the spec's 200 is the inspectResponse itself, as upstream answers it.
  return { status: 200, body: { success: errs.length === 0, errors: errs, values } };
};

/** Live controller ids in cluster mode; undefined when standalone (the caller answers as upstream's non-Raft controller). */
function memberIds(ctx: Ctx): Set<string> {
  const cluster = ctx.app.cluster;
  if (!cluster) throw new ApiError('SERVER_NOT_RUNNING_IN_HA_MODE');
  return new Set(cluster.members().map((m) => m.id));
}

export function fabricOpsEntries(): Entry[] {
  return [
    { api: 'fabric', operationId: 'listLinks', auth: 'admin', permission: { family: 'ops', action: 'read' },
      handler: emptyList(LINK_SYMBOLS) },
    { api: 'fabric', operationId: 'detailLink', auth: 'admin', permission: { family: 'ops', action: 'read' },
      handler: noSuch('link') },
    { api: 'fabric', operationId: 'patchLink', auth: 'admin', permission: { family: 'ops', action: 'update' },
      handler: noSuch('link') },
    // Upstream removes the link if it knows it and answers 200 either way.
    { api: 'fabric', operationId: 'deleteLink', auth: 'admin', permission: { family: 'ops', action: 'delete' },
      handler: () => empty() },
    { api: 'fabric', operationId: 'listCircuits', auth: 'admin', permission: { family: 'ops', action: 'read' },
      handler: emptyList(CIRCUIT_SYMBOLS) },
    { api: 'fabric', operationId: 'detailCircuit', auth: 'admin', permission: { family: 'ops', action: 'read' },
      handler: noSuch('circuit') },
    // No circuit exists to remove: answered as deleting an unknown link is (the operation declares no 404).
    { api: 'fabric', operationId: 'deleteCircuit', auth: 'admin', permission: { family: 'ops', action: 'delete' }, body: 'optional',
      handler: () => empty() },
    { api: 'fabric', operationId: 'inspect', auth: 'admin', permission: { family: 'ops', action: 'read' },
      handler: inspect },

    { api: 'fabric', operationId: 'clusterListMembers', auth: 'admin', permission: { family: 'ops', action: 'read' },
      handler: (ctx) => {
        memberIds(ctx);
        const data = ctx.app.cluster!.members().map((m) => ({
          id: m.id,
          address: m.ctrlAddress,
          voter: true,
          // No controller leads: etcd orders the writes and every controller takes them.
          leader: false,
          version: m.versionInfo.version ?? '',
          connected: true,
          readOnly: false,
        }));
        return ok(data);
      } },
    { api: 'fabric', operationId: 'clusterMemberAdd', auth: 'admin', permission: null,
      handler: (ctx) => {
        memberIds(ctx);
        throw invalidField('address', 'a controller joins this cluster by starting with the same etcd endpoints (MESH_CLUSTER_ETCD, docs/cluster.md), not by address', ctx.body.address);
      } },
    { api: 'fabric', operationId: 'clusterMemberRemove', auth: 'admin', permission: null,
      handler: (ctx) => {
        if (!memberIds(ctx).has(ctx.body.id)) throw errors.notFound('cluster member', ctx.body.id);
        throw invalidField('id', 'a controller leaves this cluster when it stops: its membership lease then expires (docs/cluster.md)', ctx.body.id);
      } },
    { api: 'fabric', operationId: 'clusterTransferLeadership', auth: 'admin', permission: null, body: 'optional',
      handler: (ctx) => {
        const ids = memberIds(ctx);
        const wanted = ctx.body?.newLeaderId;
        if (typeof wanted === 'string' && wanted !== '' && !ids.has(wanted)) throw errors.notFound('cluster member', wanted);
        throw invalidField('newLeaderId', 'controllers of this cluster have no leader: etcd orders the writes and every controller takes them', wanted);
      } },
  ];
}
