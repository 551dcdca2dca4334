/**
 * Edge routers as clients see them: stored fields plus live state from the control channel
 * (`app.presence`): `isOnline`, `hostname`, `supportedProtocols` (protocol → address).
 */
import type { Store, EdgeRouterRecord } from '../store/store.js';
import type { Presence } from '../control/presence.js';
import type { PolicyEngine } from './engine.js';

/** What these views read: the store, the live router connections and the policy engine. */
export interface RouterViewDeps {
  store: Store;
  presence: Presence;
  policy: PolicyEngine;
}
type App = RouterViewDeps;

export function routerLive(app: App, routerId: string) {
  const conn = app.presence.get(routerId);
  return {
    isOnline: conn !== undefined,
    hostname: conn?.hostname ?? '',
    supportedProtocols: (conn?.protocols ?? {}) as Record<string, string>,
    syncStatus: conn ? 'SYNC_DONE' : 'SYNC_DISCONNECTED',
  };
}

/** `commonEdgeRouterProperties` (service edge routers) and `sessionEdgeRouter` (with `urls`). */
export function commonEdgeRouter(app: App, r: EdgeRouterRecord) {
  const live = routerLive(app, r.id);
  return {
    name: r.name,
    hostname: live.hostname,
    isOnline: live.isOnline,
    supportedProtocols: live.supportedProtocols,
    urls: live.supportedProtocols,
    syncStatus: live.syncStatus,
    cost: r.cost ?? 0,
    noTraversal: r.noTraversal === true,
    disabled: r.disabled === true,
    appData: r.appData ?? {},
  };
}

/** Router records for ids, connected ones first, then by name. */
export function routersOnlineFirst(app: App, ids: Iterable<string>): EdgeRouterRecord[] {
  const recs: EdgeRouterRecord[] = [];
  for (const id of ids) {
    const r = app.store.get('edgeRouters', id);
    if (r) recs.push(r);
  }
  return recs.sort((a, b) => Number(app.presence.isOnline(b.id)) - Number(app.presence.isOnline(a.id)) || String(a.name).localeCompare(String(b.name)));
}

/** The edge routers a session may use: the policy intersection, connected ones only (they have addresses). */
export function sessionEdgeRouters(app: App, identityId: string, serviceId: string) {
  // Usually far fewer routers are connected than the policies allow (shape large: all 500 allowed
  // to the worst-case identity, each session create intersecting them): start from the connected ones.
  const { policy, presence } = app;
  if (presence.size === 0) return [];
  const mine = policy.identityRouters(identityId);
  const ids =
    presence.size <= mine.size
      ? [...presence.ids()].filter((id) => mine.has(id) && policy.serviceReaches(serviceId, id)).sort()
      : policy.commonRouters(identityId, serviceId, (id) => presence.isOnline(id));
  return ids
    .map((id) => app.store.get('edgeRouters', id))
    .filter((r): r is EdgeRouterRecord => r !== undefined)
    .map((r) => commonEdgeRouter(app, r));
}
