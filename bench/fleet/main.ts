/**
 * bench/fleet — a simulated fleet of devices (and routers) against a large model, with this
 * machine's ceilings measured in the same run (`npm run bench`, `npm run bench:fleet`; `--help`
 * describes the steps and lists the flags).
 */
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { shapeByName, writeModelToStore, writeModelViaApi, rng, type ModelSummary } from '../../scripts/lib/model.js';
import { createClient, requestJson, keepAliveRetries, type HttpClient } from '../lib/http.js';
import { spawnController, login, readCpuMs, MGMT, ROOT, type ControllerProcess } from '../lib/controller.js';
import { machineInfo } from '../lib/report.js';
import { parseCli } from '../lib/cli.js';
import { progressBar, type ProgressBar } from '../lib/progress.js';
import { OpStats, runClosedLoop, tee, isFatal } from '../lib/ops.js';
import { ProcessSampler } from '../lib/sampler.js';
import { measureCeilings, type Ceilings } from '../lib/ceilings.js';
import { deviceKeys } from './pki.js';
import { Device, type FleetContext } from './device.js';
import { AdminActor } from './admin.js';
import { RouterFleet, type RouterFleetStatus } from './routers.js';
import { fleetChart, terminalSummary, type FleetResult, type PhaseResult, type Ratio } from './report.js';
import { freePort } from '../lib/ports.js';

const ADMIN_PASSWORD = 'bench-admin-password';

const MIX_OPS = ['updates', 'services', 'dial', 'bind'] as const;
type MixOp = (typeof MIX_OPS)[number];

