/**
 * Does a large answer stall everyone else? Seeds identities, measures a small request on the idle
 * controller, then measures it again while clients keep asking for the whole collection
 * (`limit=-1`) and for an unindexed filter over it; reports the small request's latency under that
 * load as a ratio to the idle one (same run, same machine), the large answers' latency and
 * throughput, how many were refused (429 RATE_LIMITED, by design beyond a few at once) and the
 * controller's peak RSS.
 *
 *   npm run bench:list-stall -- [--identities 5000] [--large 4] [--small 300] [--load-seconds 0]
 *
 * Small defaults finish in about a minute; the issue's case is `--identities 50000 --large 4`.
 * Prints a summary and writes bench/results/list-stall-<time>.json.
 */
import fs from 'node:fs';
import path from 'node:path';
import { spawnController, login, MGMT, ROOT } from './lib/controller.js';
import { createClient, requestJson, type HttpClient, type RequestSpec } from './lib/http.js';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { parseCli, intFlag } from './lib/cli.js';
import { writeResults } from './lib/report.js';
import { progressBar } from './lib/progress.js';

const argv = parseCli({
  name: 'bench:list-stall',
  summary: `Does a large answer stall everyone else? Seeds identities, measures a small request on the idle
controller, then again while clients keep asking for the whole collection and for an unindexed filter;
reports the small request's latency as a ratio to the idle one of the same run, the large answers'
latency and throughput, the 429s (by design beyond a few at once) and the controller's peak RSS.`,
  usage: ['npm run bench:list-stall', 'npm run bench:list-stall -- --identities 50000 --large 4'],
  flags: {
    'identities': { type: 'string', default: '5000', arg: 'N', help: 'identities to seed' },
    'large': { type: 'string', default: '4', arg: 'K', help: 'clients asking for large answers at once' },
    'small': { type: 'string', default: '300', arg: 'S', help: 'small requests measured idle and under load' },
    'load-seconds': { type: 'string', default: '0', arg: 'T', help: 'keep the load (and the small requests) going at least this long: the same window for runs to compare, so the large answers cut off at its end weigh the same in their throughput' },
    'node-args': { type: 'string', default: '', arg: 'FLAGS', help: 'node flags for the controller, e.g. "--trace-gc" or "--cpu-prof --cpu-prof-dir=DIR"; its output is then written beside the results' },
  },
}, isMainThread ? process.argv.slice(2) : []);
const IDENTITIES = intFlag(argv, 'identities', 1, 10000000);
const LARGE = intFlag(argv, 'large', 1, 64);
const SMALL = intFlag(argv, 'small', 10, 1000000);
const LOAD_MS = intFlag(argv, 'load-seconds', 0, 3600) * 1000;
const PASSWORD = 'bench-admin-password';

const q = (xs: number[], p: number) => {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))];
};
const stats = (xs: number[]) => ({ n: xs.length, p50Ms: +q(xs, 0.5).toFixed(2), p99Ms: +q(xs, 0.99).toFixed(2), maxMs: +q(xs, 1).toFixed(2) });

