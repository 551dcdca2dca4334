/**
 * Datastore integrity (M:/database/*) against the real server: a clean store checks
 * clean; a store damaged on purpose (server stopped, LMDB opened with the Store class, index
 * entries and references broken, server restarted) is reported by check, repaired by fix, and
 * checks clean afterwards; one run at a time (seen through the results endpoint, no pipelining and
 * no timing assumption); results readable while running; admin only.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { startServer, isError, type Client, type Server } from './helpers/server.js';
import { RFC3339, sleep } from './helpers/assert.js';
import { Store, type CollectionName } from '../src/store/store.js';
import { unpackBackup } from '../src/store/snapshot.js';
import { createRegistry } from '../src/resources/index.js';

const M = '/edge/management/v1';

async function results(admin: Client) {
  for (let i = 0; i < 400; i++) {
    const r = await admin.get('/database/data-integrity-results');
    if (r.status === 200 && r.body.data.inProgress === false) return r;
    await sleep(25);
  }
  throw new Error('integrity run did not finish');
}

/** `n` identities, 16 requests at a time: enough records that an integrity run spans many turns. */
async function seedIdentities(admin: Client, n: number) {
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const i = next++;
      const r = await admin.post('/identities', { name: `seed-${i}`, type: 'User', isAdmin: false, roleAttributes: [`g${i % 20}`] });
      if (r.status !== 201) throw new Error(`seed ${i}: ${r.status} ${r.text}`);
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
}

async function run(admin: Client, kind: 'check' | 'fix') {
  const r = await admin.post(`/database/${kind}-data-integrity`);
  if (r.status !== 202) throw new Error(`${kind} → ${r.status} ${r.text}`);
  return results(admin);
}

function shape(t: Tap, data: any) {
  t.type(data.inProgress, 'boolean', 'inProgress');
  t.type(data.fixingErrors, 'boolean', 'fixingErrors');
  t.type(data.tooManyErrors, 'boolean', 'tooManyErrors');
  t.match(data.startTime, RFC3339, 'startTime');
  t.match(data.endTime, RFC3339, 'endTime');
  t.type(data.error, 'string', 'error');
  t.ok(Array.isArray(data.results), 'results array');
  for (const r of data.results) t.ok(typeof r.description === 'string' && typeof r.fixed === 'boolean', 'result {description, fixed}');
}
type Tap = import('./helpers/assert.js').Tap;

