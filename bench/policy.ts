/**
 * bench:policy — the policy engine at upstream's scale shape "large", each figure also as a ratio to
 * its ceiling measured in the same run (`--help` lists phases, ceilings, targets and flags).
 * Writes bench/results/policy-<ts>.json and .svg (and policy-latest.*).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createClient, requestJson, type ClientKind, type HttpClient, type RequestSpec } from './lib/http.js';
import { spawnController, login, MGMT, type ControllerProcess } from './lib/controller.js';
import { runLoad, type LoadResult } from './lib/load.js';
import { machineInfo, table, fmt, writeResults } from './lib/report.js';
import { parseCli, intFlag, numFlag, intListFlag, choiceFlag } from './lib/cli.js';
import { progressBar } from './lib/progress.js';
import { lmdbCommit, trivialAnswer, ratio, pct, type RawCeiling } from './lib/raw-ceilings.js';
import { RunChart } from './lib/run-chart.js';
import { summarizeProfile, formatProfile, latestProfile } from './lib/cpuprofile.js';
import { ROOT } from './lib/controller.js';
import { SHAPES, writeModelToStore } from '../scripts/lib/model.js';

const CLIENT = '/edge/client/v1';
const ADMIN_PASSWORD = 'bench-admin-password';
const USER_PASSWORD = 'bench-user-password';
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
  usage: ['npm run bench:policy', 'npm run bench:policy -- --shape medium --duration 3', 'npm run bench:policy -- --shape tiny --duration 0.5 --session-clients 8   # a smoke run'],
  flags: {
    shape: { type: 'string', default: 'large', arg: 'NAME', help: `model shape (${Object.keys(SHAPES).join(', ')})` },
    duration: { type: 'string', default: '5', arg: 'S', help: 'seconds per timed measure (and per ceiling)' },
    concurrency: { type: 'string', default: '32', arg: 'C', help: 'concurrent clients for polls' },
    sessions: { type: 'string', default: '32', arg: 'K', help: 'API sessions of the worst-case identity' },
    'session-clients': { type: 'string', default: '64,256', arg: 'LIST', help: 'concurrent session creators per level, each on its own connection' },
    seed: { type: 'string', default: '1', help: 'model seed' },
    client: { type: 'string', arg: 'raw|undici|https', help: 'HTTP client (default raw)' },
    'keep-data': { type: 'boolean', help: "keep the controller's data directory (and the profile)" },
    'cpu-prof': { type: 'boolean', help: 'profile the controller and print hot spots per phase' },
  },
});
const shape = SHAPES[String(argv.shape)];
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
  let client: HttpClient | undefined;
  try {
    // First start: PKI and the default admin, exactly as a real first start makes them.
    const first = await spawnController({ password: ADMIN_PASSWORD, env, dataDir });
    await first.stop();
    log(`shape ${shape.name}: writing the model …`);
    const writing = progressBar(`writing the ${shape.name} model`, {});
    const model = await writeModelToStore(dataDir, shape, { seed, env: { MESH_ADMIN_PASSWORD: ADMIN_PASSWORD, MESH_ADDRESS: '127.0.0.1:0' } });
    const seeded = { via: 'scripts/lib/model.ts writeModelToStore', worstCaseIdentityId: model.worstCaseIdentityId, identityIds: model.ids.identities, elapsedMs: model.elapsedMs };
    writing.done();
    log(`model written in ${(seeded.elapsedMs / 1000).toFixed(1)} s`);

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

    client = await createClient({ origin: ctl.origin, ca: ctl.ca, connections: concurrency, kind: clientKind });
    const adminToken = await login(client, 'admin', ADMIN_PASSWORD);
    const ah = { accept: 'application/json', 'zt-session': adminToken };
    const addUser = async (identityId: string, username: string) => {
      const r = await requestJson(client!, 'POST', `${MGMT}/authenticators`, ah, { identityId, method: 'updb', username, password: USER_PASSWORD });
      if (r.status !== 201) throw new Error(`authenticator for ${identityId}: ${r.status} ${JSON.stringify(r.body)}`);
    };
    const clientLogin = async (username: string) => {
      const r = await requestJson(client!, 'POST', `${CLIENT}/authenticate?method=password`, { accept: 'application/json' }, { username, password: USER_PASSWORD });
      if (r.status !== 200) throw new Error(`client login ${username}: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body.data.token as string;
    };
    await addUser(seeded.worstCaseIdentityId, 'bench-worst');
    const tokens: string[] = [];
    for (let i = 0; i < apiSessions; i++) tokens.push(await clientLogin('bench-worst'));
    const wh = { accept: 'application/json', 'zt-session': tokens[0] };

    // Ceilings of this run, with the same client: the listener at 1 and C, the disk at each session level.
    const trivial1 = await trivialAnswer(client, 1, durationMs);
    const trivialC = await trivialAnswer(client, concurrency, durationMs);
    chart.add('ceiling: trivial c=1', trivial1.timeline);
    chart.add(`ceiling: trivial c=${concurrency}`, trivialC.timeline);
    const lmdb = new Map<number, RawCeiling>();
    for (const c of sessionClients) {
      const x = await lmdbCommit({ concurrency: c, durationMs });
      lmdb.set(c, x);
      chart.add(`ceiling: LMDB put c=${c}`, x.timeline);
    }
    log(`ceilings: trivial answer ${fmt(trivial1.perSec, 0)}/s at c=1, ${fmt(trivialC.perSec, 0)}/s at c=${concurrency}; durable LMDB put ${[...lmdb.values()].map((x) => `${fmt(x.perSec, 0)}/s at c=${x.concurrency}`).join(', ')}`);
    const all = await requestJson(client, 'GET', `${CLIENT}/services?limit=-1`, wh);
    const visible = (all.body.data as { id: string; permissions: string[] }[]) ?? [];
    const dialable = visible.filter((s) => s.permissions.includes('Dial')).map((s) => s.id);
    log(`worst-case identity: ${visible.length} services (${dialable.length} dialable), ${apiSessions} API sessions`);

    // Controller CPU time per request: a figure that other load on the machine does not distort.
    const windows: Record<string, [number, number]> = {};
    const monoUs = () => Number(process.hrtime.bigint() / 1000n);
    // The main thread's share too: work moved to the worker pool leaves the event loop free.
    const cpuPer = async (name: string, run: () => Promise<LoadResult>) => {
      const c0 = ctl!.cpuMs() ?? NaN;
      const m0 = ctl!.mainThreadCpuMs() ?? NaN;
      const w0 = monoUs();
      const r = await run();
      windows[name] = [w0, monoUs()];
      const n = Math.max(1, r.requests);
      return { r, cpuMsPerRequest: ((ctl!.cpuMs() ?? NaN) - c0) / n, mainCpuMsPerRequest: ((ctl!.mainThreadCpuMs() ?? NaN) - m0) / n };
    };

    // 1. Client service list, limit 100, worst-case identity, one request at a time.
    const listSpec: RequestSpec = { method: 'GET', path: `${CLIENT}/services?limit=100`, headers: wh };
    await runLoad({ client, concurrency: 1, requests: [listSpec], durationMs: 500 });
    const { r: list1, cpuMsPerRequest: listCpu } = await cpuPer('service list', () => runLoad({ client: client!, concurrency: 1, requests: [listSpec], durationMs, label: 'service list c=1' }));
    const listC = await runLoad({ client, concurrency: Math.min(concurrency, 8), requests: [listSpec], durationMs, label: `service list c=${Math.min(concurrency, 8)}` });
    chart.add('service list c=1', list1.timeline);
    chart.add(`service list c=${Math.min(concurrency, 8)}`, listC.timeline);
    const listRatio = ratio(list1.okPerSec, trivial1.perSec);
    log(`service list p50 ${fmt(list1.latency.p50)} ms p99 ${fmt(list1.latency.p99)} ms (c=1); ${fmt(listC.rps, 0)}/s at c=${Math.min(concurrency, 8)}; controller CPU ${fmt(listCpu, 3)} ms/request`);

    const pollSpecs = tokens.map((tok) => ({ method: 'GET', path: `${CLIENT}/current-api-session/service-updates`, headers: { accept: 'application/json', 'zt-session': tok } }));

    // 2. Session creates: each (API session, dialable service) pair once.
    const sessionSpecs: RequestSpec[] = [];
    for (const sid of dialable) for (const tok of tokens) sessionSpecs.push({ method: 'POST', path: `${CLIENT}/sessions`, headers: { accept: 'application/json', 'content-type': 'application/json', 'zt-session': tok }, body: Buffer.from(JSON.stringify({ serviceId: sid, type: 'Dial' })) });
    // Each level of concurrent clients (each on its own keep-alive connection) creates its own
    // share of the pairs. A session is a durable write: its rate is writes per group commit × commits
    // per second, and the writes per commit are the clients waiting, so the levels show both the
    // latency-bound and the saturated regime.
    const levels = sessionClients.filter((c) => c > 0);
    const perLevel = Math.floor(Math.min(sessionSpecs.length, 60_000) / Math.max(1, levels.length));
    const sessionLevels: { clients: number; result: LoadResult; cpuMsPerRequest: number; mainCpuMsPerRequest: number; ratio?: number }[] = [];
    for (const [i, clients] of levels.entries()) {
      if (perLevel === 0) break;
      const c = await createClient({ origin: ctl.origin, ca: ctl.ca, connections: clients, kind: clientKind });
      try {
        // Connections opened (TLS handshakes) before the clock starts: a poll on each.
        await runLoad({ client: c, concurrency: clients, requests: pollSpecs, count: clients * 4 });
        const { r, cpuMsPerRequest, mainCpuMsPerRequest } = await cpuPer(`session create c=${clients}`, () => runLoad({ client: c, concurrency: clients, requests: sessionSpecs.slice(i * perLevel, (i + 1) * perLevel), count: perLevel, label: `session creates c=${clients}` }));
        sessionLevels.push({ clients, result: r, cpuMsPerRequest, mainCpuMsPerRequest, ratio: ratio(r.okPerSec, lmdb.get(clients)?.perSec) });
        chart.add(`session creates c=${clients}`, r.timeline);
        log(`session creates, ${clients} clients: ${fmt(r.okPerSec, 0)}/s p50 ${fmt(r.latency.p50)} ms p99 ${fmt(r.latency.p99)} ms (${r.ok} created, errors ${JSON.stringify(r.errors)}); controller CPU ${fmt(cpuMsPerRequest, 3)} ms/request (main thread ${fmt(mainCpuMsPerRequest, 3)})`);
      } finally {
        await c.close();
      }
    }
    const best = sessionLevels.reduce<(typeof sessionLevels)[number] | undefined>((b, l) => (!b || (l.ratio ?? 0) > (b.ratio ?? 0) ? l : b), undefined);

    // 3. Service-update polls.
    await runLoad({ client, concurrency, requests: pollSpecs, durationMs: 500 });
    const { r: polls, cpuMsPerRequest: pollCpu, mainCpuMsPerRequest: pollMainCpu } = await cpuPer('service-update polls', () => runLoad({ client: client!, concurrency, requests: pollSpecs, durationMs, label: 'service-update polls' }));
    chart.add('service-update polls', polls.timeline);
    const pollRatio = ratio(polls.okPerSec, trivialC.perSec);
    log(`service-update polls: ${fmt(polls.okPerSec, 0)}/s p99 ${fmt(polls.latency.p99)} ms; controller CPU ${fmt(pollCpu, 3)} ms/request (main thread ${fmt(pollMainCpu, 3)})`);

    // 4. A policy change affecting every identity: the `#all` service policy gains a new service.
    const others = [1, 2, 3].map((k) => seeded.identityIds[Math.floor((k * seeded.identityIds.length) / 4)]);
    for (const [k, id] of others.entries()) await addUser(id, `bench-other-${k}`);
    const otherTokens = await Promise.all(others.map((_, k) => clientLogin(`bench-other-${k}`)));
    const newSvc = await requestJson(client, 'POST', `${MGMT}/services`, ah, { name: `bench-new-service-${Date.now()}`, encryptionRequired: true });
    const allPolicy = await requestJson(client, 'GET', `${MGMT}/service-policies?filter=${encodeURIComponent('anyOf(identityRoles) = "#all" and type = 1')}&limit=1`, ah);
    const pol = allPolicy.body.data?.[0];
    let changeMs = NaN;
    let patchMs = NaN;
    if (pol && newSvc.status === 201) {
      const c0 = performance.now();
      const patch = await requestJson(client, 'PATCH', `${MGMT}/service-policies/${pol.id}`, ah, { serviceRoles: [...pol.serviceRoles, `@${newSvc.body.data.id}`] });
      patchMs = performance.now() - c0;
      if (patch.status !== 200) throw new Error(`policy change: ${patch.status} ${JSON.stringify(patch.body)}`);
      const pending = new Set([tokens[0], ...otherTokens]);
      while (pending.size && performance.now() - c0 < 10_000) {
        for (const tok of [...pending]) {
          const r = await requestJson(client, 'GET', `${CLIENT}/services?filter=${encodeURIComponent(`id = "${newSvc.body.data.id}"`)}`, { accept: 'application/json', 'zt-session': tok });
          if (r.body?.data?.length === 1) pending.delete(tok);
        }
      }
      if (pending.size === 0) changeMs = performance.now() - c0;
    }
    log(`policy change visible to every sampled identity after ${fmt(changeMs, 1)} ms (PATCH answered in ${fmt(patchMs, 1)} ms)`);

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
      model: { via: seeded.via, elapsedMs: Math.round(seeded.elapsedMs), worstCaseIdentityId: seeded.worstCaseIdentityId, worstCaseServices: visible.length, worstCaseDialable: dialable.length },
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
    await client?.close();
    await ctl?.stop();
    if (!argv['keep-data']) fs.rmSync(dataDir, { recursive: true, force: true });
    else log(`data kept in ${dataDir}`);
  }
}

main().catch((e) => {
  process.stderr.write(`bench/policy failed: ${e instanceof Error ? e.stack : String(e)}\n`);
  process.exit(1);
});
