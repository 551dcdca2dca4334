/**
 * Session creates of this build against another build, side by side: both controllers run at once
 * on the same machine (each on bench:policy's large model, written by its own build), and the
 * creates go to one and then the other in alternating rounds (the order flips each round), so the
 * machine's drift, which moves one whole run of bench:policy against the next by ±20% here, falls
 * on both alike. Per build and client level: creates/s and the controller's CPU per create (all
 * its threads, and its main thread), from /proc over the rounds; the first round warms up and is
 * not counted. The ceiling of each figure is the other build's, measured in the same run.
 *
 *   git worktree add /tmp/before <commit> && (cd /tmp/before && npm ci && npm run build)
 *   npm run bench:sessions-ab -- --before /tmp/before
 *
 * Prints a summary and writes bench/results/sessions-ab-<time>.json.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import WebSocket from 'ws';
import { ROOT, login, readCpuMs, readThreadCpuMs, MGMT, type ControllerProcess, type SpawnOptions } from './lib/controller.js';
import { createClient, requestJson, type RequestSpec } from './lib/http.js';
import { runLoad } from './lib/load.js';
import { parseCli, intFlag, intListFlag } from './lib/cli.js';
import { fmt, machineInfo, table, writeResults } from './lib/report.js';
import { progressBar } from './lib/progress.js';

const argv = parseCli({
  name: 'bench:sessions-ab',
  summary: `Session creates of this build against another (--before DIR, a built checkout), both controllers
up at once, in alternating rounds: creates/s and controller CPU per create of each, and their ratio.`,
  usage: ['npm run bench:sessions-ab -- --before /tmp/before', 'npm run bench:sessions-ab -- --before /tmp/before --rounds 4 --per-round 1000 --session-clients 64'],
  flags: {
    'before': { type: 'string', arg: 'DIR', help: 'a checkout of the build to compare with, built (dist/)' },
    'rounds': { type: 'string', default: '7', arg: 'N', help: 'rounds per client level, the first a warm-up' },
    'per-round': { type: 'string', default: '3000', arg: 'K', help: 'session creates per build per round' },
    'session-clients': { type: 'string', default: '64,256', arg: 'LIST', help: 'concurrent creators per level, each on its own connection' },
    'sessions': { type: 'string', default: '64', arg: 'S', help: 'API sessions of the worst-case identity (sessions to create: S × its dialable services)' },
    'data-dir': { type: 'string', default: os.tmpdir(), arg: 'DIR', help: 'where the two data directories go (e.g. /dev/shm to take the disk out)' },
    'cpu-prof': { type: 'string', arg: 'DIR', help: 'profile both controllers (node --cpu-prof) into DIR/this and DIR/before' },
    'heap-sample': { type: 'string', arg: 'DIR', help: "sample both controllers' allocations over the counted rounds, collected objects included (V8's sampling heap profiler through the inspector), into DIR/this.heapprofile and DIR/before.heapprofile" },
  },
});
const before = path.resolve(String(argv.before ?? ''));
if (!argv.before || !fs.existsSync(path.join(before, 'dist', 'src', 'main.js'))) {
  console.error('bench:sessions-ab: --before DIR must be a built checkout (DIR/dist/src/main.js)');
  process.exit(2);
}
const ROUNDS = intFlag(argv, 'rounds', 2, 100);
const PER_ROUND = intFlag(argv, 'per-round', 100, 100_000);
const LEVELS = intListFlag(argv, 'session-clients', 1, 4096);
const API_SESSIONS = intFlag(argv, 'sessions', 1, 1000);
const DATA_PARENT = String(argv['data-dir']);
const PROFILE_DIR = argv['cpu-prof'] ? path.resolve(String(argv['cpu-prof'])) : undefined;
const HEAP_DIR = argv['heap-sample'] ? path.resolve(String(argv['heap-sample'])) : undefined;
const ADMIN_PASSWORD = 'bench-admin-password';
const USER_PASSWORD = 'bench-user-password';
const CLIENT = '/edge/client/v1';

interface Build {
  name: string;
  dir: string;
  dataDir?: string;
  ctl?: ControllerProcess;
  creates: RequestSpec[];
  polls: RequestSpec[];
  next: number;
  levels: Map<number, { ok: number; seconds: number; cpuMs: number; mainCpuMs: number; perRound: number[]; threadCpuMs: Map<number, number>; gcMs: Map<string, number> }>;
  signing?: { tokens: number; signatures: number };
  /** --heap-sample: the controller's inspector, sampling. */
  inspector?: Inspector;
}

