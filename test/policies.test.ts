/**
 * Service policies, edge router policies, service edge router policies, posture checks and
 * posture check types (Management API) against the real controller.
 */
import t, { type Test } from 'tap';
import { startServer, isError, type Client, type Server } from './helpers/server.js';
import { base, created, emptyOk, fieldError, get, hasFields, sleep } from './helpers/assert.js';



let srv: Server;
let admin: Client;
let I1: string, I2: string, S1: string, S2: string, R1: string, R2: string, PC: string;

t.before(async () => {
  srv = await startServer(t);
  admin = await srv.login();
  I1 = await admin.create('/identities', { name: 'pol-i1', type: 'User', isAdmin: false, roleAttributes: ['i1'] });
  I2 = await admin.create('/identities', { name: 'pol-i2', type: 'User', isAdmin: false });
  S1 = await admin.create('/services', { name: 'pol-s1', encryptionRequired: true });
  S2 = await admin.create('/services', { name: 'pol-s2', encryptionRequired: true });
  R1 = await admin.create('/edge-routers', { name: 'pol-r1' });
  R2 = await admin.create('/edge-routers', { name: 'pol-r2' });
  PC = await admin.create('/posture-checks', { typeId: 'DOMAIN', name: 'pol-pc', domains: ['corp.example'] });
});

