/**
 * Identities traced before the `traceUntil` index (src/control/traces.ts reads only that index at
 * start) carry their trace without the indexed field: this writes it beside each enabled trace, as
 * the trace operation now does, so a trace in force survives the upgrade. Idempotent.
 *
 *   const indexed = await indexTraces(store);   // identities rewritten
 */
import type { IdentityRecord, Store } from '../store/store.js';

const BATCH = 1000;

function withTraceUntil(r: IdentityRecord): IdentityRecord | undefined {
  const t = r.trace as { enabled?: unknown; until?: unknown } | undefined;
  if (t?.enabled !== true || typeof t.until !== 'number' || r.traceUntil === t.until) return undefined;
  return { ...r, traceUntil: t.until };
}

export async function indexTraces(store: Store): Promise<number> {
  const ids: string[] = [];
  for (const r of store.scan('identities')) if (withTraceUntil(r)) ids.push(r.id);
  for (let i = 0; i < ids.length; i += BATCH) {
    await store.write((tx) => {
      for (const id of ids.slice(i, i + BATCH)) {
        const cur = tx.get('identities', id);
        const next = cur && withTraceUntil(cur);
        if (next) tx.put('identities', next);
      }
    });
  }
  return ids.length;
}