t.test('a clean store checks clean; one run at a time; results readable while running; admin only', async (t) => {
  const srv = await startServer(t);
  const admin = await srv.login();
  const before = await admin.get('/database/data-integrity-results');
  t.equal(before.status, 200, 'results before any run → 200');
  shape(t, before.body.data);
  t.equal(before.body.data.inProgress, false);

  // Some data of every kind of link.
  const ident = (await admin.post('/identities', { name: 'alice', type: 'User', isAdmin: false, roleAttributes: ['a'], enrollment: { updb: 'alice-user' } })).body.data.id;
  const svc = (await admin.post('/services', { name: 'svc', encryptionRequired: true, roleAttributes: ['s'] })).body.data.id;
  await admin.post('/service-policies', { name: 'sp', type: 'Dial', semantic: 'AnyOf', identityRoles: ['@' + ident], serviceRoles: ['#s'] });
  const er = (await admin.post('/edge-routers', { name: 'er', isTunnelerEnabled: true })).body.data.id;
  await admin.post('/terminators', { service: svc, router: er, binding: 'transport', address: 'tcp:127.0.0.1:1' });

  const clean = await run(admin, 'check');
  shape(t, clean.body.data);
  t.same(clean.body.data.results, [], `no problems in a clean store: ${JSON.stringify(clean.body.data.results)}`);
  t.equal(clean.body.data.error, '');
  t.equal(clean.body.data.fixingErrors, false);
  t.same(clean.body.meta.pagination, { limit: -1, offset: 0, totalCount: 0 }, 'pagination meta');

  // One run at a time, seen through the results endpoint rather than through timing: a check and a
  // fix asked for between two reads that both show the same run in progress were handled while it
  // ran, and must be refused. An attempt whose run ended in between proves nothing and is repeated
  // (enough records that a run spans many turns of the event loop make that rare).
  await seedIdentities(admin, 1500);
  let observed = 0;
  for (let attempt = 0; attempt < 40 && observed === 0; attempt++) {
    const first = await admin.post('/database/check-data-integrity');
    t.equal(first.status, 202, 'a check on an idle store → 202');
    t.same(first.body, { data: {}, meta: {} }, '202 empty envelope');
    // A run started by a wrongly admitted request would carry a later startTime than this one:
    // wait until the clock has moved on from the accepted run's start.
    await sleep(3);
    const before = (await admin.get('/database/data-integrity-results')).body.data;
    const second = await admin.post('/database/check-data-integrity');
    const fix = await admin.post('/database/fix-data-integrity');
    const after = (await admin.get('/database/data-integrity-results')).body.data;
    if (before.inProgress && after.inProgress && before.startTime === after.startTime) {
      observed++;
      t.equal(before.fixingErrors, false, 'results readable while running: a check, in progress');
      t.ok(isError(second, 429, 'RATE_LIMITED'), `a second check while one runs → 429 RATE_LIMITED (${second.status})`);
      t.ok(isError(fix, 429, 'RATE_LIMITED'), `a fix while a check runs → 429 RATE_LIMITED (${fix.status})`);
    }
    const done = await results(admin);
    t.same(done.body.data.results, [], 'the run finds nothing');
  }
  t.equal(observed, 1, 'a run was seen in progress around a second request');

  // Not for non-admins.
  await admin.post('/identities', { name: 'bob', type: 'User', isAdmin: false, enrollment: { updb: 'bob-user' } });
  const bobEnroll = (await admin.get('/enrollments?filter=' + encodeURIComponent('method = "updb"'))).body.data.find((e: any) => e.identityId !== ident);
  t.ok(bobEnroll, 'bob has an updb enrollment');
  for (const [m, p] of [['post', '/database/check-data-integrity'], ['post', '/database/fix-data-integrity'], ['get', '/database/data-integrity-results'], ['post', '/database/snapshot']] as const) {
    const r = m === 'get' ? await srv.mgmt.get(p) : await srv.mgmt.post(p);
    t.ok(isError(r, 401, 'UNAUTHORIZED'), `${p} without a session → 401`);
  }
});