t.test('service policies', async (t) => {
  const body = {
    name: 'sp-1', type: 'Dial', semantic: 'AnyOf',
    identityRoles: ['#zeta', `@${I1}`, '#alpha'], serviceRoles: [`@${S1}`, '#web'], postureCheckRoles: [`@${PC}`],
    tags: { owner: 'sec', on: false },
  };
  const id = created(t, await admin.post('/service-policies', body), 'service-policies');
  const d = await admin.get(`/service-policies/${id}`);
  t.equal(d.status, 200);
  const x = d.body.data;
  base(t, x, 'service-policies');
  hasFields(t, x, {
    identityRoles: 'array', identityRolesDisplay: 'array', name: 'string', postureCheckRoles: 'array',
    postureCheckRolesDisplay: 'array', semantic: 'string', serviceRoles: 'array', serviceRolesDisplay: 'array', type: 'string',
  }, 'servicePolicyDetail');
  t.same(x.identityRoles, ['#alpha', '#zeta', `@${I1}`].sort(), 'identityRoles sorted');
  t.same(x.serviceRoles, ['#web', `@${S1}`].sort(), 'serviceRoles sorted');
  t.same(x.postureCheckRoles, [`@${PC}`]);
  t.same(
    [...x.identityRolesDisplay].sort((a: any, b: any) => a.role.localeCompare(b.role)),
    [{ role: '#alpha', name: '#alpha' }, { role: '#zeta', name: '#zeta' }, { role: `@${I1}`, name: '@pol-i1' }].sort((a, b) => a.role.localeCompare(b.role)),
    'identityRolesDisplay',
  );
  t.same(x.serviceRolesDisplay.find((r: any) => r.role === `@${S1}`), { role: `@${S1}`, name: '@pol-s1' }, 'serviceRolesDisplay @name');
  t.same(x.postureCheckRolesDisplay, [{ role: `@${PC}`, name: '@pol-pc' }], 'postureCheckRolesDisplay');
  t.equal(x.type, 'Dial');
  t.equal(x.semantic, 'AnyOf');
  t.same(x.tags, { owner: 'sec', on: false });
  for (const l of ['services', 'identities', 'posture-checks']) t.equal(x._links[l]?.href, `./service-policies/${id}/${l}`, `link ${l}`);

  // validation
  fieldError(t, await admin.post('/service-policies', { name: 'sp-bad-svc', type: 'Bind', semantic: 'AllOf', serviceRoles: ['@nope'] }), 'serviceRoles', 'unknown service @id');
  fieldError(t, await admin.post('/service-policies', { name: 'sp-bad-pc', type: 'Bind', semantic: 'AllOf', postureCheckRoles: ['@nope'] }), 'postureCheckRoles', 'unknown posture check @id');
  fieldError(t, await admin.post('/service-policies', { name: 'sp-bad-type', type: 'Both', semantic: 'AllOf' }), 'type', 'bad type');
  t.ok(isError(await admin.post('/service-policies', { name: 'sp-no-type', semantic: 'AllOf' }), 400, 'COULD_NOT_VALIDATE'), 'missing type → 400');

  // PATCH only supplied keys
  await sleep(5);
  emptyOk(t, await admin.patch(`/service-policies/${id}`, { name: 'sp-1b' }), 'patch name');
  let p = await get(admin, `/service-policies/${id}`);
  t.equal(p.name, 'sp-1b');
  t.same(p.identityRoles, x.identityRoles, 'patch keeps identityRoles');
  t.same(p.serviceRoles, x.serviceRoles, 'patch keeps serviceRoles');
  t.same(p.postureCheckRoles, x.postureCheckRoles, 'patch keeps postureCheckRoles');
  t.equal(p.type, 'Dial', 'patch keeps type');
  t.equal(p.semantic, 'AnyOf', 'patch keeps semantic');
  t.same(p.tags, { owner: 'sec', on: false }, 'patch keeps tags');
  t.ok(Date.parse(p.updatedAt) > Date.parse(x.updatedAt), 'updatedAt advances');
  emptyOk(t, await admin.patch(`/service-policies/${id}`, { identityRoles: ['#all'], type: 'Bind' }), 'patch roles');
  p = await get(admin, `/service-policies/${id}`);
  t.same(p.identityRoles, ['#all']);
  t.equal(p.type, 'Bind');
  fieldError(t, await admin.patch(`/service-policies/${id}`, { serviceRoles: ['#all', `@${S2}`] }), 'serviceRoles', 'patch #all with other');

  // PUT resets
  emptyOk(t, await admin.put(`/service-policies/${id}`, { name: 'sp-1c', type: 'Dial', semantic: 'AllOf' }), 'put');
  p = await get(admin, `/service-policies/${id}`);
  t.same(p.identityRoles, [], 'put resets identityRoles');
  t.same(p.serviceRoles, [], 'put resets serviceRoles');
  t.same(p.postureCheckRoles, [], 'put resets postureCheckRoles');
  t.same(p.tags, {}, 'put resets tags');
  t.same(p.identityRolesDisplay, []);

  // list with filter
  const l = await admin.get('/service-policies?filter=name="sp-1c"');
  t.equal(l.status, 200);
  t.equal(l.body.data.length, 1);

  // policy-derived sub-lists (the matrix lives in policy-matrix.test.ts)
  for (const sub of ['services', 'identities', 'posture-checks']) {
    const r = await admin.get(`/service-policies/${id}/${sub}`);
    t.equal(r.status, 200, `/service-policies/{id}/${sub} → 200 (${r.status})`);
    t.ok(Array.isArray(r.body?.data), `/service-policies/{id}/${sub} is a list`);
  }

  emptyOk(t, await admin.delete(`/service-policies/${id}`), 'delete');
  t.ok(isError(await admin.get(`/service-policies/${id}`), 404, 'NOT_FOUND'), 'gone');
  t.ok(isError(await admin.delete(`/service-policies/${id}`), 404, 'NOT_FOUND'), 'delete again → 404');
});

