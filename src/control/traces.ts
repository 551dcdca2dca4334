/**
 * Identity data-flow tracing (`PUT /identities/{id}/trace`). The spec is stored on the identity
 * record (`trace: {enabled, traceId, until, channels}`, so it survives a restart); this registry keeps
 * the ones in force in memory, follows store change events, and tells the control channel when a
 * spec changes so connected routers start or stop tracing that identity's flows at once.
 *
 * Example: `traces.get(identityId)` → the spec in force, or undefined once disabled or expired.
 */
import { EventEmitter } from 'node:events';
import type { ChangeEvent, Rec, Store } from '../store/store.js';
import type { TraceSpec } from './protocol.js';

/** As stored on the identity record. */
export interface StoredTrace {
  enabled: boolean;
  traceId: string;
  /** Epoch ms. */
  until: number;
  channels: string[];
}

function traceSpec(identityId: string, t: StoredTrace, now = Date.now()): TraceSpec {
  return { identityId, enabled: t.enabled && t.until > now, traceId: t.traceId, until: new Date(t.until).toISOString(), channels: [...t.channels] };
}

export class Traces extends EventEmitter<{ change: [TraceSpec] }> {
  private readonly active = new Map<string, StoredTrace>();
  private expiryTimer?: NodeJS.Timeout;

  constructor(store: Store) {
    super();
    // Only identities whose enabled trace runs past now (the traceUntil index): a start decodes
    // no other identity record, nor maps its pages.
    for (const id of store.idsByRange('identities', 'traceUntil', { start: Date.now() })) {
      const rec = store.get('identities', id);
      if (rec) this.remember(rec);
    }
    store.on('change', (events: ChangeEvent[]) => {
      for (const ev of events) {
        if (ev.collection !== 'identities') continue;
        const before = ev.before?.trace as StoredTrace | undefined;
        const after = ev.after?.trace as StoredTrace | undefined;
        if (sameTrace(before, after)) continue;
        this.active.delete(ev.id);
        if (ev.after) this.remember(ev.after);
        if (after || before) this.emit('change', traceSpec(ev.id, after ?? { ...before!, enabled: false }));
      }
    });
    // Expired traces leave the registry and routers are told (one timer for all of them).
    this.expiryTimer = setInterval(() => this.expire(), 1000);
    this.expiryTimer.unref();
  }

  private remember(rec: Rec) {
    const t = rec.trace as StoredTrace | undefined;
    if (t?.enabled && t.until > Date.now()) this.active.set(rec.id, t);
  }

  private expire(now = Date.now()) {
    for (const [id, t] of this.active) {
      if (t.until <= now) {
        this.active.delete(id);
        this.emit('change', traceSpec(id, t, now));
      }
    }
  }

  /** The spec in force for an identity, if any. */
  get(identityId: string): TraceSpec | undefined {
    const t = this.active.get(identityId);
    return t && t.until > Date.now() ? traceSpec(identityId, t) : undefined;
  }

  /** Every spec in force (sent to a router when it connects). */
  list(): TraceSpec[] {
    const now = Date.now();
    const out: TraceSpec[] = [];
    for (const [id, t] of this.active) if (t.until > now) out.push(traceSpec(id, t, now));
    return out;
  }

  close() {
    clearInterval(this.expiryTimer);
  }
}

function sameTrace(a: StoredTrace | undefined, b: StoredTrace | undefined): boolean {
  if (!a || !b) return a === b;
  return a.enabled === b.enabled && a.traceId === b.traceId && a.until === b.until && a.channels.join('\0') === b.channels.join('\0');
}
