/**
 * Edge routers and transit routers (`/routers` and `/transit-routers` are the same resource).
 * A tunneler-enabled edge router has an identity of type `Router` with its name and a system edge
 * router policy `edge-router-<id>-system` joining the two.
 */
import { errors } from '../core/errors.js';
import type { EdgeRouterRecord, Rec, RouterRecord, Store, Tx } from '../store/store.js';
import { enrollmentKeysOf, enrollmentSecrets, newEnrollment, putNewEnrollment } from './enrollments.js';
import { newId } from './write.js';
import { deleteRouterTerminators } from './services.js';
import { crud, type FieldDef, type ResourceDef, type View, type WriteCtx } from './types.js';
import type { Registry } from './registry.js';
import type { Presence } from '../control/presence.js';

const common: Record<string, FieldDef> = {
  name: { unique: true, filter: 'string', nullKeeps: true },
  cost: { filter: 'number', default: () => 0 },
  noTraversal: { filter: 'bool', default: () => false },
  disabled: { filter: 'bool', default: () => false },
  ctrlChanListeners: { default: () => ({}) },
  isVerified: { readOnly: true, filter: 'bool' },
  // Optional and not nullable on the wire: absent until the router enrolls.
  fingerprint: { readOnly: true, filter: 'string', index: true, optional: true },
  certPem: { readOnly: true },
  unverifiedFingerprint: { readOnly: true },
  unverifiedCertPem: { readOnly: true },
};

function checkCost(rec: EdgeRouterRecord | RouterRecord) {
  if (typeof rec.cost === 'number' && (rec.cost < 0 || rec.cost > 65535)) throw errors.field('cost', 'must be between 0 and 65535', rec.cost);
}

/** Enrollment fields shown on a router while its enrollment is outstanding. */
function enrollmentView(store: Store, field: 'edgeRouterId' | 'transitRouterId', id: string, secrets: boolean) {
  const eid = store.idsByIndex('enrollments', field, id)[0];
  const e = eid ? store.get('enrollments', eid) : undefined;
  const open = e ? enrollmentSecrets(store, e, secrets) : undefined;
  return {
    enrollmentToken: open ? open.token : null,
    enrollmentJwt: open ? open.jwt : null,
    enrollmentCreatedAt: e ? new Date(e.createdAt).toISOString() : null,
    enrollmentExpiresAt: e ? new Date(e.expiresAt).toISOString() : null,
  };
}

/**
 * What the connected router reported over the control channel (src/control/presence.ts): isOnline,
 * hostname, supportedProtocols, syncStatus, and versionInfo/interfaces while connected. Offline
 * (and rendered without a request context): not online, empty hostname and protocols.
 */
function liveState(rec: EdgeRouterRecord | RouterRecord, view: View): Record<string, unknown> {
  const presence = view.ctx?.app.presence;
  if (!presence) return { isOnline: false, hostname: '', supportedProtocols: {}, syncStatus: 'SYNC_DISCONNECTED' };
  const out: Record<string, unknown> = { ...presence.state(rec.id) };
  const conn = presence.get(rec.id);
  if (conn?.versionInfo) out.versionInfo = conn.versionInfo;
  if (conn?.interfaces) out.interfaces = conn.interfaces;
  return out;
}

/**
 * Make the `isOnline` filter symbol of edge and transit routers read this controller's presence
 * (`filter=isOnline=true`). Called once by the composition root; symbol tables are per registry.
 */
export function bindPresence(reg: Registry, presence: Presence): void {
  for (const collection of ['edgeRouters', 'routers']) {
    const symbols = reg.symbols.get(collection);
    if (symbols) symbols.isOnline = { type: 'bool', get: (rec: Rec) => presence.isOnline(rec.id) };
  }
}

function syncTunnelerIdentity(rec: EdgeRouterRecord, { tx, before }: WriteCtx<EdgeRouterRecord>) {
  const identityId = tx.idsByIndex('identities', 'edgeRouterId', rec.id)[0];
  const now = Date.now();
  if (rec.isTunnelerEnabled && !identityId) {
    const iid = newId();
    tx.put('identities', {
      id: iid, createdAt: now, updatedAt: now, tags: {}, name: rec.name, typeId: 'Router', isAdmin: false, isDefaultAdmin: false,
      authPolicyId: 'default', roleAttributes: [], edgeRouterId: rec.id, defaultHostingCost: 0, defaultHostingPrecedence: 'default',
      serviceHostingCosts: {}, serviceHostingPrecedences: {},
    });
    tx.put('edgeRouterPolicies', {
      id: newId(), createdAt: now, updatedAt: now, tags: {}, name: `edge-router-${rec.id}-system`, isSystem: true, systemFor: rec.id,
      semantic: 'AnyOf', edgeRouterRoles: ['@' + rec.id], identityRoles: ['@' + iid],
    });
  } else if (identityId && before && before.name !== rec.name) {
    const ident = tx.get('identities', identityId)!;
    tx.put('identities', { ...ident, name: rec.name, updatedAt: now });
  }
}

