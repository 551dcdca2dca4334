/**
 * The policy matrix against the real controller: `#attr`, `@id`, `#all`,
 * AllOf/AnyOf and mixed lists for service policies, edge router policies and service edge router
 * policies, every association view, updates and deletes, role attribute lists, policy advice and
 * the summary.
 */
import t from 'tap';
import { startServer, isError, Client, type Server } from './helpers/server.js';
import { Fixture, ids } from './helpers/policy-fixture.js';

let srv: Server;
let admin: Client;
let f: Fixture;
let I1: string, I2: string, I3: string, S1: string, S2: string, S3: string, R1: string, R2: string, R3: string;

t.before(async () => {
  srv = await startServer(t);
  admin = await srv.login();
  f = new Fixture(srv, admin);
  I1 = await f.mk('/identities', { name: 'm-i1', type: 'User', isAdmin: false, roleAttributes: ['i1'] });
  I2 = await f.mk('/identities', { name: 'm-i2', type: 'User', isAdmin: false, roleAttributes: ['i1', 'i2'] });
  I3 = await f.mk('/identities', { name: 'm-i3', type: 'User', isAdmin: false, roleAttributes: ['i2'] });
  S1 = await f.svc('m-s1', ['s1']);
  S2 = await f.svc('m-s2', ['s1', 's2']);
  S3 = await f.svc('m-s3', []);
  R1 = await f.router('m-r1', ['r1']);
  R2 = await f.router('m-r2', ['r1', 'r2']);
  R3 = await f.router('m-r3', []);
});

const has = (list: string[], ...want: string[]) => want.every((w) => list.includes(w));
const none = (list: string[], ...not: string[]) => not.every((w) => !list.includes(w));

