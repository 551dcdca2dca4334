/**
 * Closed-loop load generation: `concurrency` workers, each sending its next request as soon as
 * the previous one answered, until a request count or a deadline is reached. Requests come from
 * a pre-built list (cycled), so the timed loop allocates nothing of its own beyond what the HTTP
 * client needs. Every non-2xx answer counts as an error, by status; transport failures count by
 * their error code.
 *
 *   const r = await runLoad({ client, concurrency: 16, durationMs: 5000, requests: [spec] });
 *   r.rps, r.latency.p99, r.errors   // e.g. 5210, 4.1, { '500': 2 }
 */
import { performance } from 'node:perf_hooks';
import type { HttpClient, HttpResult, RequestSpec } from './http.js';
import { Recorder, round, type LatencySummary } from './stats.js';
import { progressBar } from './progress.js';

/** Answers per time bucket, for charts: `t` is the bucket's start on the performance.now() clock. */
export interface TimelineBucket { t: number; ok: number; failed: number }
export const BUCKET_MS = 500;

export interface LoadOptions {
  client: HttpClient;
  concurrency: number;
  /** Pre-built requests; request i uses requests[i % length]. */
  requests: RequestSpec[];
  /** Stop after this many requests in total ... */
  count?: number;
  /** ... and/or when this much time has passed (at least one of the two is required). */
  durationMs?: number;
  /** Called with every answer (2xx or not), e.g. to collect created ids. Keep it cheap. */
  onResult?: (i: number, result: HttpResult) => void;
  /** Progress callback every `progressMs` (default 5 s). */
  onProgress?: (done: number, elapsedMs: number) => void;
  progressMs?: number;
  /** Give up after this many transport errors (default 100): the server is probably gone. */
  maxTransportErrors?: number;
  /** Name of the phase: shows a progress bar on a terminal while it runs. */
  label?: string;
}

export interface LoadResult {
  requests: number;
  ok: number;
  /** status (or transport error code) → count; only failures. */
  errors: Record<string, number>;
  elapsedMs: number;
  /** Completed requests per second (all statuses). */
  rps: number;
  /** 2xx per second. */
  okPerSec: number;
  /** Latency of every completed request, in ms. */
  latency: LatencySummary;
  /** Mean response body size. */
  meanBytes: number;
  /** Answers per 500 ms, in order (for the run's chart). */
  timeline: TimelineBucket[];
  aborted?: string;
}

export async function runLoad(opts: LoadOptions): Promise<LoadResult> {
  if (opts.count === undefined && opts.durationMs === undefined) throw new Error('runLoad needs a count or a duration');
  if (opts.requests.length === 0) throw new Error('runLoad needs at least one request');
  const { client, requests, onResult } = opts;
  const count = opts.count ?? Infinity;
  const maxTransport = opts.maxTransportErrors ?? 100;
  const rec = new Recorder(Number.isFinite(count) ? Math.min(count, 1 << 22) : 1 << 16);
  const statusErrors = new Map<number, number>();
  const transportErrors = new Map<string, number>();
  let transportTotal = 0;
  let issued = 0;
  let done = 0;
  let ok = 0;
  let bytes = 0;
  let aborted: string | undefined;

  const start = performance.now();
  const deadline = opts.durationMs === undefined ? Infinity : start + opts.durationMs;
  const progressMs = opts.progressMs ?? 5000;
  const progress = opts.onProgress
    ? setInterval(() => opts.onProgress!(done, performance.now() - start), progressMs)
    : undefined;
  const bar = opts.label ? progressBar(opts.label, { total: Number.isFinite(count) ? count : undefined, durationMs: opts.durationMs }) : undefined;
  const timeline: TimelineBucket[] = [];
  const tick = (isOk: boolean) => {
    const t = start + Math.floor((performance.now() - start) / BUCKET_MS) * BUCKET_MS;
    let b = timeline[timeline.length - 1];
    if (!b || b.t !== t) timeline.push((b = { t, ok: 0, failed: 0 }));
    if (isOk) b.ok++;
    else b.failed++;
  };

  const worker = async () => {
    for (;;) {
      if (aborted !== undefined || issued >= count) return;
      const t0 = performance.now();
      if (t0 >= deadline) return;
      const i = issued++;
      const spec = requests[i % requests.length];
      try {
        const r = await client.request(spec);
        rec.add(performance.now() - t0);
        done++;
        bytes += r.bytes;
        const good = r.status >= 200 && r.status < 300;
        if (good) ok++;
        else statusErrors.set(r.status, (statusErrors.get(r.status) ?? 0) + 1);
        tick(good);
        bar?.update(done);
        if (onResult) onResult(i, r);
      } catch (e) {
        const code = (e as { code?: string }).code ?? (e as Error).name ?? 'ERROR';
        transportErrors.set(code, (transportErrors.get(code) ?? 0) + 1);
        tick(false);
        if (++transportTotal >= maxTransport) aborted = `${transportTotal} transport errors, last: ${(e as Error).message}`;
      }
    }
  };

  try {
    await Promise.all(Array.from({ length: opts.concurrency }, worker));
  } finally {
    if (progress) clearInterval(progress);
    bar?.done();
  }
  const elapsedMs = performance.now() - start;
  const errors: Record<string, number> = {};
  for (const [s, n] of statusErrors) errors[String(s)] = n;
  for (const [c, n] of transportErrors) errors[c] = n;
  return {
    requests: done + transportTotal,
    ok,
    errors,
    elapsedMs: round(elapsedMs, 1),
    rps: round((done / elapsedMs) * 1000, 1),
    okPerSec: round((ok / elapsedMs) * 1000, 1),
    latency: rec.summary(),
    meanBytes: done ? Math.round(bytes / done) : 0,
    timeline,
    ...(aborted ? { aborted } : {}),
  };
}

/** Merge error maps (e.g. to total every phase). */
export function mergeErrors(into: Record<string, number>, from: Record<string, number>): Record<string, number> {
  for (const [k, v] of Object.entries(from)) into[k] = (into[k] ?? 0) + v;
  return into;
}
