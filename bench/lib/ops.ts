/**
 * Operation statistics over a run, for benchmarks that mix several kinds of operation (the fleet):
 * per operation, every latency (exact percentiles), errors by code, and one-second buckets for the
 * timeline (throughput and latency over the run, for the chart). Plus the closed-loop driver that
 * every phase and every ceiling uses, so figures compare like with like.
 *
 *   const stats = new OpStats();
 *   await runClosedLoop({ concurrency: 32, durationMs: 10_000 }, async () => {
 *     const t0 = performance.now();
 *     const r = await client.request(spec);
 *     stats.record('services', t0, performance.now(), r.status === 200 ? undefined : String(r.status));
 *   });
 *   stats.summary().services.latencyMs.p99
 */
import { performance } from 'node:perf_hooks';
import { Recorder, percentile, round, type LatencySummary } from './stats.js';

export interface OpSummary {
  count: number;
  ok: number;
  errors: Record<string, number>;
  /** Successful operations per second over the time this operation was being run. */
  okPerSec: number;
  activeMs: number;
  latencyMs: LatencySummary;
}

export interface TimelinePoint {
  /** Seconds since the stats started (bucket start). */
  t: number;
  ops: Record<string, { ok: number; errors: number; p50: number; p99: number }>;
}

interface OpData {
  rec: Recorder;
  ok: number;
  errors: Map<string, number>;
  first: number;
  last: number;
}

export class OpStats {
  readonly t0: number;
  private readonly ops = new Map<string, OpData>();
  /** bucket index → op → latencies (ms) and error count. */
  private readonly buckets: Map<string, { lat: number[]; errors: number }>[] = [];

  constructor(readonly bucketMs = 1000, t0 = performance.now()) {
    this.t0 = t0;
  }

  /** One finished operation: `error` is its code (`'500'`, `'501 NOT_IMPLEMENTED'`, `'ETIMEDOUT'`), undefined when it succeeded. */
  record(op: string, startMs: number, endMs: number, error?: string): void {
    let d = this.ops.get(op);
    if (!d) this.ops.set(op, (d = { rec: new Recorder(1 << 12), ok: 0, errors: new Map(), first: startMs, last: endMs }));
    const ms = endMs - startMs;
    d.rec.add(ms);
    d.first = Math.min(d.first, startMs);
    d.last = Math.max(d.last, endMs);
    if (error === undefined) d.ok++;
    else d.errors.set(error, (d.errors.get(error) ?? 0) + 1);
    const bi = Math.max(0, Math.floor((endMs - this.t0) / this.bucketMs));
    while (this.buckets.length <= bi) this.buckets.push(new Map());
    let b = this.buckets[bi].get(op);
    if (!b) this.buckets[bi].set(op, (b = { lat: [], errors: 0 }));
    if (error === undefined) b.lat.push(ms);
    else b.errors++;
  }

  names(): string[] {
    return [...this.ops.keys()];
  }

  summary(): Record<string, OpSummary> {
    const out: Record<string, OpSummary> = {};
    for (const [name, d] of this.ops) {
      const activeMs = Math.max(1, d.last - d.first);
      out[name] = {
        count: d.rec.count,
        ok: d.ok,
        errors: Object.fromEntries(d.errors),
        okPerSec: round((d.ok / activeMs) * 1000, 1),
        activeMs: round(activeMs, 0),
        latencyMs: d.rec.summary(),
      };
    }
    return out;
  }

  /** Every error of every operation: `op: code` → count. */
  errors(): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [name, d] of this.ops) for (const [code, n] of d.errors) out[`${name}: ${code}`] = n;
    return out;
  }

  timeline(): TimelinePoint[] {
    return this.buckets.map((b, i) => {
      const ops: TimelinePoint['ops'] = {};
      for (const [op, { lat, errors }] of b) {
        const sorted = Float64Array.from(lat).sort();
        ops[op] = {
          ok: lat.length,
          errors,
          p50: sorted.length ? round(percentile(sorted, 50)) : NaN,
          p99: sorted.length ? round(percentile(sorted, 99)) : NaN,
        };
      }
      return { t: round((i * this.bucketMs) / 1000, 3), ops };
    });
  }
}

export interface LoopOptions {
  concurrency: number;
  /** Stop starting new operations after this long ... */
  durationMs?: number;
  /** ... or after this many (at least one of the two). */
  count?: number;
  /** Stop early when this returns true (e.g. too many transport errors). */
  stop?: () => boolean;
}

/**
 * Closed loop: `concurrency` workers each start their next operation as soon as the previous one
 * finished. `op(i)` gets a running index; it records its own outcome (in an OpStats) and should not
 * throw — a throw stops the loop and rejects.
 */
export async function runClosedLoop(opts: LoopOptions, op: (i: number, worker: number) => Promise<void>): Promise<{ started: number; elapsedMs: number }> {
  if (opts.durationMs === undefined && opts.count === undefined) throw new Error('runClosedLoop needs a duration or a count');
  const t0 = performance.now();
  const deadline = opts.durationMs === undefined ? Infinity : t0 + opts.durationMs;
  const count = opts.count ?? Infinity;
  let started = 0;
  const worker = async (w: number) => {
    while (started < count && performance.now() < deadline && !opts.stop?.()) await op(started++, w);
  };
  await Promise.all(Array.from({ length: Math.max(1, opts.concurrency) }, (_, w) => worker(w)));
  return { started, elapsedMs: performance.now() - t0 };
}

/** `'501 NOT_IMPLEMENTED'`-style code of an HTTP answer from its status and (JSON) error body. */
export function errorCode(status: number, body?: Buffer | string): string {
  let code = '';
  if (body && body.length) {
    try {
      code = JSON.parse(body.toString())?.error?.code ?? '';
    } catch {
      code = '';
    }
  }
  return code ? `${status} ${code}` : String(status);
}

/** Transport failure code (`ETIMEDOUT`, `ECONNRESET`, …). */
export function transportCode(e: unknown): string {
  return (e as { code?: string }).code ?? (e as Error).name ?? 'ERROR';
}

/** Whether an error code fails a run by itself: 5xx, timeouts and dropped connections. */
export function isFatal(code: string): boolean {
  return /^5\d\d/.test(code) || !/^\d{3}/.test(code);
}

/** Anything that takes operation outcomes (an OpStats, or several at once through `tee`). */
export interface OpSink {
  record(op: string, startMs: number, endMs: number, error?: string): void;
}

/** Record into every sink (e.g. the whole run's stats and the current phase's). */
export function tee(...sinks: OpSink[]): OpSink {
  return { record: (op, s, e, err) => sinks.forEach((x) => x.record(op, s, e, err)) };
}