t.test('service policies P1..P6', async (t) => {
  const P1 = await f.sp('m-p1', 'Dial', ['#i1'], ['#s1']);
  const P2 = await f.sp('m-p2', 'Dial', ['#i1', `@${I3}`], ['#s1', `@${S3}`]);
  const P3 = await f.sp('m-p3', 'Dial', [`@${I2}`, `@${I3}`], [`@${S2}`, `@${S3}`]);
  const P4 = await f.sp('m-p4', 'Dial', ['#all'], ['#all']);
  const P5 = await f.sp('m-p5', 'Dial', ['#i1', '#i2'], ['#s1', '#s2']);
  const P6 = await f.sp('m-p6', 'Dial', ['#i1', '#i2'], ['#s1', '#s2'], { semantic: 'AnyOf' });
  const svcs = async (p: string) => ids(await admin.get(`/service-policies/${p}/services?limit=-1`));
  const idents = async (p: string) => ids(await admin.get(`/service-policies/${p}/identities?limit=-1`));
  t.same(await svcs(P1), [S1, S2].sort(), 'P1 services');
  t.same(await svcs(P2), [S1, S2, S3].sort(), 'P2 services (mixed list)');
  t.same(await svcs(P3), [S2, S3].sort(), 'P3 services (@ids)');
  t.ok(has(await svcs(P4), S1, S2, S3), 'P4 #all services');
  const p5 = await svcs(P5);
  t.ok(has(p5, S2) && none(p5, S1, S3), 'P5 AllOf services = S2');
  t.same(await svcs(P6), [S1, S2].sort(), 'P6 AnyOf services');
  t.same(await idents(P1), [I1, I2].sort(), 'P1 identities');
  t.same(await idents(P2), [I1, I2, I3].sort(), 'P2 identities');
  t.same(await idents(P3), [I2, I3].sort(), 'P3 identities');
  t.ok(has(await idents(P4), I1, I2, I3), 'P4 identities');
  const p5i = await idents(P5);
  t.ok(has(p5i, I2) && none(p5i, I1, I3), 'P5 identities = I2');
  t.same(await idents(P6), [I1, I2, I3].sort(), 'P6 identities');

  const spOf = async (path: string) => ids(await admin.get(`${path}?limit=-1`));
  t.same(await spOf(`/services/${S1}/service-policies`), [P1, P2, P4, P6].sort(), 'S1 policies');
  t.same(await spOf(`/services/${S2}/service-policies`), [P1, P2, P3, P4, P5, P6].sort(), 'S2 policies');
  t.same(await spOf(`/services/${S3}/service-policies`), [P2, P3, P4].sort(), 'S3 policies');
  t.same(await spOf(`/identities/${I3}/service-policies`), [P2, P3, P4, P6].sort(), 'I3 policies');

  // Identity ↔ service views, with policyType.
  t.same(ids(await admin.get(`/identities/${I1}/services?policyType=dial&limit=-1`)).filter((x) => [S1, S2, S3].includes(x)), [S1, S2, S3].sort(), 'I1 dial services');
  t.same(ids(await admin.get(`/identities/${I1}/services?policyType=bind&limit=-1`)), [], 'I1 bind services: none');
  t.ok(has(ids(await admin.get(`/services/${S3}/identities?policyType=dial&limit=-1`)), I1, I2, I3), 'S3 dial identities');
  t.same(ids(await admin.get(`/services/${S3}/identities?policyType=bind&limit=-1`)), [], 'S3 bind identities: none');
  t.ok(isError(await admin.get(`/services/${S3}/identities?policyType=sideways`), 400, 'COULD_NOT_VALIDATE'), 'bad policyType → 400');

  // Paging and filters on a view.
  const page = await admin.get(`/services/${S2}/service-policies?limit=2&offset=1`);
  t.equal(page.body.meta.pagination.totalCount, 6, 'view totalCount');
  t.equal(page.body.data.length, 2, 'view page size');
  const filtered = await admin.get(`/services/${S2}/service-policies?filter=name="m-p3"`);
  t.same(ids(filtered), [P3], 'view filter');

  // Display names.
  const d = (await admin.get(`/service-policies/${P2}`)).body.data;
  t.same(d.identityRolesDisplay.find((x: any) => x.role === `@${I3}`), { role: `@${I3}`, name: '@m-i3' }, '@id displays as @name');
  t.same(d.identityRolesDisplay.find((x: any) => x.role === '#i1'), { role: '#i1', name: '#i1' }, '#attr displays as itself');

  // PUT P1 with new roles.
  const put = await admin.put(`/service-policies/${P1}`, { name: 'm-p1', type: 'Dial', semantic: 'AllOf', serviceRoles: ['#s1', '#s2'], identityRoles: ['#i2'] });
  t.equal(put.status, 200, 'PUT P1');
  t.same(await svcs(P1), [S2], 'P1 services after PUT');
  t.same(await idents(P1), [I2, I3].sort(), 'P1 identities after PUT');

  // Delete P2: gone from every association.
  t.equal((await admin.delete(`/service-policies/${P2}`)).status, 200);
  t.ok(none(await spOf(`/services/${S1}/service-policies`), P2), 'P2 gone from S1');
  t.ok(none(await spOf(`/identities/${I3}/service-policies`), P2), 'P2 gone from I3');
  t.ok(isError(await admin.get(`/service-policies/${P2}/services`), 404, 'NOT_FOUND'), 'deleted policy view → 404');

  // Entity attribute change moves membership.
  await admin.patch(`/services/${S3}`, { roleAttributes: ['s1'] });
  t.ok(has(await svcs(P6), S3), 'S3 joins P6 after gaining s1');
  await admin.patch(`/services/${S3}`, { roleAttributes: [] });
  t.ok(none(await svcs(P6), S3), 'S3 leaves P6 after losing s1');

  // Posture checks of a policy.
  const PC = await f.mk('/posture-checks', { typeId: 'DOMAIN', name: 'm-pc', domains: ['d'], roleAttributes: ['pc'] });
  const P7 = await f.sp('m-p7', 'Bind', ['#nobody'], ['#nothing'], { postureCheckRoles: ['#pc'] });
  t.same(ids(await admin.get(`/service-policies/${P7}/posture-checks`)), [PC], 'posture checks of a policy');
  await admin.patch(`/posture-checks/${PC}`, { typeId: 'DOMAIN', roleAttributes: ['other'] });
  t.same(ids(await admin.get(`/service-policies/${P7}/posture-checks`)), [], 'posture check left after attribute change');
  for (const p of [P1, P3, P4, P5, P6, P7]) await admin.delete(`/service-policies/${p}`);
});

