/**
 * bench:crud — identity create throughput and list latency against the real controller, each also
 * as a ratio to its ceiling measured in the same run: creates to raw durable LMDB puts at the same
 * concurrency, list queries to a trivial answer on the same listener at the same concurrency.
 * Writes bench/results/crud-<ts>.json and .svg (and crud-latest.*). `--help` lists the flags.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createClient, type ClientKind, type HttpClient, type RequestSpec } from './lib/http.js';
import { spawnController, login, MGMT, ROOT, readCommitCounters, commitDelta, type ControllerProcess } from './lib/controller.js';
import { runLoad, mergeErrors, type LoadResult } from './lib/load.js';
import { machineInfo, table, fmt, writeResults } from './lib/report.js';
import { parseCli, intFlag, numFlag, intListFlag, choiceFlag } from './lib/cli.js';
import { lmdbCommit, trivialAnswer, ratio, pct, type RawCeiling } from './lib/raw-ceilings.js';
import { RunChart } from './lib/run-chart.js';
import { summarizeProfile, formatProfile, latestProfile, type ProfileSummary } from './lib/cpuprofile.js';

const TARGET_CREATES_PER_SEC = 5000;
const TARGET_LIST_P99_MS = 5;
/** Creates ÷ durable LMDB puts at the same concurrency (both wait for the disk). */
const TARGET_CREATE_RATIO = 0.5;
/** A page of identities at one client ÷ the trivial answer at one client. */
const ADMIN_USER = 'admin';
const ADMIN_PASSWORD = 'bench-admin-password';

// ---- parameters ------------------------------------------------------------------------------

const argv = parseCli({
  name: 'bench:crud',
  summary: `identity creates and list latency at N identities.
Spawns node dist/src/main.js (fresh data directory, port 0), seeds N identities through POST /identities
with C keep-alive HTTPS clients, then runs each list query closed-loop for S seconds at each query
concurrency. Ceilings of the same run: durable LMDB puts at C (creates), GET /health/live on the same
listener at each query concurrency (lists).`,
  usage: ['npm run bench:crud', 'npm run bench:crud -- --identities 20000 --duration 2 --cpu-prof', 'npm run bench:crud -- --identities 2000 --duration 0.5 --only default,nameEq   # a smoke run'],
  flags: {
    identities: { type: 'string', default: '100000', help: 'identities to seed' },
    concurrency: { type: 'string', default: '16', arg: 'C', help: 'concurrent clients for creates' },
    duration: { type: 'string', default: '3', arg: 'S', help: 'seconds per query and concurrency (and per ceiling)' },
    warmup: { type: 'string', default: '0.5', arg: 'S', help: 'untimed seconds before each query run' },
    'query-concurrency': { type: 'string', arg: 'LIST', help: 'comma list of concurrencies for queries (default "1,C")' },
    'max-requests': { type: 'string', default: '200000', help: 'cap per timed query run' },
    only: { type: 'string', arg: 'a,b', help: 'run only these queries (names: default limit100 nameEq sortOffset contains anyOfRole roleFilter detail)' },
    client: { type: 'string', arg: 'undici|https', help: 'HTTP client (default undici when installed, else node:https)' },
    'cpu-prof': { type: 'boolean', help: 'run the controller with --cpu-prof and print hot spots per phase' },
    'keep-data': { type: 'boolean', help: "keep the controller's data directory" },
  },
});

const identities = intFlag(argv, 'identities', 1, 10_000_000);
const concurrency = intFlag(argv, 'concurrency', 1, 1024);
const durationS = numFlag(argv, 'duration', 0.1, 600);
const warmupS = numFlag(argv, 'warmup', 0, 60);
const maxRequests = intFlag(argv, 'max-requests', 1, 100_000_000);
const queryConcurrency = argv['query-concurrency'] === undefined ? [...new Set([1, concurrency])] : intListFlag(argv, 'query-concurrency', 1, 1024);
const clientKind = choiceFlag(argv, 'client', ['undici', 'https'] as const) as ClientKind | undefined;
const only = argv.only ? new Set(String(argv.only).split(',').map((s) => s.trim())) : undefined;

// ---- queries ---------------------------------------------------------------------------------

interface Query {
  name: string;
  /** What the request looks like, for the table. */
  desc: string;
  /** Paths (cycled); most queries use one. */
  paths: string[];
  /** Whether it is one of the list queries the p99 target applies to. */
  target: boolean;
}

const q = (params: Record<string, string>) =>
  '?' + Object.entries(params).map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join('&');