t.test('a store damaged on purpose: check finds every problem, fix repairs them, check is clean again', async (t) => {
  const srv1 = await startServer(t, { keepData: true });
  const dataDir = srv1.dataDir;
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  let admin = await srv1.login();
  const policy = {
    name: 'strict',
    primary: {
      cert: { allowed: true, allowExpiredCerts: false },
      extJwt: { allowed: false, allowedSigners: [] },
      updb: { allowed: true, minPasswordLength: 8, maxAttempts: 4, lockoutDurationMinutes: 10, requireMixedCase: false, requireNumberChar: false, requireSpecialChar: false },
    },
    secondary: { requireTotp: false, requireExtJwtSigner: null },
  };
  const strict = (await admin.post('/auth-policies', policy)).body.data.id;
  const victim = (await admin.post('/identities', { name: 'victim', type: 'User', isAdmin: false, roleAttributes: ['red'], authPolicyId: strict })).body.data.id;
  const other = (await admin.post('/identities', { name: 'other', type: 'User', isAdmin: false })).body.data.id;
  const svc = (await admin.post('/services', { name: 'svc', encryptionRequired: true })).body.data.id;
  const sp = (await admin.post('/service-policies', { name: 'sp', type: 'Dial', semantic: 'AnyOf', identityRoles: ['@' + other], serviceRoles: ['@' + svc] })).body.data.id;
  const er = (await admin.post('/edge-routers', { name: 'er' })).body.data.id;
  const term = (await admin.post('/terminators', { service: svc, router: er, binding: 'transport', address: 'tcp:127.0.0.1:1' })).body.data.id;
  const cfgType = (await admin.post('/config-types', { name: 'ct', schema: {} })).body.data.id;
  const cfg = (await admin.post('/configs', { name: 'cfg', configTypeId: cfgType, data: {} })).body.data.id;
  await srv1.stop();

  // Damage the store directly, with the server down.
  const store = new Store(path.join(dataDir, 'db'), createRegistry().collectionSpecs());
  const c = (name: CollectionName) => store._coll(name);
  const now = Date.now();
  {
    c('identities').unique.get('name')!.removeSync('victim'); // unique entry lost
    c('services').unique.get('name')!.putSync('ghost-service', 'no-such-service'); // stale unique entry
    c('identities').indexes.get('roleAttributes')!.removeSync('red', victim); // secondary entry lost
    c('identities').indexes.get('roleAttributes')!.putSync('blue', other); // stale secondary entry
    // An authenticator of an identity that does not exist (record only: its index entries are missing too).
    c('authenticators').db.putSync('orphan-auth', { id: 'orphan-auth', createdAt: now, updatedAt: now, tags: {}, method: 'updb', identityId: 'no-such-identity', username: 'orphan-user', passwordHash: 'x' });
    // A policy role naming an identity that does not exist.
    const pol = c('servicePolicies').db.get(sp)!;
    c('servicePolicies').db.putSync(sp, { ...pol, identityRoles: [...(pol.identityRoles as string[]), '@no-such-identity'] });
    c('servicePolicies').indexes.get('identityRoles')!.putSync('@no-such-identity', sp);
    // A terminator on a router that is gone; a config whose type is gone.
    const tr = c('terminators').db.get(term)!;
    c('terminators').db.putSync(term, { ...tr, routerId: 'no-such-router' });
    c('terminators').indexes.get('routerId')!.removeSync(er, term);
    c('terminators').indexes.get('routerId')!.putSync('no-such-router', term);
    c('configTypes').db.removeSync(cfgType);
    c('configTypes').unique.get('name')!.removeSync('ct');
    // An auth policy an identity uses is gone.
    c('authPolicies').db.removeSync(strict);
    c('authPolicies').unique.get('name')!.removeSync('strict');
  }
  await store.close();

  const srv = await startServer(t, { dataDir, keepData: true });
  admin = await srv.login();
  const found = await run(admin, 'check');
  shape(t, found.body.data);
  const problems: { description: string; fixed: boolean }[] = found.body.data.results;
  t.equal(found.body.meta.pagination.totalCount, problems.length, 'totalCount is the number of results');
  const has = (re: RegExp, label: string) => t.ok(problems.some((p) => re.test(p.description)), `check reports ${label}`);
  has(/unique index identities\.name: identities .* has name "victim" but no index entry/, 'a lost unique entry');
  has(/unique index services\.name: entry "ghost-service" points at services no-such-service, which does not exist/, 'a stale unique entry');
  has(/index identities\.roleAttributes: identities .* has roleAttributes "red" but no index entry/, 'a lost secondary entry');
  has(/index identities\.roleAttributes: entry "blue" lists identities .*, whose roleAttributes is/, 'a stale secondary entry');
  has(/authenticators orphan-auth: identityId references identities no-such-identity, which does not exist/, 'a dangling reference');
  has(/service-policies .*\(sp\): identityRoles names identities no-such-identity, which does not exist/, 'a dangling @id role');
  has(/terminators .*: router no-such-router does not exist/, 'a terminator on a missing router');
  has(/configs .*\(cfg\): configTypeId references config-types .*, which does not exist/, 'a config of a missing type');
  has(new RegExp(`identities .*\\(victim\\): authPolicyId references auth-policies ${strict}, which does not exist`), 'an identity of a missing auth policy');
  t.ok(problems.every((p) => p.fixed === false), 'a check fixes nothing');
  t.equal(found.body.data.fixingErrors, false);

  // The damage is visible through the API before the fix: the lost unique entry lets a duplicate in.
  const orphan = await admin.get('/authenticators/orphan-auth');
  t.equal(orphan.status, 200, 'the orphaned authenticator is served before the fix');

  const fixed = await run(admin, 'fix');
  shape(t, fixed.body.data);
  t.equal(fixed.body.data.fixingErrors, true, 'fixingErrors on a fix run');
  t.ok(fixed.body.data.results.length > 0, 'the fix run reports what it found');
  const unfixed = fixed.body.data.results.filter((p: any) => !p.fixed);
  t.same(unfixed, [], `every problem fixed: ${JSON.stringify(unfixed)}`);

  const after = await run(admin, 'check');
  t.same(after.body.data.results, [], `a check after the fix is clean: ${JSON.stringify(after.body.data.results)}`);

  // The repairs, seen through the API.
  const dup = await admin.post('/identities', { name: 'victim', type: 'User', isAdmin: false });
  t.equal(dup.status, 400, 'the unique name index is back: a second "victim" is refused');
  t.equal((await admin.post('/services', { name: 'ghost-service', encryptionRequired: true })).status, 201, 'the stale unique entry no longer blocks its name');
  const red = await admin.get('/identities?roleFilter=%23red');
  t.same(red.body.data.map((i: any) => i.id), [victim], 'the role attribute index finds the victim again');
  t.equal((await admin.get('/authenticators/orphan-auth')).status, 404, 'the orphaned authenticator is deleted');
  const pol = (await admin.get(`/service-policies/${sp}`)).body.data;
  t.same(pol.identityRoles, ['@' + other], 'the dangling role is removed, the good one kept');
  t.equal((await admin.get(`/terminators/${term}`)).status, 404, 'the terminator on a missing router is deleted');
  t.equal((await admin.get(`/configs/${cfg}`)).status, 404, 'the config of a missing type is deleted');
  t.equal((await admin.get(`/identities/${victim}`)).body.data.authPolicyId, 'default', 'an identity of a missing auth policy falls back to the default policy');
});

