/**
 * Services, config types, configs and terminators (Management API) against the real controller.
 */
import t, { type Test } from 'tap';
import { startServer, isError, type Client, type Res, type Server } from './helpers/server.js';
import { RFC3339, base, created, emptyOk, fieldError, get, hasFields, kind, sleep, type Tap } from './helpers/assert.js';



let srv: Server;
let admin: Client;

t.before(async () => {
  srv = await startServer(t);
  admin = await srv.login();
});

const SCHEMA = {
  $schema: 'http://json-schema.org/draft-07/schema#',
  type: 'object',
  properties: { hostname: { type: 'string' }, port: { type: 'integer', minimum: 1, maximum: 65535 } },
  required: ['hostname'],
  additionalProperties: true,
};

t.test('config types', async (t) => {
  const builtIns = await admin.get('/config-types?limit=-1');
  t.equal(builtIns.status, 200);
  const names = builtIns.body.data.map((x: any) => x.name);
  for (const n of ['mesh-tunneler-client.v1', 'mesh-tunneler-server.v1', 'intercept.v1', 'host.v1', 'host.v2']) t.ok(names.includes(n), `built-in ${n}`);

  const id = created(t, await admin.post('/config-types', { name: 'ct-plain' }), 'config-types');
  const d = await admin.get(`/config-types/${id}`);
  t.equal(d.status, 200);
  base(t, d.body.data, 'config-types');
  hasFields(t, d.body.data, { name: 'string', schema: 'object' }, 'configTypeDetail');
  t.same(d.body.data.schema, {}, 'schema defaults to {}');

  const sid = created(t, await admin.post('/config-types', { name: 'ct-schema', schema: SCHEMA, tags: { a: 'b', c: true } }), 'config-types');
  const s = await get(admin, `/config-types/${sid}`);
  t.same(s.schema, SCHEMA, 'schema round-trips');
  t.same(s.tags, { a: 'b', c: true }, 'tags round-trip');

  fieldError(t, await admin.post('/config-types', { name: 'ct-bad', schema: { type: 'objectionable' } }), 'schema', 'invalid schema');
  t.equal((await admin.get('/config-types?filter=name="ct-bad"')).body.data.length, 0, 'invalid not written');

  // PATCH name only keeps schema; PUT without schema resets it.
  await sleep(5);
  emptyOk(t, await admin.patch(`/config-types/${sid}`, { name: 'ct-schema-2' }), 'patch name');
  const p = await get(admin, `/config-types/${sid}`);
  t.equal(p.name, 'ct-schema-2');
  t.same(p.schema, SCHEMA, 'patch keeps schema');
  t.same(p.tags, { a: 'b', c: true }, 'patch keeps tags');
  t.ok(Date.parse(p.updatedAt) > Date.parse(s.updatedAt), 'updatedAt advances');
  fieldError(t, await admin.patch(`/config-types/${sid}`, { schema: { type: 'objectionable' } }), 'schema', 'patch invalid schema');
  emptyOk(t, await admin.put(`/config-types/${id}`, { name: 'ct-plain-2', schema: { type: 'object' } }), 'put');
  const u = await get(admin, `/config-types/${id}`);
  t.same(u.schema, { type: 'object' });
  t.equal(u.name, 'ct-plain-2');
  emptyOk(t, await admin.put(`/config-types/${id}`, { name: 'ct-plain-3' }), 'put without schema');
  const u2 = await get(admin, `/config-types/${id}`);
  t.same(u2.schema, {}, 'put without schema resets it');
  t.same(u2.tags, {}, 'put resets tags');

  emptyOk(t, await admin.delete(`/config-types/${id}`), 'delete');
  t.ok(isError(await admin.get(`/config-types/${id}`), 404, 'NOT_FOUND'), 'gone');
  t.ok(isError(await admin.delete(`/config-types/${id}`), 404, 'NOT_FOUND'), 'delete again 404');
});

