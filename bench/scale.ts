/**
 * bench:scale — start-up, memory and the policy phases of the controller against identities (issue #35): the large
 * shape's services, routers and policies with 100k, 300k and 1M identities, in that order.
 * Writes bench/results/scale-<ts>.json and .svg (and scale-latest.*).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawnController, MAIN, type ControllerProcess } from './lib/controller.js';
import { machineInfo, table, fmt, writeResults, resultsDir } from './lib/report.js';
import { parseCli, intFlag, intListFlag, numFlag } from './lib/cli.js';
import { renderChart } from './lib/chart.js';
import type { Shape } from '../scripts/lib/model.js';
import { preparedModel, shapeFor } from './lib/models.js';
import { measurePolicy } from './lib/policy-phases.js';
import { RunChart } from './lib/run-chart.js';
import { pct } from './lib/raw-ceilings.js';
import { NODE_FLAGS } from '../src/node-flags.js';
import { Store } from '../src/store/store.js';
import { createRegistry } from '../src/resources/index.js';
import { PolicyEngine } from '../src/policy/engine.js';
import { ROLE_INDEX_SNAPSHOT } from '../src/policy/index-snapshot.js';
import { checkIndex, sampleIds } from '../src/policy/verify.js';

const ADMIN_PASSWORD = 'bench-admin-password';
const TARGETS = { startupMs: 5000, rssMiB: 1536, listP99Ms: 5, changeVisibleMs: 1000, sessionsOfTrivial: 0.35, pollsOfTrivial: 0.8 };

const argv = parseCli({
  name: 'bench:scale',
  summary: `start-up and memory against identities (the large shape's 2,000 services, 500 routers and
250/250/100 policies with each --identities count), in order. Per count:
 1. The model: copied (cp --reflink=auto) from --models DIR/<count> when there, else a first start
    and the model written straight into the store (scripts/lib/model.ts), then kept there.
 2. The controller starts on it: spawn → listening is the start-up; the role index build is what it
    logs; its controller CPU; its memory once listening: RSS, of it the controller's own (anonymous:
    V8 heap and off-heap) and the mapped store's pages (file-backed), and the peak.
 With --compact the store is first rewritten compacted (each B-tree on contiguous pages, as
    "mesh backup" writes it). A model written in batches interleaves record and index pages, and
    the kernel maps the neighbours of every page read (fault-around): reading only the indexes then
    shows most of the file as resident.
 3. With --kill: a start killed (-9) halfway through (half the start-up measured just before), then
    a start after it, measured again (it must be clean: the index is rebuilt from the store).
 4. In this process, on the stopped store: the role index built again (its heap, per identity) and
    checked against a from-scratch evaluation of the records for --verify sampled identities and
    every service (src/policy/verify.ts).
 5. Unless --start-only: bench:policy's phases on a controller started on the model (as the
    worst-case identity: service list p99 at one client, session creates at each --session-clients
    level, service-update polls at 32, a policy change until every sampled identity sees it), each
    beside its ceiling of the same run (the trivial answer on the same listener, durable LMDB puts at
    the same concurrency), and the memory after them.
Ceiling of the same run: a controller on an empty store (start-up, memory). Targets: start-up ≤ 5 s
and RSS ≤ 1.5 GiB at every count; service list p99 ≤ 5 ms, session creates ≥ 35% and polls ≥ 80% of
the trivial answer, change visible ≤ 1 s. On a shared machine wall times are indicative; the controller CPU
to listening is the steadier figure.`,
  usage: ['npm run bench:scale', 'npm run bench:scale -- --identities 100000,1000000 --models /tmp/mesh-models --kill', 'npm run bench:scale -- --identities 2000 --verify 200   # a smoke run'],
  flags: {
    identities: { type: 'string', default: '100000,300000,1000000', arg: 'LIST', help: 'identity counts, in order' },
    models: { type: 'string', arg: 'DIR', help: 'keep written models in DIR/<count> and reuse them (copies)' },
    verify: { type: 'string', default: '1000', arg: 'N', help: 'sampled identities checked against the records (0: none)' },
    kill: { type: 'boolean', help: 'also kill (-9) a start halfway and measure the start after it' },
    compact: { type: 'boolean', help: 'start on a compacted copy of the store (as `mesh backup` writes it: each tree on contiguous pages)' },
    'start-only': { type: 'boolean', help: 'only start-up and memory (no service list, session creates, polls, policy change)' },
    duration: { type: 'string', default: '5', arg: 'S', help: 'seconds per timed measure of the policy phases (and per ceiling)' },
    'session-clients': { type: 'string', default: '64,256', arg: 'LIST', help: 'concurrent session creators per level' },
    seed: { type: 'string', default: '1', help: 'model seed' },
  },
});
const counts = intListFlag(argv, 'identities', 1, 10_000_000);
const verifyN = intFlag(argv, 'verify', 0, 10_000_000);
const seed = intFlag(argv, 'seed', 0, 2 ** 31);
const modelsDir = argv.models as string | undefined;
const durationMs = numFlag(argv, 'duration', 0.1, 600) * 1000;
const sessionClients = intListFlag(argv, 'session-clients', 1, 4096);
const ENV = { MESH_LOG_LEVEL: 'info' };

const log = (s: string) => process.stdout.write(s + '\n');
const MiB = (kib: number | undefined) => (kib ?? NaN) / 1024;

/** Memory of a process from /proc/<pid>/status: RSS, its anonymous and file-backed parts, the peak (KiB). */
function memoryOf(pid: number) {
  const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (name: string) => Number(new RegExp(`${name}:\\s+(\\d+)\\s+kB`).exec(s)?.[1] ?? NaN);
  return { rssKiB: kib('VmRSS'), anonKiB: kib('RssAnon'), fileKiB: kib('RssFile'), hwmKiB: kib('VmHWM') };
}

