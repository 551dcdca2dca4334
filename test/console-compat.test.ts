/**
 * What the upstream admin console and strict clients send and expect, on one real controller:
 * role-attribute lists with a console's `sort`, fixed-type and service edge router lists through
 * the list engine, `/summary` keys, MAC posture checks, `appData`, and CA `identityNameFormat`.
 */
import t from 'tap';
import { startServer, isError, type Client } from './helpers/server.js';
import { Fixture } from './helpers/policy-fixture.js';

const srv = await startServer(t);
const admin = await srv.login();
const f = new Fixture(srv, admin);

const enc = encodeURIComponent;
const data = async (c: Client, p: string) => {
  const r = await c.get(p);
  if (r.status !== 200) throw new Error(`${p}: ${r.status} ${r.text}`);
  return r.body;
};

t.test('role-attribute lists accept a console sort, answer in attribute order, page and filter', async (t) => {
  await f.mk('/identities', { name: 'ra-i1', type: 'User', isAdmin: false, roleAttributes: ['zeta', 'alpha'] });
  await f.mk('/identities', { name: 'ra-i2', type: 'User', isAdmin: false, roleAttributes: ['mid', 'alpha'] });
  await f.svc('ra-s1', ['web', 'db']);
  await f.router('ra-r1', ['east', 'west']);
  await f.mk('/posture-checks', { typeId: 'DOMAIN', name: 'ra-pc', domains: ['corp'], roleAttributes: ['pc-b', 'pc-a'] });
  const lists: [string, string[]][] = [
    ['/identity-role-attributes', ['alpha', 'mid', 'zeta']],
    ['/service-role-attributes', ['db', 'web']],
    ['/edge-router-role-attributes', ['east', 'west']],
    ['/posture-check-role-attributes', ['pc-a', 'pc-b']],
  ];
  for (const [path, want] of lists) {
    // What a console sends on every policy page, and other sorts it may send.
    for (const sort of ['name asc', 'id desc', 'createdAt desc', 'bogus sideways']) {
      const r = await admin.get(`${path}?limit=100&offset=0&sort=${enc(sort)}`);
      t.equal(r.status, 200, `${path} sort=${sort}`);
      t.same(r.body.data, want, `${path} sort=${sort}: attribute order`);
      t.same(r.body.meta.pagination, { limit: 100, offset: 0, totalCount: want.length });
    }
    const page = await admin.get(`${path}?limit=1&offset=1&sort=${enc('name asc')}`);
    t.same(page.body.data, [want[1]], `${path}: second page of one`);
    t.equal(page.body.meta.pagination.totalCount, want.length);
    const filtered = await admin.get(`${path}?filter=${enc(`id = "${want[0]}"`)}&sort=${enc('name asc')}`);
    t.same(filtered.body.data, [want[0]], `${path}: filter on the attribute`);
    t.ok(isError(await admin.get(`${path}?limit=abc`), 400, 'INVALID_PAGINATION'), `${path}: limit=abc`);
    t.ok(isError(await admin.get(`${path}?filter=${enc('id = "open')}`), 400, 'INVALID_FILTER'), `${path}: unclosed string`);
    t.ok(isError(await admin.get(`${path}?filter=${enc('nosuch = 1')}`), 400, 'INVALID_FILTER'), `${path}: unknown field`);
  }
});

t.test('identity types and posture check types page and filter like every list', async (t) => {
  for (const path of ['/identity-types', '/posture-check-types']) {
    t.ok(isError(await admin.get(`${path}?limit=abc`), 400, 'INVALID_PAGINATION'), `${path}: limit=abc`);
    t.ok(isError(await admin.get(`${path}?offset=x`), 400, 'INVALID_PAGINATION'), `${path}: offset=x`);
    t.ok(isError(await admin.get(`${path}?filter=${enc('nosuch = 1')}`), 400, 'INVALID_FILTER'), `${path}: unknown field`);
    t.ok(isError(await admin.get(`${path}?filter=${enc('name = "open')}`), 400, 'INVALID_FILTER'), `${path}: unclosed string`);
    t.ok(isError(await admin.get(`${path}?sort=${enc('nosuch asc')}`), 400, 'INVALID_SORT_IDENTIFIER'), `${path}: unknown sort field`);
    const all = await data(admin, `${path}?limit=-1`);
    const page = await data(admin, `${path}?limit=1&offset=1`);
    t.equal(page.data.length, 1, `${path}: one per page`);
    t.equal(page.data[0].id, all.data[1].id, `${path}: offset 1 is the second`);
    t.equal(page.meta.pagination.totalCount, all.data.length);
    const desc = await data(admin, `${path}?limit=-1&sort=${enc('name desc')}`);
    t.same(desc.data.map((x: any) => x.name), all.data.map((x: any) => x.name).sort().reverse(), `${path}: sorted by name desc`);
  }
  const routerType = await data(admin, `/identity-types?filter=${enc('name = "Router"')}`);
  t.same(routerType.data.map((x: any) => x.id), ['Router']);
  const mac = await data(admin, `/posture-check-types?filter=${enc('id = "MAC"')}`);
  t.same(mac.data.map((x: any) => x.id), ['MAC']);
  t.same(mac.data[0].operatingSystems.length > 0, true, 'fields of the type are kept');
});