/** A controller's inspector (`--inspect`), for V8's sampling heap profiler. */
class Inspector {
  private next = 1;
  private readonly waiting = new Map<number, (r: { result?: unknown; error?: unknown }) => void>();
  private constructor(private readonly ws: WebSocket) {
    ws.on('message', (data) => {
      const m = JSON.parse(String(data)) as { id?: number; result?: unknown; error?: unknown };
      if (m.id !== undefined) this.waiting.get(m.id)?.(m);
    });
  }

  /** The inspector whose address the controller printed (`Debugger listening on ws://…`). */
  static async connect(output: string): Promise<Inspector> {
    const url = /Debugger listening on (ws:\/\/\S+)/.exec(output)?.[1];
    if (!url) throw new Error('--heap-sample: the controller printed no inspector address');
    const ws = new WebSocket(url);
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    return new Inspector(ws);
  }

  call(method: string, params: Record<string, unknown> = {}): Promise<unknown> {
    const id = this.next++;
    this.ws.send(JSON.stringify({ id, method, params }));
    return new Promise((resolve, reject) =>
      this.waiting.set(id, (m) => {
        this.waiting.delete(id);
        if (m.error) reject(new Error(`${method}: ${JSON.stringify(m.error)}`));
        else resolve(m.result);
      }),
    );
  }

  close() {
    this.ws.close();
  }
}