interface Level {
  identities: number;
  shape: Shape;
  modelWriteMs?: number;
  /** The first start on the model: the role index built from the store. */
  start: Start;
  /** A start after that one's clean stop: the index's entities from the snapshot it left. */
  restart: Start;
  afterKill?: Start & { killedBy: string | null; killedAfterMs: number };
  index: ReturnType<typeof inProcess>;
  policy?: Awaited<ReturnType<typeof policyPhases>>;
}

interface Start {
  startupMs: number;
  indexMs: number;
  /** Whether the role index's entities came from the snapshot of the last clean stop (src/policy/index-snapshot.ts). */
  fromSnapshot: boolean;
  cpuMs: number;
  memory: ReturnType<typeof memoryOf>;
}

async function measuredStart(dataDir: string): Promise<Start> {
  const t0 = performance.now();
  const ctl: ControllerProcess = await spawnController({ password: ADMIN_PASSWORD, env: ENV, dataDir, keepData: true, readyTimeoutMs: 600_000 });
  const startupMs = performance.now() - t0;
  const cpuMs = ctl.cpuMs() ?? NaN;
  const memory = memoryOf(ctl.pid);
  // The log is written asynchronously (src/observability/log-stream.ts): its line may trail the listening line.
  for (let i = 0; i < 100 && !/role index built/.test(ctl.output()); i++) await new Promise((r) => setTimeout(r, 50));
  const built = /"ms":(\d+),"fromSnapshot":(true|false)[^\n]*role index built/.exec(ctl.output());
  await ctl.stop();
  return { startupMs, indexMs: Number(built?.[1] ?? NaN), fromSnapshot: built?.[2] === 'true', cpuMs, memory };
}

