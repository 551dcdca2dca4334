/**
 * Client API services: visibility and permissions, admin visibility,
 * the config map with per-identity overrides, service configs on the Management API, service edge
 * routers (with the session-token rule), terminators and the caller's edge routers.
 */
import t from 'tap';
import { startServer, isError, Client, type Server } from './helpers/server.js';
import { Fixture, ids } from './helpers/policy-fixture.js';

let srv: Server;
let admin: Client;
let f: Fixture;

t.before(async () => {
  srv = await startServer(t);
  admin = await srv.login();
  f = new Fixture(srv, admin);
});

t.test('visibility and permissions', async (t) => {
  const u = await f.user('cs-user', ['cs-id']);
  const S1 = await f.svc('cs-s1', ['cs-dial']);
  const S2 = await f.svc('cs-s2', ['cs-bind']);
  const S3 = await f.svc('cs-s3', ['cs-dial', 'cs-bind']);
  const S4 = await f.svc('cs-s4', []);
  const S5 = await f.svc('cs-s5', ['cs-other']);
  await f.sp('cs-dial', 'Dial', ['#cs-id'], ['#cs-dial']);
  await f.sp('cs-bind', 'Bind', ['#cs-id'], ['#cs-bind']);
  const all = [S1, S2, S3, S4, S5];
  const r = await u.client.get(`/services?filter=id in ["${all.join('","')}"]&limit=-1`);
  t.equal(r.status, 200);
  t.same(ids(r), [S1, S2, S3].sort(), 'only granted services');
  const perms = Object.fromEntries(r.body.data.map((s: any) => [s.id, s.permissions]));
  t.same(perms[S1], ['Dial']);
  t.same(perms[S2], ['Bind']);
  t.same(perms[S3], ['Bind', 'Dial']);
  const d = await u.client.get(`/services/${S1}`);
  t.equal(d.status, 200, 'granted detail');
  t.same(d.body.data.permissions, ['Dial']);
  t.same(d.body.data.config, {}, 'no config types → no config entries');
  t.same(
    d.body.data.postureQueries,
    [{ policyId: 'dummy dial policy: no posture checks defined', policyType: 'Dial', isPassing: true, postureQueries: [] }],
    'placeholder posture queries when no check exists',
  );
  t.ok(isError(await u.client.get(`/services/${S4}`), 404, 'NOT_FOUND'), 'not granted → 404');
  t.ok(isError(await u.client.get('/services/made-up'), 404, 'NOT_FOUND'), 'unknown → 404');
  // Admins see every service on both APIs, with policy-derived permissions.
  const ac = await srv.login('admin', undefined, 'client');
  const ar = await ac.get(`/services?filter=id in ["${all.join('","')}"]&limit=-1`);
  t.same(ids(ar), [...all].sort(), 'admin sees all on the Client API');
  t.ok(ar.body.data.every((s: any) => JSON.stringify(s.permissions) === '["Invalid"]'), 'admin not granted → Invalid');
  t.same((await admin.get(`/services/${S4}`)).body.data.permissions, ['Invalid'], 'management view: Invalid');
  t.equal((await ac.get(`/services/${S4}`)).status, 200, 'admin detail of ungranted service');
  // roleFilter on the client list.
  const rf = await u.client.get(`/services?roleFilter=%23cs-dial&roleFilter=%23cs-bind&roleSemantic=AllOf`);
  t.same(ids(rf), [S3], 'roleFilter AllOf');
  const rfa = await u.client.get(`/services?roleFilter=%23cs-dial&roleFilter=%23cs-bind&roleSemantic=AnyOf&limit=-1`);
  t.same(ids(rfa), [S1, S2, S3].sort(), 'roleFilter AnyOf');
  // Gaining an attribute grants at once; losing it revokes.
  await admin.patch(`/services/${S4}`, { roleAttributes: ['cs-dial'] });
  t.equal((await u.client.get(`/services/${S4}`)).status, 200, 'visible right after the write');
  await admin.patch(`/identities/${u.id}`, { roleAttributes: [] });
  t.same(ids(await u.client.get(`/services?filter=id in ["${all.join('","')}"]`)), [], 'nothing after losing the identity attribute');
  // Client-side service writes are for admins only.
  t.ok(isError(await u.client.patch(`/services/${S1}`, { name: 'x' }), 401, 'UNAUTHORIZED'), 'non-admin PATCH → 401');
  t.ok(isError(await u.client.delete(`/services/${S1}`), 401, 'UNAUTHORIZED'), 'non-admin DELETE → 401');
  t.equal((await ac.patch(`/services/${S5}`, { terminatorStrategy: 'weighted' })).status, 200, 'admin PATCH on Client API');
  t.equal((await admin.get(`/services/${S5}`)).body.data.terminatorStrategy, 'weighted');
  t.equal((await ac.put(`/services/${S5}`, { name: 'cs-s5b', encryptionRequired: true })).status, 200, 'admin PUT on Client API');
  t.equal((await ac.delete(`/services/${S5}`)).status, 200, 'admin DELETE on Client API');
  t.ok(isError(await admin.get(`/services/${S5}`), 404, 'NOT_FOUND'), 'deleted');
});

