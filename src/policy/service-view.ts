/**
 * What a service looks like to one caller: `permissions` from the policies
 * that grant it, the `config` map (the service's configs of the requested types, then the caller's
 * per-identity overrides, which win), and `postureQueries` per granting policy.
 *
 * Example: serviceExtras(engine, svcRec, { identityId, apiSessionId, configTypes: new Set(['all']) })
 *   → { permissions: ['Dial'], config: { 'intercept.v1': {...} }, postureQueries: [...] }
 */
import type { Store, IdentityRecord, ServiceRecord, PostureCheckRecord } from '../store/store.js';
import type { PolicyEngine } from './engine.js';
import type { PolicyType } from './access.js';
import type { CheckResult } from './posture.js';

export interface Caller {
  identityId: string;
  apiSessionId: string;
  identity?: IdentityRecord;
  /** Config type ids requested (`all` for every type); empty → no config entries. */
  configTypes: ReadonlySet<string>;
}

/** Config types given as ids or names (`all` stays); unknown ones are dropped. */
export function resolveConfigTypes(store: Store, wanted: Iterable<string>): Set<string> {
  const out = new Set<string>();
  for (const w of wanted) {
    if (typeof w !== 'string' || w === '') continue;
    if (w === 'all') out.add('all');
    else if (store.has('configTypes', w)) out.add(w);
    else {
      const byName = store.findUnique('configTypes', 'name', w);
      if (byName) out.add(byName.id);
    }
  }
  return out;
}

/** What a config map needs of a config: its type's id and name, and its data (never mutated). */
interface ConfigEntry {
  configTypeId: string;
  typeName: string;
  data: unknown;
}

/**
 * Decoded configs per store, dropped by change events on configs and config types. Every service
 * of a client's service list carries its configs: decoding them (and their types, for the names)
 * from LMDB on every request was a large share of the controller's CPU in the fleet benchmark's
 * mix, and its garbage grew the heap (docs/benchmarks.md, "Measurements behind the code").
 */
const configCaches = new WeakMap<Store, Map<string, ConfigEntry | null>>();

function configEntry(store: Store, id: string): ConfigEntry | undefined {
  let cache = configCaches.get(store);
  if (!cache) {
    const m = new Map<string, ConfigEntry | null>();
    store.on('change', (events: { collection: string; id: string }[]) => {
      for (const e of events) {
        if (e.collection === 'configs') m.delete(e.id);
        else if (e.collection === 'configTypes') m.clear();
      }
    });
    configCaches.set(store, (cache = m));
  }
  let e = cache.get(id);
  if (e === undefined) {
    const cfg = store.get('configs', id);
    e = cfg ? { configTypeId: cfg.configTypeId, typeName: store.nameOf('configTypes', cfg.configTypeId) ?? cfg.configTypeId, data: cfg.data } : null;
    cache.set(id, e);
  }
  return e ?? undefined;
}

/** Config type name → data for the caller's view of a service. */
function configMap(store: Store, service: ServiceRecord, identity: IdentityRecord | undefined, types: ReadonlySet<string>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (types.size === 0) return out;
  const all = types.has('all');
  const byType = new Map<string, ConfigEntry>();
  for (const cid of (service.configs as string[]) ?? []) {
    const cfg = configEntry(store, cid);
    if (cfg && (all || types.has(cfg.configTypeId))) byType.set(cfg.configTypeId, cfg);
  }
  for (const pair of (identity?.serviceConfigs as { serviceId: string; configId: string }[] | undefined) ?? []) {
    if (pair.serviceId !== service.id) continue;
    const cfg = configEntry(store, pair.configId);
    if (cfg && (all || types.has(cfg.configTypeId))) byType.set(cfg.configTypeId, cfg);
  }
  for (const cfg of byType.values()) out[cfg.typeName] = cfg.data;
  return out;
}

const iso = (ms: number | null | undefined) => (ms === null || ms === undefined ? null : new Date(ms).toISOString());

/** One posture query as a client sees it. */
function renderPostureQuery(check: PostureCheckRecord, r: CheckResult): Record<string, unknown> {
  const q: Record<string, unknown> = {
    _links: { self: { href: `./posture-checks/${check.id}` } },
    id: check.id,
    name: check.name,
    createdAt: iso(check.createdAt),
    updatedAt: iso(r.updatedAt),
    tags: check.tags ?? {},
    queryType: check.typeId,
    isPassing: r.passing,
    timeout: r.timeout,
    timeoutRemaining: r.timeoutRemaining,
    timeoutAt: iso(r.timeoutAt),
  };
  if (check.typeId === 'MFA') {
    q.promptOnWake = check.promptOnWake === true;
    q.promptOnUnlock = check.promptOnUnlock === true;
    q.promptGracePeriodSeconds = 300;
  }
  if (check.typeId === 'PROCESS') q.process = { osType: check.process?.osType, path: check.process?.path };
  if (check.typeId === 'PROCESS_MULTI') q.processes = ((check.processes as { osType?: string; path?: string }[]) ?? []).map((p) => ({ osType: p.osType, path: p.path }));
  return q;
}

export function postureQueries(engine: PolicyEngine, serviceId: string, caller: Caller): Record<string, unknown>[] {
  const { identityId, apiSessionId, identity } = caller;
  const out: Record<string, unknown>[] = [];
  const types: PolicyType[] = ['Dial', 'Bind'];
  if (engine.index.entityCount('postureChecks') === 0) {
    for (const t of types) {
      if (engine.grantingPolicies(identityId, serviceId, t).length === 0) continue;
      out.push({ policyId: `dummy ${t.toLowerCase()} policy: no posture checks defined`, policyType: t, isPassing: true, postureQueries: [] });
    }
    return out;
  }
  for (const t of types) {
    for (const p of engine.grantingPolicies(identityId, serviceId, t)) {
      const queries: Record<string, unknown>[] = [];
      let passing = true;
      for (const cid of engine.policyChecks(p)) {
        const r = engine.evaluateCheck(cid, identityId, apiSessionId, identity);
        if (!r) continue;
        passing &&= r.result.passing;
        queries.push(renderPostureQuery(r.check, r.result));
      }
      out.push({ policyId: p.id, policyType: t, isPassing: passing, postureQueries: queries });
    }
  }
  return out;
}

export function serviceExtras(engine: PolicyEngine, store: Store, service: ServiceRecord, caller: Caller | undefined): Record<string, unknown> {
  if (!caller) return { permissions: ['Invalid'], config: {}, postureQueries: [] };
  return {
    permissions: engine.permissions(caller.identityId, service.id),
    config: configMap(store, service, caller.identity, caller.configTypes),
    postureQueries: postureQueries(engine, service.id, caller),
  };
}
