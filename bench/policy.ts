/**
 * bench:policy — the policy engine at upstream's scale shape "large", each figure also as a ratio to
 * its ceiling measured in the same run (`--help` lists phases, ceilings, targets and flags).
 * Writes bench/results/policy-<ts>.json and .svg (and policy-latest.*).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ClientKind } from './lib/http.js';
import { spawnController, type ControllerProcess } from './lib/controller.js';
import { machineInfo, table, fmt, writeResults } from './lib/report.js';
import { parseCli, intFlag, numFlag, intListFlag, choiceFlag } from './lib/cli.js';
import { progressBar } from './lib/progress.js';
import { pct } from './lib/raw-ceilings.js';
import { RunChart } from './lib/run-chart.js';
import { summarizeProfile, formatProfile, latestProfile } from './lib/cpuprofile.js';
import { ROOT } from './lib/controller.js';
import { SHAPES } from '../scripts/lib/model.js';
import { preparedModel, shapeFor } from './lib/models.js';
import { measurePolicy } from './lib/policy-phases.js';

const ADMIN_PASSWORD = 'bench-admin-password';
const TARGETS = { listP99Ms: 5, sessionsPerSec: 10_000, pollsPerSec: 50_000, changeVisibleMs: 1000, startupMs: 10_000, rssMiB: 1024 };


const argv = parseCli({
  name: 'bench:policy',
  summary: `the policy engine at a model shape (default large: 100k identities, 2k services, 500 routers,
250/250/100 policies).
 1. A data directory gets its first start, then the model is written straight into its store
    (scripts/lib/model.ts writeModelToStore); the worst-case identity is in every policy.
 2. The controller starts on it: spawn → listening is the start-up time (role index included).
 3. As the worst-case identity: GET /services?limit=100 at concurrency 1; session creates/s at each
    --session-clients level; GET /current-api-session/service-updates polls/s.
 4. A policy change affecting every identity: time until the new service is listed.
 5. Resident memory of the controller.
Ceilings of the same run, with the same client: GET /health/live on the same listener at 1 and at
--concurrency (service list, polls), durable LMDB puts at each session level (session creates).
Targets: list p99 ≤ 5 ms at one client (its ratio to the trivial answer is shown to follow drift); session creates ≥ 50% of the
LMDB puts at the same concurrency; polls ≥ 50% of the trivial answer; change visible ≤ 1 s; start-up
≤ 10 s; RSS ≤ 1 GiB. The default client is raw (bench/lib/raw-http.ts): undici spends ~26 µs of client
CPU per request.`,
  usage: ['npm run bench:policy', 'npm run bench:policy -- --shape medium --duration 3', 'npm run bench:policy -- --identities 1000000 --models /tmp/mesh-models   # the huge shape, its model kept for the next run', 'npm run bench:policy -- --shape tiny --duration 0.5 --session-clients 8   # a smoke run'],
  flags: {
    shape: { type: 'string', default: 'large', arg: 'NAME', help: `model shape (${Object.keys(SHAPES).join(', ')})` },
    duration: { type: 'string', default: '5', arg: 'S', help: 'seconds per timed measure (and per ceiling)' },
    concurrency: { type: 'string', default: '32', arg: 'C', help: 'concurrent clients for polls' },
    sessions: { type: 'string', default: '32', arg: 'K', help: 'API sessions of the worst-case identity' },
    'session-clients': { type: 'string', default: '64,256', arg: 'LIST', help: 'concurrent session creators per level, each on its own connection' },
    identities: { type: 'string', arg: 'N', help: "identities with the large shape's services, routers and policies (instead of --shape)" },
    models: { type: 'string', arg: 'DIR', help: 'keep the written model in DIR/<identities> and reuse it (a copy) in later runs' },
    seed: { type: 'string', default: '1', help: 'model seed' },
    client: { type: 'string', arg: 'raw|undici|https', help: 'HTTP client (default raw)' },
    'keep-data': { type: 'boolean', help: "keep the controller's data directory (and the profile)" },
    'cpu-prof': { type: 'boolean', help: 'profile the controller and print hot spots per phase' },
  },
});
const shape = argv.identities !== undefined ? shapeFor(intFlag(argv, 'identities', 1, 10_000_000)) : SHAPES[String(argv.shape)];
const modelsDir = argv.models as string | undefined;
if (!shape) {
  process.stderr.write(`--shape: unknown shape ${argv.shape} (known: ${Object.keys(SHAPES).join(', ')})\n`);
  process.exit(2);
}
const durationMs = numFlag(argv, 'duration', 0.1, 600) * 1000;
const concurrency = intFlag(argv, 'concurrency', 1, 4096);
const apiSessions = intFlag(argv, 'sessions', 1, 10_000);
const sessionClients = intListFlag(argv, 'session-clients', 1, 4096);
const seed = intFlag(argv, 'seed', 0, 2 ** 31);
const clientKind = (choiceFlag(argv, 'client', ['raw', 'undici', 'https'] as const) ?? 'raw') as ClientKind;
const RATIO_TARGETS = { sessions: 0.5, polls: 0.5 };

// ---- run -------------------------------------------------------------------------------------

const log = (s: string) => process.stdout.write(s + '\n');

async function main() {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-bench-policy-'));
  const env = { MESH_LOG_LEVEL: 'info' };
  let ctl: ControllerProcess | undefined;
  try {
    log(`shape ${shape.name}: ${modelsDir && fs.existsSync(path.join(modelsDir, String(shape.identities), 'db')) ? 'copying the kept model' : 'writing the model'} …`);
    const writing = progressBar(`the ${shape.name} model`, {});
    const prepared = await preparedModel(shape, dataDir, { seed, password: ADMIN_PASSWORD, modelsDir, env });
    const model = prepared.summary;
    const seeded = { via: prepared.writeMs === undefined ? `a copy of ${modelsDir}/${shape.identities}` : 'scripts/lib/model.ts writeModelToStore', worstCaseIdentityId: model.worstCaseIdentityId, ids: model.ids, elapsedMs: prepared.writeMs ?? NaN };
    writing.done();
    if (prepared.writeMs !== undefined) log(`model written in ${(prepared.writeMs / 1000).toFixed(1)} s`);

    const t0 = performance.now();
    const profDir = argv['cpu-prof'] ? fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-bench-prof-')) : undefined;
    ctl = await spawnController({ password: ADMIN_PASSWORD, env, dataDir, readyTimeoutMs: 120_000, nodeArgs: profDir ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : [] });
    const startupMs = performance.now() - t0;
    const started = new Date();
    const chart = new RunChart(ctl.pid);
    // The log is written asynchronously (src/observability/log-stream.ts): its line may trail the listening line.
    for (let i = 0; i < 40 && !/role index built/.test(ctl.output()); i++) await new Promise((r) => setTimeout(r, 50));
    const indexMs = Number(/"ms":(\d+)[^\n]*role index built/.exec(ctl.output())?.[1] ?? NaN);
    log(`start-up to serving: ${fmt(startupMs, 0)} ms (role index build ${indexMs} ms)`);

    const m = await measurePolicy({ ctl, adminPassword: ADMIN_PASSWORD, model: seeded, chart, durationMs, concurrency, apiSessions, sessionClients, clientKind, log });
    const { list1, listC, listCpu, listRatio, sessionLevels, best, polls, pollCpu, pollMainCpu, pollRatio, changeMs, patchMs, trivial1, trivialC, lmdb, windows } = m;
    const mem = ctl.memory();
    const rssMiB = (mem?.rssKiB ?? NaN) / 1024;
    const peakMiB = (mem?.hwmKiB ?? NaN) / 1024;
    const bestLmdb = best ? lmdb.get(best.clients) : undefined;
    const rows: (string | number)[][] = [
      ['client service list (limit 100, worst case), c=1', `p99 ${fmt(list1.latency.p99)} ms, ${fmt(list1.okPerSec, 0)}/s`, pct(listRatio), `trivial ${fmt(trivial1.perSec, 0)}/s`, `p99 ≤ ${TARGETS.listP99Ms} ms`, list1.latency.p99 <= TARGETS.listP99Ms ? 'ok' : 'MISSED'],
      ...sessionLevels.map((l) => [`session creates (${l.clients} clients)`, `${fmt(l.result.okPerSec, 0)}/s`, pct(l.ratio), `LMDB put ${fmt(lmdb.get(l.clients)?.perSec, 0)}/s`, `≥ ${pct(RATIO_TARGETS.sessions)}`, (l.ratio ?? 0) >= RATIO_TARGETS.sessions ? 'ok' : 'MISSED']),
      ['service-update polls', `${fmt(polls.okPerSec, 0)}/s`, pct(pollRatio), `trivial ${fmt(trivialC.perSec, 0)}/s`, `≥ ${pct(RATIO_TARGETS.polls)}`, (pollRatio ?? 0) >= RATIO_TARGETS.polls ? 'ok' : 'MISSED'],
      ['policy change visible (all identities)', `${fmt(changeMs, 1)} ms`, '', '', `≤ ${TARGETS.changeVisibleMs} ms`, changeMs <= TARGETS.changeVisibleMs ? 'ok' : 'MISSED'],
      ['start-up to serving', `${fmt(startupMs, 0)} ms`, '', '', `≤ ${TARGETS.startupMs} ms`, startupMs <= TARGETS.startupMs ? 'ok' : 'MISSED'],
      ['resident memory (now / peak)', `${fmt(rssMiB, 0)} / ${fmt(peakMiB, 0)} MiB`, '', '', `≤ ${TARGETS.rssMiB} MiB`, peakMiB <= TARGETS.rssMiB ? 'ok' : 'MISSED'],
    ];
    const chartFile = chart.write('policy', `bench:policy — shape ${shape.name}`, started);
    log('\n' + table(['measure', 'result', 'of ceiling', 'ceiling', 'target', ''], rows));
    log(`(load average during the run: ${os.loadavg().map((x) => x.toFixed(1)).join(' ')} on ${os.cpus().length} CPUs)`);
    const file = writeResults('policy', {
      bench: 'policy',
      shape,
      seed,
      model: { via: seeded.via, elapsedMs: Math.round(seeded.elapsedMs), worstCaseIdentityId: seeded.worstCaseIdentityId, worstCaseServices: m.visible, worstCaseDialable: m.dialable },
      machine: machineInfo(),
      startupMs: Math.round(startupMs),
      indexBuildMs: indexMs,
      ceilings: { trivialAnswerAtOne: { ...trivial1, timeline: undefined }, trivialAnswer: { ...trivialC, timeline: undefined }, lmdbPut: [...lmdb.values()].map((x) => ({ ...x, timeline: undefined })) },
      chart: path.relative(ROOT, chartFile),
      serviceList: { c1: { ...list1, timeline: undefined }, [`c${Math.min(concurrency, 8)}`]: { ...listC, timeline: undefined }, cpuMsPerRequest: listCpu, ratioToTrivial: listRatio },
      sessions: best && { ...best.result, timeline: undefined, clients: best.clients, cpuMsPerRequest: best.cpuMsPerRequest, mainCpuMsPerRequest: best.mainCpuMsPerRequest, ratioToLmdbPut: best.ratio, lmdbPutPerSec: bestLmdb?.perSec },
      sessionLevels: sessionLevels.map((l) => ({ clients: l.clients, okPerSec: l.result.okPerSec, ratioToLmdbPut: l.ratio, latency: l.result.latency, errors: l.result.errors, cpuMsPerRequest: l.cpuMsPerRequest, mainCpuMsPerRequest: l.mainCpuMsPerRequest })),
      polls: { ...polls, timeline: undefined, cpuMsPerRequest: pollCpu, mainCpuMsPerRequest: pollMainCpu, ratioToTrivial: pollRatio },
      loadAverage: os.loadavg(),
      policyChange: { visibleMs: changeMs, patchMs },
      memory: { rssMiB, peakMiB },
      targets: { ...TARGETS, ratios: RATIO_TARGETS },
    }, started);
    log(`\nresults: ${path.relative(ROOT, file)}; chart: ${path.relative(ROOT, chartFile)}`);
    if (profDir) {
      await ctl.stop();
      const prof = latestProfile(profDir);
      if (prof) for (const [name, w] of Object.entries(windows)) log(`\n== ${name} ==\n${formatProfile(summarizeProfile(prof, { root: ROOT, window: w }), 20)}`);
      // With --keep-data the whole-run profile stays too (e.g. for what the alert scans cost).
      if (!argv['keep-data']) fs.rmSync(profDir, { recursive: true, force: true });
      else if (prof) {
        // The phases' windows beside it, so two runs' profiles can be compared phase by phase.
        fs.writeFileSync(`${prof}.windows.json`, JSON.stringify(windows));
        log(`profile kept in ${prof} (phase windows in ${prof}.windows.json)`);
      }
    }
  } finally {
    await ctl?.stop();
    if (!argv['keep-data']) fs.rmSync(dataDir, { recursive: true, force: true });
    else log(`data kept in ${dataDir}`);
  }
}

main().catch((e) => {
  process.stderr.write(`bench/policy failed: ${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});
