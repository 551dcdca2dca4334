/**
 * bench/auth — authentication throughput and the rate limiter under overload (issue 6).
 *
 *   npm run bench:auth
 *   npm run bench:auth -- --duration 5 --concurrency 32
 *
 * Spawns the real controller (production argon2id settings unless overridden) and measures,
 * closed-loop for a fixed time each:
 *   - password logins/s (argon2id in the worker pool),
 *   - ext-jwt logins/s (ES256 token from a certificate-backed external signer),
 *   - an authenticated request with a plain session, and with a secondary ext-JWT factor
 *     (bearer verified once, then remembered until it expires),
 * then spawns a second controller with a deliberately tiny auth queue and overloads it: the
 * share of 429 RATE_LIMITED answers and the latency of both kinds show that excess work is
 * refused at once instead of queueing without bound.
 * Prints a table and writes bench/results/auth-<ts>.json and auth-latest.json.
 *
 * Flags: --duration S (default 3), --concurrency C (default 16), --overload-concurrency N (64),
 *        --client undici|https
 */
import crypto from 'node:crypto';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { SignJWT } from 'jose';
import { createClient, requestJson, type ClientKind, type HttpClient, type RequestSpec } from './lib/http.js';
import { spawnController, login, MGMT, type ControllerProcess } from './lib/controller.js';
import { runLoad, type LoadResult } from './lib/load.js';
import { machineInfo, table, fmt, writeResults } from './lib/report.js';

const { values: argv } = parseArgs({
  options: {
    duration: { type: 'string' },
    concurrency: { type: 'string' },
    'overload-concurrency': { type: 'string' },
    client: { type: 'string' },
  },
  strict: true,
});
const DURATION_MS = Number(argv.duration ?? 3) * 1000;
const C = Number(argv.concurrency ?? 16);
const OVERLOAD_C = Number(argv['overload-concurrency'] ?? 64);
const KIND = argv.client as ClientKind | undefined;
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

interface Row { name: string; concurrency: number; r: LoadResult }

async function measure(client: HttpClient, name: string, concurrency: number, requests: RequestSpec[]): Promise<Row> {
  await runLoad({ client, concurrency, requests, durationMs: 300 }); // warm-up
  const r = await runLoad({ client, concurrency, requests, durationMs: DURATION_MS });
  return { name, concurrency, r };
}

async function main() {
  const rows: Row[] = [];
  const { certPem, key } = certAndKey();
  let ctl: ControllerProcess | undefined;
  let overloaded: ControllerProcess | undefined;
  try {
    ctl = await spawnController({ password: PASSWORD, env: { MESH_EXT_JWT_JWKS_COOLDOWN_MS: '5000' } });
    const client = await createClient({ origin: ctl.origin, ca: ctl.ca, connections: Math.max(C, 8), kind: KIND });
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

    rows.push(await measure(client, 'password login (argon2id, pool)', C, [post(`${CLIENT}/authenticate?method=password`, { username: 'bench-user', password: 'bench-user-password' })]));
    rows.push(await measure(client, 'ext-jwt login (ES256, cert signer)', C, [post(`${CLIENT}/authenticate?method=ext-jwt`, {}, { authorization: `Bearer ${userJwt}` })]));
    rows.push(await measure(client, 'GET current-identity (zt-session)', C, [{ method: 'GET', path: `${CLIENT}/current-identity`, headers: { 'zt-session': userSession } }]));
    rows.push(await measure(client, 'GET current-identity (+ secondary ext-jwt)', C, [{ method: 'GET', path: `${CLIENT}/current-identity`, headers: { 'zt-session': secondSession, authorization: `Bearer ${secondJwt}` } }]));
    await client.close();

    // Overload: an auth queue of 4 running + 8 waiting against OVERLOAD_C concurrent logins.
    overloaded = await spawnController({ password: PASSWORD, env: { MESH_AUTH_CONCURRENCY: '4', MESH_AUTH_QUEUE: '8' } });
    const oc = await createClient({ origin: overloaded.origin, ca: overloaded.ca, connections: OVERLOAD_C, kind: KIND });
    rows.push(await measure(oc, 'overload: password login, queue 4+8', OVERLOAD_C, [post(`${CLIENT}/authenticate?method=password`, { username: 'admin', password: PASSWORD })]));
    await oc.close();
  } finally {
    await overloaded?.stop();
    await ctl?.stop();
  }

  console.log(table(
    ['run', 'conc', 'req/s', '2xx/s', 'p50 ms', 'p99 ms', 'max ms', 'non-2xx'],
    rows.map(({ name, concurrency, r }) => [name, concurrency, fmt(r.rps, 0), fmt(r.okPerSec, 0), fmt(r.latency.p50), fmt(r.latency.p99), fmt(r.latency.max), JSON.stringify(r.errors)]),
  ));
  const file = writeResults('auth', {
    machine: machineInfo(),
    durationMs: DURATION_MS,
    runs: rows.map(({ name, concurrency, r }) => ({ name, concurrency, rps: r.rps, okPerSec: r.okPerSec, latency: r.latency, errors: r.errors, requests: r.requests })),
  });
  console.log(`results: ${file}`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