t.test('configs', async (t) => {
  const ct = created(t, await admin.post('/config-types', { name: 'ct-cfg', schema: SCHEMA }), 'config-types');
  const ct2 = created(t, await admin.post('/config-types', { name: 'ct-cfg-free' }), 'config-types');
  const data = { hostname: 'db.local', port: 5432, nested: { list: [1, 2.5, 'x'], flag: false, deep: { n: null } } };
  const id = created(t, await admin.post('/configs', { name: 'cfg-1', configTypeId: ct, data, tags: { env: 'prod' } }), 'configs');
  const d = await admin.get(`/configs/${id}`);
  t.equal(d.status, 200);
  base(t, d.body.data, 'configs');
  hasFields(t, d.body.data, { configType: 'object', configTypeId: 'string', data: 'object', name: 'string' }, 'configDetail');
  t.same(d.body.data.data, data, 'data round-trips exactly');
  t.equal(d.body.data.configTypeId, ct);
  t.match(d.body.data.configType, { id: ct, name: 'ct-cfg', entity: 'config-types' });
  t.same(d.body.data.tags, { env: 'prod' });

  // validation
  fieldError(t, await admin.post('/configs', { name: 'cfg-bad', configTypeId: ct, data: { port: 22 } }), '(root)', 'data violating schema');
  t.equal((await admin.get('/configs?filter=name contains "cfg-"&limit=-1')).body.data.length, 1, 'nothing written by invalid creates');

  // PATCH semantics
  await sleep(5);
  emptyOk(t, await admin.patch(`/configs/${id}`, { name: 'cfg-1b' }), 'patch name');
  let c = await get(admin, `/configs/${id}`);
  t.equal(c.name, 'cfg-1b');
  t.same(c.data, data, 'patch name keeps data');
  t.same(c.tags, { env: 'prod' }, 'patch name keeps tags');
  t.ok(Date.parse(c.updatedAt) > Date.parse(d.body.data.updatedAt), 'updatedAt advances');
  emptyOk(t, await admin.patch(`/configs/${id}`, { data: { hostname: 'h2' } }), 'patch data');
  c = await get(admin, `/configs/${id}`);
  t.same(c.data, { hostname: 'h2' });
  t.equal(c.name, 'cfg-1b', 'patch data keeps name');
  emptyOk(t, await admin.patch(`/configs/${id}`, { tags: { env: 'dev' } }), 'patch tags');
  c = await get(admin, `/configs/${id}`);
  t.same(c.tags, { env: 'dev' });
  t.same(c.data, { hostname: 'h2' }, 'patch tags keeps data');
  fieldError(t, await admin.patch(`/configs/${id}`, { data: { port: 1 } }), '(root)', 'patch data violating schema');
  // configTypeId immutable
  const patchType = await admin.patch(`/configs/${id}`, { configTypeId: ct2 });
  t.equal(patchType.status, 200, 'patch configTypeId → 200');
  t.equal((await get(admin, `/configs/${id}`)).configTypeId, ct, 'configTypeId unchanged by patch');
  // PUT
  emptyOk(t, await admin.put(`/configs/${id}`, { name: 'cfg-1c', configTypeId: ct2, data: { hostname: 'h3', port: 80 } }), 'put');
  c = await get(admin, `/configs/${id}`);
  t.equal(c.configTypeId, ct, 'configTypeId unchanged by put');
  t.same(c.data, { hostname: 'h3', port: 80 });
  t.same(c.tags, {}, 'put resets tags');
  fieldError(t, await admin.put(`/configs/${id}`, { name: 'cfg-1c', configTypeId: ct, data: { port: 80 } }), '(root)', 'put re-validates');

  // list configs of a type
  const ofType = await admin.get(`/config-types/${ct}/configs`);
  t.equal(ofType.status, 200);
  t.same(ofType.body.data.map((x: any) => x.id), [id], 'config-types/{id}/configs');

  // config type in use → 409
  const del = await admin.delete(`/config-types/${ct}`);
  t.ok(isError(del, 409, 'CAN_NOT_DELETE_REFERENCED_ENTITY'), `delete used config type → 409 (${del.status} ${del.text.slice(0, 200)})`);
  t.equal((await admin.get(`/config-types/${ct}`)).status, 200, 'config type kept');

  emptyOk(t, await admin.delete(`/configs/${id}`), 'delete config');
  t.ok(isError(await admin.get(`/configs/${id}`), 404, 'NOT_FOUND'), 'config gone');
  emptyOk(t, await admin.delete(`/config-types/${ct}`), 'delete now-unused config type');
});