t.test('client listServiceEdgeRouters pages and filters, refuses bad parameters', async (t) => {
  const svc = await f.svc('ser-svc', ['ser']);
  const r1 = await f.router('ser-r1', ['ser']);
  const r2 = await f.router('ser-r2', ['ser']);
  await f.erp('ser-erp', ['#all'], ['#ser']);
  await f.serp('ser-serp', ['#ser'], ['#ser']);
  const client = await srv.login(undefined, undefined, 'client');
  const path = `/services/${svc}/edge-routers`;
  const all = await data(client, path);
  t.same(all.data.edgeRouters.map((r: any) => r.name).sort(), ['ser-r1', 'ser-r2'], 'both routers');
  t.equal(all.meta.pagination.totalCount, 2);
  const one = await data(client, `${path}?limit=1&offset=1`);
  t.equal(one.data.edgeRouters.length, 1, 'limit=1');
  t.equal(one.meta.pagination.totalCount, 2);
  const named = await data(client, `${path}?filter=${enc('name = "ser-r2"')}`);
  t.same(named.data.edgeRouters.map((r: any) => r.name), ['ser-r2'], 'filter by name');
  const byId = await data(client, `${path}?filter=${enc(`id in ["${r1}"]`)}`);
  t.same(byId.data.edgeRouters.map((r: any) => r.name), ['ser-r1'], 'filter by id');
  t.ok(r2);
  t.ok(isError(await client.get(`${path}?limit=abc`), 400, 'INVALID_PAGINATION'), 'limit=abc');
  t.ok(isError(await client.get(`${path}?filter=${enc('nosuch = 1')}`), 400, 'INVALID_FILTER'), 'unknown field');
  t.ok(isError(await client.get(`${path}?filter=${enc('name = "open')}`), 400, 'INVALID_FILTER'), 'unclosed string');
});

t.test('/summary counts under upstream keys', async (t) => {
  await f.router('sum-er1');
  await f.router('sum-er2');
  t.equal((await admin.post('/transit-routers', { name: 'sum-tr1' })).status, 201);
  const total = async (p: string) => (await data(admin, `${p}?limit=1`)).meta.pagination.totalCount as number;
  const r = await admin.get('/summary');
  t.equal(r.status, 200);
  const s = r.body.data;
  const edge = await total('/edge-routers');
  const transit = await total('/transit-routers');
  t.ok(edge >= 2 && transit >= 1);
  t.equal(s['routers.edge'], edge, 'routers.edge: the edge routers');
  t.equal(s.routers, edge + transit, 'routers: every router, edge ones included');
  const services = await total('/services');
  t.equal(s.services, services);
  t.equal(s['services.edge'], services, 'every service is an edge service');
  const lists: [string, string][] = [
    ['identities', '/identities'], ['identityTypes', '/identity-types'], ['authenticators', '/authenticators'], ['enrollments', '/enrollments'],
    ['servicePolicies', '/service-policies'], ['edgeRouterPolicies', '/edge-router-policies'],
    ['serviceEdgeRouterPolicies', '/service-edge-router-policies'], ['terminators', '/terminators'], ['configs', '/configs'],
    ['configTypes', '/config-types'], ['postureChecks', '/posture-checks'], ['postureCheckTypes', '/posture-check-types'],
    ['authPolicies', '/auth-policies'], ['cas', '/cas'], ['externalJwtSigners', '/external-jwt-signers'],
    ['apiSessions', '/api-sessions'], ['sessions', '/sessions'],
  ];
  for (const [key, path] of lists) t.equal(s[key], await total(path), `${key} = ${path} count`);
  t.equal(typeof s.apiSessionCertificates, 'number');
  t.notOk('edgeRouters' in s, 'no key upstream does not have');
});

