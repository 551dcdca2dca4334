/**
 * The alert checks at scale (src/events/alert-structural.ts, alerts.ts): `no-shared-edge-router`
 * is complete however many identity/service pairs there are, and bounded: one condition per
 * service, however many identities it leaves out (per identity/service pair, 3,000 identities ×
 * 1,800 services once made 1.5 million). One scan writes at most MAX_NEW_ALERTS documents, the
 * rest following with later scans. Expired enrollments come from the expiresAt index.
 *
 * The model, written straight into the store (as scripts/lib/model.ts does) to stay fast:
 * 3,000 identities that may Dial 1,101 services (3.3 million pairs). Identities with `ok` reach
 * routers r1 and r2 (four more policies give four of them r1 again); 1,100 `web` services are
 * served by every router, the `island` service only by r3. So every identity lacks a router for
 * `island`, and the last identity (no `ok`) for every service: 4,100 bad pairs, 1,101 conditions.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { Store, type BaseRecord } from '../src/store/store.js';
import { createRegistry } from '../src/resources/index.js';
import { PolicyEngine } from '../src/policy/engine.js';
import { structuralFindings, NO_SHARED_ROUTER } from '../src/events/alert-structural.js';
import { Pacer } from '../src/events/alert-scan.js';
import { MAX_NEW_ALERTS } from '../src/events/alerts.js';
import { startServer, ADMIN_USER, ADMIN_PASSWORD, type Server } from './helpers/server.js';
import { sleep } from './helpers/assert.js';

const IDENTITIES = 3000;
const WEB = 1100;
const LAST = `i${IDENTITIES - 1}`;

/** A fixture record of the collection it is put into: only the fields the alerts read. */
const base = <R extends BaseRecord>(id: string, name: string, extra: Record<string, unknown>): R => ({ id, createdAt: 1, updatedAt: 1, name, tags: {}, ...extra }) as unknown as R;

