/**
 * Does a wrong password for an existing user take longer than any password for an unknown user?
 * (An attacker who can tell learns which usernames exist.) Alternates the two on one connection
 * against a real controller, then reports each side's median and p90 and how often the best
 * single threshold tells them apart (50% = indistinguishable).
 *
 *   npm run bench:login-timing -- [--tries 300] [--argon2-kib 1024]
 *
 * Cheap hashing by default (as the tests use) so the hash does not drown the difference; pass
 * `--argon2-kib 19456` for the production cost. Writes bench/results/login-timing-<time>.json.
 */
import path from 'node:path';
import { spawnController, login, MGMT, ROOT } from './lib/controller.js';
import { createClient, requestJson } from './lib/http.js';
import { parseCli, intFlag } from './lib/cli.js';
import { writeResults } from './lib/report.js';
import { progressBar } from './lib/progress.js';

const argv = parseCli({
  name: 'bench:login-timing',
  summary: `Does a wrong password for an existing user take longer than any password for an unknown user?
Alternates the two on one connection, reports each side's median and p90 and how often the best single
threshold tells them apart (50% = indistinguishable). Cheap hashing by default; --argon2-kib 19456 is
the production cost.`,
  usage: ['npm run bench:login-timing', 'npm run bench:login-timing -- --argon2-kib 19456 --tries 150'],
  flags: {
    'tries': { type: 'string', default: '300', arg: 'N', help: 'logins of each kind' },
    'argon2-kib': { type: 'string', default: '1024', arg: 'K', help: 'argon2id memory of stored passwords' },
  },
}, process.argv.slice(2));
const TRIES = intFlag(argv, 'tries', 10, 100000);
const ARGON2_KIB = intFlag(argv, 'argon2-kib', 1024, 4194304);
const PASSWORD = 'bench-admin-password';

const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))];

/** Best accuracy of a single threshold classifying `a` (below) vs `b` (above), either direction. */
function separability(a: number[], b: number[]): number {
  const all = [...a.map((v) => [v, 0] as const), ...b.map((v) => [v, 1] as const)].sort((x, y) => x[0] - y[0]);
  let best = 0.5;
  let aBelow = 0;
  let bBelow = 0;
  for (const [, k] of all) {
    if (k === 0) aBelow++;
    else bBelow++;
    const acc = (aBelow + (b.length - bBelow)) / (a.length + b.length);
    best = Math.max(best, acc, 1 - acc);
  }
  return best;
}

async function main() {
  const ctl = await spawnController({ password: PASSWORD, env: { MESH_ARGON2_MEMORY_KIB: String(ARGON2_KIB), MESH_ARGON2_ITERATIONS: '1' } });
  const client = await createClient({ origin: ctl.origin, ca: ctl.ca, connections: 1 });
  try {
    const token = await login(client, 'admin', PASSWORD);
    const h = { 'zt-session': token };
    // A lockout would end the run early: a policy without one for the probed user.
    const pol = await requestJson(client, 'POST', `${MGMT}/auth-policies`, h, {
      name: 'no-lockout', primary: { cert: { allowed: true, allowExpiredCerts: true }, extJwt: { allowed: false, allowedSigners: [] }, updb: { allowed: true, maxAttempts: 0, lockoutDurationMinutes: 0, minPasswordLength: 5, requireMixedCase: false, requireNumberChar: false, requireSpecialChar: false } },
      secondary: { requireTotp: false },
    });
    const id = (await requestJson(client, 'POST', `${MGMT}/identities`, h, { name: 'timing-user', type: 'User', isAdmin: false, authPolicyId: pol.body?.data?.id })).body.data.id;
    await requestJson(client, 'POST', `${MGMT}/authenticators`, h, { method: 'updb', identityId: id, username: 'timing-user', password: 'the-right-password' });
    const body = (username: string) => Buffer.from(JSON.stringify({ username, password: 'a-wrong-password' }));
    const spec = (username: string) => ({ method: 'POST', path: `${MGMT}/authenticate?method=password`, headers: { 'content-type': 'application/json' }, body: body(username) });
    const known = spec('timing-user');
    const unknown = spec('nobody-by-this-name');
    const times = { wrongPassword: [] as number[], unknownUser: [] as number[] };
    const bar = progressBar('logins', { total: TRIES + 20 });
    for (let i = 0; i < TRIES + 20; i++) {
      bar.update(i);
      for (const [k, s] of [['wrongPassword', known], ['unknownUser', unknown]] as const) {
        const t0 = performance.now();
        const r = await client.request(s);
        const ms = performance.now() - t0;
        if (r.status !== 401) throw new Error(`${k}: expected 401, got ${r.status}`);
        if (i >= 20) times[k].push(ms); // the first 20 warm up
      }
    }
    bar.done();
    const summary = Object.fromEntries(Object.entries(times).map(([k, xs]) => [k, { medianMs: +quantile(xs, 0.5).toFixed(3), p90Ms: +quantile(xs, 0.9).toFixed(3) }]));
    const sep = separability(times.wrongPassword, times.unknownUser);
    const result = { tries: TRIES, argon2KiB: ARGON2_KIB, ...summary, distinguishable: +sep.toFixed(3), at: new Date().toISOString() };
    console.log(JSON.stringify(result, null, 2));
    console.log(`results: ${path.relative(ROOT, writeResults('login-timing', result))}`);
  } finally {
    await client.close();
    await ctl.stop();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
