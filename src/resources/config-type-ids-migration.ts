/**
 * Data directories written before the built-in config types had upstream's ids keep each of them
 * under its name as id (`intercept.v1`, `host.v1`, `mesh-tunneler-client.v1`, …) with simplified
 * schemas. This moves every such record to its upstream id and gives the built-in types their full
 * schemas, in one write: the config type records, every config's `configTypeId`, and the
 * `configTypes` API sessions asked for (identity overrides and services name configs, not types).
 * Indexes follow the records (the store rewrites them with each put and delete).
 *
 * Runs once per data directory: the moved records are the marker. Once none is left under a
 * legacy id it does nothing (so a later edit of a built-in type's schema is never undone).
 *
 *   const moved = await migrateBuiltinConfigTypeIds(store);   // number of config types moved
 */
import type { Rec, Store } from '../store/store.js';
import { BUILTIN_CONFIG_TYPES } from './builtin-config-types.js';

export async function migrateBuiltinConfigTypeIds(store: Store): Promise<number> {
  // Before this version a built-in type's id was its name.
  const moves = BUILTIN_CONFIG_TYPES.filter((t) => t.id !== t.name && store.get('configTypes', t.name)?.name === t.name);
  if (moves.length === 0) return 0;
  const newId = new Map(moves.map((t) => [t.name, t.id]));
  // API sessions have no index on `configTypes`: the ones to rewrite are found before the write.
  const sessions: string[] = [];
  for (const s of store.scan('apiSessions')) {
    if (Array.isArray(s.configTypes) && s.configTypes.some((c: unknown) => typeof c === 'string' && newId.has(c))) sessions.push(s.id);
  }
  const now = Date.now();
  // The data directory's own records (in a cluster, the replica's, before it follows etcd's log).
  await store.writeLocal((tx) => {
    for (const t of moves) {
      const old = tx.get('configTypes', t.name);
      if (!old || old.name !== t.name || tx.exists('configTypes', t.id)) continue;
      tx.delete('configTypes', t.name);
      tx.put('configTypes', { ...old, id: t.id, schema: structuredClone(t.schema), updatedAt: now });
      for (const cid of tx.idsByIndex('configs', 'configTypeId', t.name)) {
        const cfg = tx.get('configs', cid);
        if (cfg) tx.put('configs', { ...cfg, configTypeId: t.id });
      }
    }
    // Types whose id does not change (host.v2) still get their full schema, once, with the others.
    for (const t of BUILTIN_CONFIG_TYPES) {
      if (t.id !== t.name) continue;
      const rec = tx.get('configTypes', t.id);
      if (rec && rec.name === t.name) tx.put('configTypes', { ...rec, schema: structuredClone(t.schema), updatedAt: now });
    }
    for (const id of sessions) {
      const s = tx.get('apiSessions', id);
      if (!s || !Array.isArray(s.configTypes)) continue;
      tx.put('apiSessions', { ...s, configTypes: s.configTypes.map((c) => newId.get(c) ?? c) });
    }
  });
  return moves.length;
}
