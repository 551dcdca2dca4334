/**
 * bench:routers — a fleet of simulated routers on the control channel (docs/router-protocol.md), as
 * a benchmark or as a long-running simulator (`--hold`). `--help` lists the phases, ceilings and
 * flags. Writes bench/results/router-sim-<ts>.json and .svg (and router-sim-latest.*).
 */
import fs from 'node:fs';
import { performance } from 'node:perf_hooks';
import path from 'node:path';
import { createClient, requestJson, type HttpClient } from './lib/http.js';
import { spawnController, login, MGMT, type ControllerProcess } from './lib/controller.js';
import { runLoad } from './lib/load.js';
import { machineInfo, table, fmt, writeResults } from './lib/report.js';
import { parseCli, intFlag, numFlag } from './lib/cli.js';
import { progressBar } from './lib/progress.js';
import { measureMtlsHandshake, type Ceiling } from './lib/ceilings.js';
import { trivialAnswer, ratio, pct, type RawCeiling } from './lib/raw-ceilings.js';
import { RunChart } from './lib/run-chart.js';
import { ROOT } from './lib/controller.js';
import { Recorder, round } from './lib/stats.js';
import { RouterClient } from './lib/router-client.js';
import { createAndEnroll, type EnrolledRouter } from './lib/router-enroll.js';

const argv = parseCli({
  name: 'bench:routers',
  summary: `simulated routers enrolling, connecting, heartbeating and churning on the control channel.
Phases (against a controller it spawns, or --controller):
 1. enroll   create N edge (and M transit) routers through the Management API and enroll each
             (erott/trott with fresh keys and CSRs), C at a time;
 2. connect  connect them all at once: handshake latency (hello → welcome), time until the API lists
             all of them isOnline=true; ceiling: raw node:tls mutual-TLS handshakes/s at the same
             number of connections at once, with a certificate of the controller's CA (spawned only);
 3. idle     controller CPU while N routers only heartbeat;
 4. detect   K routers go silent and K drop their TCP connection: time until the API shows each offline;
 5. churn    for S seconds, R routers per second reconnect while L clients list edge routers;
             ceiling: GET /health/live on the same listener at L clients.`,
  usage: [
    'npm run bench:routers                                   # 200 edge routers, spawned controller',
    'npm run bench:routers -- --routers 1000 --churn 20 --churn-rate 50',
    'npm run bench:routers -- --routers 20 --churn 2 --detect 2   # a smoke run',
    'node dist/bench/router-sim.js --hold --routers 50 --controller https://127.0.0.1:1280 --ca data/pki/ca-bundle.pem --password <admin password>',
  ],
  flags: {
    routers: { type: 'string', default: '200', help: 'edge routers' },
    transit: { type: 'string', default: '0', arg: 'M', help: 'transit routers' },
    concurrency: { type: 'string', default: '8', arg: 'C', help: 'enrollments in flight' },
    detect: { type: 'string', default: '10', arg: 'K', help: 'routers per detection case' },
    churn: { type: 'string', default: '10', arg: 'S', help: 'seconds of churn' },
    'churn-rate': { type: 'string', default: '20', arg: 'R', help: 'reconnects per second' },
    'list-concurrency': { type: 'string', default: '4', arg: 'L', help: 'concurrent list clients during churn' },
    'list-path': { type: 'string', arg: 'P', help: 'what they list (admin session) (default /edge/management/v1/edge-routers?limit=25)' },
    'heartbeat-ms': { type: 'string', default: '1000', arg: 'H', help: 'controller ping interval (spawned)' },
    'heartbeat-timeout-ms': { type: 'string', default: '3000', arg: 'T', help: 'silence before offline (spawned)' },
    controller: { type: 'string', arg: 'URL', help: 'use a running controller (with --ca and --password)' },
    ca: { type: 'string', arg: 'FILE', help: 'its CA bundle' },
    password: { type: 'string', arg: 'PW', help: 'its admin password' },
    username: { type: 'string', arg: 'NAME', help: 'its admin username (default admin)' },
    hold: { type: 'boolean', help: 'simulator mode: keep the routers online (reconnecting) until Ctrl-C' },
  },
});

