/**
 * bench:cluster — cluster mode on this machine: a real 3-member etcd with one and with three
 * controllers, each figure next to the single node's of the same run.
 *
 * Per configuration (single node; 3 etcd + 1 controller; 3 etcd + 3 controllers): identity creates/s
 * and session creates/s (C closed-loop clients spread over the controllers) and the p99 of a page of
 * services. With three
 * controllers: how long a policy change made on one takes to show on every other (p50/p99 over N
 * changes); etcd leader killed under writes (time to the first successful write issued after the
 * kill, failed reads meanwhile); a controller killed (time until its router, reconnecting to
 * another, is online on every live controller; failed reads meanwhile).
 * Identity creates also report the CPU each process spent per create (every controller, whole and
 * main thread; every etcd member; this load generator) from /proc, and each controller's etcd
 * transactions and replica applies from /metrics: CPU per create × creates/s against the machine's
 * cores says how far a rate can go. `--only`, `--setups` and `--writers` narrow a run to what is
 * being looked at; `--cpu-prof DIR` prints where each controller's main thread spent the creates.
 * Writes bench/results/cluster-<ts>.json. `--help` lists the flags.
 */
import { createClient, requestJson, type HttpClient, type RequestSpec } from './lib/http.js';
import { spawnController, login, MGMT, type ControllerProcess } from './lib/controller.js';
import { runLoad } from './lib/load.js';
import { machineInfo, table, fmt, writeResults } from './lib/report.js';
import { parseCli, intFlag, numFlag } from './lib/cli.js';
import { startEtcd, type EtcdCluster } from './lib/etcd.js';
import { readCpuMs } from './lib/controller.js';
import { summarizeProfile, formatProfile } from './lib/cpuprofile.js';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { RouterClient } from './lib/router-client.js';
import { createAndEnroll } from './lib/router-enroll.js';

const ADMIN_PASSWORD = 'bench-admin-password';
const TARGET_CREATES = 2000;
const TARGET_VISIBLE_P99_MS = 100;
const TARGET_WRITES_BACK_MS = 10_000;
const MEASURES = ['identities', 'sessions', 'lists', 'visibility', 'failover'] as const;
const SETUPS = ['single', '1', '3'] as const;

const argv = parseCli({
  name: 'bench:cluster',
  summary: `cluster mode against the single node of the same run (3 etcd members on this machine).
Spawns etcd (/usr/bin/etcd) and node dist/src/main.js processes on free loopback ports.`,
  usage: [
    'npm run bench:cluster',
    'npm run bench:cluster -- --duration 2 --changes 20   # a smoke run',
    'npm run bench:cluster -- --only identities --setups 3 --concurrency 24 --cpu-prof /tmp/prof   # where a create\'s CPU goes',
  ],
  flags: {
    concurrency: { type: 'string', default: '48', arg: 'C', help: 'concurrent clients for creates (spread over the controllers)' },
    duration: { type: 'string', default: '10', arg: 'S', help: 'seconds of creates and of list queries per configuration' },
    changes: { type: 'string', default: '100', arg: 'N', help: 'policy changes timed until visible everywhere' },
    'session-services': { type: 'string', default: '1000', arg: 'N', help: 'services, and so new sessions per controller, for session creates' },
    only: { type: 'string', default: 'all', arg: 'LIST', help: `measures to run, comma-separated: ${MEASURES.join(', ')} (or all)` },
    setups: { type: 'string', default: 'single,1,3', arg: 'LIST', help: 'configurations to run: single (node), 1 and 3 (controllers on 3 etcd members)' },
    writers: { type: 'string', arg: 'N', help: 'controllers that take the identity creates (default: all); the others only apply them from the watch' },
    'cpu-prof': { type: 'string', arg: 'DIR', help: "run the controllers under node --cpu-prof into DIR and print where each one's main thread spent the identity creates" },
  },
});
const concurrency = intFlag(argv, 'concurrency', 1, 1024);
const durationMs = numFlag(argv, 'duration', 0.2, 600) * 1000;
const changes = intFlag(argv, 'changes', 1, 100_000);
const sessionServices = intFlag(argv, 'session-services', 1, 1_000_000);
const listOf = <T extends string>(name: string, all: readonly T[]): Set<T> => {
  const raw = String(argv[name]);
  if (raw === 'all') return new Set(all);
  const xs = raw.split(',').map((x) => x.trim());
  const bad = xs.filter((x) => !all.includes(x as T));
  if (bad.length || xs.length === 0) {
    process.stderr.write(`--${name}: expected some of ${all.join(', ')}, got ${JSON.stringify(raw)}\nRun with --help for the flags.\n`);
    process.exit(2);
  }
  return new Set(xs as T[]);
};
const only = listOf('only', MEASURES);
const setups = listOf('setups', SETUPS);
const writers = argv.writers === undefined ? Infinity : intFlag(argv, 'writers', 1, 3);
const profDir = argv['cpu-prof'] ? path.resolve(String(argv['cpu-prof'])) : undefined;

