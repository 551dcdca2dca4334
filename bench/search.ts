/**
 * bench/search — the embedded search store (issue 7): `_bulk` ingest throughput of firewall usage
 * and the latency of the seed's top-talkers query against the real controller.
 *
 *   npm run build && node dist/bench/search.js                       # 200,000 documents
 *   node dist/bench/search.js --docs 1000000 --batch 1000 --concurrency 4 --queries 20
 *
 * Spawns `node dist/src/main.js` with a fresh data directory, ingests N usage documents (50
 * firewalls, 2,000 source addresses, timestamps spread evenly over the last 48 hours, so half fall
 * in the query's 24-hour window) with C concurrent `_bulk` senders of B documents each, then runs
 * the top-talkers query (by tx, `size: 0`) Q times one after another and Q times C at a time, and
 * a newest-10-hits query. Prints a table and writes bench/results/search-<ts>.json and search-latest.json.
 */
import { parseArgs } from 'node:util';
import { createClient, type HttpClient } from './lib/http.js';
import { spawnController } from './lib/controller.js';
import { machineInfo, table, fmt, writeResults } from './lib/report.js';
import { Recorder } from './lib/stats.js';

const PASSWORD = 'bench-admin-password';
const { values: argv } = parseArgs({
  options: {
    docs: { type: 'string' },
    batch: { type: 'string' },
    concurrency: { type: 'string' },
    queries: { type: 'string' },
    client: { type: 'string' },
  },
  strict: true,
});
const N = Number(argv.docs ?? process.env.BENCH_DOCS ?? 200_000);
const B = Number(argv.batch ?? 1000);
const C = Number(argv.concurrency ?? 4);
const Q = Number(argv.queries ?? 20);

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

async function timeQueries(client: HttpClient, headers: Record<string, string>, body: string, count: number, parallel: number) {
  const rec = new Recorder();
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
        if (r.status !== 200) failures++;
      }
    }),
  );
  return { ...rec.summary(), failures, perSec: (count / (performance.now() - started)) * 1000 };
}

async function main() {
  const ctl = await spawnController({ password: PASSWORD, env: { MESH_MAX_BODY_BYTES: String(4 * 1024 * 1024) } });
  const client = await createClient({ origin: ctl.origin, ca: ctl.ca, connections: C, kind: argv.client as 'undici' | 'https' | undefined });
  try {
    const auth = 'Basic ' + Buffer.from(`admin:${PASSWORD}`).toString('base64');
    const ndjson = { authorization: auth, 'content-type': 'application/x-ndjson' };
    const now = Date.now();
    const ingest = new Recorder();
    let sent = 0;
    let errors = 0;
    const t0 = performance.now();
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
          if (r.status !== 200 || JSON.parse(r.body!.toString()).errors) errors++;
        }
      }),
    );
    const ingestSec = (performance.now() - t0) / 1000;
    const json = { authorization: auth, 'content-type': 'application/json' };
    await timeQueries(client, json, topTalkers, 2, 1); // warm the worker threads
    const serial = await timeQueries(client, json, topTalkers, Q, 1);
    const loaded = await timeQueries(client, json, topTalkers, Q, C);
    const hits = await timeQueries(client, json, newest, Q, 1);
    const mem = ctl.memory();
    const ing = ingest.summary();
    console.log(`\nsearch store: ${N} documents, _bulk batches of ${B}, ${C} senders\n`);
    console.log(table(['measure', 'value'], [
      ['ingest docs/s', fmt(N / ingestSec, 0)],
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
    const file = writeResults('search', { machine: machineInfo(), docs: N, batch: B, concurrency: C, queries: Q, ingest: { docsPerSec: N / ingestSec, batch: ing, failedBatches: errors }, topTalkers: { serial, loaded }, newestHits: hits, memory: mem });
    console.log(`results: ${file}`);
  } finally {
    await client.close();
    await ctl.stop();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
