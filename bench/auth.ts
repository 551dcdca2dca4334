/**
 * bench:auth — logins, session-checked requests and the rate limiter under overload, each figure
 * also as a ratio to its ceiling measured in the same run (`--help` lists them and the flags).
 * Writes bench/results/auth-<ts>.json and .svg (and auth-latest.*).
 */
import crypto from 'node:crypto';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SignJWT } from 'jose';
import { createClient, requestJson, type ClientKind, type HttpClient, type RequestSpec } from './lib/http.js';
import { spawnController, login, MGMT, type ControllerProcess } from './lib/controller.js';
import { runLoad, type LoadResult } from './lib/load.js';
import { machineInfo, table, fmt, writeResults } from './lib/report.js';
import { parseCli, intFlag, numFlag, choiceFlag } from './lib/cli.js';
import { argon2Verify, lmdbCommit, trivialAnswer, ratio, pct, type RawCeiling } from './lib/raw-ceilings.js';
import { RunChart } from './lib/run-chart.js';
import { ROOT } from './lib/controller.js';

const argv = parseCli({
  name: 'bench:auth',
  summary: `authentication throughput and the rate limiter under overload.
Spawns the real controller (production argon2id settings) and measures closed-loop for S seconds each:
password logins (ceiling: raw argon2id verifications, as many at a time as the controller has pool
workers), ext-JWT logins (ceiling: durable LMDB puts at the same concurrency: each login writes an API
session), GET /current-identity with a session and with a secondary ext-JWT factor (ceiling: a trivial
answer on the same listener at the same concurrency). Then a second controller with an auth queue of
4 running + 8 waiting is overloaded: the share of immediate 429 answers shows excess work is refused.`,
  usage: ['npm run bench:auth', 'npm run bench:auth -- --duration 5 --concurrency 32', 'npm run bench:auth -- --duration 0.5 --concurrency 4 --overload-concurrency 16   # a smoke run'],
  flags: {
    duration: { type: 'string', default: '3', arg: 'S', help: 'seconds per measure (and per ceiling)' },
    concurrency: { type: 'string', default: '16', arg: 'C', help: 'concurrent clients' },
    'overload-concurrency': { type: 'string', default: '64', help: 'concurrent logins against the tiny queue' },
    client: { type: 'string', arg: 'undici|https', help: 'HTTP client (default undici when installed, else node:https)' },
  },
});
const DURATION_MS = numFlag(argv, 'duration', 0.1, 600) * 1000;
const C = intFlag(argv, 'concurrency', 1, 1024);
const OVERLOAD_C = intFlag(argv, 'overload-concurrency', 1, 4096);
const KIND = choiceFlag(argv, 'client', ['undici', 'https'] as const) as ClientKind | undefined;
const PASSWORD = 'bench-admin-password';
const CLIENT = '/edge/client/v1';

function certAndKey(): { certPem: string; key: crypto.KeyObject } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-bench-auth-'));
  try {
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', path.join(dir, 'k.pem'),
      '-out', path.join(dir, 'c.pem'), '-subj', '/CN=bench-idp', '-days', '2',
    ], { stdio: 'ignore' });
    return { certPem: fs.readFileSync(path.join(dir, 'c.pem'), 'utf8'), key: crypto.createPrivateKey(fs.readFileSync(path.join(dir, 'k.pem'))) };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

