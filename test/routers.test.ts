/**
 * Edge routers, routers and transit routers (Management API), including the Router identity and
 * system edge router policy of tunneler-enabled edge routers, against the real controller.
 */
import t, { type Test } from 'tap';
import { startServer, isError, type Client, type Res, type Server } from './helpers/server.js';
import { RFC3339, base, created, emptyOk, fieldError, get, hasFields, kind, sleep, type Tap } from './helpers/assert.js';


function decodeJwt(jwt: string) {
  const [h, c] = jwt.split('.');
  return { header: JSON.parse(Buffer.from(h, 'base64url').toString()), claims: JSON.parse(Buffer.from(c, 'base64url').toString()) };
}

let srv: Server;
let admin: Client;

t.before(async () => {
  srv = await startServer(t);
  admin = await srv.login();
});

t.test('edge router create, detail, enrollment JWT', async (t) => {
  const id = created(t, await admin.post('/edge-routers', { name: 'er-min' }), 'edge-routers');
  const x = await get(admin, `/edge-routers/${id}`);
  base(t, x, 'edge-routers');
  hasFields(t, x, {
    cost: 'number|null', disabled: 'boolean', hostname: 'string', isOnline: 'boolean', isTunnelerEnabled: 'boolean', isVerified: 'boolean',
    name: 'string', noTraversal: 'boolean|null', roleAttributes: 'array|null', supportedProtocols: 'object', syncStatus: 'string',
    enrollmentJwt: 'string', enrollmentToken: 'string', enrollmentCreatedAt: 'string', enrollmentExpiresAt: 'string',
  }, 'edgeRouterDetail');
  t.equal(x.name, 'er-min');
  t.equal(x.cost, 0, 'cost default 0');
  t.equal(x.isVerified, false, 'not verified');
  t.equal(x.isOnline, false);
  t.equal(x.isTunnelerEnabled, false);
  t.equal(x.noTraversal, false);
  t.equal(x.disabled, false);
  t.same(x.roleAttributes, []);
  t.same(x.tags, {});
  t.match(x.enrollmentCreatedAt, RFC3339);
  t.match(x.enrollmentExpiresAt, RFC3339);
  for (const l of ['edge-router-policies', 'identities', 'service-edge-router-policies', 'services']) t.equal(x._links[l]?.href, `./edge-routers/${id}/${l}`, `link ${l}`);

  const j = decodeJwt(x.enrollmentJwt);
  t.equal(j.claims.em, 'erott');
  t.equal(j.claims.sub, id);
  t.equal(j.claims.jti, x.enrollmentToken);
  t.equal(j.claims.iss, `https://127.0.0.1:${srv.certPort}`, 'iss: the certificate listener');
  t.same(j.claims.aud, ['']);
  t.equal(j.claims.exp, Math.floor(Date.parse(x.enrollmentExpiresAt) / 1000));
  t.ok(Array.isArray(j.claims.ctrls) && j.claims.ctrls.length > 0, 'ctrls');
  t.type(j.header.kid, 'string');
  t.ok(['ES256', 'ES384', 'ES512', 'RS256'].includes(j.header.alg));

  // the erott enrollment is listed
  const e = await admin.get(`/enrollments?filter=edgeRouter="${id}"`);
  t.equal(e.status, 200);
  t.equal(e.body.data.length, 1, 'one erott enrollment');
  t.equal(e.body.data[0]?.method, 'erott');
  t.equal(e.body.data[0]?.edgeRouterId, id);
  t.match(e.body.data[0]?.edgeRouter, { id, name: 'er-min' });
  t.equal(e.body.data[0]?.token, x.enrollmentToken);

  // re-enroll (flows in test/enroll-router.test.ts): a new erott enrollment
  const re = await admin.post(`/edge-routers/${id}/re-enroll`);
  t.equal(re.status, 200, `re-enroll → 200 (${re.status})`);
  t.not((await admin.get(`/edge-routers/${id}`)).body.data.enrollmentToken, x.enrollmentToken, 're-enroll replaces the enrollment');
  for (const sub of ['edge-router-policies', 'identities', 'service-edge-router-policies', 'services']) {
    const r = await admin.get(`/edge-routers/${id}/${sub}`);
    t.equal(r.status, 200, `/edge-routers/{id}/${sub} → 200 (${r.status})`);
    t.ok(Array.isArray(r.body?.data), `/edge-routers/{id}/${sub} is a list`);
  }
});