function buildQueries(n: number, ids: string[]): Query[] {
  const uniqueN = n > 12345 ? 12345 : Math.floor(n / 2);
  const offset = n > 5025 ? 5000 : Math.max(0, n - 25);
  const base = `${MGMT}/identities`;
  const all: Query[] = [
    { name: 'default', desc: 'GET /identities', paths: [base], target: true },
    { name: 'limit100', desc: '?limit=100', paths: [base + q({ limit: '100' })], target: true },
    { name: 'nameEq', desc: `?filter=name="identity-${uniqueN}"`, paths: [base + q({ filter: `name="identity-${uniqueN}"` })], target: true },
    { name: 'sortOffset', desc: `?sort=name asc&limit=25&offset=${offset}`, paths: [base + q({ sort: 'name asc', limit: '25', offset: String(offset) })], target: true },
    { name: 'contains', desc: '?filter=name contains "999"', paths: [base + q({ filter: 'name contains "999"' })], target: false },
    { name: 'anyOfRole', desc: '?filter=anyOf(roleAttributes)="group-7"', paths: [base + q({ filter: 'anyOf(roleAttributes)="group-7"' })], target: true },
    { name: 'roleFilter', desc: '?roleFilter=#group-7', paths: [base + '?roleFilter=%23group-7'], target: true },
    { name: 'detail', desc: 'GET /identities/{id}', paths: ids.length ? ids.map((id) => `${base}/${encodeURIComponent(id)}`) : [base], target: true },
  ];
  return only ? all.filter((x) => only.has(x.name)) : all;
}

// ---- run -------------------------------------------------------------------------------------

const log = (s: string) => process.stderr.write(s + '\n');
const monoUs = () => Number(process.hrtime.bigint() / 1000n);

interface QueryRun {
  concurrency: number;
  result: LoadResult;
  window: [number, number];
  /** requests/s ÷ the trivial answer's at the same concurrency. */
  ratio?: number;
}

interface QueryOutcome {
  name: string;
  request: string;
  /** Whether the p99 target applies (false: a search that must scan, shown as "(search)"). */
  target: boolean;
  /** meta.pagination.totalCount and page size seen in a check request before timing. */
  totalCount?: number;
  pageSize?: number;
  runs: QueryRun[];
}

