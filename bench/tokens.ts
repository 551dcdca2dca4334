/**
 * bench/tokens — what checking a signed token costs in-process, with the real store and keys:
 * signing (login; session tokens per batch size), a first check (signature verify), and a cached check (every
 * later request with the same token), per operation on one core, each also as a ratio to its
 * ceiling measured in the same run (raw node:crypto ES256 sign or verify, a Map lookup).
 *
 *   npm run bench:tokens                       # 200,000 cached checks, 2,000 signs/verifies
 *   npm run bench:tokens -- --cached 20000 --signed 200
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseCli, intFlag } from './lib/cli.js';
import { Store } from '../src/store/store.js';
import { createRegistry } from '../src/resources/index.js';
import { SigningKeys, SESSION_TOKEN, sessionTokenClaims } from '../src/auth/tokens.js';
import { ApiSessions, API_SESSION_TOKEN } from '../src/auth/api-sessions.js';

const argv = parseCli({
  name: 'bench:tokens',
  summary: `What checking a signed token costs in-process, with the real store and keys: signing (login,
session create), a first check (signature verify) and a cached check (every later request), per
operation on one core, each with its ratio to a ceiling of the same run: one raw node:crypto ES256
signature or verify (key parsed once), or a Map lookup for the cached check. The cached check is to
cost less than a service-update poll (~20 µs).`,
  usage: ['npm run bench:tokens', 'npm run bench:tokens -- --cached 20000 --signed 200'],
  flags: {
    cached: { type: 'string', default: '200000', arg: 'N', help: 'cached checks measured' },
    signed: { type: 'string', default: '2000', arg: 'N', help: 'signatures and first checks measured' },
  },
});
const cached = intFlag(argv, 'cached', 1, 100_000_000);
const signed = intFlag(argv, 'signed', 1, 10_000_000);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-bench-tokens-'));
const store = new Store(path.join(dir, 'db'), createRegistry().collectionSpecs());
const keys = new SigningKeys(store, dir, { controllerId: 'bench', rotationMs: 3_600_000 });
await keys.start();
const sessions = new ApiSessions(store, keys, { timeoutMinutes: 30, flushMs: 600_000 });

const perOp = (n: number, fn: (i: number) => void) => {
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < n; i++) fn(i);
  return Number(process.hrtime.bigint() - t0) / 1000 / n;
};

const { session, token } = await sessions.create({ identityId: 'i1', authenticatorId: 'a1', method: 'password', ipAddress: '127.0.0.1', configTypes: [], isMfaRequired: false });
const facts = { id: 's1', identityId: 'i1', apiSessionId: session.id, serviceId: 'svc', type: 'Dial' };
const signUs = perOp(signed, () => keys.sign({ iss: 'https://bench', sub: 'i1', jti: 'x', iat: 1, z_t: API_SESSION_TOKEN }));
const verifyUs = perOp(signed, () => keys.verify(token, API_SESSION_TOKEN));
// Session tokens: one signature per batch (the sessions asked for while a commit is in flight).
const batchClaims = (n: number) => Array.from({ length: n }, (_, i) => sessionTokenClaims('https://bench', { ...facts, id: `s${i}` }, 1800));
const batchUs = (n: number) => perOp(Math.max(1, Math.ceil(signed / n)), () => keys.signSessions(batchClaims(n))) / n;
const sessionSample = keys.signSessions(batchClaims(32))[17];
const sessionVerifyUs = perOp(signed, () => keys.verify(sessionSample, SESSION_TOKEN));
// A fresh string per request, as a header value is: the Map hashes it every time.
const copies = Array.from({ length: 1024 }, () => (' ' + token).slice(1));
const cachedUs = perOp(cached, (i) => sessions.resolve(copies[i & 1023]));
// Ceilings of the same run: raw node:crypto ES256 over a token-sized input with a key parsed once,
// and a Map lookup of a fresh string (what a cached check cannot beat).
const raw = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
const input = Buffer.from(token.slice(0, token.lastIndexOf('.')));
const rawSig = crypto.sign('sha256', input, { key: raw.privateKey, dsaEncoding: 'ieee-p1363' });
perOp(Math.min(signed, 200), () => crypto.verify('sha256', input, { key: raw.publicKey, dsaEncoding: 'ieee-p1363' }, crypto.sign('sha256', input, { key: raw.privateKey, dsaEncoding: 'ieee-p1363' })));
const rawSignUs = perOp(signed, () => crypto.sign('sha256', input, { key: raw.privateKey, dsaEncoding: 'ieee-p1363' }));
const rawVerifyUs = perOp(signed, () => crypto.verify('sha256', input, { key: raw.publicKey, dsaEncoding: 'ieee-p1363' }, rawSig));
const map = new Map(copies.map((c, i) => [c + i, i]));
const keysOf = [...map.keys()].map((k) => (' ' + k).slice(1));
const lookupUs = perOp(cached, (i) => map.get(keysOf[i & 1023]));
const SIGN = ['one ES256 signature', rawSignUs] as const;
const VERIFY = ['one ES256 verify', rawVerifyUs] as const;
const LOOKUP = ['a Map lookup', lookupUs] as const;
const rows: [string, number, readonly [string, number]][] = [
  ['sign (login)', signUs, SIGN],
  ['verify (first request with a token)', verifyUs, VERIFY],
  ['session token, batch of 1', batchUs(1), SIGN],
  ['session token, batch of 32 (per token)', batchUs(32), SIGN],
  ['session token, batch of 256 (per token)', batchUs(256), SIGN],
  ['session token verify (batch of 32)', sessionVerifyUs, VERIFY],
  ['cached check (every later request)', cachedUs, LOOKUP],
];
// Ratio: this operation's rate as a share of its ceiling's rate (above 100%: one signature serves several tokens).
console.log(`${'operation'.padEnd(40)} ${'µs'.padStart(8)}  ${'per s'.padStart(10)}  ${'ratio'.padStart(6)}  ceiling of the same run`);
for (const [name, us, [ceiling, cUs]] of rows) {
  console.log(`${name.padEnd(40)} ${us.toFixed(2).padStart(8)}  ${Math.round(1e6 / us).toLocaleString('en').padStart(10)}  ${`${Math.round((100 * cUs) / us)}%`.padStart(6)}  ${ceiling}: ${cUs.toFixed(2)} µs`);
}
console.log(`(API-session token ${token.length} characters, session token ${sessionSample.length} in a batch of 32; load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')} on ${os.cpus().length} CPUs)`);
keys.close();
await sessions.close();
await store.close();
fs.rmSync(dir, { recursive: true, force: true });