t.test('services', async (t) => {
  const id = created(t, await admin.post('/services', { name: 'svc-min', encryptionRequired: true }), 'services');
  const d = await admin.get(`/services/${id}`);
  t.equal(d.status, 200);
  const s = d.body.data;
  base(t, s, 'services');
  hasFields(t, s, {
    config: 'object', configs: 'array', encryptionRequired: 'boolean', maxIdleTimeMillis: 'number', name: 'string',
    permissions: 'array', postureQueries: 'array', roleAttributes: 'array|null', terminatorStrategy: 'string',
  }, 'serviceDetail');
  t.equal(s.terminatorStrategy, 'smartrouting', 'default terminatorStrategy');
  t.same(s.configs, []);
  t.same(s.roleAttributes, []);
  t.equal(s.encryptionRequired, true);
  t.equal(s.maxIdleTimeMillis, 0);
  t.same(s.tags, {});

  const ct = created(t, await admin.post('/config-types', { name: 'ct-svc' }), 'config-types');
  const ctB = created(t, await admin.post('/config-types', { name: 'ct-svc-b' }), 'config-types');
  const cfgA = created(t, await admin.post('/configs', { name: 'svc-cfg-a', configTypeId: ct, data: { a: 1 } }), 'configs');
  const cfgA2 = created(t, await admin.post('/configs', { name: 'svc-cfg-a2', configTypeId: ct, data: { a: 2 } }), 'configs');
  const cfgB = created(t, await admin.post('/configs', { name: 'svc-cfg-b', configTypeId: ctB, data: { b: 1 } }), 'configs');

  const full = created(t, await admin.post('/services', {
    name: 'svc-full', encryptionRequired: false, roleAttributes: ['web', 'db'], configs: [cfgA, cfgB],
    terminatorStrategy: 'weighted', maxIdleTimeMillis: 5000, tags: { tier: 'gold', on: true },
  }), 'services');
  const f = await get(admin, `/services/${full}`);
  t.same(f.roleAttributes, ['db', 'web'], 'roleAttributes sorted');
  t.same([...f.configs].sort(), [cfgA, cfgB].sort());
  t.equal(f.terminatorStrategy, 'weighted');
  t.equal(f.maxIdleTimeMillis, 5000);
  t.equal(f.encryptionRequired, false);
  t.same(f.tags, { tier: 'gold', on: true });

  // validation
  fieldError(t, await admin.post('/services', { name: 'svc-dup-cfg', encryptionRequired: true, configs: [cfgA, cfgA2] }), 'configs', 'two configs of the same type');
  t.equal((await admin.get('/services?filter=name contains "svc-"&limit=-1')).body.data.length, 2, 'nothing written by invalid creates');

  // PATCH: only given keys; encryptionRequired immutable
  await sleep(5);
  emptyOk(t, await admin.patch(`/services/${full}`, { encryptionRequired: true, name: 'svc-full-2' }), 'patch');
  let p = await get(admin, `/services/${full}`);
  t.equal(p.encryptionRequired, false, 'encryptionRequired immutable on patch');
  t.equal(p.name, 'svc-full-2');
  t.same(p.roleAttributes, ['db', 'web'], 'patch keeps roleAttributes');
  t.equal(p.terminatorStrategy, 'weighted', 'patch keeps terminatorStrategy');
  t.same(p.tags, { tier: 'gold', on: true }, 'patch keeps tags');
  t.ok(Date.parse(p.updatedAt) > Date.parse(f.updatedAt), 'updatedAt advances');
  fieldError(t, await admin.patch(`/services/${full}`, { configs: [cfgA, cfgA2] }), 'configs', 'patch two configs same type');

  // PUT: resets omitted optional fields
  emptyOk(t, await admin.put(`/services/${full}`, { name: 'svc-full-3', encryptionRequired: true }), 'put');
  p = await get(admin, `/services/${full}`);
  t.equal(p.encryptionRequired, false, 'encryptionRequired immutable on put');
  t.equal(p.terminatorStrategy, 'smartrouting', 'put resets terminatorStrategy');
  t.same(p.roleAttributes, [], 'put resets roleAttributes');
  t.same(p.configs, [], 'put resets configs');
  t.same(p.tags, {}, 'put resets tags');
  t.equal(p.maxIdleTimeMillis, 0, 'put resets maxIdleTimeMillis');

  // deleting a config referenced by a service removes it from the service
  emptyOk(t, await admin.patch(`/services/${full}`, { configs: [cfgA, cfgB] }), 'patch configs');
  const cs = await admin.get(`/services/${full}/configs`);
  t.equal(cs.status, 200);
  t.same(cs.body.data.map((x: any) => x.id).sort(), [cfgA, cfgB].sort(), 'services/{id}/configs');
  const cfgSvcs = await admin.get(`/configs/${cfgA}/services`);
  t.equal(cfgSvcs.status, 200);
  t.same(cfgSvcs.body.data.map((x: any) => x.id), [full], 'configs/{id}/services');
  emptyOk(t, await admin.delete(`/configs/${cfgA}`), 'delete referenced config');
  t.same((await get(admin, `/services/${full}`)).configs, [cfgB], 'config removed from service');

  // policy-derived sub-lists
  for (const sub of ['service-policies', 'service-edge-router-policies', 'identities', 'edge-routers']) {
    const r = await admin.get(`/services/${full}/${sub}`);
    t.equal(r.status, 200, `/services/{id}/${sub} → 200 (${r.status})`);
    t.ok(Array.isArray(r.body?.data), `/services/{id}/${sub} is a list`);
  }

  emptyOk(t, await admin.delete(`/services/${id}`), 'delete');
  t.ok(isError(await admin.get(`/services/${id}`), 404, 'NOT_FOUND'), 'gone');
  t.ok(isError(await admin.patch(`/services/${id}`, { name: 'x' }), 404, 'NOT_FOUND'), 'patch deleted → 404');
});

