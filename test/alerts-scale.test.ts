/**
 * The alert checks at scale (src/events/alert-structural.ts, alerts.ts): `no-shared-edge-router`
 * is complete however many identity/service pairs there are (it used to stop after 200,000 pairs,
 * so on the "large" model it never saw most of them), and one scan writes at most
 * MAX_NEW_ALERTS documents, the rest following with later scans. Expired enrollments come from
 * the expiresAt index.
 *
 * The model, written straight into the store (as scripts/lib/model.ts does) to stay fast:
 * 2,100 identities that may Dial 101 services (212,100 pairs). Identities with `ok` reach routers
 * r1 and r2 (four more policies give four of them r1 again); 100 `web` services are served by every router, the `island` service only by r3. So
 * every identity lacks a router for `island`, and the last identity (no `ok`) for every service:
 * 2,200 bad pairs, the last of them far beyond the old 200,000-pair cut.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { Store, type Rec } from '../src/store/store.js';
import { createRegistry } from '../src/resources/index.js';
import { PolicyEngine } from '../src/policy/engine.js';
import { structuralFindings, NO_SHARED_ROUTER } from '../src/events/alert-structural.js';
import { Pacer } from '../src/events/alert-scan.js';
import { MAX_NEW_ALERTS } from '../src/events/alerts.js';
import { startServer, ADMIN_USER, ADMIN_PASSWORD, type Server } from './helpers/server.js';
import { sleep } from './helpers/assert.js';

const IDENTITIES = 2100;
const WEB = 100;
const LAST = `i${IDENTITIES - 1}`;
const BAD = IDENTITIES + WEB;

const base = (id: string, name: string, extra: Record<string, unknown>): Rec => ({ id, createdAt: 1, updatedAt: 1, name, tags: {}, ...extra });

async function seed(store: Store, opts: { expiredEnrollment?: boolean } = {}) {
  await store.write((tx) => {
    for (let i = 0; i < IDENTITIES; i++) {
      const id = `i${String(i).padStart(4, '0')}`;
      tx.put('identities', base(id, `identity-${id}`, { type: 'Default', isAdmin: false, roleAttributes: id === LAST ? ['late'] : ['ok'] }));
    }
  });
  await store.write((tx) => {
    for (let i = 0; i < WEB; i++) tx.put('services', base(`s${String(i).padStart(3, '0')}`, `web-${i}`, { roleAttributes: ['web'], encryptionRequired: true, configs: [] }));
    tx.put('services', base('s-island', 'island', { roleAttributes: ['island'], encryptionRequired: true, configs: [] }));
    for (const r of ['r1', 'r2', 'r3']) tx.put('edgeRouters', base(r, `router-${r}`, { roleAttributes: [], isTunnelerEnabled: false, cost: 0 }));
    tx.put('edgeRouterPolicies', base('erp-ok', 'ok-routers', { semantic: 'AnyOf', identityRoles: ['#ok'], edgeRouterRoles: ['@r1', '@r2'], isSystem: false }));
    // More ERPs reaching the web services' routers: their cover has more than four (the bitset path).
    for (let k = 1; k <= 4; k++) tx.put('edgeRouterPolicies', base(`erp-x${k}`, `extra-${k}`, { semantic: 'AnyOf', identityRoles: [`@i000${k}`], edgeRouterRoles: ['@r1'], isSystem: false }));
    tx.put('serviceEdgeRouterPolicies', base('serp-web', 'web-everywhere', { semantic: 'AnyOf', serviceRoles: ['#web'], edgeRouterRoles: ['#all'] }));
    tx.put('serviceEdgeRouterPolicies', base('serp-island', 'island-r3', { semantic: 'AnyOf', serviceRoles: ['#island'], edgeRouterRoles: ['@r3'] }));
    tx.put('servicePolicies', base('sp-dial', 'dial-everything', { type: 'Dial', semantic: 'AnyOf', identityRoles: ['#all'], serviceRoles: ['#all'], postureCheckRoles: [] }));
    if (opts.expiredEnrollment) tx.put('enrollments', base('enr-old', 'x', { method: 'ott', identityId: 'i0000', token: 'tok-old', jwt: 'x', expiresAt: Date.now() - 60_000 }));
  });
}

t.test('no-shared-edge-router is complete: every bad pair, well past 200,000 pairs', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-alerts-'));
  const store = new Store(dir, createRegistry().collectionSpecs());
  await seed(store);
  const engine = new PolicyEngine(store);
  t.teardown(async () => {
    engine.close();
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const found = await structuralFindings(engine.index, store, new Pacer());
  const pairs = found.find((f) => f.prefix === NO_SHARED_ROUTER)!;
  const keys = [...pairs.conditions].map((c) => c.key);
  t.equal(keys.length, BAD, `${BAD} bad pairs`);
  t.equal(new Set(keys).size, keys.length, 'each pair once');
  t.equal(keys.filter((k) => k.endsWith(':s-island')).length, IDENTITIES, 'every identity lacks a router for the island service');
  t.equal(keys.filter((k) => k.startsWith(`${NO_SHARED_ROUTER}${LAST}:`)).length, WEB + 1, 'the last identity lacks one for every service');
  t.ok(pairs.holds(`${NO_SHARED_ROUTER}${LAST}:s099`), 'holds: the last pair examined');
  t.notOk(pairs.holds(`${NO_SHARED_ROUTER}i0000:s000`), 'holds: a pair that shares r1 and r2');
  t.notOk(pairs.holds(`${NO_SHARED_ROUTER}nobody:s000`), 'holds: an identity that does not exist');
  const doc = [...pairs.conditions].find((c) => c.key === `${NO_SHARED_ROUTER}${LAST}:s099`)!.alert()!;
  t.match(doc.message, /identity identity-i2099 may dial service web-99 but shares no edge router with it/);
  t.same(doc.logs, ['service policy: dial-everything (sp-dial)', 'service: web-99 (s099)', 'edge routers the identity may use: 0', 'edge routers the service may use: 3']);

  // The identity gains a router: its pairs clear, the island ones stay.
  await store.write((tx) => tx.put('edgeRouterPolicies', base('erp-late', 'late-r1', { semantic: 'AnyOf', identityRoles: ['#late'], edgeRouterRoles: ['@r1'], isSystem: false })));
  const again = (await structuralFindings(engine.index, store, new Pacer())).find((f) => f.prefix === NO_SHARED_ROUTER)!;
  t.equal([...again.conditions].length, IDENTITIES, 'only the island pairs are left');
  t.notOk(again.holds(`${NO_SHARED_ROUTER}${LAST}:s099`), 'the last identity now shares r1 with web services');
});

t.test('no-shared-edge-router agrees with the per-pair definition on random models', async (t) => {
  // Random small models (attributes, AllOf/AnyOf, #all, @id, empty lists): the grouped check must
  // find exactly the pairs the engine's own per-identity views call bad (Dial access, no common router).
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-alerts-'));
  const store = new Store(dir, createRegistry().collectionSpecs());
  const engine = new PolicyEngine(store);
  t.teardown(async () => {
    engine.close();
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  let seedState = 7;
  const rnd = (n: number) => {
    // mulberry32
    seedState = (seedState + 0x6d2b79f5) | 0;
    let x = Math.imul(seedState ^ (seedState >>> 15), 1 | seedState);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) % n;
  };
  const attrs = ['a', 'b', 'c', 'd'];
  const roles = (kind: string, count: number) => {
    const x = rnd(10);
    if (x === 0) return ['#all'];
    if (x === 1) return [];
    if (x === 2) return [`@${kind}${rnd(count)}`, `@${kind}${rnd(count)}`];
    const out = [`#${attrs[rnd(4)]}`];
    if (rnd(2)) out.push(`#${attrs[rnd(4)]}`);
    if (x === 3) out.push(`@${kind}${rnd(count)}`);
    return out;
  };
  const some = () => attrs.filter(() => rnd(3) === 0);
  let bad = 0;
  for (let round = 0; round < 25; round++) {
    const [ni, ns, nr] = [12 + rnd(20), 3 + rnd(6), 2 + rnd(8)];
    await store.write((tx) => {
      for (const c of ['identities', 'services', 'edgeRouters', 'servicePolicies', 'edgeRouterPolicies', 'serviceEdgeRouterPolicies']) for (const id of [...store.scan(c)].map((r) => r.id)) tx.delete(c, id);
    });
    await store.write((tx) => {
      for (let i = 0; i < ni; i++) tx.put('identities', base(`id${i}`, `identity-${i}`, { type: 'Default', isAdmin: false, roleAttributes: some() }));
      for (let i = 0; i < ns; i++) tx.put('services', base(`svc${i}`, `service-${i}`, { roleAttributes: some(), encryptionRequired: true, configs: [] }));
      for (let i = 0; i < nr; i++) tx.put('edgeRouters', base(`er${i}`, `router-${i}`, { roleAttributes: some(), isTunnelerEnabled: false, cost: 0 }));
      const semantic = () => (rnd(2) ? 'AnyOf' : 'AllOf');
      for (let i = 0; i < 2 + rnd(5); i++) tx.put('servicePolicies', base(`sp${i}`, `sp-${i}`, { type: rnd(4) ? 'Dial' : 'Bind', semantic: semantic(), identityRoles: roles('id', ni), serviceRoles: roles('svc', ns), postureCheckRoles: [] }));
      for (let i = 0; i < 1 + rnd(8); i++) tx.put('edgeRouterPolicies', base(`erp${i}`, `erp-${i}`, { semantic: semantic(), identityRoles: roles('id', ni), edgeRouterRoles: roles('er', nr), isSystem: false }));
      for (let i = 0; i < 1 + rnd(4); i++) tx.put('serviceEdgeRouterPolicies', base(`serp${i}`, `serp-${i}`, { semantic: semantic(), serviceRoles: roles('svc', ns), edgeRouterRoles: roles('er', nr) }));
    });
    const expected: string[] = [];
    for (let i = 0; i < ni; i++) for (let s = 0; s < ns; s++) if (engine.hasAccess(`id${i}`, `svc${s}`, 'Dial') && !engine.hasCommonRouter(`id${i}`, `svc${s}`)) expected.push(`${NO_SHARED_ROUTER}id${i}:svc${s}`);
    const found = (await structuralFindings(engine.index, store, new Pacer())).find((f) => f.prefix === NO_SHARED_ROUTER)!;
    const keys = [...found.conditions].map((c) => c.key);
    t.same(keys.sort(), expected.sort(), `round ${round}: ${expected.length} bad pairs`);
    bad += expected.length;
    const all: string[] = [];
    for (let i = 0; i < ni; i++) for (let s = 0; s < ns; s++) all.push(`${NO_SHARED_ROUTER}id${i}:svc${s}`);
    t.same(all.filter((k) => found.holds(k)).sort(), expected.sort(), `round ${round}: holds() agrees`);
  }
  t.ok(bad > 50, `the models have bad pairs to find (${bad})`);
});

t.test('a scan writes at most MAX_NEW_ALERTS documents; later scans write the rest', async (t) => {
  // A controller's first start creates its data directory; the model is then written into it.
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-alerts-'));
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const env = { MESH_ALERT_DEBOUNCE_MS: '50' };
  await (await startServer(t, { dataDir, keepData: true, env })).stop();
  const store = new Store(path.join(dataDir, 'db'), createRegistry().collectionSpecs());
  await seed(store, { expiredEnrollment: true });
  await store.close();

  const srv: Server = await startServer(t, { dataDir, keepData: true, env });
  const admin = await srv.login();
  const auth = 'Basic ' + Buffer.from(`${ADMIN_USER}:${ADMIN_PASSWORD}`).toString('base64');
  const count = async (type?: string) =>
    (await srv.raw('GET', '/search/mesh.alert*/_count', Buffer.from(JSON.stringify(type ? { query: { term: { 'alert_type.keyword': type } } } : {})), { authorization: auth, 'content-type': 'application/json' })).body.count as number;
  /** The alert count once it stops moving (a scan writes its documents in chunks). */
  const settle = async (above: number) => {
    let last = -1;
    let same = 0;
    for (let i = 0; i < 400 && same < 3; i++) {
      await sleep(150);
      const c = await count();
      same = c === last && c > above ? same + 1 : 0;
      last = c;
    }
    return last;
  };

  const first = await settle(0);
  t.equal(first, MAX_NEW_ALERTS, `the first scan writes ${MAX_NEW_ALERTS} documents`);
  t.match(srv.output, `more than ${MAX_NEW_ALERTS} new conditions`, 'the cap is logged');
  t.equal(await count('service.no-terminators'), WEB + 1, 'the small families first: services without terminators');
  t.equal(await count('enrollment.expired'), 1, 'and the enrollment that expired before the start (read from the expiresAt index)');
  // The expiresAt index (epoch ms) never answers list filters (the planner keys datetimes as ISO strings).
  const listed = async (filter: string) => (await admin.get(`/enrollments?filter=${encodeURIComponent(filter)}`)).body.data.map((e: { id: string }) => e.id);
  t.same(await listed(`expiresAt > datetime(2000-01-01T00:00:00Z)`), ['enr-old'], 'enrollments filtered on expiresAt >');
  t.same(await listed(`expiresAt < datetime(${new Date().toISOString()})`), ['enr-old'], 'enrollments filtered on expiresAt <');
  // Each structural change starts a scan, which writes up to MAX_NEW_ALERTS of the rest.
  // Every identity (the seeded ones, the default admin, the triggers) lacks a router for the
  // island service; the two without `ok` (the last seeded one, the admin) for the web services too.
  const expected = async () => ((await admin.get('/identities?limit=1')).body.meta.pagination.totalCount as number) + 2 * WEB;
  let total = first;
  for (let i = 0; i < 6 && (await count('identity.no-shared-edge-router')) < (await expected()); i++) {
    t.equal((await admin.post('/identities', { name: `trigger-${i}`, type: 'User', isAdmin: false, roleAttributes: ['ok'] })).status, 201);
    const next = await settle(total);
    t.ok(next - total <= MAX_NEW_ALERTS, `scan ${i + 2} writes at most ${MAX_NEW_ALERTS} (${next - total})`);
    total = next;
  }
  t.equal(await count('identity.no-shared-edge-router'), await expected(), 'every bad pair alerted, each once');
});