async function seed(client: HttpClient, h: Record<string, string>) {
  let next = 0;
  let done = 0;
  const bar = progressBar('seeding identities', { total: IDENTITIES });
  const worker = async () => {
    while (next < IDENTITIES) {
      const i = next++;
      const r = await requestJson(client, 'POST', `${MGMT}/identities`, h, { name: `stall-${i}`, type: 'User', isAdmin: false, roleAttributes: [`group-${i % 50}`], defaultHostingCost: i % 7 });
      if (r.status !== 201) throw new Error(`seed ${i}: ${r.status} ${JSON.stringify(r.body)}`);
      bar.update(++done);
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
  bar.done();
}

/** Latencies of `n` small requests one after another, and more until `minMs` have passed. */
async function smallLatencies(client: HttpClient, spec: RequestSpec, n: number, minMs = 0): Promise<number[]> {
  const out: number[] = [];
  const bar = progressBar('small requests', { total: n, durationMs: minMs });
  const start = performance.now();
  for (let i = 0; i < n || performance.now() - start < minMs; i++) {
    const t0 = performance.now();
    const r = await client.request(spec);
    if (r.status !== 200) throw new Error(`small request: ${r.status}`);
    out.push(performance.now() - t0);
    bar.update(i + 1);
  }
  bar.done();
  return out;
}

async function main() {
  const nodeArgs = String(argv['node-args'] ?? '').split(/\s+/).filter(Boolean);
  const ctl = await spawnController({ password: PASSWORD, nodeArgs });
  const setup = await createClient({ origin: ctl.origin, ca: ctl.ca, connections: 16 });
  const smallClient = await createClient({ origin: ctl.origin, ca: ctl.ca, connections: 1 });
  try {
    const token = await login(setup, 'admin', PASSWORD);
    const h = { 'zt-session': token, 'content-type': 'application/json' };
    const t0 = performance.now();
    await seed(setup, h);
    const seedS = (performance.now() - t0) / 1000;
    // The small request: one identity by id order, what a console or an SDK poll costs.
    const small: RequestSpec = { method: 'GET', path: `${MGMT}/identities?limit=1`, headers: { 'zt-session': token } };
    await smallLatencies(smallClient, small, 30); // warm-up
    const idle = await smallLatencies(smallClient, small, SMALL);

    const largeSpecs: RequestSpec[] = [
      { method: 'GET', path: `${MGMT}/identities?limit=-1`, headers: { 'zt-session': token } },
      { method: 'GET', path: `${MGMT}/identities?limit=-1&filter=${encodeURIComponent('isAdmin = false and name contains "1"')}`, headers: { 'zt-session': token } },
    ];
    // The large lists come from a worker thread: reading and decrypting their answers must not
    // delay this thread's small requests (that would be the client's stall, not the controller's).
    const cpu0 = ctl.mainThreadCpuMs();
    const load = new Worker(new URL(import.meta.url), { workerData: { origin: ctl.origin, ca: ctl.ca, specs: largeSpecs, loops: LARGE } });
    const loadDone = new Promise<{ large: number[]; largeBytes: number[]; refused: number; seconds: number }>((resolve, reject) => {
      load.once('message', resolve);
      load.once('error', reject);
    });
    await new Promise((r) => setTimeout(r, 300)); // let the large lists get going
    const loaded = await smallLatencies(smallClient, small, SMALL, LOAD_MS);
    load.postMessage('stop');
    const cpu1 = ctl.mainThreadCpuMs();
    const { large, largeBytes, refused, seconds } = await loadDone;
    await load.terminate();
    const mem = ctl.memory();
    const result = {
      identities: IDENTITIES,
      concurrentLargeLists: LARGE,
      seedSeconds: +seedS.toFixed(1),
      smallIdle: stats(idle),
      smallDuringLargeLists: stats(loaded),
      ratioP50: +(q(loaded, 0.5) / q(idle, 0.5)).toFixed(2),
      ratioP99: +(q(loaded, 0.99) / q(idle, 0.99)).toFixed(2),
      largeLists: {
        ...stats(large),
        refused429: refused,
        meanBytes: Math.round(largeBytes.reduce((a, b) => a + b, 0) / Math.max(1, largeBytes.length)),
        // Answers finished while the load ran, over its whole length (those cut off at the end count nothing).
        loadSeconds: +seconds.toFixed(1),
        mibPerSecond: +(largeBytes.reduce((a, b) => a + b, 0) / seconds / 2 ** 20).toFixed(2),
        // The controller's main thread over the load (small requests included): how busy, and its CPU per MiB answered.
        mainThreadBusy: cpu0 !== undefined && cpu1 !== undefined ? +((cpu1 - cpu0) / 1000 / seconds).toFixed(2) : undefined,
        mainThreadMsPerMiB: cpu0 !== undefined && cpu1 !== undefined ? +((cpu1 - cpu0) / (largeBytes.reduce((a, b) => a + b, 0) / 2 ** 20)).toFixed(1) : undefined,
      },
      controllerPeakRssMiB: mem ? Math.round(mem.hwmKiB / 1024) : undefined,
      at: new Date().toISOString(),
    };
    console.log(JSON.stringify(result, null, 2));
    const written = writeResults('list-stall', result);
    console.log(`results: ${path.relative(ROOT, written)}`);
    if (nodeArgs.length > 0) {
      await ctl.stop();
      const log = written.replace(/\.json$/, '.controller.log');
      fs.writeFileSync(log, ctl.output());
      console.log(`controller output: ${path.relative(ROOT, log)}`);
    }
  } finally {
    await Promise.all([setup.close(), smallClient.close()]);
    await ctl.stop();
  }
}

/** The worker: `loops` clients asking for large lists until told to stop; posts what it saw before the stop. */
async function loadWorker() {
  const { origin, ca, specs, loops } = workerData as { origin: string; ca: Buffer; specs: RequestSpec[]; loops: number };
  const client = await createClient({ origin, ca, connections: loops });
  const large: number[] = [];
  const largeBytes: number[] = [];
  let refused = 0;
  let stop = false;
  const start = performance.now();
  let seconds = 0;
  parentPort!.once('message', () => {
    stop = true;
    seconds = (performance.now() - start) / 1000;
  });
  await Promise.all(
    Array.from({ length: loops }, async (_, k) => {
      while (!stop) {
        const t = performance.now();
        const r = await client.request(specs[k % specs.length]);
        if (stop) break;
        if (r.status === 429) {
          refused++;
          // As a well-behaved client does: back off for the Retry-After the refusal names.
          await backOff((r.retryAfter ?? 1) * 1000, () => stop);
        } else if (r.status !== 200) throw new Error(`large list: ${r.status}`);
        else {
          large.push(performance.now() - t);
          largeBytes.push(r.bytes);
        }
      }
    }),
  );
  await client.close();
  parentPort!.postMessage({ large, largeBytes, refused, seconds });
}

/** Wait `ms`, or less if `stopped()` turns true meanwhile. */
async function backOff(ms: number, stopped: () => boolean) {
  const until = performance.now() + ms;
  while (!stopped() && performance.now() < until) await new Promise((r) => setTimeout(r, Math.min(100, until - performance.now())));
}

(isMainThread ? main() : loadWorker()).catch((e) => {
  console.error(e);
  process.exit(1);
});