/** Flags → settings; a usage error is reported in one line (exit code 2), not as a stack trace. */
function parseOptions() {
  const argv = parseCli({
    name: 'bench:fleet',
    summary: `a simulated fleet of devices (and routers) against a large model, with this machine's
ceilings measured in the same run.
Steps: (1) write the model straight into a fresh data directory (scripts/lib/model.ts; or through the
API with --via api); (2) measure the ceilings (trivial uWS JSON, raw mutual-TLS handshake, raw CSR
signing) with the same closed-loop driver; (3) start the controller on that directory (loopback only),
check the model's sizes, read the devices' enrollment tokens; (4) phases, each recorded per operation:
enroll (every device: CSR → certificate; ratio to raw signing), login (every device: new mutual-TLS
connection + authenticate?method=cert; ratio to the raw handshake), mix (for --duration: service-updates
polls, service listings, Dial and Bind sessions by the --mix weights, re-login on 401, while admins
change policies and simulated routers report on the control channel; ratio to the trivial answer);
(5) write bench/results/fleet-<ts>.json and .svg (and fleet-latest.*) and print a summary.
Any error — a 5xx, a timeout, a dropped connection, a 501 — fails the run (exit code 1). Every phase
has a count or a duration, every request a timeout, and --max-minutes stops everything.`,
    usage: [
      'npm run bench                                   # short: model medium, 200 devices, ~1 minute',
      'npm run bench:fleet                             # model large, 1000 devices, 60 s of mixed load',
      'npm run bench:fleet -- --shape many-services --devices 500 --duration 30',
      'npm run bench:fleet -- --shape tiny --devices 20 --duration 3 --ceiling-duration 1 --routers 2   # a smoke run',
    ],
    flags: {
      short: { type: 'boolean', help: 'the `npm run bench` preset (medium, 200 devices, concurrency 32, mix 12 s, ceilings 2 s)' },
      shape: { type: 'string', arg: 'NAME', help: 'tiny | small | medium | large | many-services (default large)' },
      seed: { type: 'string', default: '1', help: 'model seed' },
      via: { type: 'string', default: 'store', arg: 'store|api', help: 'how the model is written' },
      devices: { type: 'string', help: 'simulated devices, at most the identities (default 1000)' },
      concurrency: { type: 'string', arg: 'C', help: 'operations in flight at once (default 64)' },
      duration: { type: 'string', arg: 'S', help: 'seconds of mixed load (default 60)' },
      mix: { type: 'string', arg: 'SPEC', help: 'weights (default updates=50,services=15,dial=25,bind=10)' },
      'admin-interval': { type: 'string', default: '500', arg: 'MS', help: 'an admin change every MS during the mix' },
      routers: { type: 'string', arg: 'M', help: 'edge routers to enroll, connect and report (default 50)' },
      'ceiling-duration': { type: 'string', arg: 'S', help: 'seconds per ceiling (default 5)' },
      'no-ceilings': { type: 'boolean', help: 'skip the ceilings' },
      timeout: { type: 'string', default: '10000', arg: 'MS', help: 'per-request timeout' },
      'max-minutes': { type: 'string', default: '30', arg: 'M', help: 'hard stop of the whole run' },
      'keep-data': { type: 'boolean', help: "keep the controller's data directory" },
      'results-dir': { type: 'string', arg: 'DIR', help: 'where the JSON and SVG go (default bench/results)' },
      'cpu-prof': { type: 'string', arg: 'DIR', help: 'run the controller under node --cpu-prof (profile written into DIR at stop)' },
    },
  }) as Record<string, any>;

  function num(v: string | undefined, name: string, def: number, min: number, max: number): number {
    if (v === undefined) return def;
    const x = Number(v);
    if (!Number.isFinite(x) || x < min || x > max) throw new Error(`--${name} ${v}: expected a number in ${min}..${max}`);
    return x;
  }

  const short = argv.short;
  const shape = shapeByName(argv.shape ?? (short ? 'medium' : 'large'));
  const seed = Math.floor(num(argv.seed, 'seed', 1, 0, 2 ** 53));
  const via = argv.via ?? 'store';
  if (via !== 'store' && via !== 'api') throw new Error('--via must be store or api');
  const devicesN = Math.floor(num(argv.devices, 'devices', short ? 200 : 1000, 1, shape.identities));
  const concurrency = Math.floor(num(argv.concurrency, 'concurrency', short ? 32 : 64, 1, 4096));
  const durationS = num(argv.duration, 'duration', short ? 12 : 60, 1, 3600);
  const mixSpec: string = argv.mix ?? 'updates=50,services=15,dial=25,bind=10';
  const adminIntervalMs = num(argv['admin-interval'], 'admin-interval', 500, 50, 600_000);
  const routersN = Math.floor(num(argv.routers, 'routers', Math.min(50, shape.edgeRouters), 0, shape.edgeRouters));
  const ceilingS = num(argv['ceiling-duration'], 'ceiling-duration', short ? 2 : 5, 0.5, 120);
  const timeoutMs = num(argv.timeout, 'timeout', 10_000, 100, 600_000);
  const maxMinutes = num(argv['max-minutes'], 'max-minutes', 30, 1, 24 * 60);

  const mix: [MixOp, number][] = mixSpec.split(',').map((part) => {
    const [k, v] = part.split('=').map((s) => s.trim());
    if (!(MIX_OPS as readonly string[]).includes(k) || !(Number(v) >= 0)) throw new Error(`--mix: bad entry "${part}" (operations: ${MIX_OPS.join(', ')})`);
    return [k as MixOp, Number(v)];
  });
  const mixTotal = mix.reduce((a, [, w]) => a + w, 0);
  if (!(mixTotal > 0)) throw new Error('--mix: weights sum to 0');
  return { argv, short, shape, seed, via, devicesN, concurrency, durationS, mixSpec, adminIntervalMs, routersN, ceilingS, timeoutMs, maxMinutes, mix, mixTotal };
}

let options: ReturnType<typeof parseOptions>;
try {
  options = parseOptions();
} catch (e) {
  process.stderr.write(`bench/fleet: ${(e as Error).message} (see --help)\n`);
  process.exit(2);
}
const { argv, short, shape, seed, via, devicesN, concurrency, durationS, mixSpec, adminIntervalMs, routersN, ceilingS, timeoutMs, maxMinutes, mix, mixTotal } = options;

const log = (s: string) => process.stderr.write(s + '\n');