/** A build's own spawnController and model writer: each writes its data directory in its own format. */
async function prepare(b: Build) {
  const lib = (await import(pathToFileURL(path.join(b.dir, 'dist', 'bench', 'lib', 'controller.js')).href)) as { spawnController(o: SpawnOptions): Promise<ControllerProcess> };
  const model = await import(pathToFileURL(path.join(b.dir, 'dist', 'scripts', 'lib', 'model.js')).href);
  const dataDir = (b.dataDir = fs.mkdtempSync(path.join(DATA_PARENT, 'mesh-bench-ab-')));
  const env = { MESH_LOG_LEVEL: 'info' };
  const first = await lib.spawnController({ password: ADMIN_PASSWORD, env, dataDir, keepData: true });
  await first.stop();
  const bar = progressBar(`${b.name}: writing the large model`, {});
  const seeded = await model.writeModelToStore(dataDir, model.shapeByName('large'), { seed: 1, env: { MESH_ADMIN_PASSWORD: ADMIN_PASSWORD, MESH_ADDRESS: '127.0.0.1:0' } });
  bar.done();
  const nodeArgs = [...(PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${path.join(PROFILE_DIR, b.name)}`] : []), ...(HEAP_DIR ? ['--inspect=127.0.0.1:0'] : [])];
  const ctl = (b.ctl = await lib.spawnController({ password: ADMIN_PASSWORD, env, dataDir, nodeArgs, readyTimeoutMs: 120_000 }));
  const c = await createClient({ origin: ctl.origin, ca: ctl.ca, connections: 1, kind: 'raw' });
  try {
    const admin = await login(c, 'admin', ADMIN_PASSWORD);
    const r = await requestJson(c, 'POST', `${MGMT}/authenticators`, { accept: 'application/json', 'zt-session': admin }, { identityId: seeded.worstCaseIdentityId, method: 'updb', username: 'bench-worst', password: USER_PASSWORD });
    if (r.status !== 201) throw new Error(`${b.name}: authenticator: ${r.status} ${JSON.stringify(r.body)}`);
    const tokens: string[] = [];
    for (let i = 0; i < API_SESSIONS; i++) {
      const l = await requestJson(c, 'POST', `${CLIENT}/authenticate?method=password`, { accept: 'application/json' }, { username: 'bench-worst', password: USER_PASSWORD });
      if (l.status !== 200) throw new Error(`${b.name}: login: ${l.status} ${JSON.stringify(l.body)}`);
      tokens.push(l.body.data.token);
    }
    const list = await requestJson(c, 'GET', `${CLIENT}/services?limit=-1`, { accept: 'application/json', 'zt-session': tokens[0] });
    const dialable = (list.body.data as { id: string; permissions: string[] }[]).filter((s) => s.permissions.includes('Dial')).map((s) => s.id);
    for (const sid of dialable) for (const tok of tokens) b.creates.push({ method: 'POST', path: `${CLIENT}/sessions`, headers: { accept: 'application/json', 'content-type': 'application/json', 'zt-session': tok }, body: Buffer.from(JSON.stringify({ serviceId: sid, type: 'Dial' })) });
    b.polls = tokens.map((tok) => ({ method: 'GET', path: `${CLIENT}/current-api-session/service-updates`, headers: { accept: 'application/json', 'zt-session': tok } }));
  } finally {
    await c.close();
  }
}

/** One round of one build at one level: `PER_ROUND` creates of pairs not created yet. */
async function round(b: Build, clients: number, counted: boolean) {
  const ctl = b.ctl!;
  const c = await createClient({ origin: ctl.origin, ca: ctl.ca, connections: clients, kind: 'raw' });
  try {
    // Connections opened (TLS handshakes) before the clock starts: a poll on each.
    await runLoad({ client: c, concurrency: clients, requests: b.polls, count: clients * 4 });
    const specs = b.creates.slice(b.next, b.next + PER_ROUND);
    b.next += specs.length;
    if (specs.length === 0) throw new Error(`${b.name}: no session pairs left (fewer rounds, a smaller --per-round or more --sessions)`);
    const gc0 = await gcMs(c);
    const threads0 = readThreadCpuMs(ctl.pid);
    const cpu0 = readCpuMs(ctl.pid) ?? NaN;
    const main0 = readCpuMs(ctl.pid, ctl.pid) ?? NaN;
    const r = await runLoad({ client: c, concurrency: clients, requests: specs, count: specs.length });
    const cpuMs = (readCpuMs(ctl.pid) ?? NaN) - cpu0;
    const mainCpuMs = (readCpuMs(ctl.pid, ctl.pid) ?? NaN) - main0;
    const threads1 = readThreadCpuMs(ctl.pid);
    const gc1 = await gcMs(c);
    if (r.ok !== specs.length) throw new Error(`${b.name}: ${specs.length - r.ok} creates failed: ${JSON.stringify(r.errors)}`);
    if (!counted) return;
    let l = b.levels.get(clients);
    if (!l) b.levels.set(clients, (l = { ok: 0, seconds: 0, cpuMs: 0, mainCpuMs: 0, perRound: [], threadCpuMs: new Map(), gcMs: new Map() }));
    for (const [tid, ms] of threads1) l.threadCpuMs.set(tid, (l.threadCpuMs.get(tid) ?? 0) + ms - (threads0.get(tid) ?? 0));
    for (const [kind, ms] of gc1) l.gcMs.set(kind, (l.gcMs.get(kind) ?? 0) + ms - (gc0.get(kind) ?? 0));
    l.ok += r.ok;
    l.seconds += r.ok / r.okPerSec;
    l.cpuMs += cpuMs;
    l.mainCpuMs += mainCpuMs;
    l.perRound.push(Math.round(r.okPerSec));
  } finally {
    await c.close();
  }
}

const ctlPid = (b: Build) => b.ctl!.pid;

/** Milliseconds spent in garbage collection so far, by kind (minor, major, incremental, weakcb), from prom-client's default metrics. */
async function gcMs(c: Awaited<ReturnType<typeof createClient>>): Promise<Map<string, number>> {
  const r = await c.request({ method: 'GET', path: '/metrics', headers: {}, wantBody: true });
  const out = new Map<string, number>();
  for (const m of (r.body?.toString('utf8') ?? '').matchAll(/^nodejs_gc_duration_seconds_sum\{kind="(\w+)"\} (\S+)$/gm)) out.set(m[1], Number(m[2]) * 1000);
  return out;
}

/** The session-token signing counters, where the build has them. */
async function signing(b: Build) {
  const c = await createClient({ origin: b.ctl!.origin, ca: b.ctl!.ca, connections: 1, kind: 'raw' });
  try {
    const r = await c.request({ method: 'GET', path: '/metrics', headers: {}, wantBody: true });
    const text = r.body?.toString('utf8') ?? '';
    const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
    const tokens = value('mesh_session_tokens_signed_total');
    if (Number.isFinite(tokens)) b.signing = { tokens, signatures: value('mesh_session_token_signatures_total') };
  } finally {
    await c.close();
  }
}

async function main() {
  const builds: Build[] = [
    { name: 'this', dir: ROOT, creates: [], polls: [], next: 0, levels: new Map() },
    { name: 'before', dir: before, creates: [], polls: [], next: 0, levels: new Map() },
  ];
  try {
    for (const b of builds) await prepare(b);
    const bar = progressBar('rounds', { total: ROUNDS * LEVELS.length });
    let done = 0;
    for (let i = 0; i < ROUNDS; i++) {
      if (i === 1 && HEAP_DIR)
        for (const b of builds) {
          b.inspector = await Inspector.connect(b.ctl!.output());
          await b.inspector.call('HeapProfiler.enable');
          await b.inspector.call('HeapProfiler.startSampling', { samplingInterval: 16384, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
        }
      for (const clients of LEVELS) {
        for (const b of i % 2 ? [...builds].reverse() : builds) await round(b, clients, i > 0);
        bar.update(++done);
      }
    }
    bar.done();
    for (const b of builds) await signing(b);
    if (HEAP_DIR) {
      fs.mkdirSync(HEAP_DIR, { recursive: true });
      for (const b of builds) {
        const r = (await b.inspector!.call('HeapProfiler.stopSampling')) as { profile: unknown };
        fs.writeFileSync(path.join(HEAP_DIR, `${b.name}.heapprofile`), JSON.stringify(r.profile));
        b.inspector!.close();
      }
      console.log(`allocation samples: ${HEAP_DIR}/this.heapprofile and before.heapprofile (open in Chrome's DevTools, Memory)`);
    }
  } finally {
    for (const b of builds) {
      await b.ctl?.stop();
      if (b.dataDir) fs.rmSync(b.dataDir, { recursive: true, force: true });
    }
  }
  const [now, then] = builds;
  const rows: (string | number)[][] = [];
  const levels = LEVELS.map((clients) => {
    const per = (b: Build) => {
      const l = b.levels.get(clients)!;
      const perCreate = (m: Map<string, number>) => Object.fromEntries([...m].filter(([, ms]) => ms > 0).map(([k, ms]) => [k, +((ms / l.ok) * 1000).toFixed(1)]));
      return {
        createsPerSec: Math.round(l.ok / l.seconds),
        cpuUsPerCreate: +((l.cpuMs / l.ok) * 1000).toFixed(1),
        mainThreadCpuUsPerCreate: +((l.mainCpuMs / l.ok) * 1000).toFixed(1),
        perRound: l.perRound,
        /** CPU µs per create of the main thread and of the busiest others, by rank. */
        threadCpuUsPerCreate: perCreate(new Map([...l.threadCpuMs].sort((x, y) => (x[0] === ctlPid(b) ? -1 : y[0] === ctlPid(b) ? 1 : y[1] - x[1])).slice(0, 8).map(([tid, ms], i) => [tid === ctlPid(b) ? 'main' : `#${i}`, ms]))),
        /** Garbage collection µs per create by kind. */
        gcUsPerCreate: perCreate(l.gcMs),
      };
    };
    const a = per(now);
    const b = per(then);
    const ratio = { creates: +(a.createsPerSec / b.createsPerSec).toFixed(3), cpu: +(a.cpuUsPerCreate / b.cpuUsPerCreate).toFixed(3), mainThreadCpu: +(a.mainThreadCpuUsPerCreate / b.mainThreadCpuUsPerCreate).toFixed(3) };
    rows.push([`${clients} clients`, `${a.createsPerSec}/s`, `${b.createsPerSec}/s`, fmt(ratio.creates, 2), `${a.cpuUsPerCreate} µs (main ${a.mainThreadCpuUsPerCreate})`, `${b.cpuUsPerCreate} µs (main ${b.mainThreadCpuUsPerCreate})`, fmt(ratio.cpu, 2)]);
    return { clients, this: a, before: b, ratio };
  });
  console.log(`\nsession creates, ${ROUNDS - 1} counted rounds of ${PER_ROUND} per build and level (this: ${ROOT}, before: ${before}; data in ${DATA_PARENT})\n`);
  console.log(table(['level', 'this', 'before', 'ratio', 'this CPU per create', 'before CPU per create', 'ratio'], rows));
  const show = (m: Record<string, number>) => Object.entries(m).sort((x, y) => y[1] - x[1]).map(([k, us]) => `${k} ${us}`).join(', ');
  for (const l of levels) {
    console.log(`\n${l.clients} clients, CPU µs per create by thread: this ${show(l.this.threadCpuUsPerCreate)}; before ${show(l.before.threadCpuUsPerCreate)}`);
    console.log(`${l.clients} clients, GC µs per create by kind: this ${show(l.this.gcUsPerCreate)}; before ${show(l.before.gcUsPerCreate)}`);
  }
  for (const b of builds) if (b.signing) console.log(`${b.name}: ${b.signing.tokens} session tokens in ${b.signing.signatures} signatures (${fmt(b.signing.tokens / b.signing.signatures, 1)} a signature)`);
  console.log(`(load average at the end: ${os.loadavg().map((x) => x.toFixed(1)).join(' ')} on ${os.cpus().length} CPUs)`);
  const file = writeResults('sessions-ab', { machine: machineInfo(), before, rounds: ROUNDS, perRound: PER_ROUND, apiSessions: API_SESSIONS, dataDir: DATA_PARENT, levels, signing: Object.fromEntries(builds.map((b) => [b.name, b.signing ?? null])) });
  console.log(`\nresults: ${path.relative(process.cwd(), file)}`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