t.test('edge router policies P1..P6', async (t) => {
  const P1 = await f.erp('m-e1', ['#i1'], ['#r1']);
  const P2 = await f.erp('m-e2', ['#i1', `@${I3}`], ['#r1', `@${R3}`]);
  const P3 = await f.erp('m-e3', [`@${I2}`, `@${I3}`], [`@${R2}`, `@${R3}`]);
  const P5 = await f.erp('m-e5', ['#i1', '#i2'], ['#r1', '#r2']);
  const P6 = await f.erp('m-e6', ['#i1', '#i2'], ['#r1', '#r2'], 'AnyOf');
  const routers = async (p: string) => ids(await admin.get(`/edge-router-policies/${p}/edge-routers?limit=-1`));
  const idents = async (p: string) => ids(await admin.get(`/edge-router-policies/${p}/identities?limit=-1`));
  t.same(await routers(P1), [R1, R2].sort(), 'P1 routers');
  t.same(await routers(P2), [R1, R2, R3].sort(), 'P2 routers');
  t.same(await routers(P3), [R2, R3].sort(), 'P3 routers');
  t.same(await routers(P5), [R2], 'P5 routers (AllOf)');
  t.same(await routers(P6), [R1, R2].sort(), 'P6 routers (AnyOf)');
  t.same(await idents(P5), [I2], 'P5 identities');
  t.same(await idents(P6), [I1, I2, I3].sort(), 'P6 identities');
  t.same(ids(await admin.get(`/edge-routers/${R3}/edge-router-policies`)), [P2, P3].sort(), 'R3 policies');
  t.same(ids(await admin.get(`/identities/${I3}/edge-router-policies`)), [P2, P3, P6].sort(), 'I3 policies');
  t.same(ids(await admin.get(`/identities/${I3}/edge-routers?limit=-1`)), [R1, R2, R3].sort(), 'I3 routers');
  t.same(ids(await admin.get(`/edge-routers/${R3}/identities?limit=-1`)), [I1, I2, I3].sort(), 'R3 identities');
  // PATCH roles and semantic.
  t.equal((await admin.patch(`/edge-router-policies/${P5}`, { edgeRouterRoles: ['#r2', `@${R3}`], semantic: 'AnyOf' })).status, 200);
  t.same(await routers(P5), [R2, R3].sort(), 'P5 routers after PATCH');
  t.same(await idents(P5), [I1, I2, I3].sort(), 'P5 identities after semantic change');
  // Deleting a router removes its @id from policies.
  const R4 = await f.router('m-r4');
  const P7 = await f.erp('m-e7', ['#all'], [`@${R4}`, '#r2']);
  t.equal((await admin.delete(`/edge-routers/${R4}`)).status, 200);
  const p7 = (await admin.get(`/edge-router-policies/${P7}`)).body.data;
  t.same(p7.edgeRouterRoles, ['#r2'], '@id removed from the role list');
  t.same(await routers(P7), [R2], 'P7 routers after delete');
  for (const p of [P1, P2, P3, P5, P6, P7]) await admin.delete(`/edge-router-policies/${p}`);
});

t.test('service edge router policies', async (t) => {
  const P1 = await f.serp('m-x1', ['#s1'], ['#r1']);
  const P2 = await f.serp('m-x2', [`@${S3}`], ['#all']);
  const P3 = await f.serp('m-x3', ['#s1', '#s2'], ['#r1', '#r2'], 'AnyOf');
  t.same(ids(await admin.get(`/service-edge-router-policies/${P1}/services`)), [S1, S2].sort(), 'P1 services');
  t.same(ids(await admin.get(`/service-edge-router-policies/${P1}/edge-routers`)), [R1, R2].sort(), 'P1 routers');
  t.ok(has(ids(await admin.get(`/service-edge-router-policies/${P2}/edge-routers?limit=-1`)), R1, R2, R3), 'P2 #all routers');
  t.same(ids(await admin.get(`/services/${S3}/service-edge-router-policies`)), [P2], 'S3 policies');
  t.same(ids(await admin.get(`/edge-routers/${R1}/service-edge-router-policies`)), [P1, P2, P3].sort(), 'R1 policies');
  t.ok(has(ids(await admin.get(`/services/${S3}/edge-routers?limit=-1`)), R1, R2, R3), 'S3 routers');
  t.same(ids(await admin.get(`/services/${S1}/edge-routers?limit=-1`)), [R1, R2].sort(), 'S1 routers');
  t.same(ids(await admin.get(`/edge-routers/${R3}/services?limit=-1`)), [S3], 'R3 services');
  t.same(ids(await admin.get(`/edge-routers/${R1}/services?limit=-1`)), [S1, S2, S3].sort(), 'R1 services');
  for (const p of [P1, P2, P3]) await admin.delete(`/service-edge-router-policies/${p}`);
});