t.test('edge router policies', async (t) => {
  const id = created(t, await admin.post('/edge-router-policies', {
    name: 'erp-1', semantic: 'AllOf', identityRoles: [`@${I2}`, '#i1'], edgeRouterRoles: [`@${R2}`, `@${R1}`], tags: { a: 'b' },
  }), 'edge-router-policies');
  const x = await get(admin, `/edge-router-policies/${id}`);
  base(t, x, 'edge-router-policies');
  hasFields(t, x, {
    edgeRouterRoles: 'array', edgeRouterRolesDisplay: 'array', identityRoles: 'array', identityRolesDisplay: 'array',
    isSystem: 'boolean', name: 'string', semantic: 'string',
  }, 'edgeRouterPolicyDetail');
  t.equal(x.isSystem, false);
  t.same(x.edgeRouterRoles, [`@${R1}`, `@${R2}`].sort(), 'edgeRouterRoles sorted');
  t.same(x.identityRoles, ['#i1', `@${I2}`].sort());
  t.same(x.edgeRouterRolesDisplay.find((r: any) => r.role === `@${R1}`), { role: `@${R1}`, name: '@pol-r1' });
  t.same(x.identityRolesDisplay.find((r: any) => r.role === `@${I2}`), { role: `@${I2}`, name: '@pol-i2' });
  t.same(x.identityRolesDisplay.find((r: any) => r.role === '#i1'), { role: '#i1', name: '#i1' });
  t.same(x.tags, { a: 'b' });

  fieldError(t, await admin.post('/edge-router-policies', { name: 'erp-bad-i', semantic: 'AllOf', identityRoles: ['@nope'] }), 'identityRoles', 'unknown identity @id');
  // isSystem cannot be set
  const sys = created(t, await admin.post('/edge-router-policies', { name: 'erp-sys', semantic: 'AnyOf', isSystem: true }), 'edge-router-policies');
  t.equal((await get(admin, `/edge-router-policies/${sys}`)).isSystem, false, 'isSystem not writable');

  await sleep(5);
  emptyOk(t, await admin.patch(`/edge-router-policies/${id}`, { semantic: 'AnyOf', edgeRouterRoles: ['#all'] }), 'patch');
  const p = await get(admin, `/edge-router-policies/${id}`);
  t.equal(p.semantic, 'AnyOf');
  t.same(p.edgeRouterRoles, ['#all']);
  t.same(p.identityRoles, x.identityRoles, 'patch keeps identityRoles');
  t.equal(p.name, 'erp-1', 'patch keeps name');
  t.same(p.tags, { a: 'b' }, 'patch keeps tags');
  t.ok(Date.parse(p.updatedAt) > Date.parse(x.updatedAt), 'updatedAt advances');
  emptyOk(t, await admin.put(`/edge-router-policies/${id}`, { name: 'erp-1b', semantic: 'AllOf' }), 'put');
  const u = await get(admin, `/edge-router-policies/${id}`);
  t.same(u.edgeRouterRoles, [], 'put resets edgeRouterRoles');
  t.same(u.identityRoles, [], 'put resets identityRoles');
  t.same(u.tags, {}, 'put resets tags');

  for (const sub of ['edge-routers', 'identities']) {
    const r = await admin.get(`/edge-router-policies/${id}/${sub}`);
    t.equal(r.status, 200, `/edge-router-policies/{id}/${sub} → 200 (${r.status})`);
    t.ok(Array.isArray(r.body?.data), `/edge-router-policies/{id}/${sub} is a list`);
  }
  emptyOk(t, await admin.delete(`/edge-router-policies/${id}`), 'delete');
  t.ok(isError(await admin.get(`/edge-router-policies/${id}`), 404, 'NOT_FOUND'), 'gone');
});