t.test('MAC posture checks store addresses as upstream does', async (t) => {
  const r = await admin.post('/posture-checks', { typeId: 'MAC', name: 'mac-fmt', macAddresses: ['AA:BB:CC:DD:EE:FF', '00-11-22-33-44-5a', 'a1b2.c3d4.e5f6'] });
  t.equal(r.status, 201);
  const id = r.body.data.id;
  const want = ['aabbccddeeff', '00112233445a', 'a1b2c3d4e5f6'];
  t.same((await data(admin, `/posture-checks/${id}`)).data.macAddresses, want, 'lower case, separators stripped');
  t.equal((await admin.patch(`/posture-checks/${id}`, { typeId: 'MAC', macAddresses: ['DE:AD:BE:EF:00:01'] })).status, 200);
  t.same((await data(admin, `/posture-checks/${id}`)).data.macAddresses, ['deadbeef0001'], 'PATCH likewise');
  t.equal((await admin.put(`/posture-checks/${id}`, { typeId: 'MAC', name: 'mac-fmt', macAddresses: ['de:ad:be:ef:00:02'] })).status, 200);
  t.same((await data(admin, `/posture-checks/${id}`)).data.macAddresses, ['deadbeef0002'], 'PUT likewise');
  const bad = await admin.patch(`/posture-checks/${id}`, { typeId: 'MAC', macAddresses: ['::-'] });
  t.ok(isError(bad, 400, 'COULD_NOT_VALIDATE'), 'an address without hex digits: 400');
  t.same((await data(admin, `/posture-checks/${id}`)).data.macAddresses, ['deadbeef0002'], 'nothing written');
});

t.test('appData is {} when unset on identities and edge routers', async (t) => {
  const ident = await f.mk('/identities', { name: 'app-i', type: 'User', isAdmin: false });
  t.same((await data(admin, `/identities/${ident}`)).data.appData, {}, 'identity detail');
  const listed = (await data(admin, `/identities?filter=${enc('name = "app-i"')}`)).data[0];
  t.same(listed.appData, {}, 'identity list');
  for (const x of (await data(admin, '/identities?limit=-1')).data) t.ok(x.appData !== null && typeof x.appData === 'object', `${x.name}: appData an object`);
  t.same((await data(admin, '/current-identity')).data.appData, {}, 'management current identity');
  const client = await srv.login(undefined, undefined, 'client');
  t.same((await data(client, '/current-identity')).data.appData, {}, 'client current identity');
  const er = await f.router('app-er');
  t.same((await data(admin, `/edge-routers/${er}`)).data.appData, {}, 'edge router detail');
  for (const x of (await data(admin, '/edge-routers?limit=-1')).data) t.ok(x.appData !== null && typeof x.appData === 'object', `${x.name}: appData an object`);
  // A tunneler-enabled router's identity is written by the controller itself.
  const ter = await f.mk('/edge-routers', { name: 'app-ter', isTunnelerEnabled: true });
  t.ok(ter);
  const tid = (await data(admin, `/identities?filter=${enc('name = "app-ter"')}`)).data[0];
  t.same(tid.appData, {}, 'router identity');
  const set = await f.mk('/identities', { name: 'app-set', type: 'User', isAdmin: false, appData: { k: 'v' } });
  t.same((await data(admin, `/identities/${set}`)).data.appData, { k: 'v' }, 'a set appData is kept');
});

t.test('CA identityNameFormat may not be emptied', async (t) => {
  const { newCa } = await import('./helpers/pki.js');
  const ca = newCa('Format CA');
  const r = await admin.post('/cas', { name: 'fmt-ca', certPem: ca.cert, identityRoles: [], isAuthEnabled: true, isAutoCaEnrollmentEnabled: true, isOttCaEnrollmentEnabled: false, identityNameFormat: '[caName]-[commonName]-x' });
  t.equal(r.status, 201);
  const id = r.body.data.id;
  const before = (await data(admin, `/cas/${id}`)).data;
  const full = { name: 'fmt-ca-renamed', identityRoles: ['changed'], isAuthEnabled: false, isAutoCaEnrollmentEnabled: false, isOttCaEnrollmentEnabled: true };
  for (const v of ['', '   ']) {
    t.ok(isError(await admin.patch(`/cas/${id}`, { identityNameFormat: v, name: 'fmt-ca-renamed' }), 400, 'COULD_NOT_VALIDATE'), `PATCH ${JSON.stringify(v)}: 400`);
    const put = await admin.put(`/cas/${id}`, { ...full, identityNameFormat: v });
    t.ok(isError(put, 400, 'COULD_NOT_VALIDATE'), `PUT ${JSON.stringify(v)}: 400`);
    t.equal(put.body?.error?.cause?.field, 'identityNameFormat');
  }
  const after = (await data(admin, `/cas/${id}`)).data;
  t.same(after, before, 'nothing written');
  t.equal((await admin.patch(`/cas/${id}`, { identityNameFormat: '[commonName]' })).status, 200, 'a real format is accepted');
  t.equal((await data(admin, `/cas/${id}`)).data.identityNameFormat, '[commonName]');
});
