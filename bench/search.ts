/**
 * bench:search — the embedded search store: `_bulk` ingest throughput of firewall usage (also as a
 * ratio to durable LMDB transactions of the same size measured in the same run) and the latency of
 * the top-talkers query. `--help` lists the flags. Writes bench/results/search-<ts>.json and .svg.
 */
import path from 'node:path';
import { createClient, type HttpClient } from './lib/http.js';
import { spawnController, ROOT } from './lib/controller.js';
import { machineInfo, table, fmt, writeResults } from './lib/report.js';
import { Recorder } from './lib/stats.js';
import { parseCli, intFlag, choiceFlag } from './lib/cli.js';
import { progressBar } from './lib/progress.js';
import { lmdbCommit, ratio, pct } from './lib/raw-ceilings.js';
import { RunChart } from './lib/run-chart.js';
import type { TimelineBucket } from './lib/load.js';

const PASSWORD = 'bench-admin-password';
const argv = parseCli({
  name: 'bench:search',
  summary: `the embedded search store against the real controller.
Spawns node dist/src/main.js with a fresh data directory, ingests N usage documents (50 firewalls, 2,000
source addresses, timestamps spread over the last 48 hours, so half fall in the query's 24-hour window)
with C concurrent _bulk senders of B documents each, then runs the top-talkers query (by tx, size 0) Q
times one after another and Q times C at a time, and a newest-10-hits query.
Ceiling of the same run: durable LMDB transactions of B documents' size at C concurrent (ingest). The
queries are aggregations over half the documents: their figure is the time, with no ceiling.`,
  usage: ['npm run bench:search -- --docs 200000', 'npm run bench:search -- --docs 1000000 --batch 1000 --concurrency 4 --queries 20', 'npm run bench:search -- --docs 5000 --queries 3   # a smoke run'],
  flags: {
    docs: { type: 'string', default: '200000', help: 'documents to ingest' },
    batch: { type: 'string', default: '1000', arg: 'B', help: 'documents per _bulk request' },
    concurrency: { type: 'string', default: '4', arg: 'C', help: 'concurrent _bulk senders and concurrent queries' },
    queries: { type: 'string', default: '20', arg: 'Q', help: 'queries per measure' },
    client: { type: 'string', arg: 'undici|https', help: 'HTTP client (default undici when installed, else node:https)' },
  },
});
const N = intFlag(argv, 'docs', 1, 100_000_000);
const B = intFlag(argv, 'batch', 1, 100_000);
const C = intFlag(argv, 'concurrency', 1, 256);
const Q = intFlag(argv, 'queries', 1, 100_000);
const KIND = choiceFlag(argv, 'client', ['undici', 'https'] as const);

const topTalkers = JSON.stringify({
  query: { bool: { filter: [{ range: { '@timestamp': { format: 'strict_date_optional_time', gte: 'now-24h', lte: 'now' } } }] } },
  aggs: {
    firewalls: {
      terms: { field: 'zfw.source_id.keyword', order: { tx: 'desc' }, size: 10 },
      aggs: {
        tx: { sum: { field: 'zfw.usage.circuit.tx' } },
        sources: { terms: { field: 'zfw.saddr.keyword', order: { tx: 'desc' }, size: 10 }, aggs: { tx: { sum: { field: 'zfw.usage.circuit.tx' } }, rx: { sum: { field: 'zfw.usage.circuit.rx' } } } },
      },
    },
  },
  size: 0,
});
const newest = JSON.stringify({ query: { range: { '@timestamp': { gte: 'now-1h' } } }, sort: [{ '@timestamp': 'desc' }], size: 10 });

function bulkBody(start: number, count: number, now: number): Buffer {
  let s = '';
  for (let i = start; i < start + count; i++) {
    const ts = new Date(now - Math.floor((i / N) * 48 * 3_600_000)).toISOString();
    s += '{"index":{"_index":"zfw.events"}}\n';
    s += JSON.stringify({
      '@timestamp': ts,
      zfw: { source_id: `fw-${i % 50}`, saddr: `10.${(i * 7) % 8}.${(i * 13) % 250}.${i % 5}`, daddr: `192.0.2.${i % 200}`, dport: [22, 53, 80, 443][i % 4], iface: 'eth0', direction: i % 2 ? 'egress' : 'ingress', usage: { circuit: { tx: (i * 37) % 10_000, rx: (i * 91) % 20_000 } } },
    }) + '\n';
  }
  return Buffer.from(s);
}

async function timeQueries(client: HttpClient, headers: Record<string, string>, body: string, count: number, parallel: number, label?: string) {
  const rec = new Recorder();
  const bar = label ? progressBar(label, { total: count }) : undefined;
  let next = 0;
  let failures = 0;
  const spec = { method: 'GET', path: '/search/zfw.events*/_search', headers, body: Buffer.from(body) };
  const started = performance.now();
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      while (next++ < count) {
        const t0 = performance.now();
        const r = await client.request(spec);
        rec.add(performance.now() - t0);
        bar?.update(rec.count);
        if (r.status !== 200) failures++;
      }
    }),
  );
  bar?.done();
  return { ...rec.summary(), failures, perSec: (count / (performance.now() - started)) * 1000 };
}

