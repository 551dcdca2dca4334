/**
 * The fleet benchmark end to end on the `tiny` model (bench/fleet/main.ts): it writes the model,
 * measures the ceilings, starts the controller, checks the model through the Management API, runs
 * the device phases and reports. Whatever this controller implements, the result must be honest:
 * it passes exactly when there were zero errors and every phase ran, an operation answered 501 is
 * named as not implemented, and the exit code follows the verdict. No figures are asserted.
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
  const args = [MAIN, '--shape', 'tiny', '--devices', '4', '--concurrency', '4', '--duration', '2', '--ceiling-duration', '0.5', '--admin-interval', '200', '--routers', '0', '--max-minutes', '3', '--results-dir', out];
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
  t.same(r.phases.map((p: any) => p.name), ['enroll', 'login', 'mix'], 'the three device phases are reported (run or skipped with a reason)');
  for (const p of skipped) t.ok(typeof p.skipped === 'string' && p.skipped.length > 0, `phase ${p.name} says why it did not run`);
  const enroll = r.phases[0];
  if (!enroll.skipped) t.equal(enroll.ops.enroll.count, 4, 'every device tried to enroll');

  // Controller resources over time, and the chart.
  t.ok(r.controller.samples.length > 0 && r.controller.samples.every((s: any) => s.rssMiB > 0), 'controller RSS sampled');
  t.ok(Array.isArray(r.timeline), 'timeline present');
  t.ok(typeof r.routers.simulated === 'boolean' && (r.routers.simulated || typeof r.routers.reason === 'string'), 'routers: simulated or why not');
  const svg = fs.readFileSync(path.join(out, 'fleet-latest.svg'), 'utf8');
  t.match(svg, /^<svg [^>]*xmlns="http:\/\/www.w3.org\/2000\/svg"/);
  t.match(svg, /<\/svg>\n$/);
  t.match(svg, /throughput per operation/);
});
