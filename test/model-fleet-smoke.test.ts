/**
 * The fleet benchmark end to end on the `tiny` model (bench/fleet/main.ts): it writes the model,
 * measures the ceilings, starts the controller, checks the model through the Management API, runs
 * the device and router phases and reports. With the policy engine, PKI/enrollment, certificate
 * login and the control channel in place, the tiny run must PASS with zero errors: every device
 * enrolls, logs in over mutual TLS, lists services, polls updates and gets Dial/Bind sessions while
 * admins change policies and expire sessions (re-login on 401), and the simulated routers enroll,
 * connect and show online through the Management API. The verdict must also stay honest (it passes
 * exactly when there were zero errors and every phase ran; the exit code follows it). No figures
 * are asserted.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const MAIN = path.join(ROOT, 'dist', 'bench', 'fleet', 'main.js');

t.test('fleet run on the tiny model: verdict, outputs and model check', async (t) => {
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-fleet-test-'));
  t.teardown(() => fs.rmSync(out, { recursive: true, force: true }));
  const args = [MAIN, '--shape', 'tiny', '--devices', '4', '--concurrency', '4', '--duration', '2', '--ceiling-duration', '0.5', '--admin-interval', '200', '--routers', '2', '--max-minutes', '3', '--results-dir', out];
  const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const p = spawn(process.execPath, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let so = '';
    let se = '';
    p.stdout.on('data', (d) => (so += d));
    p.stderr.on('data', (d) => (se += d));
    p.on('exit', (c) => resolve({ code: c, stdout: so, stderr: se }));
  });
  const file = path.join(out, 'fleet-latest.json');
  t.ok(fs.existsSync(file), `result written (stderr: ${stderr.slice(-500)})`);
  const r = JSON.parse(fs.readFileSync(file, 'utf8'));

  // The model, as the Management API counts it.
  for (const [family, check] of Object.entries(r.modelCheck as Record<string, { expected: number; actual: number; ok: boolean }>)) {
    t.ok(check.ok, `${family}: ${check.actual} through the API, ${check.expected} planned`);
  }
  t.same(Object.keys(r.modelCheck).sort(), ['configs', 'edgeRouterPolicies', 'edgeRouters', 'identities', 'serviceEdgeRouterPolicies', 'servicePolicies', 'services']);

  // Ceilings measured in the same run, each with a rate and latency percentiles.
  for (const name of ['uwsJson', 'mtlsHandshake', 'csrSign', 'csrSignPeculiar']) {
    const c = r.ceilings[name];
    t.ok(c && c.ok > 0 && c.okPerSec > 0 && Object.keys(c.errors).length === 0, `ceiling ${name} measured without errors`);
    t.ok(['p50', 'p95', 'p99'].every((k) => typeof c.latencyMs[k] === 'number'), `ceiling ${name} has percentiles`);
  }

  // Honest verdict.
  const skipped = r.phases.filter((p: any) => p.skipped);
  t.equal(r.passed, r.errors.total === 0 && skipped.length === 0 && r.failures.length === 0, 'passes exactly with zero errors and every phase run');
  t.equal(code, r.passed ? 0 : 1, 'exit code follows the verdict');
  t.match(stdout, r.passed ? /RESULT: PASS/ : /RESULT: FAIL/, 'one-screen summary states the verdict');
  const has501 = Object.keys(r.errors.fatal).concat(Object.keys(r.errors.other)).some((k) => / 501/.test(k));
  t.equal(r.errors.notImplemented.length > 0, has501, '501 answers are named as not implemented');
  if (has501) t.match(stdout, /NOT IMPLEMENTED/);
  t.same(r.phases.map((p: any) => p.name), ['enroll', 'login', 'routers', 'mix'], 'the device phases and the routers phase are reported (run or skipped with a reason)');
  for (const p of skipped) t.ok(typeof p.skipped === 'string' && p.skipped.length > 0, `phase ${p.name} says why it did not run`);
  const enroll = r.phases[0];
  if (!enroll.skipped) t.equal(enroll.ops.enroll.count, 4, 'every device tried to enroll');

  // The whole flow works end to end on this controller: zero errors, PASS.
  t.equal(r.errors.total, 0, `zero errors (${JSON.stringify(r.errors)})`);
  t.same(r.failures, [], 'no failure');
  t.equal(r.passed, true, 'the run passes');
  t.equal(code, 0, 'exit code 0');
  t.same(skipped, [], 'every phase ran');
  t.equal(enroll.ops.enroll.ok, 4, 'every device enrolled (ott + CSR)');
  t.equal(r.phases[1].ops.login.ok, 4, 'every device logged in with its certificate over mutual TLS');
  const mix = r.phases[3].ops;
  t.ok(mix.serviceUpdates?.ok > 0, 'service updates polled');
  t.ok(mix.services?.ok > 0, 'services listed');
  t.ok((mix.sessionDial?.ok ?? 0) + (mix.sessionBind?.ok ?? 0) > 0, 'sessions created');
  t.ok(r.admin.policyChanges > 0, 'admins changed policies during the mix');
  t.equal(r.routers.simulated, true, 'routers simulated');
  t.equal(r.routers.report.connected, 2, 'both routers enrolled and connected on the control channel');
  t.equal(r.routers.report.onlineInApi, 2, 'both routers online (with their reported hostname) through the Management API');
  t.same(r.routers.report.errors, {}, 'no router errors');
  for (const p of r.phases) t.ok(p.cpu && p.cpu.controllerMs >= 0 && p.cpu.generatorMs >= 0, `phase ${p.name}: CPU measured`);

  // Controller resources over time, and the chart.
  t.ok(r.controller.samples.length > 0 && r.controller.samples.every((s: any) => s.rssMiB > 0), 'controller RSS sampled');
  t.ok(Array.isArray(r.timeline), 'timeline present');
  t.ok(typeof r.routers.simulated === 'boolean' && (r.routers.simulated || typeof r.routers.reason === 'string'), 'routers: simulated or why not');
  const svg = fs.readFileSync(path.join(out, 'fleet-latest.svg'), 'utf8');
  t.match(svg, /^<svg [^>]*xmlns="http:\/\/www.w3.org\/2000\/svg"/);
  t.match(svg, /<\/svg>\n$/);
  t.match(svg, /throughput per operation/);
});