t.test('edge router full create, PATCH, PUT, delete', async (t) => {
  const body = {
    name: 'er-full', cost: 100, noTraversal: true, disabled: true, roleAttributes: ['west', 'east'], isTunnelerEnabled: false,
    appData: { rack: 'r1', n: 2 }, ctrlChanListeners: { 'tls:10.0.0.1:6262': ['g1'] }, tags: { dc: 'a', ok: true },
  };
  const id = created(t, await admin.post('/edge-routers', body), 'edge-routers');
  const x = await get(admin, `/edge-routers/${id}`);
  t.equal(x.cost, 100);
  t.equal(x.noTraversal, true);
  t.equal(x.disabled, true);
  t.same(x.roleAttributes, ['east', 'west'], 'roleAttributes sorted');
  t.same(x.appData, { rack: 'r1', n: 2 });
  t.same(x.ctrlChanListeners, { 'tls:10.0.0.1:6262': ['g1'] });
  t.same(x.tags, { dc: 'a', ok: true });

  await sleep(5);
  emptyOk(t, await admin.patch(`/edge-routers/${id}`, { cost: 5 }), 'patch cost');
  let p = await get(admin, `/edge-routers/${id}`);
  t.equal(p.cost, 5);
  t.same(p.roleAttributes, ['east', 'west'], 'patch keeps roleAttributes');
  t.same(p.ctrlChanListeners, { 'tls:10.0.0.1:6262': ['g1'] }, 'patch keeps ctrlChanListeners');
  t.same(p.tags, { dc: 'a', ok: true }, 'patch keeps tags');
  t.equal(p.noTraversal, true, 'patch keeps noTraversal');
  t.ok(Date.parse(p.updatedAt) > Date.parse(x.updatedAt), 'updatedAt advances');
  fieldError(t, await admin.patch(`/edge-routers/${id}`, { cost: 70000 }), 'cost', 'patch cost 70000');
  emptyOk(t, await admin.patch(`/edge-routers/${id}`, { ctrlChanListeners: {} }), 'patch clears ctrlChanListeners');
  t.same((await get(admin, `/edge-routers/${id}`)).ctrlChanListeners, {});
  emptyOk(t, await admin.patch(`/edge-routers/${id}`, { ctrlChanListeners: { 'tls:h:1': ['a'] } }), 'patch sets ctrlChanListeners');
  emptyOk(t, await admin.put(`/edge-routers/${id}`, { name: 'er-full-2' }), 'put');
  p = await get(admin, `/edge-routers/${id}`);
  t.equal(p.name, 'er-full-2');
  t.same(p.ctrlChanListeners, {}, 'put without ctrlChanListeners clears them');
  t.same(p.roleAttributes, [], 'put resets roleAttributes');
  t.same(p.tags, {}, 'put resets tags');
  t.equal(p.cost, 0, 'put resets cost');
  t.equal(p.noTraversal, false, 'put resets noTraversal');
  t.equal(p.disabled, false, 'put resets disabled');
  t.equal(p.isVerified, false, 'isVerified untouched');

  // delete: removes @id from policies, its enrollment and terminators
  const svc = created(t, await admin.post('/services', { name: 'er-svc', encryptionRequired: true }), 'services');
  const term = created(t, await admin.post('/terminators', { service: svc, router: id, binding: 'transport', address: 'tcp:x:1' }), 'terminators');
  const erp = created(t, await admin.post('/edge-router-policies', { name: 'er-erp', semantic: 'AnyOf', edgeRouterRoles: [`@${id}`, '#east'] }), 'edge-router-policies');
  const enr = (await admin.get(`/enrollments?filter=edgeRouter="${id}"`)).body.data[0]?.id;
  emptyOk(t, await admin.delete(`/edge-routers/${id}`), 'delete');
  t.ok(isError(await admin.get(`/edge-routers/${id}`), 404, 'NOT_FOUND'), 'gone');
  t.same((await get(admin, `/edge-router-policies/${erp}`)).edgeRouterRoles, ['#east'], '@id removed from ERP');
  t.ok(isError(await admin.get(`/terminators/${term}`), 404, 'NOT_FOUND'), 'terminator deleted with router');
  if (enr) t.ok(isError(await admin.get(`/enrollments/${enr}`), 404, 'NOT_FOUND'), 'enrollment deleted with router');
  t.ok(isError(await admin.delete(`/edge-routers/${id}`), 404, 'NOT_FOUND'), 'delete again 404');
});