async function main() {
  const started = new Date();
  const machine = machineInfo();
  const profDir = argv['cpu-prof'] ? fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-bench-prof-')) : undefined;
  const params = { identities, concurrency, durationS, warmupS, queryConcurrency, maxRequests, only: only ? [...only] : undefined, cpuProf: !!profDir };
  log(`bench/crud: ${identities} identities, ${concurrency} clients, queries at concurrency ${queryConcurrency.join('/')} for ${durationS}s each; ${machine.cpus} cpus, node ${machine.node}, load ${machine.loadavg.join(' ')}`);

  let ctl: ControllerProcess | undefined;
  let client: HttpClient | undefined;
  try {
    ctl = await spawnController({
      password: ADMIN_PASSWORD,
      keepData: !!argv['keep-data'],
      nodeArgs: profDir ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : [],
    });
    log(`controller pid ${ctl.pid} on ${ctl.origin}, data ${ctl.dataDir}`);
    const maxConc = Math.max(concurrency, ...queryConcurrency);
    client = await createClient({ origin: ctl.origin, ca: ctl.ca, connections: maxConc, kind: clientKind });
    const kind = client.kind;
    const token = await login(client, ADMIN_USER, ADMIN_PASSWORD);
    const rssStart = ctl.memory();
    const chart = new RunChart(ctl.pid);

    // -- ceilings of this run: the disk (durable puts at the creates' concurrency), the listener
    const lmdbCeiling = await lmdbCommit({ concurrency, durationMs: durationS * 1000 });
    chart.add('ceiling: LMDB put', lmdbCeiling.timeline);
    log(`ceiling: ${lmdbCeiling.what}: ${fmt(lmdbCeiling.perSec, 0)}/s, p50 ${lmdbCeiling.p50Ms} ms`);
    const trivial = new Map<number, RawCeiling>();
    for (const c of queryConcurrency) {
      const t = await trivialAnswer(client, c, durationS * 1000);
      trivial.set(c, t);
      chart.add(`ceiling: trivial c=${c}`, t.timeline);
      log(`ceiling: trivial answer at c=${c}: ${fmt(t.perSec, 0)}/s, p50 ${t.p50Ms} ms`);
    }

    // -- seed / create throughput
    const postHeaders = { 'zt-session': token, 'content-type': 'application/json', accept: 'application/json' };
    const getHeaders = { 'zt-session': token, accept: 'application/json' };
    const creates: RequestSpec[] = new Array(identities);
    for (let n = 0; n < identities; n++) {
      creates[n] = {
        method: 'POST',
        path: `${MGMT}/identities`,
        headers: postHeaders,
        body: Buffer.from(`{"name":"identity-${n}","type":"User","isAdmin":false,"roleAttributes":["group-${n % 100}"]}`),
        // Keep ~1000 created ids for the detail query (cheap substring, no JSON.parse in the loop).
        wantBody: n % Math.max(1, Math.floor(identities / 1000)) === 0,
      };
    }
    const ids: string[] = [];
    const timeline: { atSec: number; created: number; perSec: number }[] = [];
    const idRe = /"id":"([^"]+)"/;
    log(`seeding ${identities} identities ...`);
    const createWindowStart = monoUs();
    const commits0 = await readCommitCounters(client);
    const cpu0 = { server: ctl.cpuMs(), loadgen: process.cpuUsage() };
    const create = await runLoad({
      client,
      concurrency,
      requests: creates,
      count: identities,
      label: 'creates',
      onResult: (_i, r) => {
        if (r.body && r.status === 201) {
          const m = idRe.exec(r.body.toString('latin1'));
          if (m) ids.push(m[1]);
        }
      },
      onProgress: (done, ms) => {
        // Rate over the last interval: shows whether creates slow down as the store grows.
        const last = timeline[timeline.length - 1] ?? { atSec: 0, created: 0 };
        const atSec = Math.round(ms / 100) / 10;
        const perSec = Math.round((done - last.created) / (atSec - last.atSec));
        timeline.push({ atSec, created: done, perSec });
        if (!process.stderr.isTTY) log(`  ${done}/${identities} created, ${perSec}/s over the last ${Math.round(atSec - last.atSec)} s`);
      },
      maxTransportErrors: 100,
    });
    const createWindow: [number, number] = [createWindowStart, monoUs()];
    chart.add('creates', create.timeline);
    const createRatio = ratio(create.okPerSec, lmdbCeiling.perSec);
    // CPU used during seeding, as % of one core: tells whether the server or the load generator is the limit.
    const lg = process.cpuUsage(cpu0.loadgen);
    const serverCpu1 = ctl.cpuMs();
    const createCpu = {
      serverPctOfCore: serverCpu1 !== undefined && cpu0.server !== undefined ? Math.round(((serverCpu1 - cpu0.server) / create.elapsedMs) * 100) : undefined,
      loadgenPctOfCore: Math.round(((lg.user + lg.system) / 1000 / create.elapsedMs) * 100),
    };
    creates.length = 0;
    const rssAfterSeed = ctl.memory();
    // Transactions: with C closed-loop clients the rate is about writesPerCommit / meanCommitMs.
    const commits = commitDelta(commits0, await readCommitCounters(client));
    log(`CPU during seeding: controller ${createCpu.serverPctOfCore}% of a core, load generator ${createCpu.loadgenPctOfCore}%`);
    if (commits) log(`store: ${commits.commits} transactions, ${commits.writesPerCommit} writes each, ${commits.meanCommitMs} ms from start to durable`);
    log(`created ${create.ok} in ${(create.elapsedMs / 1000).toFixed(1)} s: ${create.okPerSec}/s, p50 ${create.latency.p50} ms, p99 ${create.latency.p99} ms; RSS ${rssAfterSeed ? Math.round(rssAfterSeed.rssKiB / 1024) : '?'} MiB`);
    if (create.aborted) throw new Error(`seeding aborted: ${create.aborted}`);

    // -- list queries
    const outcomes: QueryOutcome[] = [];
    for (const query of buildQueries(identities, ids)) {
      const specs: RequestSpec[] = query.paths.map((p) => ({ method: 'GET', path: p, headers: getHeaders }));
      const check = await client.request({ ...specs[0], wantBody: true });
      const outcome: QueryOutcome = { name: query.name, request: query.desc, target: query.target, runs: [] };
      if (check.status === 200 && check.body) {
        const body = JSON.parse(check.body.toString('utf8'));
        outcome.totalCount = body?.meta?.pagination?.totalCount;
        outcome.pageSize = Array.isArray(body?.data) ? body.data.length : undefined;
      } else {
        log(`  ${query.name}: check request answered ${check.status}: ${check.body?.toString('utf8').slice(0, 300)}`);
      }
      for (const c of queryConcurrency) {
        if (warmupS > 0) await runLoad({ client, concurrency: c, requests: specs, durationMs: warmupS * 1000, count: maxRequests });
        const w0 = monoUs();
        const result = await runLoad({ client, concurrency: c, requests: specs, durationMs: durationS * 1000, count: maxRequests, label: `${query.name} c=${c}` });
        chart.add(`${query.name} c=${c}`, result.timeline);
        outcome.runs.push({ concurrency: c, result, window: [w0, monoUs()], ratio: ratio(result.okPerSec, trivial.get(c)?.perSec) });
        log(`  ${query.name.padEnd(10)} c=${String(c).padEnd(3)} ${result.rps} req/s  p50 ${result.latency.p50}  p99 ${result.latency.p99}  max ${result.latency.max} ms${Object.keys(result.errors).length ? '  errors ' + JSON.stringify(result.errors) : ''}`);
        if (result.aborted) throw new Error(`${query.name}: ${result.aborted}`);
      }
      outcomes.push(outcome);
    }
    const rssEnd = ctl.memory();
    const chartFile = chart.write('crud', `bench:crud — ${identities} identities, ${concurrency} clients`, started);

    await client.close();
    client = undefined;
    const exit = await ctl.stop();
    if (exit.code !== 0) log(`controller exited with ${exit.code ?? exit.signal}; output:\n${ctl.output().slice(-2000)}`);

    // -- profile, cut into phases
    let profile: { file: string; phases: Record<string, ProfileSummary> } | undefined;
    const profFile = profDir ? latestProfile(profDir) : undefined;
    if (profDir && !profFile) log(`no .cpuprofile written in ${profDir}`);
    if (profDir && profFile) {
      const phases: Record<string, ProfileSummary> = { create: summarizeProfile(profFile, { root: ROOT, window: createWindow }) };
      for (const o of outcomes) {
        const runs = o.runs;
        phases[o.name] = summarizeProfile(profFile, { root: ROOT, window: [runs[0].window[0], runs[runs.length - 1].window[1]] });
      }
      const keep = path.join(ROOT, 'bench', 'results', `crud-${started.toISOString().replace(/[:.]/g, '-')}.cpuprofile.json`);
      fs.copyFileSync(profFile, keep);
      fs.rmSync(profDir, { recursive: true, force: true });
      profile = { file: keep, phases };
      for (const [name, s] of Object.entries(phases)) log(`\n== ${name} ==\n${formatProfile(s, 15)}`);
    }

    // -- report
    const allErrors: Record<string, number> = {};
    mergeErrors(allErrors, create.errors);
    for (const o of outcomes) for (const r of o.runs) mergeErrors(allErrors, r.result.errors);
    const mib = (k?: { rssKiB: number; hwmKiB: number }) => (k ? Math.round((k.rssKiB / 1024) * 10) / 10 : undefined);
    const results = {
      bench: 'crud',
      startedAt: started.toISOString(),
      machine,
      client: kind,
      parameters: params,
      targets: { createsPerSec: TARGET_CREATES_PER_SEC, createRatioToLmdbPut: TARGET_CREATE_RATIO, listP99Ms: TARGET_LIST_P99_MS },
      ceilings: { lmdbPut: { ...lmdbCeiling, timeline: undefined }, trivialAnswer: [...trivial.values()].map((t) => ({ ...t, timeline: undefined })) },
      chart: path.relative(ROOT, chartFile),
      create: {
        count: identities,
        ok: create.ok,
        createsPerSec: create.okPerSec,
        ratioToLmdbPut: createRatio,
        elapsedMs: create.elapsedMs,
        latencyMs: create.latency,
        cpu: createCpu,
        store: commits,
        timeline,
        errors: create.errors,
        meetsTarget: (createRatio ?? 0) >= TARGET_CREATE_RATIO,
      },
      rss: {
        atStartMiB: mib(rssStart),
        afterSeedMiB: mib(rssAfterSeed),
        afterQueriesMiB: mib(rssEnd),
        peakMiB: rssEnd ? Math.round((rssEnd.hwmKiB / 1024) * 10) / 10 : undefined,
      },
      queries: outcomes.map((o) => ({
        name: o.name,
        request: o.request,
        target: o.target,
        totalCount: o.totalCount,
        pageSize: o.pageSize,
        runs: o.runs.map((r) => ({
          concurrency: r.concurrency,
          requests: r.result.requests,
          requestsPerSec: r.result.rps,
          ratioToTrivial: r.ratio,
          latencyMs: r.result.latency,
          meanResponseBytes: r.result.meanBytes,
          errors: r.result.errors,
        })),
        meetsP99Target: o.runs.find((r) => r.concurrency === 1)
          ? o.runs.find((r) => r.concurrency === 1)!.result.latency.p99 <= TARGET_LIST_P99_MS
          : undefined,
      })),
      errorsByStatus: allErrors,
      controllerExit: exit,
      profile: profile
        ? {
            file: path.relative(ROOT, profile.file),
            phases: Object.fromEntries(Object.entries(profile.phases).map(([k, s]) => [k, { busyMs: s.busyMs, durationMs: s.durationMs, top: s.functions.slice(0, 15) }])),
          }
        : undefined,
    };
    const file = writeResults('crud', results, started);

    // -- table
    const out: string[] = [];
    out.push('');
    out.push(`bench/crud  ${identities} identities, ${concurrency} clients (${results.client}), ${machine.cpus} cpus, node ${machine.node}, load at start ${machine.loadavg.join(' ')}`);
    out.push(
      table(
        ['creates', '/s', 'of LMDB put', 'p50 ms', 'p95 ms', 'p99 ms', 'max ms', 'errors', `target ≥ ${pct(TARGET_CREATE_RATIO)}`],
        [[String(create.ok), fmt(create.okPerSec, 0), pct(createRatio), fmt(create.latency.p50), fmt(create.latency.p95), fmt(create.latency.p99), fmt(create.latency.max), JSON.stringify(create.errors), (createRatio ?? 0) >= TARGET_CREATE_RATIO ? 'ok' : 'MISS']],
      ),
    );
    if (timeline.length > 1) out.push(`creates/s per ${Math.round(timeline[0].atSec)} s interval: ${timeline.map((t) => t.perSec).join(' ')}`);
    out.push(`ceilings of this run: durable LMDB put at c=${concurrency} ${fmt(lmdbCeiling.perSec, 0)}/s; trivial answer ${[...trivial.values()].map((t) => `c=${t.concurrency} ${fmt(t.perSec, 0)}/s`).join(', ')}`);
    out.push(`CPU while seeding: controller ${createCpu.serverPctOfCore}% of one core, load generator ${createCpu.loadgenPctOfCore}%`);
    if (commits) out.push(`store while seeding: ${commits.writesPerCommit} writes per transaction, ${commits.meanCommitMs} ms each from start to durable`);
    out.push('');
    const rows: string[][] = [];
    for (const o of outcomes) {
      for (const r of o.runs) {
        const l = r.result.latency;
        rows.push([
          r === o.runs[0] ? o.request : '',
          r === o.runs[0] ? String(o.totalCount ?? '-') : '',
          String(r.concurrency),
          fmt(r.result.rps, 0),
          pct(r.ratio),
          fmt(l.p50),
          fmt(l.p95),
          fmt(l.p99),
          fmt(l.max),
          Object.keys(r.result.errors).length ? JSON.stringify(r.result.errors) : '0',
          r.concurrency !== 1 ? '' : !o.target ? '(search)' : l.p99 <= TARGET_LIST_P99_MS ? 'ok' : 'MISS',
        ]);
      }
    }
    out.push(table(['query', 'total', 'conc', 'req/s', 'of trivial', 'p50 ms', 'p95 ms', 'p99 ms', 'max ms', 'errors', `p99 ≤ ${TARGET_LIST_P99_MS} ms`], rows));
    out.push('');
    out.push(`controller RSS: ${mib(rssStart)} MiB at start, ${mib(rssAfterSeed)} MiB after seeding, ${mib(rssEnd)} MiB after queries, peak ${results.rss.peakMiB} MiB`);
    out.push(`errors (non-2xx / transport): ${Object.keys(allErrors).length ? JSON.stringify(allErrors) : 'none'}`);
    out.push(`results: ${path.relative(ROOT, file)} (and bench/results/crud-latest.json); chart: ${path.relative(ROOT, chartFile)}`);
    if (profile) out.push(`cpu profile: ${path.relative(ROOT, profile.file)}`);
    process.stdout.write(out.join('\n') + '\n');
  } finally {
    if (client) await client.close().catch(() => {});
    if (ctl) await ctl.stop(5_000).catch(() => {});
    if (profDir) fs.rmSync(profDir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  process.stderr.write(`bench/crud failed: ${e?.stack ?? e}\n`);
  process.exitCode = 1;
});
