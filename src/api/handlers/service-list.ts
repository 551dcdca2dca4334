/**
 * `GET /services` on the Client API for a non-admin caller with no filter, sort or roleFilter —
 * what SDKs poll. The generic list (listRecords → runList → renderRecord) decodes and renders every
 * service of the page on every request, and the garbage of that made the poll's cost (the figures
 * are in docs/policy.md).
 *
 * Here each service's own fields (the same renderRecord output, rendered once) are kept as JSON
 * until a change event touches the service; a page is the sorted accessible ids sliced like
 * runList's candidate path, each entry that JSON plus the caller's `permissions`, `config` and
 * `postureQueries` (serviceExtras, as services.render adds them). Same bytes as the generic path.
 */
import type { Ctx } from '../context.js';
import type { Reply } from '../../core/operation.js';
import { listOfJson } from '../../core/envelope.js';
import { listSource } from '../../resources/list.js';
import { type Registry } from '../../resources/registry.js';
import { renderRecord } from '../../resources/render.js';
import type { ResourceDef } from '../../resources/types.js';
import { callerOf } from '../../resources/services.js';
import { serviceExtras } from '../../policy/service-view.js';
import { parseListParams } from '../../core/query.js';
import type { ChangeEvent, Store, ServiceRecord } from '../../store/store.js';

interface Entry {
  rec: ServiceRecord;
  /** JSON of the service's own fields, without the closing brace. */
  head: string;
}

/** Per store: service id → Entry, dropped when a change event names the service. */
const caches = new WeakMap<Store, Map<string, Entry>>();

function cacheOf(store: Store): Map<string, Entry> {
  let cache = caches.get(store);
  if (!cache) {
    const m = new Map<string, Entry>();
    store.on('change', (events: ChangeEvent[]) => {
      for (const ev of events) if (ev.collection === 'services') m.delete(ev.id);
    });
    caches.set(store, (cache = m));
  }
  return cache;
}

/** The extras services.render appends (they come last in renderRecord's output, in this order). */
const EXTRAS = ['permissions', 'config', 'postureQueries'] as const;

function entryOf(reg: Registry, def: ResourceDef<'services'>, store: Store, cache: Map<string, Entry>, id: string): Entry | undefined {
  let e = cache.get(id);
  if (e) return e;
  const rec = store.get(def.collection, id);
  if (!rec) return undefined;
  // Rendered without a caller: services.render then adds placeholders for the caller's fields.
  const own = renderRecord(reg, def, rec, { store, refs: new Map() });
  for (const k of EXTRAS) delete own[k];
  e = { rec, head: JSON.stringify(own).slice(0, -1) };
  cache.set(id, e);
  return e;
}

/** The reply, or undefined when the request needs the generic list (filter, sort, roleFilter). */
export function callerServiceList(reg: Registry, def: ResourceDef<'services'>, ctx: Ctx, candidates: string[]): Reply | undefined {
  const q = ctx.req.query;
  if (q.getAll('roleFilter').some((r) => r !== '')) return undefined;
  const src = listSource(reg, def);
  const p = parseListParams(q, src.symbols);
  if (p.filter.where || p.sort.length > 0) return undefined;
  const caller = callerOf(ctx);
  if (!caller) return undefined;
  const store = ctx.app.store;
  const cache = cacheOf(store);
  // accessibleServices is sorted and unique: runList's `[...new Set(ids)].sort()`.
  const page = candidates.slice(p.offset, p.limit === -1 ? undefined : p.offset + p.limit);
  const items: string[] = [];
  for (const id of page) {
    const e = entryOf(reg, def, store, cache, id);
    if (!e) continue;
    const x = serviceExtras(ctx.app.policy, store, e.rec, caller);
    items.push(`${e.head},"permissions":${JSON.stringify(x.permissions)},"config":${JSON.stringify(x.config)},"postureQueries":${JSON.stringify(x.postureQueries)}}`);
  }
  return listOfJson(items, { limit: p.limit, offset: p.offset, totalCount: candidates.length }, src.filterableFields);
}