interface Node {
  proc: ControllerProcess;
  http: HttpClient;
  token: string;
}

async function startNodes(n: number, env: Record<string, string>, tag: string): Promise<Node[]> {
  const nodes: Node[] = [];
  // The first one alone: it creates the shared PKI and the default admin.
  for (let i = 0; i < n; i++) {
    const nodeArgs = profDir ? ['--cpu-prof', `--cpu-prof-dir=${path.join(profDir, `${tag}-${i}`)}`] : [];
    const proc = await spawnController({ password: ADMIN_PASSWORD, nodeArgs, env: { MESH_WORKERS: '1', MESH_REQUEST_LOG: 'false', ...env } });
    const http = await createClient({ origin: proc.origin, ca: proc.ca, connections: Math.max(4, Math.ceil(concurrency / n)), kind: 'https' });
    nodes.push({ proc, http, token: await login(http, 'admin', ADMIN_PASSWORD) });
  }
  return nodes;
}

async function stopNodes(nodes: Node[]) {
  for (const n of nodes) {
    await n.http.close();
    await n.proc.stop(5000);
  }
}

const hdr = (n: Node) => ({ accept: 'application/json', 'content-type': 'application/json', 'zt-session': n.token });

/** CPU time (ms) of every process taking part: each controller (whole and main thread), each etcd member, this load generator. */
function cpuNow(nodes: Node[], etcd?: EtcdCluster) {
  const self = process.cpuUsage();
  return {
    controllers: nodes.map((n) => ({ all: n.proc.cpuMs() ?? NaN, main: n.proc.mainThreadCpuMs() ?? NaN })),
    etcd: (etcd?.members ?? []).map((m) => (m.proc?.pid ? (readCpuMs(m.proc.pid) ?? NaN) : NaN)),
    load: (self.user + self.system) / 1000,
  };
}

const clusterMetric = async (n: Node, name: string) => {
  const r = await n.http.request({ method: 'GET', path: '/metrics', headers: {}, wantBody: true });
  return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(r.body?.toString('utf8') ?? '')?.[1] ?? NaN);
};
const CLUSTER_COUNTERS = ['mesh_cluster_txns_total', 'mesh_cluster_writes_total', 'mesh_cluster_applies_total', 'mesh_cluster_apply_seconds_total', 'mesh_cluster_txn_seconds_total'] as const;
const clusterCounters = (nodes: Node[]) => Promise.all(nodes.map(async (n) => Promise.all(CLUSTER_COUNTERS.map((c) => clusterMetric(n, c)))));

/** Monotonic clock in µs, as V8 stamps --cpu-prof samples (a profile is cut to the creates' window). */
const monoUs = () => Number(process.hrtime.bigint() / 1000n);
const createWindows = new Map<string, [number, number]>();