t.test('service edge router policies', async (t) => {
  const id = created(t, await admin.post('/service-edge-router-policies', {
    name: 'serp-1', semantic: 'AnyOf', serviceRoles: [`@${S2}`, '#s'], edgeRouterRoles: ['#r', `@${R1}`],
  }), 'service-edge-router-policies');
  const x = await get(admin, `/service-edge-router-policies/${id}`);
  base(t, x, 'service-edge-router-policies');
  hasFields(t, x, {
    edgeRouterRoles: 'array', edgeRouterRolesDisplay: 'array', name: 'string', semantic: 'string', serviceRoles: 'array', serviceRolesDisplay: 'array',
  }, 'serviceEdgeRouterPolicyDetail');
  t.same(x.serviceRoles, ['#s', `@${S2}`].sort());
  t.same(x.edgeRouterRoles, ['#r', `@${R1}`].sort());
  t.same(x.serviceRolesDisplay.find((r: any) => r.role === `@${S2}`), { role: `@${S2}`, name: '@pol-s2' });
  t.same(x.edgeRouterRolesDisplay.find((r: any) => r.role === `@${R1}`), { role: `@${R1}`, name: '@pol-r1' });
  t.same(x.tags, {});


  emptyOk(t, await admin.patch(`/service-edge-router-policies/${id}`, { tags: { x: 'y' } }), 'patch tags');
  const p = await get(admin, `/service-edge-router-policies/${id}`);
  t.same(p.tags, { x: 'y' });
  t.same(p.serviceRoles, x.serviceRoles, 'patch keeps serviceRoles');
  emptyOk(t, await admin.put(`/service-edge-router-policies/${id}`, { name: 'serp-1', semantic: 'AllOf', serviceRoles: ['#all'] }), 'put');
  const u = await get(admin, `/service-edge-router-policies/${id}`);
  t.same(u.serviceRoles, ['#all']);
  t.same(u.edgeRouterRoles, [], 'put resets edgeRouterRoles');
  t.same(u.tags, {}, 'put resets tags');
  for (const sub of ['edge-routers', 'services']) {
    const r = await admin.get(`/service-edge-router-policies/${id}/${sub}`);
    t.equal(r.status, 200, `/service-edge-router-policies/{id}/${sub} → 200 (${r.status})`);
    t.ok(Array.isArray(r.body?.data), `/service-edge-router-policies/{id}/${sub} is a list`);
  }

  // deleting a referenced service / router removes the @id from the policy
  const svc = created(t, await admin.post('/services', { name: 'pol-s-tmp', encryptionRequired: true }), 'services');
  const er = created(t, await admin.post('/edge-routers', { name: 'pol-r-tmp' }), 'edge-routers');
  emptyOk(t, await admin.put(`/service-edge-router-policies/${id}`, { name: 'serp-1', semantic: 'AllOf', serviceRoles: [`@${svc}`, '#s'], edgeRouterRoles: [`@${er}`] }), 'put refs');
  emptyOk(t, await admin.delete(`/services/${svc}`), 'delete service');
  emptyOk(t, await admin.delete(`/edge-routers/${er}`), 'delete router');
  const after = await get(admin, `/service-edge-router-policies/${id}`);
  t.same(after.serviceRoles, ['#s'], '@service removed');
  t.same(after.edgeRouterRoles, [], '@router removed');

  emptyOk(t, await admin.delete(`/service-edge-router-policies/${id}`), 'delete');
  t.ok(isError(await admin.get(`/service-edge-router-policies/${id}`), 404, 'NOT_FOUND'), 'gone');
});