t.test('configs, config types and per-identity overrides', async (t) => {
  const u = await f.user('cfg-user', ['cfg-id']);
  const ct1 = await f.mk('/config-types', { name: 'cfg-ct1' });
  const ct2 = await f.mk('/config-types', { name: 'cfg-ct2' });
  const c1 = await f.mk('/configs', { name: 'cfg-c1', configTypeId: ct1, data: { port: 1 } });
  const c2 = await f.mk('/configs', { name: 'cfg-c2', configTypeId: ct2, data: { port: 2 } });
  const c1b = await f.mk('/configs', { name: 'cfg-c1b', configTypeId: ct1, data: { port: 11 } });
  const c2b = await f.mk('/configs', { name: 'cfg-c2b', configTypeId: ct2, data: { port: 22 } });
  const S = await f.svc('cfg-s', ['cfg-svc'], { configs: [c1] });
  await f.sp('cfg-dial', 'Dial', ['#cfg-id'], ['#cfg-svc']);
  t.same((await u.client.get(`/services/${S}`)).body.data.config, {}, 'no types requested');
  t.same((await u.client.get(`/services/${S}?configTypes=${ct1}`)).body.data.config, { 'cfg-ct1': { port: 1 } }, 'by type id');
  t.same((await u.client.get(`/services/${S}?configTypes=cfg-ct1`)).body.data.config, { 'cfg-ct1': { port: 1 } }, 'by type name');
  t.same((await u.client.get(`/services/${S}?configTypes=cfg-ct2`)).body.data.config, {}, 'type the service lacks');
  // Config types chosen at login (names or ids; unknown ones dropped); the query parameter overrides them.
  const c = new Client(srv, '/edge/client/v1');
  const login = await c.post('/authenticate?method=password', { username: u.username, password: 'pw-for-tests-1', configTypes: ['cfg-ct1', 'no-such-type'] });
  t.equal(login.status, 200);
  t.same(login.body.data.configTypes, [ct1], 'resolved at login');
  c.token = login.body.data.token;
  t.same((await c.get(`/services/${S}`)).body.data.config, { 'cfg-ct1': { port: 1 } }, 'session config types');
  t.same((await c.get(`/services/${S}?configTypes=cfg-ct2`)).body.data.config, {}, 'query overrides the session');
  t.same((await c.get(`/services?filter=id="${S}"`)).body.data[0].config, { 'cfg-ct1': { port: 1 } }, 'in lists too');
  // Configs are kept decoded between requests: a changed config or a renamed type shows at once.
  t.equal((await admin.patch(`/configs/${c1}`, { data: { port: 3 } })).status, 200);
  t.same((await c.get(`/services/${S}`)).body.data.config, { 'cfg-ct1': { port: 3 } }, 'updated config data');
  t.same((await c.get('/services')).body.data.find((x: { id: string }) => x.id === S)?.config, { 'cfg-ct1': { port: 3 } }, 'updated config data in the plain list');
  t.equal((await admin.patch(`/config-types/${ct1}`, { name: 'cfg-ct1-renamed' })).status, 200);
  t.same((await c.get(`/services/${S}`)).body.data.config, { 'cfg-ct1-renamed': { port: 3 } }, 'renamed config type');
  t.equal((await admin.patch(`/config-types/${ct1}`, { name: 'cfg-ct1' })).status, 200);
  t.equal((await admin.patch(`/configs/${c1}`, { data: { port: 1 } })).status, 200);
  t.same((await c.get(`/services/${S}`)).body.data.config, { 'cfg-ct1': { port: 1 } }, 'changed back');

  // Overrides.
  const assign = await admin.post(`/identities/${u.id}/service-configs`, [{ serviceId: S, configId: c1b }, { serviceId: S, configId: c2 }]);
  t.equal(assign.status, 200, 'associate → 200');
  const listed = (await admin.get(`/identities/${u.id}/service-configs`)).body.data;
  t.same(listed.map((p: any) => `${p.serviceId}/${p.configId}`).sort(), [`${S}/${c1b}`, `${S}/${c2}`].sort(), 'pairs listed');
  t.equal(listed[0].service.entity, 'services', 'service ref');
  t.equal(listed[0].config.entity, 'configs', 'config ref');
  t.same((await u.client.get(`/services/${S}?configTypes=all`)).body.data.config, { 'cfg-ct1': { port: 11 }, 'cfg-ct2': { port: 2 } }, 'overrides win and add types');
  // Assigning another config of the same type replaces the previous override.
  t.equal((await admin.post(`/identities/${u.id}/service-configs`, [{ serviceId: S, configId: c2b }])).status, 200);
  t.same((await u.client.get(`/services/${S}?configTypes=all`)).body.data.config, { 'cfg-ct1': { port: 11 }, 'cfg-ct2': { port: 22 } }, 'one override per type');
  t.ok(isError(await admin.post(`/identities/${u.id}/service-configs`, [{ serviceId: S, configId: 'nope' }]), 404, 'NOT_FOUND'), 'unknown config → 404');
  t.ok(isError(await admin.post(`/identities/${u.id}/service-configs`, [{ serviceId: 'nope', configId: c1 }]), 404, 'NOT_FOUND'), 'unknown service → 404');
  t.ok(isError(await admin.post(`/identities/nope/service-configs`, [{ serviceId: S, configId: c1 }]), 404, 'NOT_FOUND'), 'unknown identity → 404');
  t.equal((await admin.delete(`/identities/${u.id}/service-configs`, [{ serviceId: S, configId: c1b }])).status, 200, 'disassociate → 200');
  t.same((await u.client.get(`/services/${S}?configTypes=all`)).body.data.config, { 'cfg-ct1': { port: 1 }, 'cfg-ct2': { port: 22 } }, 'service default back');
  t.equal((await admin.delete(`/identities/${u.id}/service-configs`, [{ serviceId: S, configId: c2b }])).status, 200);
  t.same((await admin.get(`/identities/${u.id}/service-configs`)).body.data, [], 'all removed');
  // Deleting a config used by an override drops the override.
  await admin.post(`/identities/${u.id}/service-configs`, [{ serviceId: S, configId: c2 }]);
  t.equal((await admin.delete(`/configs/${c2}`)).status, 200);
  t.same((await admin.get(`/identities/${u.id}/service-configs`)).body.data, [], 'override gone with its config');
});