t.test('snapshots: a consistent copy under the data directory, at most one a minute', async (t) => {
  const srv: Server = await startServer(t);
  const admin = await srv.login();
  await admin.post('/identities', { name: 'in-snapshot', type: 'User', isAdmin: false });
  const r = await admin.post('/database/snapshot');
  t.equal(r.status, 200, `snapshot → 200 (${r.text})`);
  t.same(r.body, { data: {}, meta: {} }, 'empty envelope');
  const again = await admin.post('/database/snapshot');
  t.ok(isError(again, 429, 'RATE_LIMITED'), 'a second snapshot within a minute → 429 RATE_LIMITED');

  const dir = path.join(srv.dataDir, 'snapshots');
  const taken = fs.readdirSync(dir);
  t.equal(taken.length, 1, 'one snapshot file');
  t.match(taken[0], /^mesh-backup-\d{8}T\d{6}Z\.tar\.gz$/, 'named after its UTC time');
  t.equal(r.headers['mesh-snapshot'], taken[0], 'the answer names the file');
  t.equal(fs.statSync(path.join(dir, taken[0])).mode & 0o777, 0o600, 'readable by its owner only: it holds private keys');
  // The backup checks out, carries the PKI, and its datastore is a working store holding what was written before it was taken.
  const unpacked = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-unpacked-'));
  t.teardown(() => fs.rmSync(unpacked, { recursive: true, force: true }));
  const manifest = await unpackBackup(path.join(dir, taken[0]), unpacked);
  t.equal(manifest.kind, 'mesh-controller-backup');
  t.ok(manifest.files.some((f) => f.path === 'pki/ca-bundle.pem'), 'the PKI is in the backup');
  t.equal(fs.readFileSync(path.join(unpacked, 'pki', 'ca-bundle.pem'), 'utf8'), srv.ca, 'the same CA bundle');
  const copy = new Store(path.join(unpacked, 'db'), createRegistry().collectionSpecs());
  t.teardown(() => copy.close());
  t.equal(copy.findUnique('identities', 'name', 'in-snapshot')?.name, 'in-snapshot', 'the snapshot holds the data');
});