t.test('role attribute lists', async (t) => {
  const list = async (p: string, q = '') => (await admin.get(`/${p}${q}`)).body;
  const ia = await list('identity-role-attributes', '?limit=-1');
  t.ok(has(ia.data, 'i1', 'i2'), 'identity attributes');
  t.same(ia.data, [...ia.data].sort(), 'sorted');
  t.equal(ia.meta.pagination.totalCount, ia.data.length, 'totalCount');
  t.same((await list('identity-role-attributes', '?filter=id contains "2"')).data, ['i2'], 'filter on id');
  t.same((await list('service-role-attributes', '?filter=id in ["s1","s2","zz"]')).data, ['s1', 's2'], 'service attributes');
  t.same((await list('edge-router-role-attributes', '?filter=id = "r2"')).data, ['r2'], 'router attributes');
  const pc = await f.mk('/posture-checks', { typeId: 'MAC', name: 'm-mac', macAddresses: ['aa:bb'], roleAttributes: ['pc-attr'] });
  t.same((await list('posture-check-role-attributes', '?filter=id = "pc-attr"')).data, ['pc-attr'], 'posture check attributes');
  await admin.delete(`/posture-checks/${pc}`);
  t.same((await list('posture-check-role-attributes', '?filter=id = "pc-attr"')).data, [], 'gone with its last holder');
  const sorted = await list('identity-role-attributes', '?filter=id contains "i" sort by id desc');
  t.same(sorted.data.slice(0, 2), ['i2', 'i1'], 'sort by id desc');
  t.ok(isError(await admin.get('/identity-role-attributes?filter=name = "x"'), 400, 'INVALID_FILTER'), 'unknown field → 400');
});

t.test('policy advice', async (t) => {
  const SP = await f.sp('m-adv-sp', 'Dial', [`@${I1}`], [`@${S1}`]);
  const ERP = await f.erp('m-adv-erp', [`@${I1}`], [`@${R1}`, `@${R2}`]);
  const SERP = await f.serp('m-adv-serp', [`@${S1}`], [`@${R2}`, `@${R3}`]);
  const r = await admin.get(`/identities/${I1}/policy-advice/${S1}`);
  t.equal(r.status, 200);
  const a = r.body.data;
  t.equal(a.identityId, I1);
  t.equal(a.serviceId, S1);
  t.equal(a.identity.name, 'm-i1');
  t.equal(a.service.name, 'm-s1');
  t.equal(a.isDialAllowed, true);
  t.equal(a.isBindAllowed, false);
  t.equal(a.identityRouterCount, 2);
  t.equal(a.serviceRouterCount, 2);
  t.equal(a.commonRouters.length, 1);
  t.equal(a.commonRouters[0].id, R2);
  t.equal(a.commonRouters[0].name, 'm-r2');
  t.equal(a.commonRouters[0].isOnline, false, 'not connected');
  t.equal(a.commonRouters[0].entity, 'edge-routers');
  const none = (await admin.get(`/identities/${I3}/policy-advice/${S3}`)).body.data;
  t.equal(none.isDialAllowed, false);
  t.equal(none.isBindAllowed, false);
  t.same(none.commonRouters, []);
  t.ok(isError(await admin.get(`/identities/nope/policy-advice/${S1}`), 404, 'NOT_FOUND'), 'unknown identity');
  t.ok(isError(await admin.get(`/identities/${I1}/policy-advice/nope`), 404, 'NOT_FOUND'), 'unknown service');
  await admin.delete(`/service-policies/${SP}`);
  await admin.delete(`/edge-router-policies/${ERP}`);
  await admin.delete(`/service-edge-router-policies/${SERP}`);
});

t.test('summary', async (t) => {
  const r = await admin.get('/summary');
  t.equal(r.status, 200);
  t.equal(r.body.data.services, (await admin.get('/services?limit=1')).body.meta.pagination.totalCount, 'services counted');
  t.equal(r.body.data.identities, (await admin.get('/identities?limit=1')).body.meta.pagination.totalCount, 'identities counted');
  // A non-admin with one read permission sees only that family.
  const reader = await f.mk('/identities', { name: 'm-reader', type: 'User', isAdmin: false, permissions: ['service.read'] });
  await f.mk('/authenticators', { identityId: reader, method: 'updb', username: 'm-reader-u', password: 'pw-for-tests-1' });
  const c = await srv.login('m-reader-u', 'pw-for-tests-1', 'management');
  const s = await c.get('/summary');
  t.equal(s.status, 200, 'any session may ask');
  t.same(Object.keys(s.body.data).sort(), ['services', 'services.edge'], 'only what the caller may read');
  const plain = await f.user('m-plain');
  const pm = new Client(srv, '/edge/management/v1', plain.client.token);
  const ps = await pm.get('/summary');
  t.equal(ps.status, 200, 'plain identity may ask');
  t.same(ps.body.data, {}, 'and may read nothing');
  t.ok(isError(await new Client(srv, '/edge/management/v1').get('/summary'), 401, 'UNAUTHORIZED'), 'no session → 401');
});