/** Progress of a counted step: a bar on a terminal, a line every 2 s in a log. */
function progress(label: string) {
  let last = 0;
  let bar: ProgressBar | undefined;
  return (done: number, total: number) => {
    if (process.stderr.isTTY) {
      bar ??= progressBar(label, { total });
      bar.update(done);
      if (done >= total) bar.done();
      return;
    }
    const now = performance.now();
    if (done < total && now - last < 2000) return;
    last = now;
    log(`  ${label}: ${done.toLocaleString('en')}/${total.toLocaleString('en')}`);
  };
}

/** Management API families and the model count each must show (identities: plus the default admin). */
const FAMILY_PATHS: [keyof ModelSummary['counts'], string][] = [
  ['identities', 'identities'], ['services', 'services'], ['configs', 'configs'], ['edgeRouters', 'edge-routers'],
  ['servicePolicies', 'service-policies'], ['edgeRouterPolicies', 'edge-router-policies'], ['serviceEdgeRouterPolicies', 'service-edge-router-policies'],
];

async function main() {
  const startedAt = new Date();
  const machine = machineInfo();
  const hardStop = setTimeout(() => {
    log(`bench/fleet: --max-minutes ${maxMinutes} reached; stopping`);
    process.exit(1);
  }, maxMinutes * 60_000);
  hardStop.unref();
  log(`bench/fleet: model "${shape.name}" seed ${seed}, ${devicesN} devices, concurrency ${concurrency}, mix ${durationS} s; ${machine.cpus} cpus, load ${machine.loadavg.join(' ')}`);

  const apiPort = await freePort();
  const certPort = await freePort();
  const env = {
    MESH_ADMIN_PASSWORD: ADMIN_PASSWORD,
    MESH_ADDRESS: `127.0.0.1:${apiPort}`,
    // The mutual-TLS certificate listener; ignored by a controller without one.
    MESH_CERT_ADDRESS: `127.0.0.1:${certPort}`,
    // Devices log in once and keep working; expiry is exercised by admins deleting sessions.
    MESH_SESSION_TIMEOUT_MINUTES: '30',
  };
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-fleet-'));
  let ctl: ControllerProcess | undefined;
  let admin: HttpClient | undefined;
  let enrollClient: HttpClient | undefined;
  const devices: Device[] = [];
  const failures: string[] = [];
  try {
    // (1) model
    let model: ModelSummary | undefined;
    const tModel = performance.now();
    if (via === 'store') {
      log(`writing model "${shape.name}" into ${dataDir} ...`);
      model = await writeModelToStore(dataDir, shape, { seed, env, onProgress: progress('model records') });
    }
    const modelWriteMs = performance.now() - tModel;

    // (2) ceilings (before the controller runs, so neither takes the other's CPU)
    let ceilings: Ceilings | undefined;
    if (!argv['no-ceilings']) {
      if (via === 'api') {
        // The PKI the ceilings use is created by the controller's first start; make it now.
        const { loadOrCreatePki } = await import('../../src/pki/bootstrap.js');
        await loadOrCreatePki(path.join(dataDir, 'pki'), { advertisedHost: '127.0.0.1' });
      }
      log(`measuring ceilings (${ceilingS} s each, concurrency ${concurrency}) ...`);
      ceilings = await measureCeilings({ pkiDir: path.join(dataDir, 'pki'), durationMs: ceilingS * 1000, concurrency, log });
    }

    // (3) controller
    const cpuProf = argv['cpu-prof'] ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(argv['cpu-prof'])}`] : undefined;
    ctl = await spawnController({ nodeArgs: cpuProf, password: ADMIN_PASSWORD, dataDir, address: env.MESH_ADDRESS, env, keepData: argv['keep-data'], readyTimeoutMs: 120_000 });
    const t0 = performance.now();
    const stats = new OpStats(1000, t0);
    const sampler = new ProcessSampler(ctl.pid, 1000, t0).start();
    await new Promise((r) => setTimeout(r, 300)); // a certificate listener prints its line right after the API's
    const listeners = ctl.listeners();
    // The certificate listener: printed as a second `listening on` line, or at least bound to MESH_CERT_ADDRESS.
    const certBound = await new Promise<boolean>((resolve) => {
      const sock = net.connect(certPort, '127.0.0.1', () => {
        sock.destroy();
        resolve(true);
      });
      sock.on('error', () => resolve(false));
    });
    const certOrigin = listeners.find((u) => u.endsWith(`:${certPort}`)) ?? (certBound ? `https://127.0.0.1:${certPort}` : undefined) ?? listeners[1] ?? ctl.origin;
    const certListener = certOrigin !== ctl.origin;
    log(`controller pid ${ctl.pid}: API ${ctl.origin}${certListener ? `, certificate listener ${certOrigin}` : ' (no separate certificate listener: certificate logins go to the API listener)'}`);
    const ca = ctl.ca;
    admin = await createClient({ origin: ctl.origin, ca, connections: 8, timeoutMs });
    const adminToken = await login(admin, 'admin', ADMIN_PASSWORD);
    if (via === 'api') {
      log(`creating model "${shape.name}" through the Management API ...`);
      model = await writeModelViaApi(ctl.origin, adminToken, shape, { seed, ca, concurrency: Math.min(concurrency, 32), onProgress: progress('model records') });
    }
    const m = model!;
    const adminHeaders = { 'zt-session': adminToken, accept: 'application/json' };

    // Model sizes, through the Management API.
    const modelCheck: FleetResult['modelCheck'] = {};
    for (const [key, p] of FAMILY_PATHS) {
      const r = await requestJson(admin, 'GET', `${MGMT}/${p}?limit=1`, adminHeaders);
      const actual = typeof r.body?.meta?.pagination?.totalCount === 'number' ? r.body.meta.pagination.totalCount : null;
      const expected = m.counts[key] + (key === 'identities' ? 1 : 0);
      modelCheck[key] = { expected, actual, ok: actual === expected };
      if (actual !== expected) failures.push(`model check: ${p} has ${actual}, expected ${expected}`);
    }

    // Devices: the worst-case identity and others spread over the model; their ott tokens.
    const ids = m.ids.identities;
    const chosen = new Set<number>([ids.indexOf(m.worstCaseIdentityId)]);
    for (let i = 0; chosen.size < devicesN; i++) chosen.add(Math.floor((i * ids.length) / devicesN) % ids.length);
    const fc: FleetContext = { certOrigin, ca, stats, enrollClient: undefined as unknown as HttpClient, timeoutMs, configTypes: ['intercept.v1', 'host.v1'] };
    enrollClient = await createClient({ origin: certOrigin, ca, connections: concurrency, timeoutMs });
    fc.enrollClient = enrollClient;
    log(`preparing ${devicesN} devices (enrollment tokens, keys, CSRs) ...`);
    const order = [...chosen];
    const preparing = progress('devices prepared');
    const tokens: (string | undefined)[] = new Array(order.length);
    const names: string[] = new Array(order.length);
    await runClosedLoop({ concurrency: Math.min(concurrency, 16), count: order.length }, async (i) => {
      const r = await requestJson(admin!, 'GET', `${MGMT}/identities/${encodeURIComponent(ids[order[i]])}`, adminHeaders);
      if (r.status !== 200) throw new Error(`GET identity ${ids[order[i]]}: ${r.status} ${JSON.stringify(r.body).slice(0, 200)}`);
      tokens[i] = r.body?.data?.enrollment?.ott?.token;
      names[i] = r.body?.data?.name;
    });
    const missing = tokens.filter((t) => !t).length;
    if (missing) failures.push(`${missing} chosen identities have no outstanding ott enrollment`);
    for (let i = 0; i < order.length; i++) {
      if (!tokens[i]) continue;
      devices.push(new Device(ids[order[i]], names[i], tokens[i]!, await deviceKeys(names[i]), fc));
      preparing(i + 1, order.length);
    }

    // (4) phases
    const phases: PhaseResult[] = [];
    const phase = async (name: string, body: (ps: OpStats) => Promise<void>, skipped?: string) => {
      const from = (performance.now() - t0) / 1000;
      if (skipped) {
        phases.push({ name, from, to: from, ops: {}, skipped });
        log(`phase ${name}: skipped — ${skipped}`);
        return;
      }
      log(`phase ${name} ...`);
      const ps = new OpStats(1000, t0);
      fc.stats = tee(stats, ps);
      const ctlCpu0 = readCpuMs(ctl!.pid) ?? NaN;
      const genCpu0 = process.cpuUsage();
      const bar = progressBar(`phase ${name}`, name === 'mix' ? { durationMs: durationS * 1000 } : {});
      try {
        await body(ps);
      } finally {
        bar.done();
      }
      const genCpu = process.cpuUsage(genCpu0);
      const controllerMs = (readCpuMs(ctl!.pid) ?? NaN) - ctlCpu0;
      fc.stats = stats;
      const to = (performance.now() - t0) / 1000;
      const ops = ps.summary();
      // Device operations: what the devices asked for (not the admins' or the routers' work).
      const deviceOps = Object.entries(ops).filter(([k]) => !k.startsWith('admin') && !k.startsWith('router')).reduce((a, [, x]) => a + x.ok, 0);
      const generatorMs = (genCpu.user + genCpu.system) / 1000;
      const r2 = (x: number) => Math.round(x * 100) / 100;
      const cpu = { controllerMs: Math.round(controllerMs), generatorMs: Math.round(generatorMs), deviceOps, controllerMsPerOp: deviceOps ? r2(controllerMs / deviceOps) : NaN, generatorMsPerOp: deviceOps ? r2(generatorMs / deviceOps) : NaN };
      phases.push({ name, from, to, ops, cpu });
      for (const [op, s] of Object.entries(ops)) log(`  ${op}: ${s.ok} ok (${s.okPerSec}/s), p99 ${s.latencyMs.p99} ms${Object.keys(s.errors).length ? ', errors ' + JSON.stringify(s.errors) : ''}`);
      log(`  CPU: controller ${cpu.controllerMs} ms, load generator ${cpu.generatorMs} ms${deviceOps ? ` (${cpu.controllerMsPerOp} / ${cpu.generatorMsPerOp} ms per device operation)` : ''}`);
    };

    await phase('enroll', async () => {
      await runClosedLoop({ concurrency, count: devices.length }, async (i) => {
        await devices[i].enroll();
      });
    }, devices.length === 0 ? 'no devices' : undefined);
    const enrolled = devices.filter((d) => d.enrolled);
    await phase('login', async () => {
      await runClosedLoop({ concurrency, count: enrolled.length }, async (i) => {
        await enrolled[i].login();
      });
    }, enrolled.length === 0 ? 'no device enrolled (see the enroll errors)' : undefined);
    const live = devices.filter((d) => d.loggedIn);

    const rand = rng(seed, 'fleet-mix');
    const pickOp = (): MixOp => {
      let x = rand() * mixTotal;
      for (const [op, w] of mix) if ((x -= w) < 0) return op;
      return mix[mix.length - 1][0];
    };
    const adminActor = new AdminActor({
      client: admin, token: adminToken, stats: { record: (...a) => fc.stats.record(...a) }, servicePolicyIds: m.ids.servicePolicies,
      serviceGroups: Math.max(2, Math.min(shape.services, Math.round(shape.servicePolicies / 2))), devices: () => live, intervalMs: adminIntervalMs, rand: rng(seed, 'admin'),
    });
    // Simulated edge routers (control channel): enrolled and connected in their own
    // phase, then answering heartbeats and reporting state during the mix.
    let routerStatus: RouterFleetStatus = { simulated: false, reason: 'no routers requested (--routers 0)', requested: routersN };
    const routers = routersN > 0
      ? new RouterFleet({ origin: ctl.origin, ca, http: admin, adminToken, edgeRouterIds: m.ids.edgeRouters.slice(0, routersN), stats: () => fc.stats, concurrency: Math.min(concurrency, 8), reportIntervalMs: 2000 })
      : undefined;
    if (routers) {
      routerStatus = { simulated: false, reason: 'the routers phase did not run', requested: routersN };
      await phase('routers', async () => {
        await routers.start();
      });
    }
    await phase('mix', async () => {
      adminActor.start();
      try {
        await runClosedLoop({ concurrency, durationMs: durationS * 1000 }, async () => {
          const dev = live[Math.floor(rand() * live.length)];
          const op = pickOp();
          const pick = (n: number) => Math.floor(rand() * n);
          if (op === 'updates') await dev.pollUpdates();
          else if (op === 'services') await dev.listServices();
          else {
            const r = await dev.createSession(op === 'dial' ? 'Dial' : 'Bind', pick);
            if (r === 'none') await dev.pollUpdates(); // nothing to dial/bind: do what an idle SDK does
          }
        });
      } finally {
        await adminActor.stop();
        if (routers) {
          const v = await routers.verifyOnline().catch((e) => ({ online: -1, expected: routers.connected, error: String(e) }));
          if (v.online !== v.expected) failures.push(`routers: ${v.online} of ${v.expected} connected routers online (with their reported hostname) in the Management API`);
          routerStatus = { simulated: true, requested: routersN, report: await routers.stop() };
        }
      }
    }, live.length === 0 ? 'no device logged in (see the enroll and login errors)' : undefined);

    sampler.stop();
    for (const d of devices) await d.close();
    await enrollClient.close();
    enrollClient = undefined;
    await admin.close();
    admin = undefined;
    const exit = await ctl.stop();
    if (exit.code !== 0 && exit.signal !== 'SIGINT') failures.push(`controller exited with ${exit.code ?? exit.signal}`);
    // What the controller itself logged as an error (pino level ≥ 50, or an unhandled rejection in
    // a front end): an answer that looked fine to a client can still hide one.
    const controllerErrors = ctl.output().split('\n').filter((line) => {
      if (line.startsWith('router rejected')) return true;
      try {
        return (JSON.parse(line) as { level?: number }).level! >= 50;
      } catch {
        return false;
      }
    });
    if (controllerErrors.length) failures.push(`controller logged ${controllerErrors.length} errors, first: ${controllerErrors[0].slice(0, 300)}`);

    // (5) results
    const errs = stats.errors();
    const fatal: Record<string, number> = {};
    const other: Record<string, number> = {};
    for (const [k, v] of Object.entries(errs)) (isFatal(k.slice(k.indexOf(': ') + 2)) ? fatal : other)[k] = v;
    const notImplemented = [...new Set(Object.keys(errs).filter((k) => / 501( |$)/.test(k)).map((k) => k.slice(0, k.indexOf(':'))))];
    const totalErrors = Object.values(errs).reduce((a, b) => a + b, 0);
    if (notImplemented.length) failures.push(`not implemented by this controller (501): ${notImplemented.join(', ')}`);
    if (Object.keys(fatal).length) failures.push(`${Object.values(fatal).reduce((a, b) => a + b, 0)} 5xx/timeouts/dropped connections`);
    if (totalErrors > 0) failures.push(`${totalErrors} errors in all`);
    for (const ph of phases) if (ph.skipped) failures.push(`phase ${ph.name} did not run: ${ph.skipped}`);
    if (routerStatus.simulated && Object.keys(routerStatus.report?.errors ?? {}).length) failures.push(`router simulator errors: ${JSON.stringify(routerStatus.report!.errors)}`);
    if (routerStatus.simulated && routerStatus.report!.connected < routersN) failures.push(`routers: ${routerStatus.report!.connected} of ${routersN} connected`);
    if (!routerStatus.simulated && routersN > 0) failures.push(`routers not simulated: ${routerStatus.reason}`);

    const ratios: Ratio[] = [];
    const get = (p: string, op: string) => phases.find((x) => x.name === p)?.ops[op];
    const ratio = (what: string, s: { okPerSec: number } | undefined, c: { okPerSec: number } | undefined) => {
      if (s && c && c.okPerSec > 0 && s.okPerSec > 0) ratios.push({ what, controllerPerSec: s.okPerSec, ceilingPerSec: c.okPerSec, ratio: Math.round((s.okPerSec / c.okPerSec) * 1000) / 1000 });
    };
    if (ceilings) {
      ratio('enrollments (CSR → certificate) vs raw CSR signing on one thread', get('enroll', 'enroll'), ceilings.csrSign);
      ratio('certificate logins (new mTLS connection + authenticate) vs raw mTLS handshake', get('login', 'login'), ceilings.mtlsHandshake);
      const mixPhase = phases.find((x) => x.name === 'mix' && !x.skipped);
      if (mixPhase) {
        const okAll = Object.entries(mixPhase.ops).filter(([k]) => !k.startsWith('admin') && !k.startsWith('router')).reduce((a, [, s]) => a + s.ok, 0);
        ratio('mixed device requests vs trivial uWS JSON', { okPerSec: okAll / Math.max(0.001, mixPhase.to - mixPhase.from) }, ceilings.uwsJson);
        for (const op of ['serviceUpdates', 'services', 'sessionDial', 'sessionBind']) if (mixPhase.ops[op]) ratio(`${op} (share of the mix) vs trivial uWS JSON`, mixPhase.ops[op], ceilings.uwsJson);
      }
    }
    const cpu = sampler.window();
    const { ids: modelIds, ...modelShort } = m;
    void modelIds;
    const result: FleetResult = {
      bench: 'fleet',
      startedAt: startedAt.toISOString(),
      passed: failures.length === 0,
      failures,
      parameters: { short, shape: shape.name, seed, via, devices: devices.length, concurrency, durationS, mix: mixSpec, adminIntervalMs, routers: routersN, ceilingS, timeoutMs, certListener },
      machine,
      model: { ...modelShort, writeMs: Math.round(via === 'store' ? modelWriteMs : m.elapsedMs) },
      modelCheck,
      ceilings,
      phases,
      ratios,
      errors: { total: totalErrors, fatal, other, notImplemented },
      controller: { cpuPctMean: cpu.meanCpuPct, cpuPctMax: cpu.maxCpuPct, rssPeakMiB: cpu.peakRssMiB, samples: sampler.samples, exit },
      routers: routerStatus,
      keepAliveRetries: keepAliveRetries.count,
      admin: { policyChanges: adminActor.changes, sessionsExpired: adminActor.expired },
      timeline: stats.timeline(),
    };
    const dir = path.resolve(argv['results-dir'] ?? path.join(ROOT, 'bench', 'results'));
    fs.mkdirSync(dir, { recursive: true });
    const stamp = startedAt.toISOString().replace(/[:.]/g, '-');
    const jsonFile = path.join(dir, `fleet-${stamp}.json`);
    const svgFile = path.join(dir, `fleet-${stamp}.svg`);
    const shown = (f: string) => (f.startsWith(ROOT + path.sep) ? path.relative(ROOT, f) : f);
    result.files = { json: shown(jsonFile), chart: shown(svgFile) };
    const text = JSON.stringify(result, null, 2) + '\n';
    const svg = fleetChart(result);
    fs.writeFileSync(jsonFile, text);
    fs.writeFileSync(path.join(dir, 'fleet-latest.json'), text);
    fs.writeFileSync(svgFile, svg);
    fs.writeFileSync(path.join(dir, 'fleet-latest.svg'), svg);
    process.stdout.write(terminalSummary(result));
    if (!result.passed) process.exitCode = 1;
  } finally {
    for (const d of devices) await d.close();
    if (enrollClient) await enrollClient.close().catch(() => {});
    if (admin) await admin.close().catch(() => {});
    if (ctl) await ctl.stop(5_000).catch(() => {});
    if (!argv['keep-data']) fs.rmSync(dataDir, { recursive: true, force: true });
    else log(`data kept in ${dataDir}`);
  }
}

main().catch((e) => {
  process.stderr.write(`bench/fleet failed: ${e?.stack ?? e}\n`);
  process.exitCode = 1;
});