async function creates(nodes: Node[], tag: string, etcd?: EtcdCluster) {
  const taking = nodes.slice(0, writers);
  const per = Math.max(1, Math.round(concurrency / taking.length));
  let seq = 0;
  // Every create needs a name of its own (a repeated one is a fast 400 that would count as a
  // failure and crowd out real writes): more requests than the run can send, none reused.
  const total = Math.ceil((durationMs / 1000) * 10_000);
  const requestsOf = taking.map((n, i) => Array.from({ length: total }, (): RequestSpec => ({ method: 'POST', path: `${MGMT}/identities`, headers: hdr(n), body: Buffer.from(JSON.stringify({ name: `${tag}-${i}-${seq++}-${Math.random().toString(36).slice(2)}`, type: 'User', isAdmin: false })) })));
  const loadBefore = os.loadavg()[0];
  const countersBefore = etcd ? await clusterCounters(nodes) : undefined;
  const cpuBefore = cpuNow(nodes, etcd);
  const from = monoUs();
  const results = await Promise.all(taking.map((n, i) => runLoad({ client: n.http, concurrency: per, requests: requestsOf[i], count: total, durationMs, label: `${tag} creates on ${i}` })));
  const cpuAfter = cpuNow(nodes, etcd);
  createWindows.set(tag, [from, monoUs()]);
  const countersAfter = etcd ? await clusterCounters(nodes) : undefined;
  const ok = results.reduce((a, r) => a + r.ok, 0);
  const secs = Math.max(...results.map((r) => r.elapsedMs)) / 1000;
  // CPU per create, in ms, per process: what one identity create costs each of them.
  const perCreate = (a: number, b: number) => Math.round(((b - a) / Math.max(1, ok)) * 1000) / 1000;
  const cpu = {
    controllers: cpuAfter.controllers.map((c, i) => ({ all: perCreate(cpuBefore.controllers[i].all, c.all), main: perCreate(cpuBefore.controllers[i].main, c.main) })),
    etcd: cpuAfter.etcd.map((c, i) => perCreate(cpuBefore.etcd[i], c)),
    load: perCreate(cpuBefore.load, cpuAfter.load),
    total: 0,
  };
  cpu.total = Math.round((cpu.controllers.reduce((a, c) => a + c.all, 0) + cpu.etcd.reduce((a, c) => a + c, 0) + cpu.load) * 1000) / 1000;
  const cluster = countersAfter?.map((after, i) => {
    const d = after.map((v, k) => v - countersBefore![i][k]);
    return { txns: d[0], writesPerTxn: Math.round((d[1] / Math.max(1, d[0])) * 10) / 10, applies: d[2], meanApplyMs: Math.round((d[3] / Math.max(1, d[2])) * 1e5) / 100, meanTxnMs: Math.round((d[4] / Math.max(1, d[0])) * 1e5) / 100 };
  });
  return { perSec: ok / secs, ok, writers: taking.length, windowUs: createWindows.get(tag), failed: results.reduce((a, r) => a + Object.values(r.errors).reduce((x, y) => x + y, 0), 0), p99Ms: Math.max(...results.map((r) => r.latency.p99)), loadAvg1m: Math.round(loadBefore * 100) / 100, cpuMsPerCreate: cpu, cluster };
}

type Creates = Awaited<ReturnType<typeof creates>>;