/** Remove the router identity and the system policy (deleting the router, or tunneling off). */
function removeTunnelerIdentity(tx: Tx, routerId: string) {
  for (const pid of tx.idsByIndex('edgeRouterPolicies', 'systemFor', routerId)) tx.delete('edgeRouterPolicies', pid);
  for (const iid of tx.idsByIndex('identities', 'edgeRouterId', routerId)) {
    for (const aid of tx.idsByIndex('apiSessions', 'identityId', iid)) {
      for (const sid of tx.idsByIndex('sessions', 'apiSessionId', aid)) tx.delete('sessions', sid);
      tx.delete('apiSessions', aid);
    }
    for (const aid of tx.idsByIndex('authenticators', 'identityId', iid)) tx.delete('authenticators', aid);
    for (const eid of tx.idsByIndex('enrollments', 'identityId', iid)) tx.delete('enrollments', eid);
    for (const field of ['identityRoles'] as const) {
      for (const coll of ['servicePolicies', 'edgeRouterPolicies'] as const) {
        for (const pid of tx.idsByIndex(coll, field, '@' + iid)) {
          const p = tx.get(coll, pid)!;
          tx.put(coll, { ...p, [field]: (p[field] as string[]).filter((r) => r !== '@' + iid) });
        }
      }
    }
    tx.delete('identities', iid);
  }
}

export const edgeRouters: ResourceDef<'edgeRouters'> = {
  collection: 'edgeRouters',
  path: 'edge-routers',
  family: 'router',
  operations: crud('EdgeRouter', 'EdgeRouters'),
  links: ['edge-router-policies', 'identities', 'service-edge-router-policies', 'services'],
  // A write may rename, remove or re-key the router's own identity (its certificate logs in as it).
  reaches: { from: 'referrer', field: 'edgeRouterId' },
  fields: {
    ...common,
    roleAttributes: { attributes: true, filter: 'set' },
    isTunnelerEnabled: { filter: 'bool', default: () => false },
    // Upstream renders an unset appData as `{}`; strict clients refuse `null`.
    appData: { default: () => ({}) },
    versionInfo: { readOnly: true, optional: true },
  },
  symbols: {
    isOnline: { type: 'bool', get: () => false },
  },
  prepare(rec, wctx) {
    if (wctx.mode === 'create') rec.isVerified = false;
    checkCost(rec);
    if (!rec.isTunnelerEnabled && wctx.before?.isTunnelerEnabled) removeTunnelerIdentity(wctx.tx, rec.id);
  },
  // Its enrollment is signed and sealed before the write and put in the same write as the router.
  beforeCreate: (id, _body, writer) => newEnrollment(enrollmentKeysOf(writer), { method: 'erott', edgeRouterId: id }),
  afterWrite(rec, wctx) {
    if (wctx.mode === 'create') putNewEnrollment(wctx, { method: 'erott', edgeRouterId: rec.id });
    syncTunnelerIdentity(rec, wctx);
  },
  beforeDelete(rec, { tx }) {
    removeTunnelerIdentity(tx, rec.id);
    deleteRouterTerminators(tx, rec.id);
  },
  rendersSecrets: true,
  render(rec, view, secrets) {
    return { appData: rec.appData ?? {}, ...liveState(rec, view), ...enrollmentView(view.store, 'edgeRouterId', rec.id, secrets) };
  },
};

export const routers: ResourceDef<'routers'> = {
  collection: 'routers',
  path: 'routers',
  family: 'router',
  operations: crud('Router', 'Routers'),
  fields: { ...common },
  symbols: {
    isOnline: { type: 'bool', get: () => false },
  },
  prepare(rec, { mode }) {
    if (mode === 'create') rec.isVerified = false;
    checkCost(rec);
  },
  beforeCreate: (id, _body, writer) => newEnrollment(enrollmentKeysOf(writer), { method: 'trott', transitRouterId: id }),
  afterWrite(rec, wctx) {
    if (wctx.mode === 'create') putNewEnrollment(wctx, { method: 'trott', transitRouterId: rec.id });
  },
  beforeDelete(rec, { tx }) {
    deleteRouterTerminators(tx, rec.id);
  },
  rendersSecrets: true,
  render(rec, view, secrets) {
    return { isOnline: view.ctx?.app.presence.isOnline(rec.id) ?? false, fingerprint: rec.fingerprint ?? '', ...enrollmentView(view.store, 'transitRouterId', rec.id, secrets) };
  },
};

/** `/transit-routers` serves the same records under its own operation ids. */
export const transitRouters: ResourceDef = {
  ...routers,
  path: 'transit-routers',
  operations: crud('TransitRouter', 'TransitRouters'),
};