/** A start killed (-9) after `afterMs`; resolves once it is gone. */
function killedStart(dataDir: string, afterMs: number): Promise<string | null> {
  const proc = spawn(process.execPath, [...NODE_FLAGS, MAIN], { env: { ...process.env, MESH_DATA_DIR: dataDir, MESH_ADDRESS: '127.0.0.1:0', MESH_ADMIN_PASSWORD: ADMIN_PASSWORD }, stdio: 'ignore' });
  const timer = setTimeout(() => proc.kill('SIGKILL'), afterMs);
  return new Promise((resolve) =>
    proc.once('exit', (_code, signal) => {
      clearTimeout(timer);
      resolve(signal);
    }),
  );
}

/** Rewrite the store compacted (lmdb-js backup with compaction, as src/store/snapshot.ts takes it). */
async function compactStore(dataDir: string) {
  const db = path.join(dataDir, 'db');
  const tmp = path.join(dataDir, 'db-compact');
  const store = new Store(db, createRegistry().collectionSpecs());
  fs.mkdirSync(tmp);
  try {
    await store.env.backup(tmp, true);
  } finally {
    await store.close();
  }
  fs.rmSync(db, { recursive: true, force: true });
  fs.renameSync(tmp, db);
}

/** bench:policy's phases on a controller started on the model (bench/lib/policy-phases.ts), and its memory after them. */
async function policyPhases(dataDir: string, model: Parameters<typeof measurePolicy>[0]['model']) {
  const ctl = await spawnController({ password: ADMIN_PASSWORD, env: ENV, dataDir, keepData: true, readyTimeoutMs: 600_000 });
  try {
    const m = await measurePolicy({ ctl, adminPassword: ADMIN_PASSWORD, model, chart: new RunChart(ctl.pid), durationMs, concurrency: 32, apiSessions: 32, sessionClients, clientKind: 'raw', log: (line) => log(`  ${line}`) });
    const strip = <T extends { timeline?: unknown }>({ timeline: _, ...rest }: T): Omit<T, 'timeline'> => rest;
    return {
      serviceListC1: strip(m.list1),
      trivialAtOne: strip(m.trivial1),
      trivial: strip(m.trivialC),
      sessionLevels: m.sessionLevels.map((l) => ({ clients: l.clients, okPerSec: l.result.okPerSec, latency: l.result.latency, errors: l.result.errors, lmdbPutPerSec: m.lmdb.get(l.clients)?.perSec, ratioToLmdbPut: l.ratio, ratioToTrivial: m.trivialC.perSec ? l.result.okPerSec / m.trivialC.perSec : undefined, cpuMsPerRequest: l.cpuMsPerRequest, mainCpuMsPerRequest: l.mainCpuMsPerRequest })),
      polls: { ...strip(m.polls), ratioToTrivial: m.pollRatio, cpuMsPerRequest: m.pollCpu },
      changeVisibleMs: m.changeMs,
      memoryAfter: memoryOf(ctl.pid),
    };
  } finally {
    await ctl.stop();
  }
}

/** The role index built in this process on the stopped store: its time, its heap, and the check. */
function inProcess(dataDir: string) {
  const gc = (globalThis as { gc?: () => void }).gc;
  const store = new Store(path.join(dataDir, 'db'), createRegistry().collectionSpecs());
  try {
    gc?.();
    const heap0 = process.memoryUsage();
    const t0 = performance.now();
    const engine = new PolicyEngine(store, { sweepMs: 3_600_000 });
    const buildMs = performance.now() - t0;
    gc?.();
    const heap1 = process.memoryUsage();
    const sample = verifyN > 0 ? sampleIds(store, verifyN) : [];
    const check = verifyN > 0 ? checkIndex(store, engine, sample) : undefined;
    engine.close();
    // The index as the restart read it: the snapshot the last clean stop left, checked alike.
    const t1 = performance.now();
    const restored = new PolicyEngine(store, { sweepMs: 3_600_000, snapshotFile: path.join(dataDir, ROLE_INDEX_SNAPSHOT) });
    const restoreMs = performance.now() - t1;
    const restoredCheck = verifyN > 0 && restored.fromSnapshot ? checkIndex(store, restored, sample) : undefined;
    restored.close();
    return {
      restoreMs,
      fromSnapshot: restored.fromSnapshot,
      restoredCheck: restoredCheck && { identities: restoredCheck.identities, services: restoredCheck.services, mismatches: restoredCheck.mismatches },
      buildMs,
      heapBytes: heap1.heapUsed - heap0.heapUsed,
      offHeapBytes: heap1.external + heap1.arrayBuffers - heap0.external - heap0.arrayBuffers,
      measuredAfterGc: !!gc,
      check: check && { identities: check.identities, services: check.services, policies: check.policies, mismatches: check.mismatches, ms: Math.round(check.ms) },
    };
  } finally {
    void store.close();
  }
}

