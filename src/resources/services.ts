/** Services, configs, config types and terminators. */
import { errors } from '../core/errors.js';
import type { Rec, Store, Tx } from '../store/store.js';
import { entityRef } from './render.js';
import type { Ctx } from './context.js';
import { resolveConfigTypes, serviceExtras, type Caller } from '../policy/service-view.js';
import { checkConfigData, checkSchema } from './json-schema.js';
import { crud, type ResourceDef } from './types.js';

export const services: ResourceDef<'services'> = {
  collection: 'services',
  path: 'services',
  family: 'service',
  operations: crud('Service', 'Services'),
  links: ['configs', 'service-edge-router-policies', 'service-policies', 'terminators', 'identities', 'edge-routers'],
  fields: {
    name: { unique: true, filter: 'string', nullKeeps: true },
    roleAttributes: { attributes: true, filter: 'set' },
    configs: { filter: 'set', default: () => [], ref: { collection: 'configs', onDelete: 'pull' } },
    encryptionRequired: { immutable: true, default: () => true },
    terminatorStrategy: { filter: 'string', default: () => 'smartrouting' },
    maxIdleTimeMillis: { default: () => 0 },
  },
  prepare(rec, { tx }) {
    // At most one config of each config type.
    const byType = new Map<string, string>();
    for (const id of rec.configs as string[]) {
      const cfg = tx.get('configs', id)!;
      const other = byType.get(cfg.configTypeId);
      if (other) throw errors.field('configs', `duplicate configs ${other} and ${id} of config type ${cfg.configTypeId}`, rec.configs);
      byType.set(cfg.configTypeId, id);
    }
  },
  render(rec, { store, ctx }) {
    // Policy-derived, for the caller: `permissions`, its `config` map, `postureQueries`.
    return ctx ? serviceExtras(ctx.app.policy, store, rec, callerOf(ctx)) : serviceExtras(undefined as never, store, rec, undefined);
  },
};

export const configTypes: ResourceDef<'configTypes'> = {
  collection: 'configTypes',
  path: 'config-types',
  family: 'config-type',
  operations: crud('ConfigType', 'ConfigTypes'),
  links: ['configs'],
  fields: {
    name: { unique: true, filter: 'string', nullKeeps: true },
    schema: { default: () => ({}) },
  },
  prepare(rec) {
    checkSchema(rec.schema);
  },
};

export const configs: ResourceDef<'configs'> = {
  collection: 'configs',
  path: 'configs',
  family: 'config',
  operations: crud('Config', 'Configs'),
  links: ['services'],
  fields: {
    name: { unique: true, filter: 'string', nullKeeps: true },
    configTypeId: {
      immutable: true,
      filter: 'string',
      ref: { collection: 'configTypes', onDelete: 'restrict', errorField: 'type', entityRef: 'configType' },
    },
    data: { nullKeeps: true },
  },
  symbols: { type: { type: 'string', get: (r: Rec) => r.configTypeId } },
  prepare(rec, { tx }) {
    if (!rec.configTypeId) throw errors.field('type', 'a config type is required', rec.configTypeId);
    const data = rec.data;
    if (data === undefined || data === null || typeof data !== 'object' || Array.isArray(data)) throw errors.field('data', 'must be an object', data);
    checkConfigData(tx.get('configTypes', rec.configTypeId)!, data);
  },
  beforeDelete(rec, { tx }) {
    // Per-identity overrides that use this config go with it.
    for (const id of tx.idsByIndex('identities', 'overrideConfigIds', rec.id)) {
      const ident = tx.get('identities', id);
      if (!ident) continue;
      const serviceConfigs = (ident.serviceConfigs as { serviceId: string; configId: string }[]).filter((p) => p.configId !== rec.id);
      tx.put('identities', { ...ident, serviceConfigs, overrideConfigIds: serviceConfigs.map((p) => p.configId) });
    }
  },
};

/** A router reference of a terminator may name an edge router or a transit router (so may a fabric router id). */
export function routerCollection(tx: Store | Tx, id: unknown): 'edgeRouters' | 'routers' | undefined {
  if (typeof id !== 'string') return undefined;
  if (tx.get('edgeRouters', id)) return 'edgeRouters';
  if (tx.get('routers', id)) return 'routers';
  return undefined;
}

export const terminators: ResourceDef<'terminators'> = {
  collection: 'terminators',
  path: 'terminators',
  family: 'terminator',
  operations: crud('Terminator', 'Terminators'),
  fields: {
    serviceId: {
      bodyName: 'service',
      nullKeeps: true,
      filter: 'string',
      ref: { collection: 'services', onDelete: 'cascade', missing: 'notFound', entityRef: 'service' },
    },
    routerId: { bodyName: 'router', nullKeeps: true, filter: 'string', index: true },
    binding: { filter: 'string', nullKeeps: true },
    address: { filter: 'string', nullKeeps: true },
    identity: { filter: 'string', default: () => '' },
    identitySecret: { hidden: true },
    cost: { filter: 'number', default: () => 0 },
    precedence: { filter: 'string', default: () => 'default' },
  },
  symbols: {
    service: { type: 'string', get: (r: Rec) => r.serviceId },
    router: { type: 'string', get: (r: Rec) => r.routerId },
  },
  prepare(rec, { tx }) {
    if (!routerCollection(tx, rec.routerId)) throw errors.notFound();
    for (const f of ['binding', 'address'] as const) if (typeof rec[f] !== 'string' || rec[f] === '') throw errors.field(f, 'is required', rec[f]);
  },
  render(rec, { store }) {
    const coll = routerCollection(store, rec.routerId);
    const ref = coll ? entityRef(store, { collection: coll, path: coll === 'edgeRouters' ? 'edge-routers' : 'routers' } as ResourceDef, rec.routerId) : null;
    return { router: ref, dynamicCost: rec.cost ?? 0 };
  },
};

/** Terminators on a deleted router go with it. */
export function deleteRouterTerminators(tx: import('../store/store.js').Tx, routerId: string) {
  for (const id of tx.idsByIndex('terminators', 'routerId', routerId)) tx.delete('terminators', id);
}

/** The caller of a request as service views need it (resolved once per request). */
const callers = new WeakMap<Ctx, Caller | undefined>();
export function callerOf(ctx: Ctx): Caller | undefined {
  if (callers.has(ctx)) return callers.get(ctx);
  let caller: Caller | undefined;
  if (ctx.session && ctx.identity) {
    // `configTypes` on the request (ids or names, repeated or comma-separated) overrides the session's.
    const asked = ctx.req.query.getAll('configTypes').flatMap((v) => v.split(',')).map((v) => v.trim()).filter(Boolean);
    caller = {
      identityId: ctx.identity.id,
      apiSessionId: ctx.session.id,
      identity: ctx.identity,
      configTypes: asked.length ? resolveConfigTypes(ctx.app.store, asked) : new Set(ctx.session.configTypes ?? []),
    };
  }
  callers.set(ctx, caller);
  return caller;
}