async function main() {
  const started = new Date();
  const ctl = await spawnController({ password: PASSWORD, env: { MESH_MAX_BODY_BYTES: String(4 * 1024 * 1024) } });
  const client = await createClient({ origin: ctl.origin, ca: ctl.ca, connections: C, kind: KIND });
  const chart = new RunChart(ctl.pid);
  try {
    const docBytes = Math.round(bulkBody(0, 100, Date.now()).length / 100);
    const disk = await lmdbCommit({ concurrency: C, durationMs: 3000, batch: B, valueBytes: docBytes });
    chart.add('ceiling: LMDB transactions (documents)', disk.timeline?.map((b) => ({ ...b, ok: b.ok * B })));
    const auth = 'Basic ' + Buffer.from(`admin:${PASSWORD}`).toString('base64');
    const ndjson = { authorization: auth, 'content-type': 'application/x-ndjson' };
    const now = Date.now();
    const ingest = new Recorder();
    let sent = 0;
    let errors = 0;
    const t0 = performance.now();
    const bar = progressBar('ingest', { total: N });
    const timeline: TimelineBucket[] = [];
    await Promise.all(
      Array.from({ length: C }, async () => {
        for (;;) {
          const start = sent;
          if (start >= N) return;
          const count = Math.min(B, N - start);
          sent += count;
          const body = bulkBody(start, count, now);
          const t = performance.now();
          const r = await client.request({ method: 'POST', path: '/search/_bulk', headers: ndjson, body, wantBody: true });
          ingest.add(performance.now() - t);
          const bucket = t0 + Math.floor((performance.now() - t0) / 500) * 500;
          if (timeline[timeline.length - 1]?.t !== bucket) timeline.push({ t: bucket, ok: 0, failed: 0 });
          timeline[timeline.length - 1].ok += count;
          bar.update(sent);
          if (r.status !== 200 || JSON.parse(r.body!.toString()).errors) errors++;
        }
      }),
    );
    bar.done();
    const ingestSec = (performance.now() - t0) / 1000;
    chart.add('ingest (documents)', timeline);
    const ingestRatio = ratio(N / ingestSec, disk.perSec);
    const json = { authorization: auth, 'content-type': 'application/json' };
    await timeQueries(client, json, topTalkers, 2, 1); // warm the worker threads
    const serial = await timeQueries(client, json, topTalkers, Q, 1, 'top talkers, 1 at a time');
    const loaded = await timeQueries(client, json, topTalkers, Q, C, `top talkers, ${C} at a time`);
    const hits = await timeQueries(client, json, newest, Q, 1, 'newest hits');
    const chartFile = chart.write('search', `bench:search — ${N} documents`, started);
    const mem = ctl.memory();
    const ing = ingest.summary();
    console.log(`\nsearch store: ${N} documents, _bulk batches of ${B}, ${C} senders\n`);
    console.log(table(['measure', 'value'], [
      ['ingest docs/s', fmt(N / ingestSec, 0)],
      ['ceiling: durable LMDB transactions, docs/s', `${fmt(disk.perSec, 0)} (${B} × ${docBytes} B each, ${C} at a time)`],
      ['ingest ÷ ceiling', pct(ingestRatio)],
      ['ingest batch p50 ms', fmt(ing.p50)],
      ['ingest batch p99 ms', fmt(ing.p99)],
      ['ingest failed batches', errors],
    ]));
    console.log('');
    console.log(table(['query', 'p50 ms', 'p95 ms', 'max ms', 'queries/s', 'failures'], [
      ['top talkers (24h of 48h), 1 at a time', fmt(serial.p50), fmt(serial.p95), fmt(serial.max), fmt(serial.perSec, 1), serial.failures],
      [`top talkers, ${C} at a time`, fmt(loaded.p50), fmt(loaded.p95), fmt(loaded.max), fmt(loaded.perSec, 1), loaded.failures],
      ['newest 10 hits (last hour)', fmt(hits.p50), fmt(hits.p95), fmt(hits.max), fmt(hits.perSec, 1), hits.failures],
    ]));
    console.log(`\ncontroller RSS ${mem ? (mem.rssKiB / 1024).toFixed(0) : '-'} MiB (peak ${mem ? (mem.hwmKiB / 1024).toFixed(0) : '-'} MiB)`);
    const file = writeResults('search', { bench: 'search', startedAt: started.toISOString(), machine: machineInfo(), docs: N, batch: B, concurrency: C, queries: Q, ceilings: { lmdbTransactions: { ...disk, timeline: undefined } }, chart: path.relative(ROOT, chartFile), ingest: { docsPerSec: N / ingestSec, ratioToLmdb: ingestRatio, batch: ing, failedBatches: errors }, topTalkers: { serial, loaded }, newestHits: hits, memory: mem }, started);
    console.log(`results: ${path.relative(ROOT, file)}; chart: ${path.relative(ROOT, chartFile)}`);
  } finally {
    await client.close();
    await ctl.stop();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
