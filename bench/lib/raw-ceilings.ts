/**
 * Ceilings a benchmark measures in its own run, on the same machine at the same moment and with
 * the same closed-loop driver as its figures, so that each figure can also be given as a ratio to
 * what the machine can do at all right now (these machines' speed drifts by 2× within a day):
 *
 *  - `trivialAnswer`: `GET /health/live` on the controller's own HTTPS listener with the same client
 *    — a constant answer through the same uWS listener and router, nothing else;
 *  - `lmdbCommit`: durable LMDB puts in a fresh environment opened as the store opens its own
 *    (no compression, overlappingSync off: each put resolves once synced), at the same
 *    concurrency, in a temp directory on the same file system as the controller's data;
 *  - `argon2Verify`: argon2id verifications with the controller's default cost, as many at a time
 *    as the controller has pool workers.
 *
 *   const c = await lmdbCommit({ concurrency: 16, durationMs: 3000 });
 *   ratio(create.okPerSec, c.perSec)   // 0.62
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { open } from 'lmdb';
import { hash, verify } from '@node-rs/argon2';
import type { HttpClient } from './http.js';
import { runLoad, type LoadResult } from './load.js';
import { progressBar } from './progress.js';
import { Recorder, round } from './stats.js';

export interface RawCeiling {
  what: string;
  concurrency: number;
  perSec: number;
  p50Ms: number;
  p99Ms: number;
  /** Per 500 ms bucket (performance.now() clock), like LoadResult.timeline. */
  timeline?: LoadResult['timeline'];
}

/** figure ÷ ceiling, 3 decimals; undefined when the ceiling is unknown or zero. */
export function ratio(figure: number | undefined, ceiling: number | undefined): number | undefined {
  if (figure === undefined || !ceiling || !Number.isFinite(figure)) return undefined;
  return round(figure / ceiling, 3);
}

/** A ratio for a table: `62%` (or `-`). */
export function pct(r: number | undefined): string {
  return r === undefined ? '-' : `${(r * 100).toFixed(r < 0.1 ? 1 : 0)}%`;
}

export async function trivialAnswer(client: HttpClient, concurrency: number, durationMs: number): Promise<RawCeiling> {
  const requests = [{ method: 'GET', path: '/health/live', headers: { accept: 'application/json' } }];
  await runLoad({ client, concurrency, requests, durationMs: Math.min(500, durationMs) });
  const r = await runLoad({ client, concurrency, requests, durationMs, label: `ceiling: trivial answer c=${concurrency}` });
  if (r.ok === 0) throw new Error(`trivial answer ceiling: no 2xx (${JSON.stringify(r.errors)})`);
  return { what: 'GET /health/live on the same listener and client', concurrency, perSec: r.okPerSec, p50Ms: r.latency.p50, p99Ms: r.latency.p99, timeline: r.timeline };
}

/** Closed loop of `concurrency` workers calling `op` until the deadline. */
async function closedLoop(label: string, concurrency: number, durationMs: number, op: (i: number) => Promise<unknown>) {
  const rec = new Recorder();
  const timeline: NonNullable<RawCeiling['timeline']> = [];
  const start = performance.now();
  const deadline = start + durationMs;
  const bar = progressBar(label, { durationMs });
  let n = 0;
  let completed = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < deadline) {
        const t0 = performance.now();
        await op(n++);
        const t1 = performance.now();
        rec.add(t1 - t0);
        const t = start + Math.floor((t1 - start) / 500) * 500;
        const b = timeline[timeline.length - 1];
        if (b?.t === t) b.ok++;
        else timeline.push({ t, ok: 1, failed: 0 });
        bar.update(++completed);
      }
    }),
  );
  bar.done();
  const s = rec.summary();
  return { perSec: round((s.count / (performance.now() - start)) * 1000, 1), p50Ms: s.p50, p99Ms: s.p99, timeline };
}

/**
 * Durable LMDB writes at `concurrency`; with `batch` > 1 each operation is one transaction of that
 * many values (as a `_bulk` request is), and `perSec` counts values.
 */
export async function lmdbCommit(opts: { concurrency: number; durationMs: number; valueBytes?: number; batch?: number }): Promise<RawCeiling> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-bench-lmdb-'));
  const env = open({ path: dir, maxDbs: 4, mapSize: 1024 ** 3, compression: false, overlappingSync: false });
  const db = env.openDB<Buffer, string>({ name: 'raw', encoding: 'binary' });
  const value = Buffer.alloc(opts.valueBytes ?? 600, 7);
  // Keys that grow with time, as the store's ids do.
  const key = (i: number) => `${Date.now().toString(36).padStart(10, '0')}-${i.toString(36).padStart(8, '0')}`;
  try {
    for (let i = 0; i < 50; i++) await db.put(key(1e9 + i), value);
    const batch = opts.batch ?? 1;
    if (batch === 1) {
      const r = await closedLoop(`ceiling: durable LMDB put c=${opts.concurrency}`, opts.concurrency, opts.durationMs, (i) => db.put(key(i), value));
      return { what: `durable LMDB put (${value.length} B, overlappingSync off), ${opts.concurrency} at a time`, concurrency: opts.concurrency, ...r };
    }
    const r = await closedLoop(`ceiling: durable LMDB batches c=${opts.concurrency}`, opts.concurrency, opts.durationMs, (i) =>
      db.transaction(() => {
        for (let j = 0; j < batch; j++) db.put(key(i * batch + j), value);
      }),
    );
    return { what: `durable LMDB transactions of ${batch} values (${value.length} B each), ${opts.concurrency} at a time`, concurrency: opts.concurrency, ...r, perSec: round(r.perSec * batch, 1) };
  } finally {
    await env.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export async function argon2Verify(opts: { concurrency: number; durationMs: number; memoryCost?: number; timeCost?: number }): Promise<RawCeiling> {
  const cost = { algorithm: 2, memoryCost: opts.memoryCost ?? 19456, timeCost: opts.timeCost ?? 2, parallelism: 1 };
  const phc = await hash('bench-user-password', cost);
  const r = await closedLoop(`ceiling: argon2id verify c=${opts.concurrency}`, opts.concurrency, opts.durationMs, () => verify(phc, 'bench-user-password'));
  return { what: `argon2id verify (m=${cost.memoryCost} KiB, t=${cost.timeCost}), ${opts.concurrency} at a time in this process`, concurrency: opts.concurrency, ...r };
}