t.test('tunneler-enabled edge router: Router identity and system policy', async (t) => {
  const id = created(t, await admin.post('/edge-routers', { name: 'er-tun', isTunnelerEnabled: true }), 'edge-routers');
  t.equal((await get(admin, `/edge-routers/${id}`)).isTunnelerEnabled, true);
  const ids = await admin.get('/identities?filter=type="Router"');
  t.equal(ids.status, 200);
  const ident = ids.body.data.find((x: any) => x.name === 'er-tun');
  t.ok(ident, 'Router identity with the router name');
  t.equal(ident?.typeId, 'Router');
  t.match(ident?.type, { id: 'Router', name: 'Router' });
  const pols = await admin.get(`/edge-router-policies?filter=name="edge-router-${id}-system"`);
  t.equal(pols.body.data.length, 1, 'system ERP exists');
  const pol = pols.body.data[0];
  t.equal(pol?.isSystem, true);
  t.same(pol?.edgeRouterRoles, [`@${id}`]);
  t.same(pol?.identityRoles, [`@${ident?.id}`]);
  t.same(pol?.edgeRouterRolesDisplay, [{ role: `@${id}`, name: '@er-tun' }]);
  const sysFilter = await admin.get('/edge-router-policies?filter=isSystem=true');
  t.ok(sysFilter.body.data.some((p: any) => p.id === pol?.id), 'isSystem filter');

  // identity protections
  t.ok(isError(await admin.delete(`/identities/${ident.id}`), 400, 'ENTITY_CAN_NOT_BE_DELETED'), 'delete router identity → 400');
  const rn = await admin.patch(`/identities/${ident.id}`, { name: 'renamed' });
  t.equal(rn.status, 400, `rename router identity (PATCH) → 400 (${rn.status})`);
  const rnPut = await admin.put(`/identities/${ident.id}`, { name: 'renamed', type: 'Router', isAdmin: false });
  t.equal(rnPut.status, 400, `rename router identity (PUT) → 400 (${rnPut.status})`);
  emptyOk(t, await admin.patch(`/identities/${ident.id}`, { roleAttributes: ['tunnelers'] }), 'router identity attrs can change');
  t.same((await get(admin, `/identities/${ident.id}`)).roleAttributes, ['tunnelers']);
  t.equal((await get(admin, `/identities/${ident.id}`)).name, 'er-tun', 'name unchanged');

  // system policy protections
  const dp = await admin.delete(`/edge-router-policies/${pol.id}`);
  t.ok(isError(dp, 400, 'ENTITY_CAN_NOT_BE_DELETED'), `delete system ERP → 400 (${dp.status})`);
  const up = await admin.patch(`/edge-router-policies/${pol.id}`, { name: 'hijack' });
  t.equal(up.status, 400, `patch system ERP → 400 (${up.status})`);
  t.equal((await get(admin, `/edge-router-policies/${pol.id}`)).name, `edge-router-${id}-system`, 'system ERP unchanged');

  // renaming the router renames the identity
  emptyOk(t, await admin.patch(`/edge-routers/${id}`, { name: 'er-tun-2' }), 'rename router');
  t.equal((await get(admin, `/identities/${ident.id}`)).name, 'er-tun-2', 'identity renamed with router');

  // deleting the router removes router, identity and policy
  emptyOk(t, await admin.delete(`/edge-routers/${id}`), 'delete tunneler router');
  t.ok(isError(await admin.get(`/identities/${ident.id}`), 404, 'NOT_FOUND'), 'router identity gone');
  t.ok(isError(await admin.get(`/edge-router-policies/${pol.id}`), 404, 'NOT_FOUND'), 'system ERP gone');

  // turning tunneling on later creates them; off removes them
  const id2 = created(t, await admin.post('/edge-routers', { name: 'er-late' }), 'edge-routers');
  t.equal((await admin.get('/identities?filter=name="er-late"')).body.data.length, 0, 'no identity yet');
  emptyOk(t, await admin.patch(`/edge-routers/${id2}`, { isTunnelerEnabled: true }), 'enable tunneling');
  const late = await admin.get('/identities?filter=name="er-late"');
  t.equal(late.body.data.length, 1, 'identity created');
  t.equal(late.body.data[0]?.typeId, 'Router');
  t.equal((await admin.get(`/edge-router-policies?filter=name="edge-router-${id2}-system"`)).body.data.length, 1, 'system policy created');
  emptyOk(t, await admin.patch(`/edge-routers/${id2}`, { isTunnelerEnabled: false }), 'disable tunneling');
  t.equal((await admin.get('/identities?filter=name="er-late"')).body.data.length, 0, 'identity removed');
  t.equal((await admin.get(`/edge-router-policies?filter=name="edge-router-${id2}-system"`)).body.data.length, 0, 'system policy removed');
});