t.test('terminators', async (t) => {
  const svc = created(t, await admin.post('/services', { name: 'term-svc', encryptionRequired: true }), 'services');
  const er = created(t, await admin.post('/edge-routers', { name: 'term-er' }), 'edge-routers');
  const tr = created(t, await admin.post('/transit-routers', { name: 'term-tr' }), 'transit-routers');

  const id = created(t, await admin.post('/terminators', { service: svc, router: er, binding: 'transport', address: 'tcp:localhost:2020' }), 'terminators');
  const d = await admin.get(`/terminators/${id}`);
  t.equal(d.status, 200);
  const x = d.body.data;
  base(t, x, 'terminators');
  hasFields(t, x, {
    address: 'string', binding: 'string', cost: 'number', dynamicCost: 'number', identity: 'string', precedence: 'string',
    router: 'object', routerId: 'string', service: 'object', serviceId: 'string',
  }, 'terminatorDetail');
  t.equal(x.serviceId, svc);
  t.equal(x.routerId, er);
  t.match(x.service, { id: svc, name: 'term-svc', entity: 'services' });
  t.match(x.router, { id: er, name: 'term-er' });
  t.equal(x.binding, 'transport');
  t.equal(x.address, 'tcp:localhost:2020');
  t.equal(x.cost, 0);
  t.equal(x.precedence, 'default');
  t.same(x.tags, {});

  const id2 = created(t, await admin.post('/terminators', { service: svc, router: tr, binding: 'edge', address: 'hosted:x', cost: 10, precedence: 'required', tags: { k: 'v' } }), 'terminators');
  const x2 = await get(admin, `/terminators/${id2}`);
  t.equal(x2.cost, 10);
  t.equal(x2.precedence, 'required');
  t.same(x2.tags, { k: 'v' });
  t.equal(x2.routerId, tr, 'terminator on a transit router');

  // validation
  const base0 = { service: svc, router: er, binding: 'transport', address: 'tcp:a:1' };
  t.ok(isError(await admin.post('/terminators', { ...base0, router: 'no-such-router' }), 404, 'NOT_FOUND'), 'unknown router → 404');
  t.equal((await admin.get('/terminators?limit=-1')).body.data.length, 2, 'nothing written by invalid creates');

  // PATCH / PUT
  await sleep(5);
  emptyOk(t, await admin.patch(`/terminators/${id2}`, { address: 'hosted:y' }), 'patch address');
  let p = await get(admin, `/terminators/${id2}`);
  t.equal(p.address, 'hosted:y');
  t.equal(p.cost, 10, 'patch keeps cost');
  t.equal(p.precedence, 'required', 'patch keeps precedence');
  t.same(p.tags, { k: 'v' }, 'patch keeps tags');
  t.ok(Date.parse(p.updatedAt) > Date.parse(x2.updatedAt), 'updatedAt advances');
  emptyOk(t, await admin.put(`/terminators/${id2}`, { service: svc, router: er, binding: 'transport', address: 'tcp:b:2' }), 'put');
  p = await get(admin, `/terminators/${id2}`);
  t.equal(p.routerId, er);
  t.equal(p.cost, 0, 'put resets cost');
  t.equal(p.precedence, 'default', 'put resets precedence');
  t.same(p.tags, {}, 'put resets tags');
  fieldError(t, await admin.patch(`/terminators/${id2}`, { cost: 65536 }), 'cost', 'patch cost 65536');

  // list + filters + service sub-list
  const l = await admin.get(`/terminators?filter=service="${svc}"`);
  t.equal(l.status, 200);
  t.equal(l.body.data.length, 2);
  const sub = await admin.get(`/services/${svc}/terminators`);
  t.equal(sub.status, 200);
  t.same(sub.body.data.map((x: any) => x.id).sort(), [id, id2].sort(), 'services/{id}/terminators');

  emptyOk(t, await admin.delete(`/terminators/${id}`), 'delete terminator');
  t.ok(isError(await admin.get(`/terminators/${id}`), 404, 'NOT_FOUND'), 'gone');

  // deleting the service deletes its terminators
  emptyOk(t, await admin.delete(`/services/${svc}`), 'delete service');
  t.ok(isError(await admin.get(`/terminators/${id2}`), 404, 'NOT_FOUND'), 'terminator deleted with service');
});