t.test('service edge routers, terminators, current identity edge routers', async (t) => {
  const u = await f.user('er-user', ['er-id']);
  const S = await f.svc('er-s', ['er-svc']);
  const R1 = await f.router('er-r1', ['er-a']);
  const R2 = await f.router('er-r2', ['er-a', 'er-b']);
  await f.router('er-r3', ['er-b']);
  await f.sp('er-dial', 'Dial', ['#er-id'], ['#er-svc']);
  const none = (await u.client.get(`/services/${S}/edge-routers`)).body;
  t.same(none.data, { edgeRouters: [] }, 'no router policies: none');
  t.equal(none.meta.pagination.totalCount, 0, 'paged like every list');
  await f.erp('er-erp', ['#er-id'], ['#er-a']);
  await f.serp('er-serp', ['#er-svc'], ['#er-b']);
  const r = await u.client.get(`/services/${S}/edge-routers`);
  t.equal(r.status, 200);
  t.same(r.body.data.edgeRouters.map((x: any) => x.name), ['er-r2'], 'intersection');
  const er = r.body.data.edgeRouters[0];
  for (const k of ['name', 'hostname', 'isOnline', 'supportedProtocols', 'syncStatus', 'cost', 'noTraversal', 'disabled']) t.ok(k in er, `edge router field ${k}`);
  t.equal(er.isOnline, false);
  t.ok(isError(await u.client.get(`/services/${S}/edge-routers`, { headers: { 'session-token': 'not-a-token' } }), 401, 'UNAUTHORIZED'), 'bad session-token → 401');
  const hidden = await f.svc('er-hidden');
  t.ok(isError(await u.client.get(`/services/${hidden}/edge-routers`), 404, 'NOT_FOUND'), 'invisible service → 404');

  // Terminators.
  const term = await f.mk('/terminators', { service: S, router: R1, binding: 'transport', address: 'tcp:localhost:2020' });
  const tl = await u.client.get(`/services/${S}/terminators`);
  t.equal(tl.status, 200);
  t.same(ids(tl), [term], 'terminators of a visible service');
  t.equal(tl.body.data[0].serviceId, S);
  t.equal(tl.body.data[0].routerId, R1);
  t.ok(isError(await u.client.get(`/services/${hidden}/terminators`), 404, 'NOT_FOUND'), 'invisible → 404');

  // Current identity edge routers: enrolled ones only; none are enrolled here.
  const ce = await u.client.get('/current-identity/edge-routers');
  t.equal(ce.status, 200);
  t.same(ce.body.data, [], 'unenrolled routers are not listed');
  t.ok(R2, 'router ids');
});