t.test('routers and transit routers are the same records', async (t) => {
  const id = created(t, await admin.post('/routers', { name: 'rt-1', cost: 7, noTraversal: true, tags: { k: 'v' } }), 'routers');
  const x = await get(admin, `/routers/${id}`);
  base(t, x, 'routers');
  hasFields(t, x, {
    cost: 'number', disabled: 'boolean', fingerprint: 'string', isOnline: 'boolean', isVerified: 'boolean', name: 'string', noTraversal: 'boolean',
    enrollmentJwt: 'string', enrollmentToken: 'string', enrollmentCreatedAt: 'string', enrollmentExpiresAt: 'string',
  }, 'routerDetail');
  t.equal(x.cost, 7);
  t.equal(x.noTraversal, true);
  t.equal(x.isVerified, false);
  t.same(x.tags, { k: 'v' });
  const j = decodeJwt(x.enrollmentJwt);
  t.equal(j.claims.em, 'trott');
  t.equal(j.claims.sub, id);
  t.equal(j.claims.jti, x.enrollmentToken);

  const viaTransit = await admin.get(`/transit-routers/${id}`);
  t.equal(viaTransit.status, 200, 'router visible as transit router');
  t.equal(viaTransit.body.data.name, 'rt-1');
  t.equal(viaTransit.body.data._links.self.href, `./transit-routers/${id}`, 'transit self link');

  const tid = created(t, await admin.post('/transit-routers', { name: 'rt-2' }), 'transit-routers');
  t.equal((await admin.get(`/routers/${tid}`)).status, 200, 'transit router visible as router');
  const lr = await admin.get('/routers?filter=name contains "rt-"');
  const lt = await admin.get('/transit-routers?filter=name contains "rt-"');
  t.same(lr.body.data.map((r: any) => r.id).sort(), [id, tid].sort());
  t.same(lt.body.data.map((r: any) => r.id).sort(), [id, tid].sort());

  fieldError(t, await admin.post('/routers', { name: 'rt-bad', cost: 70000 }), 'cost', 'router cost 70000');
  fieldError(t, await admin.post('/transit-routers', { name: 'rt-bad2', cost: 70000 }), 'cost', 'transit router cost 70000');
  fieldError(t, await admin.post('/transit-routers', { name: 'rt-1' }), 'name', 'duplicate name across paths');
  t.ok(isError(await admin.post('/routers', {}), 400, 'COULD_NOT_VALIDATE'), 'missing name');

  await sleep(5);
  emptyOk(t, await admin.patch(`/transit-routers/${id}`, { name: 'rt-1b' }), 'patch via transit');
  const p = await get(admin, `/routers/${id}`);
  t.equal(p.name, 'rt-1b');
  t.equal(p.cost, 7, 'patch keeps cost');
  t.same(p.tags, { k: 'v' }, 'patch keeps tags');
  t.ok(Date.parse(p.updatedAt) > Date.parse(x.updatedAt), 'updatedAt advances');
  emptyOk(t, await admin.put(`/routers/${id}`, { name: 'rt-1c' }), 'put');
  const u = await get(admin, `/transit-routers/${id}`);
  t.equal(u.cost, 0, 'put resets cost');
  t.equal(u.noTraversal, false, 'put resets noTraversal');
  t.same(u.tags, {}, 'put resets tags');

  const e = await admin.get(`/enrollments?filter=transitRouter="${id}"`);
  t.equal(e.body.data.length, 1, 'trott enrollment listed');
  const eid = e.body.data[0]?.id;
  emptyOk(t, await admin.delete(`/transit-routers/${id}`), 'delete via transit');
  t.ok(isError(await admin.get(`/routers/${id}`), 404, 'NOT_FOUND'), 'gone under /routers');
  if (eid) t.ok(isError(await admin.get(`/enrollments/${eid}`), 404, 'NOT_FOUND'), 'enrollment gone');
  emptyOk(t, await admin.delete(`/routers/${tid}`), 'delete via routers');
  t.ok(isError(await admin.get(`/transit-routers/${tid}`), 404, 'NOT_FOUND'), 'gone under /transit-routers');
});