async function seed(store: Store, opts: { expiredEnrollment?: boolean } = {}) {
  await store.write((tx) => {
    for (let i = 0; i < IDENTITIES; i++) {
      const id = `i${String(i).padStart(4, '0')}`;
      tx.put('identities', base(id, `identity-${id}`, { type: 'Default', isAdmin: false, roleAttributes: id === LAST ? ['late'] : ['ok'] }));
    }
  });
  await store.write((tx) => {
    for (let i = 0; i < WEB; i++) tx.put('services', base(`s${String(i).padStart(4, '0')}`, `web-${i}`, { roleAttributes: ['web'], encryptionRequired: true, configs: [] }));
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

/** The count an alert document reports (its first log line). */
const leftOut = (logs: string[]) => Number(/^identities left out: (\d+)$/.exec(logs[0])?.[1]);

t.test('no-shared-edge-router: one condition per service, complete past millions of pairs', async (t) => {
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
  const shared = found.find((f) => f.prefix === NO_SHARED_ROUTER)!;
  const conditions = [...shared.conditions];
  t.equal(conditions.length, WEB + 1, `${WEB + 1} conditions for ${IDENTITIES * (WEB + 1)} identity/service pairs`);
  t.equal(shared.count, WEB + 1, 'count');
  t.equal(new Set(conditions.map((c) => c.key)).size, conditions.length, 'each service once');
  const island = conditions.find((c) => c.key === `${NO_SHARED_ROUTER}s-island`)!.alert()!;
  t.equal(island.alert_type, 'service.no-shared-edge-router');
  t.equal(island.event_source_type, 'service');
  t.equal(island.event_source_id, 's-island');
  t.equal(island.event_source_name, 'island');
  t.equal(island.message, `${IDENTITIES} identities may dial service island but share no edge router with it`);
  t.equal(leftOut(island.logs), IDENTITIES, 'every identity lacks a router for the island service');
  t.equal(island.logs[1], `some of them: ${Array.from({ length: 10 }, (_, i) => `identity-i000${i} (i000${i})`).join(', ')}, and ${IDENTITIES - 10} more`, 'ten named, the rest counted');
  t.same(island.logs.slice(2), ['service policies letting them dial: dial-everything (sp-dial)', 'edge routers the service may use: 1']);
  const web = conditions.find((c) => c.key === `${NO_SHARED_ROUTER}s1099`)!.alert()!;
  t.equal(web.message, '1 identity may dial service web-1099 but shares no edge router with it');
  t.same(web.logs, ['identities left out: 1', `some of them: identity-${LAST} (${LAST})`, 'service policies letting them dial: dial-everything (sp-dial)', 'edge routers the service may use: 3']);
  t.ok(shared.holds(`${NO_SHARED_ROUTER}s1099`), 'holds: the last service examined');
  t.notOk(shared.holds(`${NO_SHARED_ROUTER}nothing`), 'holds: a service that does not exist');
  t.notOk(shared.holds(`${NO_SHARED_ROUTER}${LAST}:s1099`), 'holds: a key of the former per-pair form is cleared');

  // The last identity gains a router: the web services clear, the island stays.
  await store.write((tx) => tx.put('edgeRouterPolicies', base('erp-late', 'late-r1', { semantic: 'AnyOf', identityRoles: ['#late'], edgeRouterRoles: ['@r1'], isSystem: false })));
  const again = (await structuralFindings(engine.index, store, new Pacer())).find((f) => f.prefix === NO_SHARED_ROUTER)!;
  t.same([...again.conditions].map((c) => c.key), [`${NO_SHARED_ROUTER}s-island`], 'only the island service is left');
  t.notOk(again.holds(`${NO_SHARED_ROUTER}s1099`), 'the web services now share r1 with everyone');
});

t.test('no-shared-edge-router agrees with the per-pair definition on random models', async (t) => {
  // Random small models (attributes, AllOf/AnyOf, #all, @id, empty lists): each service's
  // condition must count exactly the identities the engine's own per-identity views call bad
  // (Dial access, no common router), and a service without any has no condition.
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
      for (const c of ['identities', 'services', 'edgeRouters', 'servicePolicies', 'edgeRouterPolicies', 'serviceEdgeRouterPolicies'] as const) for (const id of [...store.scan(c)].map((r) => r.id)) tx.delete(c, id);
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
    const expected = new Map<string, number>();
    for (let s = 0; s < ns; s++) {
      let n = 0;
      for (let i = 0; i < ni; i++) if (engine.hasAccess(`id${i}`, `svc${s}`, 'Dial') && !engine.hasCommonRouter(`id${i}`, `svc${s}`)) n++;
      if (n) expected.set(`${NO_SHARED_ROUTER}svc${s}`, n);
      bad += n;
    }
    const found = (await structuralFindings(engine.index, store, new Pacer())).find((f) => f.prefix === NO_SHARED_ROUTER)!;
    const got = new Map([...found.conditions].map((c) => [c.key, leftOut(c.alert()!.logs)]));
    t.same([...got].sort(), [...expected].sort(), `round ${round}: ${expected.size} services, ${[...expected.values()].reduce((a, b) => a + b, 0)} bad pairs`);
    const all = Array.from({ length: ns }, (_, s) => `${NO_SHARED_ROUTER}svc${s}`);
    t.same(all.filter((k) => found.holds(k)).sort(), [...expected.keys()].sort(), `round ${round}: holds() agrees`);
  }
  t.ok(bad > 50, `the models have bad pairs to find (${bad})`);
});

t.test('a scan writes at most MAX_NEW_ALERTS documents; later scans write the rest', async (t) => {
  // A controller's first start creates its data directory; the model is then written into it.
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-alerts-'));
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  // Scans follow each other after their own CPU time rather than 20 times it: the spacing is
  // nextScanDelay's (test/alerts-triggers.test.ts); this test counts what each scan writes.
  const env = { MESH_ALERT_DEBOUNCE_MS: '50', MESH_ALERT_SCAN_SPACING: '1' };
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
  t.equal(await count('service.no-terminators'), MAX_NEW_ALERTS, 'the families with one condition per entity first: services without terminators');
  // The expiresAt index (epoch ms) never answers list filters (the planner keys datetimes as ISO strings).
  const listed = async (filter: string) => (await admin.get(`/enrollments?filter=${encodeURIComponent(filter)}`)).body.data.map((e: { id: string }) => e.id);
  t.same(await listed(`expiresAt > datetime(2000-01-01T00:00:00Z)`), ['enr-old'], 'enrollments filtered on expiresAt >');
  t.same(await listed(`expiresAt < datetime(${new Date().toISOString()})`), ['enr-old'], 'enrollments filtered on expiresAt <');
  // Each change starts a scan, which writes up to MAX_NEW_ALERTS of the rest: the other services
  // without terminators, the enrollment that expired before the start (read from the expiresAt
  // index), then one no-shared-edge-router alert per service (the admin and the last seeded
  // identity lack `ok`; everyone lacks a router for the island service). The new identity comes
  // with an enrollment so that its scan runs the time-based checks too: otherwise the expired
  // enrollment waits for the checks every controller runs each minute.
  const all = 2 * (WEB + 1) + 1;
  let total = first;
  for (let i = 0; i < 6 && total < all; i++) {
    t.equal((await admin.post('/identities', { name: `trigger-${i}`, type: 'User', isAdmin: false, roleAttributes: ['ok'], enrollment: { ott: true } })).status, 201);
    const next = await settle(total);
    t.ok(next - total <= MAX_NEW_ALERTS, `scan ${i + 2} writes at most ${MAX_NEW_ALERTS} (${next - total})`);
    total = next;
  }
  t.equal(await count('service.no-terminators'), WEB + 1, 'every service without terminators, once');
  t.equal(await count('enrollment.expired'), 1, 'the expired enrollment, once');
  t.equal(await count('service.no-shared-edge-router'), WEB + 1, 'one no-shared-edge-router alert per service, however many identities it leaves out');
  t.equal(await count(), all, 'nothing else');
});