async function must(client: HttpClient, method: string, p: string, headers: Record<string, string>, json?: unknown): Promise<any> {
  const r = await requestJson(client, method, p, headers, json);
  if (r.status >= 300) throw new Error(`${method} ${p}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

const post = (p: string, json: unknown, headers: Record<string, string> = {}): RequestSpec => ({
  method: 'POST', path: p, headers: { 'content-type': 'application/json', ...headers }, body: Buffer.from(JSON.stringify(json)),
});

interface Row { name: string; concurrency: number; r: LoadResult; ceiling?: RawCeiling }

const chart = new RunChart();

async function measure(client: HttpClient, name: string, concurrency: number, requests: RequestSpec[], ceiling?: RawCeiling): Promise<Row> {
  await runLoad({ client, concurrency, requests, durationMs: 300 }); // warm-up
  const r = await runLoad({ client, concurrency, requests, durationMs: DURATION_MS, label: name });
  chart.add(name, r.timeline);
  return { name, concurrency, r, ceiling };
}

/** Pool workers of a controller started without MESH_WORKERS: one per core. */
const POOL_WORKERS = os.availableParallelism();

async function main() {
  const rows: Row[] = [];
  const ceilings: RawCeiling[] = [];
  const started = new Date();
  const { certPem, key } = certAndKey();
  let ctl: ControllerProcess | undefined;
  let overloaded: ControllerProcess | undefined;
  try {
    ctl = await spawnController({ password: PASSWORD, env: { MESH_EXT_JWT_JWKS_COOLDOWN_MS: '5000' } });
    chart.watch(ctl.pid);
    const client = await createClient({ origin: ctl.origin, ca: ctl.ca, connections: Math.max(C, 8), kind: KIND });
    const argon = await argon2Verify({ concurrency: POOL_WORKERS, durationMs: DURATION_MS });
    chart.add('ceiling: argon2id', argon.timeline);
    const lmdb = await lmdbCommit({ concurrency: C, durationMs: DURATION_MS });
    chart.add('ceiling: LMDB put', lmdb.timeline);
    const trivial = await trivialAnswer(client, C, DURATION_MS);
    chart.add('ceiling: trivial answer', trivial.timeline);
    ceilings.push(argon, lmdb, trivial);
    const token = await login(client, 'admin', PASSWORD);
    const h = { 'zt-session': token };
    const signer = (await must(client, 'POST', `${MGMT}/external-jwt-signers`, h, { name: 'bench-idp', issuer: 'bench-issuer', audience: 'bench-aud', certPem, kid: 'bench-kid', enabled: true })).data.id;
    const user = (await must(client, 'POST', `${MGMT}/identities`, h, { name: 'bench-user', type: 'User', isAdmin: false })).data.id;
    await must(client, 'POST', `${MGMT}/authenticators`, h, { method: 'updb', identityId: user, username: 'bench-user', password: 'bench-user-password' });
    const policy = (await must(client, 'POST', `${MGMT}/auth-policies`, h, {
      name: 'bench-secondary',
      primary: { cert: { allowed: true, allowExpiredCerts: true }, extJwt: { allowed: true, allowedSigners: [] }, updb: { allowed: true, minPasswordLength: 5, maxAttempts: 0, lockoutDurationMinutes: 0, requireMixedCase: false, requireNumberChar: false, requireSpecialChar: false } },
      secondary: { requireTotp: false, requireExtJwtSigner: signer },
    })).data.id;
    const second = (await must(client, 'POST', `${MGMT}/identities`, h, { name: 'bench-second', type: 'User', isAdmin: false, authPolicyId: policy })).data.id;
    await must(client, 'POST', `${MGMT}/authenticators`, h, { method: 'updb', identityId: second, username: 'bench-second', password: 'bench-user-password' });
    const jwtFor = (sub: string) => new SignJWT({ sub }).setProtectedHeader({ alg: 'ES256', kid: 'bench-kid' }).setIssuer('bench-issuer').setAudience('bench-aud').setIssuedAt().setExpirationTime('1h').sign(key);
    const userJwt = await jwtFor(user);
    const secondJwt = await jwtFor(second);
    const userSession = await login(client, 'bench-user', 'bench-user-password');
    const secondSession = (await must(client, 'POST', `${CLIENT}/authenticate?method=password`, {}, { username: 'bench-second', password: 'bench-user-password' })).data.token;

    rows.push(await measure(client, 'password login (argon2id, pool)', C, [post(`${CLIENT}/authenticate?method=password`, { username: 'bench-user', password: 'bench-user-password' })], argon));
    rows.push(await measure(client, 'ext-jwt login (ES256, cert signer)', C, [post(`${CLIENT}/authenticate?method=ext-jwt`, {}, { authorization: `Bearer ${userJwt}` })], lmdb));
    rows.push(await measure(client, 'GET current-identity (zt-session)', C, [{ method: 'GET', path: `${CLIENT}/current-identity`, headers: { 'zt-session': userSession } }], trivial));
    rows.push(await measure(client, 'GET current-identity (+ secondary ext-jwt)', C, [{ method: 'GET', path: `${CLIENT}/current-identity`, headers: { 'zt-session': secondSession, authorization: `Bearer ${secondJwt}` } }], trivial));
    await client.close();

    // Overload: an auth queue of 4 running + 8 waiting against OVERLOAD_C concurrent logins.
    overloaded = await spawnController({ password: PASSWORD, env: { MESH_AUTH_CONCURRENCY: '4', MESH_AUTH_QUEUE: '8' } });
    chart.watch(overloaded.pid);
    const oc = await createClient({ origin: overloaded.origin, ca: overloaded.ca, connections: OVERLOAD_C, kind: KIND });
    rows.push(await measure(oc, 'overload: password login, queue 4+8', OVERLOAD_C, [post(`${CLIENT}/authenticate?method=password`, { username: 'admin', password: PASSWORD })]));
    await oc.close();
  } finally {
    await overloaded?.stop();
    await ctl?.stop();
  }

  const chartFile = chart.write('auth', `bench:auth — ${C} clients`, started);
  console.log(`ceilings of this run: ${ceilings.map((c) => `${c.what}: ${fmt(c.perSec, 0)}/s`).join('; ')}`);
  console.log(table(
    ['run', 'conc', 'req/s', '2xx/s', 'of ceiling', 'ceiling', 'p50 ms', 'p99 ms', 'max ms', 'non-2xx'],
    rows.map(({ name, concurrency, r, ceiling }) => [name, concurrency, fmt(r.rps, 0), fmt(r.okPerSec, 0), pct(ratio(r.okPerSec, ceiling?.perSec)), ceiling ? ceiling.what.split(' (')[0].split(' on ')[0] : '(429 share: ' + pct(ratio(r.errors['429'] ?? 0, r.requests)) + ')', fmt(r.latency.p50), fmt(r.latency.p99), fmt(r.latency.max), JSON.stringify(r.errors)]),
  ));
  const file = writeResults('auth', {
    bench: 'auth',
    startedAt: started.toISOString(),
    machine: machineInfo(),
    durationMs: DURATION_MS,
    ceilings: ceilings.map((c) => ({ ...c, timeline: undefined })),
    chart: path.relative(ROOT, chartFile),
    runs: rows.map(({ name, concurrency, r, ceiling }) => ({ name, concurrency, rps: r.rps, okPerSec: r.okPerSec, ratioToCeiling: ratio(r.okPerSec, ceiling?.perSec), ceiling: ceiling?.what, latency: r.latency, errors: r.errors, requests: r.requests })),
  }, started);
  console.log(`results: ${path.relative(ROOT, file)}; chart: ${path.relative(ROOT, chartFile)}`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
