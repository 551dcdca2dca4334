/**
 * What the alert checks (alert-structural.ts, alert-expiry.ts) hand to the alert writer
 * (alerts.ts), and the pacing they share.
 *
 * A check family reports `Findings`: the conditions present now, as a lazy sequence (a document is
 * only built, and records only read, for a condition that is new), and `holds(key)` to ask
 * whether a condition raised earlier is still present, so that no scan has to spell out every
 * present condition's key (a misconfigured large model can have millions of identity/service
 * pairs without a shared edge router).
 */
import { performance } from 'node:perf_hooks';

export interface Alert {
  key: string;
  alert_type: string;
  event_source_type: string;
  event_source_id: string;
  event_source_name?: string;
  severity: 'info' | 'warning' | 'error';
  message: string;
  logs: string[];
}

export interface Condition {
  key: string;
  /** The document; undefined when the condition vanished meanwhile (e.g. an enrollment used). */
  alert(): Alert | undefined;
}

export interface Findings {
  /** Key prefix of this family's conditions (`no-terminators:`, …). */
  prefix: string;
  /** Every condition present now, in a stable order (iterable more than once). */
  conditions: Iterable<Condition>;
  /** Whether the condition with this key (of this family) is present now. */
  holds(key: string): boolean;
  /** How many conditions are present (for logs). */
  count: number;
}

/**
 * Cooperative slicing: loops call `if (pace.due()) await pace.yield()`, which gives the event loop
 * a turn once the current slice has run `sliceMs`, so API requests wait at most about that long
 * behind a scan. The clock is read every 64 units of work (`due(weight)` for heavier steps), and
 * `busyMs` adds up the slices: the scan's own cost, without the time spent waiting between slices.
 */
export class Pacer {
  busyMs = 0;
  private work = 0;
  /** Start of the current slice; undefined once closed (`finish`). */
  private sliceStart: number | undefined = performance.now();

  constructor(private readonly sliceMs = 1) {}

  due(weight = 1): boolean {
    this.work += weight;
    if (this.work < 64) return false;
    this.work = 0;
    return performance.now() - (this.sliceStart ?? performance.now()) >= this.sliceMs;
  }

  async yield(): Promise<void> {
    this.finish();
    await new Promise<void>((r) => setImmediate(r));
    this.sliceStart = performance.now();
  }

  /** Close the current slice (before waiting on I/O, which is not the scan's work); returns the total busy time (ms). */
  finish(): number {
    if (this.sliceStart !== undefined) this.busyMs += performance.now() - this.sliceStart;
    this.sliceStart = undefined;
    return this.busyMs;
  }
}

/** Findings whose present conditions are few and known up front (a set of their keys answers `holds`). */
export function listed(prefix: string, conditions: Condition[]): Findings {
  const keys = new Set(conditions.map((c) => c.key));
  return { prefix, conditions, holds: (key) => keys.has(key), count: conditions.length };
}