function printCreates(label: string, c: Creates) {
  const cpu = c.cpuMsPerCreate;
  const lines = [
    `${label}: ${fmt(c.perSec, 0)} identity creates/s on ${c.writers} controller(s) (${c.ok} ok, ${c.failed} failed, p99 ${fmt(c.p99Ms)} ms, load average ${c.loadAvg1m} before)`,
    `  CPU ms per create: controllers ${cpu.controllers.map((x) => `${x.all} (main thread ${x.main})`).join(', ')}` +
      (cpu.etcd.length ? `; etcd members ${cpu.etcd.join(', ')}` : '') +
      `; load generator ${cpu.load}; all ${cpu.total} → at most ${fmt(2000 / cpu.total, 0)} creates/s on 2 cores`,
  ];
  for (const [i, x] of (c.cluster ?? []).entries()) lines.push(`  controller ${i}: ${x.txns} etcd txns, ${x.writesPerTxn} writes/txn, mean txn ${x.meanTxnMs} ms; ${x.applies} replica applies, mean ${x.meanApplyMs} ms`);
  process.stdout.write(lines.join('\n') + '\n');
}

/** With --cpu-prof: where each controller's main thread spent the identity creates of a configuration. */
function printProfiles(tag: string, n: number) {
  const window = createWindows.get(tag);
  if (!profDir || !window) return;
  for (let i = 0; i < n; i++) {
    const dir = path.join(profDir, `${tag}-${i}`);
    const file = fs.existsSync(dir) ? fs.readdirSync(dir)
      // The main thread's (thread id 0); worker threads write profiles of their own.
      .find((f) => /\.\d+\.0\.\d+\.cpuprofile$/.test(f)) : undefined;
    if (!file) continue;
    const summary = summarizeProfile(path.join(dir, file), { root: process.cwd(), window });
    process.stdout.write(`\n${tag} controller ${i}, identity creates:\n${formatProfile(summary, 30)}\n`);
  }
}

const CLIENT = '/edge/client/v1';

/** A user who may dial one service over one edge router, logged in on every node; sessions for it closed-loop. */
async function sessions(nodes: Node[], tag: string) {
  const [a] = nodes;
  const post = async (path: string, body: unknown) => {
    const r = await requestJson(a.http, 'POST', `${MGMT}${path}`, hdr(a), body);
    if (r.status !== 201) throw new Error(`POST ${path}: ${r.status} ${JSON.stringify(r.body)}`);
    return r.body.data.id as string;
  };
  await post('/edge-routers', { name: `${tag}-er`, roleAttributes: [], isTunnelerEnabled: false });
  await post('/edge-router-policies', { name: `${tag}-erp`, semantic: 'AnyOf', identityRoles: ['#all'], edgeRouterRoles: ['#all'] });
  await post('/service-edge-router-policies', { name: `${tag}-serp`, semantic: 'AnyOf', serviceRoles: ['#all'], edgeRouterRoles: ['#all'] });
  // A session is made once per API session, service and type (a second request returns it): one
  // new session per request needs as many services as requests per controller.
  const serviceIds: string[] = [];
  for (let i = 0; i < sessionServices; i++) serviceIds.push(await post('/services', { name: `${tag}-svc-${i}`, encryptionRequired: true }));
  await post('/service-policies', { name: `${tag}-sp`, type: 'Dial', semantic: 'AnyOf', identityRoles: ['#all'], serviceRoles: ['#all'] });
  const identityId = await post('/identities', { name: `${tag}-user`, type: 'User', isAdmin: false });
  await post('/authenticators', { identityId, method: 'updb', username: `${tag}-user`, password: `${tag}-password` });
  await sleep(300);
  const per = Math.max(1, Math.round(concurrency / nodes.length));
  const results = await Promise.all(
    nodes.map(async (n, i) => {
      const r = await requestJson(n.http, 'POST', `${CLIENT}/authenticate?method=password`, { accept: 'application/json' }, { username: `${tag}-user`, password: `${tag}-password` });
      const token = r.body?.data?.token as string;
      if (!token) throw new Error(`client login on ${i}: ${r.status}`);
      const headers = { accept: 'application/json', 'content-type': 'application/json', 'zt-session': token };
      const specs: RequestSpec[] = serviceIds.map((serviceId) => ({ method: 'POST', path: `${CLIENT}/sessions`, headers, body: Buffer.from(JSON.stringify({ serviceId, type: 'Dial' })) }));
      return runLoad({ client: n.http, concurrency: per, requests: specs, count: specs.length, label: `${tag} sessions on ${i}` });
    }),
  );
  const ok = results.reduce((x, r) => x + r.ok, 0);
  return { perSec: ok / (Math.max(...results.map((r) => r.elapsedMs)) / 1000), failed: results.reduce((x, r) => x + Object.values(r.errors).reduce((p, q) => p + q, 0), 0) };
}