async function main() {
  const started = new Date();
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-bench-scale-'));
  try {
    // Ceiling: the same controller on an empty store.
    const emptyDir = path.join(work, 'empty');
    const first = await spawnController({ password: ADMIN_PASSWORD, env: ENV, dataDir: emptyDir, keepData: true });
    await first.stop();
    const empty = await measuredStart(emptyDir);
    log(`empty store: start-up ${fmt(empty.startupMs, 0)} ms, RSS ${fmt(MiB(empty.memory.rssKiB), 0)} MiB`);

    const levels: Level[] = [];
    for (const n of counts) {
      const shape = shapeFor(n);
      const dataDir = path.join(work, String(n));
      fs.mkdirSync(dataDir);
      log(`${n.toLocaleString('en')} identities (shape ${shape.name}):`);
      const prepared = await preparedModel(shape, dataDir, { seed, password: ADMIN_PASSWORD, modelsDir, env: ENV });
      const writeMs = prepared.writeMs;
      if (writeMs !== undefined) log(`  model written in ${fmt(writeMs / 1000, 1)} s (${fmt(n / (writeMs / 1000), 0)} identities/s)`);
      if (argv.compact) await compactStore(dataDir);
      // The first start builds the index from the store, whatever a kept model's directory holds.
      fs.rmSync(path.join(dataDir, ROLE_INDEX_SNAPSHOT), { force: true });
      const start = await measuredStart(dataDir);
      log(`  start-up ${fmt(start.startupMs, 0)} ms (index ${start.indexMs} ms, controller CPU ${fmt(start.cpuMs, 0)} ms); RSS ${fmt(MiB(start.memory.rssKiB), 0)} MiB = ${fmt(MiB(start.memory.anonKiB), 0)} controller + ${fmt(MiB(start.memory.fileKiB), 0)} mapped files, peak ${fmt(MiB(start.memory.hwmKiB), 0)} MiB`);
      const restart = await measuredStart(dataDir);
      log(`  restart after a clean stop: ${fmt(restart.startupMs, 0)} ms (index ${restart.indexMs} ms, ${restart.fromSnapshot ? 'entities from the snapshot' : 'NOT from the snapshot'}, controller CPU ${fmt(restart.cpuMs, 0)} ms); RSS ${fmt(MiB(restart.memory.rssKiB), 0)} MiB`);
      let afterKill: Level['afterKill'];
      if (argv.kill) {
        const killedAfterMs = Math.round(start.startupMs / 2);
        const killedBy = await killedStart(dataDir, killedAfterMs);
        afterKill = { ...(await measuredStart(dataDir)), killedBy, killedAfterMs };
        log(`  killed (${killedBy}) ${killedAfterMs} ms into a start; the next start: ${fmt(afterKill.startupMs, 0)} ms (index ${afterKill.indexMs} ms${afterKill.fromSnapshot ? ', from the snapshot' : ''})`);
      }
      const index = inProcess(dataDir);
      log(`  role index from the snapshot in this process: ${index.fromSnapshot ? `${fmt(index.restoreMs, 0)} ms` : 'NOT USED'}${index.restoredCheck ? `; check: ${index.restoredCheck.mismatches.length ? index.restoredCheck.mismatches.join('\n    ') : 'no mismatch'}` : ''}`);
      log(`  role index in this process: ${fmt(index.buildMs, 0)} ms, heap ${fmt(index.heapBytes / 2 ** 20, 0)} MiB + off-heap (bitsets) ${fmt(index.offHeapBytes / 2 ** 20, 0)} MiB (${fmt((index.heapBytes + index.offHeapBytes) / n, 0)} B per identity)${index.check ? `; check of ${index.check.identities} identities and ${index.check.services} services: ${index.check.mismatches.length ? index.check.mismatches.join('\n    ') : 'no mismatch'}` : ''}`);
      const policy = argv['start-only'] ? undefined : await policyPhases(dataDir, prepared.summary);
      levels.push({ identities: n, shape, modelWriteMs: writeMs && Math.round(writeMs), start, restart, afterKill, index, policy });
      fs.rmSync(dataDir, { recursive: true, force: true });
    }

    const rows = levels.map((l) => [
      l.identities.toLocaleString('en'),
      `${fmt(l.start.startupMs, 0)} ms`,
      `${l.start.indexMs} ms`,
      `${fmt(l.restart.startupMs, 0)} ms${l.restart.fromSnapshot ? '' : ' (no snapshot)'}`,
      `${fmt(l.start.cpuMs, 0)} ms`,
      `${fmt(MiB(l.start.memory.rssKiB), 0)} MiB`,
      `${fmt(MiB(l.start.memory.anonKiB), 0)} MiB`,
      `${fmt(MiB(l.start.memory.fileKiB), 0)} MiB`,
      `${fmt(l.index.heapBytes / l.identities, 0)} + ${fmt(l.index.offHeapBytes / l.identities, 0)} B`,
      l.index.check ? (l.index.check.mismatches.length || l.index.restoredCheck?.mismatches.length || !l.index.fromSnapshot ? 'MISMATCH' : `ok (${l.index.check.identities}, both)`) : '-',
      `${l.restart.startupMs <= TARGETS.startupMs ? 'ok' : 'MISSED'} / ${l.start.startupMs <= TARGETS.startupMs ? 'ok' : 'MISSED'} / ${MiB(l.start.memory.hwmKiB) <= TARGETS.rssMiB ? 'ok' : 'MISSED'}`,
    ]);
    rows.push(['empty store (ceiling)', `${fmt(empty.startupMs, 0)} ms`, `${empty.indexMs} ms`, `${fmt(empty.startupMs, 0)} ms`, `${fmt(empty.cpuMs, 0)} ms`, `${fmt(MiB(empty.memory.rssKiB), 0)} MiB`, `${fmt(MiB(empty.memory.anonKiB), 0)} MiB`, `${fmt(MiB(empty.memory.fileKiB), 0)} MiB`, '', '', '']);
    log('\n' + table(['identities', 'first start', 'index build', 'restart', 'controller CPU', 'RSS', 'controller', 'mapped files', 'index heap + off-heap/identity', 'check', `restart, first start ≤ ${TARGETS.startupMs / 1000} s; peak ≤ ${TARGETS.rssMiB / 1024} GiB`], rows));
    const measured = levels.filter((l) => l.policy);
    if (measured.length) {
      const sessionCols = sessionClients.map((c) => `session creates c=${c}`);
      const prow = measured.map((l) => {
        const p = l.policy!;
        return [
          l.identities.toLocaleString('en'),
          l.modelWriteMs ? `${fmt(l.identities / (l.modelWriteMs / 1000), 0)}/s` : 'kept',
          `${fmt(p.serviceListC1.latency.p99)} ms (${pct(p.serviceListC1.okPerSec / p.trivialAtOne.perSec)})`,
          ...sessionClients.map((c) => {
            const s = p.sessionLevels.find((x) => x.clients === c);
            return s ? `${fmt(s.okPerSec, 0)}/s (${pct(s.ratioToTrivial)} trivial, ${pct(s.ratioToLmdbPut)} LMDB)` : '-';
          }),
          `${fmt(p.polls.okPerSec, 0)}/s (${pct(p.polls.ratioToTrivial)})`,
          `${fmt(p.changeVisibleMs, 0)} ms`,
          `${fmt(MiB(p.memoryAfter.rssKiB), 0)} / ${fmt(MiB(p.memoryAfter.hwmKiB), 0)} MiB`,
        ];
      });
      log('\n' + table(['identities', 'model write', `service list p99 c=1 (of trivial)`, ...sessionCols, 'polls c=32 (of trivial)', 'change visible', 'RSS after / peak'], prow));
      log(`targets: list p99 ≤ ${TARGETS.listP99Ms} ms, session creates ≥ ${pct(TARGETS.sessionsOfTrivial)} and polls ≥ ${pct(TARGETS.pollsOfTrivial)} of the trivial answer (c=32, same listener and client), change visible ≤ ${TARGETS.changeVisibleMs} ms`);
    }
    log(`(load average: ${os.loadavg().map((x) => x.toFixed(1)).join(' ')} on ${os.cpus().length} CPUs)`);

    const x = (f: (l: Level) => number): [number, number][] => levels.map((l) => [l.identities / 1000, f(l)]);
    const px = (f: (p: NonNullable<Level['policy']>) => number): [number, number][] => measured.map((l) => [l.identities / 1000, f(l.policy!)]);
    const svg = renderChart({
      title: 'bench:scale — start-up, memory and the policy phases against identities (thousands)',
      subtitle: `${started.toISOString()}; ceiling: the same controller on an empty store`,
      panels: [
        { title: 'start-up', unit: 'ms', series: [{ name: 'first start', points: x((l) => l.start.startupMs) }, { name: 'role index build', points: x((l) => l.start.indexMs) }, { name: 'restart (snapshot)', points: x((l) => l.restart.startupMs) }, { name: 'ceiling: empty store', points: x(() => empty.startupMs) }] },
        { title: 'memory', unit: 'MiB', series: [{ name: 'RSS', points: x((l) => MiB(l.start.memory.rssKiB)) }, { name: 'controller (anonymous)', points: x((l) => MiB(l.start.memory.anonKiB)) }, { name: 'mapped files', points: x((l) => MiB(l.start.memory.fileKiB)) }, { name: 'ceiling: empty store', points: x(() => MiB(empty.memory.rssKiB)) }] },
        ...(measured.length
          ? [
              { title: 'service list p99, c=1', unit: 'ms', series: [{ name: 'service list', points: px((p) => p.serviceListC1.latency.p99) }, { name: 'ceiling: trivial answer', points: px((p) => p.trivialAtOne.p99Ms) }] },
              {
                title: 'per second',
                unit: '/s',
                series: [
                  ...sessionClients.map((c) => ({ name: `session creates c=${c}`, points: px((p) => p.sessionLevels.find((s) => s.clients === c)?.okPerSec ?? NaN) })),
                  { name: 'polls c=32', points: px((p) => p.polls.okPerSec) },
                  { name: 'ceiling: trivial answer c=32', points: px((p) => p.trivial.perSec) },
                ],
              },
              { title: 'policy change visible', unit: 'ms', series: [{ name: 'every sampled identity', points: px((p) => p.changeVisibleMs) }] },
            ]
          : []),
      ],
    });
    fs.mkdirSync(resultsDir(), { recursive: true });
    const stamp = started.toISOString().replace(/[:.]/g, '-');
    for (const f of [`scale-${stamp}.svg`, 'scale-latest.svg']) fs.writeFileSync(path.join(resultsDir(), f), svg);
    const file = writeResults('scale', { bench: 'scale', seed, compacted: !!argv.compact, machine: machineInfo(), loadavgAtEnd: os.loadavg(), targets: TARGETS, empty, levels }, started);
    log(`results: ${file}`);
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

main().catch((e) => {
  process.stderr.write(`${e?.stack ?? e}\n`);
  process.exit(1);
});