const N = intFlag(argv, 'routers', 1, 100_000);
const M = intFlag(argv, 'transit', 0, 100_000);
const C = intFlag(argv, 'concurrency', 1, 256);
const K = Math.min(N, intFlag(argv, 'detect', 0, 10_000));
const churnS = numFlag(argv, 'churn', 0, 3600);
const churnRate = numFlag(argv, 'churn-rate', 0, 10_000);
const listConcurrency = intFlag(argv, 'list-concurrency', 1, 256);
const heartbeatMs = intFlag(argv, 'heartbeat-ms', 100, 60_000);
const heartbeatTimeoutMs = intFlag(argv, 'heartbeat-timeout-ms', 300, 300_000);
const listPath = (argv['list-path'] as string | undefined) ?? `${MGMT}/edge-routers?limit=25`;
const PASSWORD = (argv.password as string | undefined) ?? 'bench-admin-password';
const USERNAME = (argv.username as string | undefined) ?? 'admin';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function pool<T, R>(items: T[], concurrency: number, fn: (x: T, i: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i], i);
      }
    }),
  );
  return out;
}

interface SimRouter {
  r: EnrolledRouter;
  client: RouterClient;
}

async function main() {
  let ctl: ControllerProcess | undefined;
  let origin: string;
  let ca: Buffer;
  if (argv.controller) {
    if (!argv.ca || !argv.password) throw new Error('--controller needs --ca and --password');
    origin = String(argv.controller).replace(/\/$/, '');
    ca = fs.readFileSync(String(argv.ca));
  } else {
    ctl = await spawnController({
      password: PASSWORD,
      env: { MESH_ROUTER_HEARTBEAT_MS: String(heartbeatMs), MESH_ROUTER_HEARTBEAT_TIMEOUT_MS: String(heartbeatTimeoutMs), MESH_ENROLLMENT_MINUTES: '600' },
    });
    origin = ctl.origin;
    ca = ctl.ca;
  }
  const wsUrl = origin.replace(/^https:/, 'wss:') + '/ctrl/v1';
  const http: HttpClient = await createClient({ origin, ca, connections: Math.max(C, listConcurrency) + 2, kind: 'https' });
  const stopAll: (() => Promise<unknown>)[] = [];
  const started = new Date();
  const chart = new RunChart(ctl?.pid);
  try {
    const token = await login(http, USERNAME, PASSWORD);
    const H = { accept: 'application/json', 'zt-session': token };
    const stamp = Date.now().toString(36);

    // ---- 1. enroll --------------------------------------------------------------------------
    const specs = [
      ...Array.from({ length: N }, (_, i) => ({ name: `sim-er-${stamp}-${i}`, kind: 'edge' as const, hostname: `er${i}.sim.test`, roleAttributes: ['sim'] })),
      ...Array.from({ length: M }, (_, i) => ({ name: `sim-tr-${stamp}-${i}`, kind: 'transit' as const, hostname: `tr${i}.sim.test` })),
    ];
    process.stdout.write(`enrolling ${N} edge + ${M} transit routers (${C} at a time)…\n`);
    const t0 = performance.now();
    const enrollBar = progressBar('enroll routers', { total: specs.length });
    let enrolledCount = 0;
    const enrolled = await pool(specs, C, async (s) => {
      const r = await createAndEnroll(http, token, s);
      enrollBar.update(++enrolledCount);
      return r;
    });
    enrollBar.done();
    const enrollMs = performance.now() - t0;

    // Ceilings of this run: a raw mutual-TLS handshake at as many connections at once as the connect
    // phase opens (capped at 256), and a trivial answer at the churn phase's list concurrency.
    let tlsCeiling: Ceiling | undefined;
    if (ctl && !argv.hold) {
      const bar = progressBar('ceiling: raw mTLS handshakes', { durationMs: 3500 });
      tlsCeiling = await measureMtlsHandshake({ pkiDir: path.join(ctl.dataDir, 'pki'), durationMs: 3000, concurrency: Math.min(256, N + M) });
      bar.done();
    }
    const trivial: RawCeiling | undefined = argv.hold || churnS <= 0 ? undefined : await trivialAnswer(http, listConcurrency, Math.min(3000, churnS * 1000));
    chart.add('ceiling: trivial answer', trivial?.timeline);

    const make = (r: EnrolledRouter, i: number) =>
      new RouterClient({
        url: wsUrl,
        ca,
        certChain: r.certChain,
        key: r.keyPem,
        hostname: `${r.kind === 'edge' ? 'er' : 'tr'}${i}.sim.test`,
        protocols: r.kind === 'edge' ? { tls: `tls:${r.kind === 'edge' ? 'er' : 'tr'}${i}.sim.test:3022`, wss: `wss:er${i}.sim.test:3023` } : undefined,
        versionInfo: { os: 'linux', arch: 'amd64', version: 'v0.0.0-sim', revision: 'sim', buildDate: new Date().toISOString() },
      });

    // ---- 2. connect -------------------------------------------------------------------------
    const fleet: SimRouter[] = enrolled.map((r, i) => ({ r, client: make(r, i) }));
    stopAll.push(() => Promise.all(fleet.map((f) => f.client.close())));
    const handshake = new Recorder();
    const connectCpu0 = ctl?.cpuMs();
    const c0 = performance.now();
    await Promise.all(
      fleet.map(async (f) => {
        const s = performance.now();
        await f.client.connect();
        handshake.add(performance.now() - s);
      }),
    );
    const allConnectedMs = performance.now() - c0;
    const handshakesPerSec = ((N + M) / allConnectedMs) * 1000;
    const handshakeRatio = ratio(handshakesPerSec, tlsCeiling?.okPerSec);
    const connectCpu1 = ctl?.cpuMs();
    /** Controller CPU per handshake (TLS + WebSocket upgrade + certificate check + proof), in ms. */
    const cpuPerHandshakeMs = connectCpu0 !== undefined && connectCpu1 !== undefined ? (connectCpu1 - connectCpu0) / (N + M) : undefined;
    const onlineCount = async (kind: 'edge-routers' | 'transit-routers' = 'edge-routers') =>
      (await requestJson(http, 'GET', `${MGMT}/${kind}?limit=1&filter=${encodeURIComponent(`isOnline=true and name contains "${stamp}"`)}`, H)).body?.meta?.pagination?.totalCount ?? -1;
    while ((await onlineCount()) < N) await sleep(20);
    const allOnlineInApiMs = performance.now() - c0;
    if (M > 0) while ((await onlineCount('transit-routers')) < M) await sleep(20);

    if (argv.hold) {
      await hold(fleet, make, onlineCount);
      return;
    }

    // ---- 3. idle ----------------------------------------------------------------------------
    let idleCpuPct: number | undefined;
    if (ctl) {
      const cpu0 = ctl.cpuMs();
      const w0 = performance.now();
      const bar = progressBar('idle (heartbeats only)', { durationMs: 5000 });
      await sleep(5000);
      bar.done();
      const cpu1 = ctl.cpuMs();
      if (cpu0 !== undefined && cpu1 !== undefined) idleCpuPct = ((cpu1 - cpu0) / (performance.now() - w0)) * 100;
    }

    // ---- 4. detect --------------------------------------------------------------------------
    const detectOffline = async (routers: SimRouter[], act: (f: SimRouter) => void) => {
      const ids = routers.map((f) => f.r.id);
      const filter = encodeURIComponent(`id in [${ids.map((x) => JSON.stringify(x)).join(',')}] and isOnline=false`);
      const s = performance.now();
      for (const f of routers) act(f);
      const seen = new Map<string, number>();
      while (seen.size < ids.length && performance.now() - s < 60_000) {
        const r = await requestJson(http, 'GET', `${MGMT}/edge-routers?limit=500&filter=${filter}`, H);
        for (const x of r.body?.data ?? []) if (!seen.has(x.id)) seen.set(x.id, performance.now() - s);
        await sleep(20);
      }
      const rec = new Recorder();
      for (const v of seen.values()) rec.add(v);
      return { routers: ids.length, detected: seen.size, ms: rec.summary() };
    };
    const edgeFleet = fleet.filter((f) => f.r.kind === 'edge');
    const silentSet = edgeFleet.slice(0, K);
    const killedSet = edgeFleet.slice(K, 2 * K);
    const silent = K ? await detectOffline(silentSet, (f) => f.client.silence()) : undefined;
    const killed = killedSet.length ? await detectOffline(killedSet, (f) => f.client.kill()) : undefined;
    // Bring them back.
    await Promise.all(
      [...silentSet, ...killedSet].map(async (f) => {
        const i = fleet.indexOf(f);
        f.client.kill();
        f.client = make(f.r, i);
        await f.client.connect();
      }),
    );

    // ---- 5. churn ---------------------------------------------------------------------------
    const reconnect = new Recorder();
    let churnErrors = 0;
    let churnDone = 0;
    let scrape: { routersOnline?: number; bytes: number; ms: number } | undefined;
    const churnEnd = performance.now() + churnS * 1000;
    const churner = (async () => {
      if (churnRate <= 0) return;
      const gap = 1000 / churnRate;
      const inflight: Promise<void>[] = [];
      /** Routers mid-reconnect: never churn the same router twice at once. */
      const busy = new Set<number>();
      while (performance.now() < churnEnd) {
        const i = Math.floor(Math.random() * fleet.length);
        if (busy.has(i)) continue;
        busy.add(i);
        const f = fleet[i];
        inflight.push(
          (async () => {
            await f.client.close();
            const next = make(f.r, i);
            f.client = next;
            const s = performance.now();
            try {
              await next.connect();
              reconnect.add(performance.now() - s);
              churnDone++;
            } catch {
              churnErrors++;
            }
            busy.delete(i);
          })(),
        );
        await sleep(gap);
      }
      await Promise.all(inflight);
    })();
    const scraper = (async () => {
      await sleep((churnS * 1000) / 2);
      const s = performance.now();
      const r = await http.request({ method: 'GET', path: '/metrics', headers: {}, wantBody: true });
      const text = r.body?.toString('utf8') ?? '';
      const m = /^mesh_routers_online\{kind="edge"\} (\d+)/m.exec(text);
      scrape = { routersOnline: m ? Number(m[1]) : undefined, bytes: r.bytes, ms: round(performance.now() - s) };
    })();
    const listLoad = churnS > 0
      ? await runLoad({
          client: http,
          concurrency: listConcurrency,
          durationMs: churnS * 1000,
          requests: [{ method: 'GET', path: listPath, headers: H }],
          label: 'churn',
        })
      : undefined;
    chart.add('list during churn', listLoad?.timeline);
    const listRatio = ratio(listLoad?.okPerSec, trivial?.perSec);
    await churner;
    await scraper;
    while ((await onlineCount()) < N) await sleep(20);

    const mem = ctl?.memory();
    const result = {
      machine: machineInfo(),
      params: { listPath, edgeRouters: N, transitRouters: M, enrollConcurrency: C, detect: K, churnSeconds: churnS, churnRate, listConcurrency, heartbeatMs, heartbeatTimeoutMs, spawned: !!ctl },
      enroll: { ms: round(enrollMs), perSec: round(((N + M) / enrollMs) * 1000) },
      ceilings: { mtlsHandshake: tlsCeiling, trivialAnswer: trivial && { ...trivial, timeline: undefined } },
      connect: { handshakesPerSec: round(handshakesPerSec, 1), ratioToRawHandshake: handshakeRatio, allConnectedMs: round(allConnectedMs), allOnlineInApiMs: round(allOnlineInApiMs), handshakeMs: handshake.summary(), controllerCpuPerHandshakeMs: cpuPerHandshakeMs === undefined ? undefined : round(cpuPerHandshakeMs) },
      idle: { controllerCpuPct: idleCpuPct === undefined ? undefined : round(idleCpuPct, 2) },
      detect: { silent, killed },
      churn: { reconnects: churnDone, errors: churnErrors, reconnectMs: reconnect.summary(), list: listLoad && { rps: round(listLoad.rps), ratioToTrivial: listRatio, latency: listLoad.latency, errors: listLoad.errors }, metricsScrape: scrape },
      controllerMemory: mem,
    };
    const chartFile = chart.write('router-sim', `bench:routers — ${N} edge + ${M} transit routers`, started);
    const file = writeResults('router-sim', { ...result, bench: 'router-sim', startedAt: started.toISOString(), chart: path.relative(ROOT, chartFile) }, started);

    const rows: (string | number)[][] = [
      ['enroll (create + erott/trott)', `${fmt(result.enroll.perSec, 1)} routers/s`, `${fmt(enrollMs / 1000, 1)} s for ${N + M}`],
      ['connect: handshake p50 / p99', `${fmt(handshake.summary().p50)} / ${fmt(handshake.summary().p99)} ms`, `${N + M} at once`],
      ['connect: handshakes per second', `${fmt(handshakesPerSec, 1)}/s = ${pct(handshakeRatio)} of raw`, tlsCeiling ? `raw mTLS handshake ${fmt(tlsCeiling.okPerSec, 1)}/s at ${tlsCeiling.concurrency}` : 'no ceiling (--controller)'],
      ['connect: all online in the API', `${fmt(allOnlineInApiMs, 0)} ms`, ''],
      ['connect: controller CPU per handshake', cpuPerHandshakeMs === undefined ? '-' : `${fmt(cpuPerHandshakeMs)} ms`, 'TLS + upgrade + certificate + proof'],
      ['idle controller CPU', idleCpuPct === undefined ? '-' : `${fmt(idleCpuPct, 1)} %`, `heartbeat ${heartbeatMs} ms`],
      ['silent router → offline p50 / max', silent ? `${fmt(silent.ms.p50, 0)} / ${fmt(silent.ms.max, 0)} ms` : '-', `timeout ${heartbeatTimeoutMs} ms, ${silent?.detected ?? 0}/${K}`],
      ['dropped TCP → offline p50 / max', killed ? `${fmt(killed.ms.p50, 0)} / ${fmt(killed.ms.max, 0)} ms` : '-', `${killed?.detected ?? 0}/${killedSet.length}`],
      ['churn: reconnect p50 / p99', `${fmt(reconnect.summary().p50)} / ${fmt(reconnect.summary().p99)} ms`, `${churnDone} reconnects, ${churnErrors} errors`],
      [`churn: GET ${listPath.replace(/^\/edge\/management\/v1/, '')} p50 / p99`, listLoad ? `${fmt(listLoad.latency.p50)} / ${fmt(listLoad.latency.p99)} ms` : '-', listLoad ? `${fmt(listLoad.rps, 0)} req/s = ${pct(listRatio)} of trivial ${fmt(trivial?.perSec, 0)}/s, errors ${JSON.stringify(listLoad.errors)}` : ''],
      ['metrics scrape during churn', scrape ? `${fmt(scrape.ms)} ms` : '-', scrape ? `mesh_routers_online=${scrape.routersOnline}` : ''],
      ['controller RSS', mem ? `${fmt(mem.rssKiB / 1024, 0)} MiB` : '-', ''],
    ];
    process.stdout.write('\n' + table(['router-sim', 'result', 'notes'], rows) + `\n\nresults: ${path.relative(ROOT, file)}; chart: ${path.relative(ROOT, chartFile)}\n`);
  } finally {
    for (const s of stopAll) await s().catch(() => undefined);
    await http.close();
    if (ctl) await ctl.stop();
  }
}