async function lists(nodes: Node[]) {
  const results = await Promise.all(nodes.map((n) => runLoad({ client: n.http, concurrency: 4, requests: [{ method: 'GET', path: `${MGMT}/services?limit=100`, headers: hdr(n) }], durationMs: Math.min(durationMs, 3000) })));
  return { p99Ms: Math.max(...results.map((r) => r.latency.p99)) };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A role attribute changed on node 0, visible in a policy's identities on every other node. */
async function visibility(nodes: Node[]) {
  const [a] = nodes;
  await requestJson(a.http, 'POST', `${MGMT}/services`, hdr(a), { name: 'vis-svc', encryptionRequired: true, roleAttributes: ['vis'] });
  const id = (await requestJson(a.http, 'POST', `${MGMT}/identities`, hdr(a), { name: 'vis-id', type: 'User', isAdmin: false, roleAttributes: [] })).body.data.id as string;
  const sp = (await requestJson(a.http, 'POST', `${MGMT}/service-policies`, hdr(a), { name: 'vis-sp', type: 'Dial', semantic: 'AnyOf', identityRoles: ['#vis-0'], serviceRoles: ['#vis'] })).body.data.id as string;
  const ms: number[] = [];
  for (let i = 1; i <= changes; i++) {
    const attr = i % 2 ? 'vis-0' : 'other';
    const start = performance.now();
    await requestJson(a.http, 'PATCH', `${MGMT}/identities/${id}`, hdr(a), { roleAttributes: [attr] });
    await Promise.all(
      nodes.slice(1).map(async (n) => {
        for (;;) {
          // The policy's identities, as that controller's role index evaluates them.
          const r = await requestJson(n.http, 'GET', `${MGMT}/service-policies/${sp}/identities`, hdr(n));
          const has = (r.body?.data ?? []).some((x: { id: string }) => x.id === id);
          if (has === (attr === 'vis-0')) return;
          if (performance.now() - start > 10_000) throw new Error('change not visible after 10 s');
          // A breath between polls: back-to-back queries took CPU from the apply being timed.
          await sleep(1);
        }
      }),
    );
    ms.push(performance.now() - start);
  }
  ms.sort((x, y) => x - y);
  return { p50Ms: ms[Math.floor(ms.length * 0.5)], p99Ms: ms[Math.min(ms.length - 1, Math.floor(ms.length * 0.99))] };
}

/** Reads on every node every 20 ms while `during` runs; counts failures. */
async function readsDuring<T>(nodes: Node[], during: () => Promise<T>): Promise<{ result: T; reads: number; failedReads: number }> {
  let stop = false;
  let reads = 0;
  let failedReads = 0;
  const readers = nodes.map(async (n) => {
    while (!stop) {
      try {
        const r = await n.http.request({ method: 'GET', path: `${MGMT}/services?limit=10`, headers: hdr(n) });
        reads++;
        if (r.status !== 200) failedReads++;
      } catch {
        failedReads++;
      }
      await sleep(20);
    }
  });
  try {
    return { result: await during(), reads, failedReads };
  } finally {
    stop = true;
    await Promise.all(readers);
  }
}

async function leaderFailover(etcd: EtcdCluster, nodes: Node[]) {
  const leader = await etcd.leader();
  const out = await readsDuring(nodes, async () => {
    let stop = false;
    let killedAt = 0;
    let backAt = 0;
    const writers = nodes.map(async (n, i) => {
      for (let k = 0; !stop; k++) {
        const issued = performance.now();
        const r = await requestJson(n.http, 'POST', `${MGMT}/identities`, hdr(n), { name: `lf-${i}-${k}`, type: 'User', isAdmin: false }).catch(() => ({ status: 0 }));
        if (r.status === 201 && killedAt && issued > killedAt && !backAt) backAt = performance.now();
        if (r.status !== 201) await sleep(50);
      }
    });
    await sleep(1000);
    killedAt = performance.now();
    await etcd.kill(leader);
    while (!backAt && performance.now() - killedAt < 30_000) await sleep(20);
    stop = true;
    await Promise.all(writers);
    return backAt ? backAt - killedAt : undefined;
  });
  etcd.start(leader);
  await etcd.waitHealthy();
  return { firstWriteMs: out.result, reads: out.reads, failedReads: out.failedReads };
}

async function controllerFailover(nodes: Node[]) {
  const [a, ...rest] = nodes;
  const r = await createAndEnroll(a.http, a.token, { name: 'bench-failover-er', kind: 'edge', hostname: 'er.bench' });
  const versionInfo = { os: 'linux', arch: 'amd64', version: 'v1.0.0', revision: 'bench', buildDate: '2026-01-01T00:00:00Z' };
  const router = (n: Node) => new RouterClient({ url: `wss://127.0.0.1:${n.proc.port}/ctrl/v1`, ca: n.proc.ca, certChain: r.certChain, key: r.keyPem, hostname: 'er.bench', protocols: { tls: 'tls:er.bench:3022' }, versionInfo });
  await sleep(500);
  const first = router(a);
  await first.connect();
  const online = async (n: Node) => (await requestJson(n.http, 'GET', `${MGMT}/edge-routers/${r.id}`, hdr(n))).body?.data?.isOnline === true;
  while (!(await Promise.all(rest.map(online))).every(Boolean)) await sleep(20);
  const out = await readsDuring(rest, async () => {
    const closed = new Promise((res) => first.once('closed', res));
    const killed = performance.now();
    await a.proc.stop(0);
    await closed;
    const again = router(rest[0]);
    await again.connect();
    while (!(await Promise.all(rest.map(online))).every(Boolean)) await sleep(10);
    const ms = performance.now() - killed;
    await again.close();
    return ms;
  });
  return { routerOnlineMs: out.result, reads: out.reads, failedReads: out.failedReads };
}

/** One configuration's measures, each only when asked for (--only). */
async function measure(nodes: Node[], tag: string, etcd?: EtcdCluster) {
  const out: { creates?: Creates; sessions?: { perSec: number; failed: number }; list?: { p99Ms: number }; visible?: { p50Ms: number; p99Ms: number } } = {};
  if (only.has('identities')) out.creates = await creates(nodes, tag, etcd);
  if (only.has('sessions')) out.sessions = await sessions(nodes, tag);
  if (only.has('lists')) out.list = await lists(nodes);
  if (only.has('visibility') && nodes.length > 1) out.visible = await visibility(nodes);
  return out;
}

async function main() {
  const results: Record<string, unknown> = { machine: machineInfo(), concurrency, durationMs, changes, only: [...only], setups: [...setups] };
  type Measured = Awaited<ReturnType<typeof measure>>;
  let s: Measured = {};
  let c1: Measured = {};
  let c3: Measured = {};
  let lf: Awaited<ReturnType<typeof leaderFailover>> | undefined;
  let cf: Awaited<ReturnType<typeof controllerFailover>> | undefined;
  if (setups.has('single')) {
    process.stderr.write('single node…\n');
    const single = await startNodes(1, {}, 'single');
    s = await measure(single, 'single');
    await stopNodes(single);
    results.single = s;
    printProfiles('single', 1);
  }

  const etcd = setups.has('1') || setups.has('3') ? await startEtcd(undefined, 3) : undefined;
  try {
    if (etcd && setups.has('1')) {
      process.stderr.write('3 etcd + 1 controller…\n');
      const one = await startNodes(1, { MESH_CLUSTER_ETCD: etcd.endpoints.join(','), MESH_CLUSTER_PREFIX: '/bench-1' }, 'c1');
      c1 = await measure(one, 'c1', etcd);
      await stopNodes(one);
      results.cluster1 = c1;
      printProfiles('c1', 1);
    }
    if (etcd && setups.has('3')) {
      process.stderr.write('3 etcd + 3 controllers…\n');
      const three = await startNodes(3, { MESH_CLUSTER_ETCD: etcd.endpoints.join(','), MESH_CLUSTER_PREFIX: '/bench-3' }, 'c3');
      c3 = await measure(three, 'c3', etcd);
      results.cluster3 = c3;
      if (only.has('failover')) {
        process.stderr.write('etcd leader failover…\n');
        lf = await leaderFailover(etcd, three);
        process.stderr.write('controller failover…\n');
        cf = await controllerFailover(three);
        results.failover = { etcdLeader: lf, controller: cf };
        await stopNodes(three.slice(1));
        await three[0].http.close();
      } else await stopNodes(three);
      printProfiles('c3', 3);
    }

    const col = <T,>(m: Measured, f: (m: Measured) => T | undefined, show: (v: T) => string | number) => {
      const v = f(m);
      return v === undefined ? '-' : show(v);
    };
    const row = <T,>(name: string, f: (m: Measured) => T | undefined, show: (v: T) => string | number, target = '') => [name, col(s, f, show), col(c1, f, show), col(c3, f, show), target];
    process.stdout.write(
      '\n' +
        table(
          ['', 'single node', '3 etcd + 1 ctrl', '3 etcd + 3 ctrls', 'target'],
          [
            row('identity creates/s', (m) => m.creates?.perSec, (v) => fmt(v, 0), `≥ ${TARGET_CREATES}`),
            row('create p99 ms', (m) => m.creates?.p99Ms, (v) => fmt(v)),
            row('failed creates', (m) => m.creates?.failed, (v) => v, '0'),
            row('CPU ms per create, all processes', (m) => m.creates?.cpuMsPerCreate.total, (v) => v),
            row('session creates/s', (m) => m.sessions?.perSec, (v) => fmt(v, 0)),
            row('failed session creates', (m) => m.sessions?.failed, (v) => v, '0'),
            row('service list p99 ms', (m) => m.list?.p99Ms, (v) => fmt(v)),
            row('policy change visible everywhere p50 / p99 ms', (m) => m.visible, (v) => `${fmt(v.p50Ms, 1)} / ${fmt(v.p99Ms, 1)}`, `p99 ≤ ${TARGET_VISIBLE_P99_MS}`),
            ['etcd leader killed → first write ms', '-', '-', lf ? fmt(lf.firstWriteMs, 0) : '-', `≤ ${TARGET_WRITES_BACK_MS}`],
            ['  failed reads meanwhile', '-', '-', lf ? `${lf.failedReads} of ${lf.reads}` : '-', '0'],
            ['controller killed → its router online elsewhere ms', '-', '-', cf ? fmt(cf.routerOnlineMs, 0) : '-', ''],
            ['  failed reads meanwhile', '-', '-', cf ? `${cf.failedReads} of ${cf.reads}` : '-', '0'],
          ],
        ) +
        '\n',
    );
    for (const [label, m] of [['single node', s], ['3 etcd + 1 controller', c1], ['3 etcd + 3 controllers', c3]] as const) if (m.creates) printCreates(label, m.creates);
  } finally {
    await etcd?.close();
  }
  const file = writeResults('cluster', results);
  process.stderr.write(`results: ${file}\n`);
}

main().catch((e) => {
  process.stderr.write(`bench:cluster: ${e?.stack ?? e}\n`);
  process.exit(1);
});
