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