t.test('posture checks of every type', async (t) => {
  const cases: [string, any, Record<string, string>][] = [
    ['OS', { operatingSystems: [{ type: 'Windows', versions: ['10'] }, { type: 'Linux', versions: [] }] }, { operatingSystems: 'array' }],
    ['PROCESS', { process: { osType: 'Windows', path: 'C:\\a.exe', hashes: ['abc'], signerFingerprint: 'ff' } }, { process: 'object' }],
    ['PROCESS_MULTI', { semantic: 'AnyOf', processes: [{ osType: 'Linux', path: '/usr/bin/x', hashes: [] }] }, { processes: 'array', semantic: 'string' }],
    ['DOMAIN', { domains: ['corp.example', 'lab.example'] }, { domains: 'array' }],
    ['MAC', { macAddresses: ['001122334455'] }, { macAddresses: 'array' }],
    ['MFA', { timeoutSeconds: 300, promptOnWake: true, promptOnUnlock: false, ignoreLegacyEndpoints: true }, { timeoutSeconds: 'number', promptOnWake: 'boolean', promptOnUnlock: 'boolean', ignoreLegacyEndpoints: 'boolean' }],
  ];
  const ids: Record<string, string> = {};
  for (const [typeId, extra, fields] of cases) {
    const body = { typeId, name: `pc-${typeId}`, roleAttributes: ['b', 'a'], tags: { t: typeId }, ...extra };
    const id = created(t, await admin.post('/posture-checks', body), 'posture-checks');
    ids[typeId] = id;
    const x = await get(admin, `/posture-checks/${id}`);
    base(t, x, 'posture-checks');
    hasFields(t, x, { name: 'string', roleAttributes: 'array|null', typeId: 'string', version: 'number', ...fields }, `${typeId} detail`);
    t.equal(x.typeId, typeId, `${typeId} typeId`);
    t.equal(x.version, 1, `${typeId} version 1`);
    t.same(x.roleAttributes, ['a', 'b'], `${typeId} roleAttributes sorted`);
    t.same(x.tags, { t: typeId }, `${typeId} tags`);
    for (const k of Object.keys(extra)) t.same(x[k], extra[k], `${typeId} ${k} round-trips`);
  }
  // MFA defaults
  const mfa = created(t, await admin.post('/posture-checks', { typeId: 'MFA', name: 'pc-MFA-def' }), 'posture-checks');
  const m = await get(admin, `/posture-checks/${mfa}`);
  t.equal(m.timeoutSeconds, -1, 'MFA timeoutSeconds default -1');
  t.equal(m.promptOnWake, false);
  t.equal(m.promptOnUnlock, false);
  t.equal(m.ignoreLegacyEndpoints, false);

  // validation
  for (const [label, body, field] of [
    ['DOMAIN empty domains', { typeId: 'DOMAIN', name: 'pc-v1', domains: [] }, 'domains'],
    ['DOMAIN missing domains', { typeId: 'DOMAIN', name: 'pc-v2' }, 'domains'],
    ['MAC empty', { typeId: 'MAC', name: 'pc-v3', macAddresses: [] }, 'macAddresses'],
    ['OS empty', { typeId: 'OS', name: 'pc-v4', operatingSystems: [] }, 'operatingSystems'],
    ['PROCESS_MULTI empty', { typeId: 'PROCESS_MULTI', name: 'pc-v5', semantic: 'AllOf', processes: [] }, 'processes'],
    ['bad attr', { typeId: 'DOMAIN', name: 'pc-v6', domains: ['x'], roleAttributes: ['@x'] }, 'roleAttributes'],
    ['duplicate name', { typeId: 'DOMAIN', name: 'pc-DOMAIN', domains: ['x'] }, 'name'],
  ] as [string, any, string][]) {
    const r = await admin.post('/posture-checks', body);
    t.ok(isError(r, 400, 'COULD_NOT_VALIDATE'), `${label} → 400 (${r.status} ${r.text.slice(0, 200)})`);
    t.equal(String(r.body?.error?.cause?.field).split('.')[0], field, `${label}: cause.field ${field} (got ${r.body?.error?.cause?.field})`);
  }
  for (const [label, body] of [
    ['unknown typeId', { typeId: 'ENDPOINT_STATE', name: 'pc-v7' }],
    ['missing typeId', { name: 'pc-v8' }],
    ['missing name', { typeId: 'DOMAIN', domains: ['x'] }],
    ['PROCESS without process', { typeId: 'PROCESS', name: 'pc-v9' }],
  ] as [string, any][]) {
    const r = await admin.post('/posture-checks', body);
    t.ok(isError(r, 400, 'COULD_NOT_VALIDATE'), `${label} → 400 (${r.status} ${r.text.slice(0, 200)})`);
  }
  t.equal((await admin.get('/posture-checks?filter=name contains "pc-v"')).body.data.length, 0, 'nothing written');

  // PATCH: {name, typeId} keeps domains; tags; version increments; typeId immutable
  const dom = ids.DOMAIN;
  const before = await get(admin, `/posture-checks/${dom}`);
  await sleep(5);
  emptyOk(t, await admin.patch(`/posture-checks/${dom}`, { name: 'pc-DOMAIN-2', typeId: 'DOMAIN' }), 'patch name');
  let p = await get(admin, `/posture-checks/${dom}`);
  t.equal(p.name, 'pc-DOMAIN-2');
  t.same(p.domains, ['corp.example', 'lab.example'], 'domains unchanged');
  t.same(p.roleAttributes, ['a', 'b'], 'roleAttributes unchanged');
  t.equal(p.version, 2, 'version increments');
  t.ok(Date.parse(p.updatedAt) > Date.parse(before.updatedAt), 'updatedAt advances');
  emptyOk(t, await admin.patch(`/posture-checks/${dom}`, { tags: { new: 'tag' }, typeId: 'DOMAIN' }), 'patch tags');
  p = await get(admin, `/posture-checks/${dom}`);
  t.same(p.tags, { new: 'tag' });
  t.same(p.domains, ['corp.example', 'lab.example'], 'domains unchanged after tags patch');
  const changeType = await admin.patch(`/posture-checks/${dom}`, { typeId: 'MAC', macAddresses: ['aa:bb:cc:dd:ee:ff'] });
  t.ok(changeType.status === 400 || changeType.status === 200, `patch typeId answered (${changeType.status})`);
  t.equal((await get(admin, `/posture-checks/${dom}`)).typeId, 'DOMAIN', 'typeId stays');
  // PUT replaces
  emptyOk(t, await admin.put(`/posture-checks/${dom}`, { typeId: 'DOMAIN', name: 'pc-DOMAIN-3', domains: ['only.example'] }), 'put');
  p = await get(admin, `/posture-checks/${dom}`);
  t.same(p.domains, ['only.example']);
  t.same(p.roleAttributes, [], 'put resets roleAttributes');
  t.same(p.tags, {}, 'put resets tags');
  fieldError(t, await admin.put(`/posture-checks/${dom}`, { typeId: 'DOMAIN', name: 'pc-DOMAIN-3', domains: [] }), 'domains', 'put empty domains');
  emptyOk(t, await admin.patch(`/posture-checks/${ids.MFA}`, { timeoutSeconds: 60, typeId: 'MFA' }), 'patch MFA timeout');
  const mp = await get(admin, `/posture-checks/${ids.MFA}`);
  t.equal(mp.timeoutSeconds, 60);
  t.equal(mp.promptOnWake, true, 'MFA patch keeps promptOnWake');

  // list, role filter
  const l = await admin.get('/posture-checks?filter=typeId="MFA"');
  t.equal(l.status, 200);
  t.equal(l.body.data.length, 2);
  const rf = await admin.get('/posture-checks?roleFilter=%23a&roleSemantic=AllOf&limit=-1');
  t.equal(rf.status, 200);
  t.equal(rf.body.data.length, 5, 'roleFilter #a matches the checks still carrying a');

  // delete a check referenced by a policy: @id removed
  const sp = created(t, await admin.post('/service-policies', { name: 'pc-sp', type: 'Dial', semantic: 'AllOf', postureCheckRoles: [`@${ids.MAC}`, '#a'] }), 'service-policies');
  emptyOk(t, await admin.delete(`/posture-checks/${ids.MAC}`), 'delete posture check');
  t.ok(isError(await admin.get(`/posture-checks/${ids.MAC}`), 404, 'NOT_FOUND'), 'gone');
  t.same((await get(admin, `/service-policies/${sp}`)).postureCheckRoles, ['#a'], '@id removed from policy');

  const ra = await admin.get('/posture-check-role-attributes');
  t.equal(ra.status, 200, `posture-check-role-attributes → 200 (${ra.status})`);
  t.ok(Array.isArray(ra.body?.data), 'posture-check-role-attributes is a list');
});

t.test('posture check types', async (t) => {
  const r = await admin.get('/posture-check-types');
  t.equal(r.status, 200);
  const ids = r.body.data.map((x: any) => x.id).sort();
  for (const id of ['DOMAIN', 'MAC', 'OS', 'PROCESS', 'PROCESS_MULTI']) t.ok(ids.includes(id), `type ${id} listed`);
  for (const x of r.body.data) {
    base(t, x, 'posture-check-types');
    hasFields(t, x, { name: 'string', operatingSystems: 'array', version: 'string' }, `type ${x.id}`);
    for (const os of x.operatingSystems) hasFields(t, os, { type: 'string', versions: 'array' }, `${x.id} os`);
  }
  const d = await admin.get('/posture-check-types/DOMAIN');
  t.equal(d.status, 200);
  t.equal(d.body.data.id, 'DOMAIN');
  t.ok(isError(await admin.get('/posture-check-types/NOPE'), 404, 'NOT_FOUND'), 'unknown type → 404');
});