/** Simulator mode: keep every router online, reconnecting with backoff, report every 5 s, until Ctrl-C. */
async function hold(fleet: SimRouter[], make: (r: EnrolledRouter, i: number) => RouterClient, onlineCount: () => Promise<number>) {
  let stopping = false;
  let reconnects = 0;
  const keep = (f: SimRouter, i: number) => {
    f.client.once('closed', async () => {
      if (stopping) return;
      for (let delay = 250; !stopping; delay = Math.min(delay * 2, 10_000)) {
        await sleep(delay);
        f.client = make(f.r, i);
        try {
          await f.client.connect();
          reconnects++;
          keep(f, i);
          return;
        } catch {
          // refused (re-enrolled, deleted, disabled) or unreachable: keep trying, slower
        }
      }
    });
  };
  fleet.forEach(keep);
  process.stdout.write(`holding ${fleet.length} routers online; Ctrl-C to stop\n`);
  const timer = setInterval(async () => {
    const up = fleet.filter((f) => f.client.welcome && !f.client.closedInfo).length;
    process.stdout.write(`${new Date().toISOString()} connected ${up}/${fleet.length}, online in API ${await onlineCount().catch(() => -1)}, reconnects ${reconnects}\n`);
  }, 5000);
  await new Promise<void>((resolve) => process.once('SIGINT', () => resolve()));
  stopping = true;
  clearInterval(timer);
}

main().catch((e) => {
  process.stderr.write(`router-sim: ${e?.stack ?? e}\n`);
  process.exit(1);
});
