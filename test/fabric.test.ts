/**
 * The fabric API (`/fabric/v1`) against the real server: every one of its 37 operations at least
 * once — routers (edge and transit alike), services and terminators over the same records as the
 * Management API, links and circuits (empty, well-formed), inspections, the database operations
 * and the cluster operations of a standalone controller — with its auth (the same API session,
 * the same permission families), envelopes, paging and filters, and its spec in `/specs`.
 */
import t from 'tap';
import { startServer, isError, Client } from './helpers/server.js';
import { createUser } from './helpers/users.js';
import { buildOperations } from '../src/api/operations.js';
import { createRegistry } from '../src/resources/index.js';
import { RouterClient } from '../bench/lib/router-client.js';
import { createAndEnroll } from '../bench/lib/router-enroll.js';
import { createClient } from '../bench/lib/http.js';

const srv = await startServer(t);
const admin = await srv.login();
const fabric = new Client(srv, '/fabric/v1', admin.token);
const FABRIC_OPS = 37;

/** Calls made, `METHOD path-template`, to check every operation was exercised. */
const called = new Set<string>();
const call = async (c: Client, method: string, template: string, p: string, body?: unknown) => {
  called.add(`${method} ${template}`);
  return c.request(method, p, body);
};

t.test('auth: the same API session and permissions as the Management API', async (t) => {
  const anon = new Client(srv, '/fabric/v1');
  t.ok(isError(await anon.get('/routers'), 401, 'UNAUTHORIZED'), 'no token → 401');
  t.ok(isError(await new Client(srv, '/fabric/v1', 'not-a-token').get('/routers'), 401, 'UNAUTHORIZED'), 'unknown token → 401');
  await createUser(admin, 'fabric-plain', 'fabric-plain-pw');
  const plain = await srv.login('fabric-plain', 'fabric-plain-pw');
  const plainFabric = new Client(srv, '/fabric/v1', plain.token);
  t.ok(isError(await plainFabric.get('/routers'), 401, 'UNAUTHORIZED'), 'non-admin without permission → 401');
  t.ok(isError(await plainFabric.get('/links'), 401, 'UNAUTHORIZED'), 'links need ops.read');
  await createUser(admin, 'fabric-reader', 'fabric-reader-pw', { permissions: ['router.read'] });
  const reader = new Client(srv, '/fabric/v1', (await srv.login('fabric-reader', 'fabric-reader-pw')).token);
  t.equal((await reader.get('/routers')).status, 200, 'router.read lists routers');
  t.ok(isError(await reader.post('/routers', { id: 'x', name: 'x', cost: 0, noTraversal: false }), 401, 'UNAUTHORIZED'), 'router.read may not create');
  t.ok(isError(await reader.get('/services'), 401, 'UNAUTHORIZED'), 'router.read may not list services');
  t.ok(isError(await reader.post('/database/check-data-integrity'), 401, 'UNAUTHORIZED'), 'database operations are for admins');
  // The OIDC-style bearer form of the same session is accepted as on the other APIs.
  const bearer = await srv.raw('GET', '/fabric/v1/routers', undefined, { authorization: `Bearer ${admin.token}`, accept: 'application/json' });
  t.not(bearer.status, 500, 'a Bearer header is read, never a 500');
});

/**
 * The fabric permissions, written out: the Management API's families (router, service, terminator),
 * `ops` for links, circuits, inspections and the cluster list; `admin` for the database and the
 * cluster changes, as the Management API's database operations.
 */
const PERMISSIONS: Record<string, string> = {
  listRouters: 'router.read', detailRouter: 'router.read', createRouter: 'router.create', updateRouter: 'router.update',
  patchRouter: 'router.update', deleteRouter: 'router.delete', listRouterTerminators: 'terminator.read',
  listServices: 'service.read', detailService: 'service.read', createService: 'service.create', updateService: 'service.update',
  patchService: 'service.update', deleteService: 'service.delete', listServiceTerminators: 'terminator.read',
  listTerminators: 'terminator.read', detailTerminator: 'terminator.read', createTerminator: 'terminator.create',
  updateTerminator: 'terminator.update', patchTerminator: 'terminator.update', deleteTerminator: 'terminator.delete',
  listLinks: 'ops.read', detailLink: 'ops.read', patchLink: 'ops.update', deleteLink: 'ops.delete',
  listCircuits: 'ops.read', detailCircuit: 'ops.read', deleteCircuit: 'ops.delete', inspect: 'ops.read',
  clusterListMembers: 'ops.read', clusterMemberAdd: 'admin', clusterMemberRemove: 'admin', clusterTransferLeadership: 'admin',
  createDatabaseSnapshot: 'admin', createDatabaseSnapshotWithPath: 'admin', checkDataIntegrity: 'admin',
  fixDataIntegrity: 'admin', dataIntegrityResults: 'admin',
};

t.test('permissions: each operation needs its family.action, checked before any lookup', async (t) => {
  const ops = buildOperations(createRegistry()).filter((o) => o.api === 'fabric');
  t.equal(ops.length, FABRIC_OPS);
  const holders = new Map<string, Client>();
  const holder = async (perm: string) => {
    let c = holders.get(perm);
    if (!c) {
      const name = `fabric-perm-${perm}`;
      await createUser(admin, name, 'fabric-perm-pw', { permissions: [perm] });
      holders.set(perm, (c = new Client(srv, '/fabric/v1', (await srv.login(name, 'fabric-perm-pw')).token)));
    }
    return c;
  };
  for (const op of ops) {
    const got = op.permission ? `${op.permission.family}.${op.permission.action}` : 'admin';
    t.equal(got, PERMISSIONS[op.operationId], `${op.operationId}: ${PERMISSIONS[op.operationId]}`);
    // Made-up ids, empty bodies: an allowed caller gets anything but 401, a refused one 401 first.
    // (Writes that would succeed with an empty body are not sent as allowed: only refusals.)
    const url = op.path.replace(/\{[^}]+\}/g, 'made-up-id-0001');
    const body = ['post', 'put', 'patch'].includes(op.method) ? {} : undefined;
    const other = got.startsWith('ops') ? 'identity.read' : 'ops.read';
    const refused = await (await holder(other)).request(op.method.toUpperCase(), url, body);
    t.ok(isError(refused, 401, 'UNAUTHORIZED'), `${op.operationId} refused to ${other}`);
    if (got === 'admin') continue;
    if (op.method === 'get') {
      const allowed = await (await holder(got)).request('GET', url);
      t.not(allowed.status, 401, `${op.operationId} allowed to ${got} (${allowed.status})`);
      const family = await (await holder(got.split('.')[0])).request('GET', url);
      t.not(family.status, 401, `${op.operationId} allowed to the whole family (${family.status})`);
    }
  }
});

t.test('routers: edge and transit routers, fabric fields, paging, filter, writes', async (t) => {
  const er = await admin.create('/edge-routers', { name: 'fab-edge-1', roleAttributes: ['a'] });
  const tr = await admin.create('/transit-routers', { name: 'fab-transit-1' });

  const c = await call(fabric, 'POST', '/routers', '/routers', { id: 'fab-r1', name: 'fab-made-1', cost: 7, noTraversal: false, tags: { k: 'v' } });
  t.equal(c.status, 201, 'create');
  t.equal(c.body.data.id, 'fab-r1', 'the id the body names');
  t.equal(c.body.data._links.self.href, './routers/fab-r1');
  t.ok(isError(await fabric.post('/routers', { id: 'fab-r1', name: 'other', cost: 0, noTraversal: false }), 400, 'COULD_NOT_VALIDATE'), 'an id in use → 400');
  t.ok(isError(await fabric.post('/routers', { id: er, name: 'other2', cost: 0, noTraversal: false }), 400, 'COULD_NOT_VALIDATE'), 'an edge router id in use → 400');
  t.ok(isError(await fabric.post('/routers', { id: 'fab-r2', name: 'fab-made-2', cost: 70000, noTraversal: false }), 400, 'COULD_NOT_VALIDATE'), 'cost out of range → 400');
  t.ok(isError(await fabric.post('/routers', { name: 'no-id', cost: 0, noTraversal: false }), 400, 'COULD_NOT_VALIDATE'), 'id required → 400');
  t.ok(isError(await fabric.post('/routers', { id: 'fab-r3', name: 'fab-made-3', cost: 0, noTraversal: false, fingerprint: 'zz' }), 400, 'COULD_NOT_VALIDATE'), 'a malformed fingerprint → 400');
  const fp = 'AB:'.repeat(19) + 'AB';
  t.equal((await fabric.post('/routers', { id: 'fab-r4', name: 'fab-made-4', cost: 0, noTraversal: true, fingerprint: fp })).status, 201, 'create with a fingerprint');

  const mgmtView = await admin.get('/transit-routers/fab-r1');
  t.equal(mgmtView.status, 200, 'the router is a transit router on the Management API');
  t.equal(mgmtView.body.data.cost, 7);

  const all = await call(fabric, 'GET', '/routers', '/routers?limit=1000');
  t.equal(all.status, 200);
  const ids = all.body.data.map((r: any) => r.id);
  for (const id of [er, tr, 'fab-r1', 'fab-r4']) t.ok(ids.includes(id), `${id} listed`);
  t.equal(all.body.meta.pagination.totalCount, 4, 'every router, edge ones included');
  t.same([...ids].sort(), ids, 'id order by default');
  const d = all.body.data.find((r: any) => r.id === er);
  t.match(d, { name: 'fab-edge-1', fingerprint: '', connected: false, cost: 0, noTraversal: false, disabled: false, ctrlChanListeners: {}, tags: {} });
  t.equal(d._links.self.href, `./routers/${er}`);
  t.equal(d._links.terminators.href, `./routers/${er}/terminators`);
  t.notOk('listenerAddresses' in d, 'no listeners while disconnected');
  t.ok(typeof d.createdAt === 'string' && typeof d.updatedAt === 'string');
  t.equal(all.body.data.find((r: any) => r.id === 'fab-r4').fingerprint, 'ab'.repeat(20), 'fingerprint kept in the records\' form');

  const page = await fabric.get('/routers?limit=2&offset=1');
  t.equal(page.body.data.length, 2);
  t.same(page.body.meta.pagination, { limit: 2, offset: 1, totalCount: 4 });
  t.same(page.body.data.map((r: any) => r.id), ids.slice(1, 3), 'the page of the whole list');
  const filtered = await fabric.get(`/routers?filter=${encodeURIComponent('name contains "made" and cost > 3')}`);
  t.same(filtered.body.data.map((r: any) => r.id), ['fab-r1'], 'filter');
  const sorted = await fabric.get(`/routers?sort=${encodeURIComponent('name desc')}&limit=1`);
  t.equal(sorted.body.data[0].name, 'fab-transit-1', 'sort');
  t.equal((await fabric.get('/routers?filter=connected%3Dfalse')).body.meta.pagination.totalCount, 4, 'filter on connected');
  t.ok(isError(await fabric.get('/routers?filter=name%3D'), 400, 'INVALID_FILTER'), 'a bad filter → 400');

  const det = await call(fabric, 'GET', '/routers/{id}', `/routers/${tr}`);
  t.equal(det.status, 200);
  t.equal(det.body.data.name, 'fab-transit-1');
  t.ok(isError(await fabric.get('/routers/nope'), 404, 'NOT_FOUND'), 'unknown router → 404');

  t.equal((await call(fabric, 'PATCH', '/routers/{id}', `/routers/${er}`, { cost: 12, disabled: true })).status, 200, 'patch an edge router');
  const erMgmt = (await admin.get(`/edge-routers/${er}`)).body.data;
  t.equal(erMgmt.cost, 12);
  t.equal(erMgmt.disabled, true);
  t.same(erMgmt.roleAttributes, ['a'], 'edge fields untouched');
  t.ok(isError(await fabric.patch(`/routers/${er}`, { fingerprint: 'ab'.repeat(20) }), 400, 'COULD_NOT_VALIDATE'), 'the fingerprint cannot be changed');
  // PUT requires a fingerprint (a required string is a non-empty one, as upstream's validator reads it):
  // the router's own, repeated.
  t.ok(isError(await fabric.put(`/routers/${er}`, { name: 'fab-edge-1b', fingerprint: '', cost: 3, noTraversal: true }), 400, 'COULD_NOT_VALIDATE'), 'put without a fingerprint → 400');
  t.equal((await call(fabric, 'PUT', '/routers/{id}', '/routers/fab-r4', { name: 'fab-made-4b', fingerprint: fp, cost: 3, noTraversal: false })).status, 200, 'put');
  t.match((await admin.get('/transit-routers/fab-r4')).body.data, { name: 'fab-made-4b', cost: 3, noTraversal: false, disabled: false, fingerprint: 'ab'.repeat(20) }, 'put replaces the fabric fields');
  t.ok(isError(await fabric.put('/routers/fab-r4', { name: 'fab-made-4b', fingerprint: 'cd'.repeat(20), cost: 3, noTraversal: false }), 400, 'COULD_NOT_VALIDATE'), 'put with another fingerprint → 400');
  t.ok(isError(await fabric.put('/routers/nope', { name: 'n', fingerprint: fp, cost: 0, noTraversal: false }), 404, 'NOT_FOUND'));

  const rt = await call(fabric, 'GET', '/routers/{id}/terminators', `/routers/${er}/terminators`);
  t.equal(rt.status, 200);
  t.same(rt.body.data, []);
  t.ok(isError(await fabric.get('/routers/nope/terminators'), 404, 'NOT_FOUND'));

  t.equal((await call(fabric, 'DELETE', '/routers/{id}', '/routers/fab-r4')).status, 200, 'delete');
  t.ok(isError(await fabric.get('/routers/fab-r4'), 404, 'NOT_FOUND'), 'gone');
  t.ok(isError(await admin.get('/transit-routers/fab-r4'), 404, 'NOT_FOUND'), 'gone from the Management API too');
  t.ok(isError(await fabric.delete('/routers/fab-r4'), 404, 'NOT_FOUND'), 'delete again → 404');
});

t.test('services and terminators: the Management API\'s records in fabric shapes', async (t) => {
  const c = await call(fabric, 'POST', '/services', '/services', { name: 'fab-svc-1', terminatorStrategy: 'weighted', maxIdleTimeMillis: 1000 });
  t.equal(c.status, 201);
  const svc = c.body.data.id;
  t.equal(c.body.data._links.self.href, `./services/${svc}`);
  t.equal((await admin.patch(`/services/${svc}`, { roleAttributes: ['edge-attr'] })).status, 200);
  const det = await call(fabric, 'GET', '/services/{id}', `/services/${svc}`);
  t.match(det.body.data, { id: svc, name: 'fab-svc-1', terminatorStrategy: 'weighted', maxIdleTimeMillis: 1000, tags: {} });
  t.notOk('roleAttributes' in det.body.data, 'edge fields not shown');
  const listed = await call(fabric, 'GET', '/services', `/services?filter=${encodeURIComponent('name="fab-svc-1"')}`);
  t.same(listed.body.data.map((s: any) => s.id), [svc], 'filter');
  t.equal(listed.body.meta.pagination.totalCount, 1);
  t.ok(isError(await fabric.post('/services', { name: 'fab-svc-1' }), 400, 'COULD_NOT_VALIDATE'), 'name unique as on the Management API');
  t.ok(isError(await fabric.post('/services', {}), 400, 'COULD_NOT_VALIDATE'), 'name required');

  t.equal((await call(fabric, 'PATCH', '/services/{id}', `/services/${svc}`, { maxIdleTimeMillis: 5 })).status, 200);
  t.equal((await call(fabric, 'PUT', '/services/{id}', `/services/${svc}`, { name: 'fab-svc-1b' })).status, 200);
  const m = (await admin.get(`/services/${svc}`)).body.data;
  t.match(m, { name: 'fab-svc-1b', terminatorStrategy: 'smartrouting', maxIdleTimeMillis: 0, roleAttributes: ['edge-attr'] }, 'put resets the fabric fields only');

  const er = await admin.create('/edge-routers', { name: 'fab-edge-term' });
  const tc = await call(fabric, 'POST', '/terminators', '/terminators', { service: svc, router: er, binding: 'transport', address: 'tcp:10.0.0.1:80', instanceId: 'inst-1', cost: 4, precedence: 'required' });
  t.equal(tc.status, 201, `terminator created: ${tc.text}`);
  const term = tc.body.data.id;
  t.equal((await admin.get(`/terminators/${term}`)).body.data.identity, 'inst-1', 'instanceId is the Management API\'s identity');
  const td = await call(fabric, 'GET', '/terminators/{id}', `/terminators/${term}`);
  t.match(td.body.data, {
    serviceId: svc, routerId: er, binding: 'transport', address: 'tcp:10.0.0.1:80', instanceId: 'inst-1', cost: 4, precedence: 'required', dynamicCost: 4, hostId: '',
    service: { id: svc, entity: 'services', name: 'fab-svc-1b', _links: { self: { href: `./services/${svc}` } } },
    router: { id: er, entity: 'routers', name: 'fab-edge-term', _links: { self: { href: `./routers/${er}` } } },
  });
  t.ok(isError(await fabric.post('/terminators', { service: svc, router: 'nope', binding: 'b', address: 'a' }), 404, 'NOT_FOUND'), 'unknown router → 404 as on the Management API');

  const st = await call(fabric, 'GET', '/services/{id}/terminators', `/services/${svc}/terminators`);
  t.same(st.body.data.map((x: any) => x.id), [term]);
  t.ok(isError(await fabric.get('/services/nope/terminators'), 404, 'NOT_FOUND'));
  t.same((await fabric.get(`/routers/${er}/terminators`)).body.data.map((x: any) => x.id), [term], 'the router\'s terminators');
  const tl = await call(fabric, 'GET', '/terminators', `/terminators?filter=${encodeURIComponent(`service="${svc}"`)}`);
  t.same(tl.body.data.map((x: any) => x.id), [term]);

  t.equal((await call(fabric, 'PATCH', '/terminators/{id}', `/terminators/${term}`, { cost: 9 })).status, 200);
  t.equal((await fabric.get(`/terminators/${term}`)).body.data.cost, 9);
  t.equal((await call(fabric, 'PUT', '/terminators/{id}', `/terminators/${term}`, { service: svc, router: er, binding: 'transport', address: 'tcp:10.0.0.2:80' })).status, 200);
  t.match((await fabric.get(`/terminators/${term}`)).body.data, { address: 'tcp:10.0.0.2:80', cost: 0, precedence: 'default', instanceId: 'inst-1' }, 'put keeps instanceId');
  t.equal((await call(fabric, 'DELETE', '/terminators/{id}', `/terminators/${term}`)).status, 200);
  t.ok(isError(await admin.get(`/terminators/${term}`), 404, 'NOT_FOUND'));

  t.equal((await call(fabric, 'DELETE', '/services/{id}', `/services/${svc}`)).status, 200);
  t.ok(isError(await fabric.get(`/services/${svc}`), 404, 'NOT_FOUND'));
});

t.test('a connected router: presence on the fabric API and in inspections', async (t) => {
  const http = await createClient({ origin: srv.origin, ca: srv.ca, connections: 2, kind: 'https' });
  t.teardown(() => http.close());
  const r = await createAndEnroll(http, admin.token!, { name: 'fab-live', kind: 'edge', hostname: 'fab-live.test' });
  const versionInfo = { os: 'linux', arch: 'amd64', version: 'v9.9.9', revision: 'abc123', buildDate: '2026-01-01T00:00:00Z' };
  const c = new RouterClient({ url: `wss://127.0.0.1:${srv.port}/ctrl/v1`, ca: srv.ca, certChain: r.certChain, key: r.keyPem, hostname: 'fab-live.example', protocols: { tls: 'tls:fab-live.example:3022' }, versionInfo });
  await c.connect();
  t.teardown(() => c.close());
  let d: any;
  for (;;) {
    d = (await fabric.get(`/routers/${r.id}`)).body.data;
    if (d.connected) break;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  t.equal(d.fingerprint, r.fingerprint, 'the enrolled certificate\'s fingerprint');
  t.same(d.listenerAddresses, [{ address: 'tls:fab-live.example:3022', protocol: 'tls' }], 'what the router reported it listens on');
  t.same(d.versionInfo, versionInfo);
  const online = await fabric.get(`/routers?filter=${encodeURIComponent('connected=true')}`);
  t.same(online.body.data.map((x: any) => x.id), [r.id], 'filter on connected');
  const ins = await fabric.post('/inspections', { appRegex: '.*', requestedValues: ['connected-routers'] });
  t.equal(ins.body.success, false, 'a matched router cannot be inspected');
  t.equal(ins.body.errors.length, 1);
  t.match(ins.body.errors[0], r.id);
  t.match(ins.body.values[0].value.routers, [{ id: r.id, name: 'fab-live', version: 'v9.9.9' }], 'the controller lists it');
});

t.test('links and circuits: empty lists, never a 404 for the list', async (t) => {
  for (const [path, template] of [['/links', '/links'], ['/circuits', '/circuits']]) {
    const r = await call(fabric, 'GET', template, `${path}?limit=5&offset=0`);
    t.equal(r.status, 200, `${path} 200`);
    t.same(r.body.data, [], `${path} empty`);
    t.same(r.body.meta.pagination, { limit: 5, offset: 0, totalCount: 0 }, `${path} pagination`);
    t.ok(Array.isArray(r.body.meta.filterableFields));
    t.ok(isError(await fabric.get(`${path}?filter=${encodeURIComponent('id =')}`), 400, 'INVALID_FILTER'), `${path} bad filter → 400`);
  }
  t.ok(isError(await call(fabric, 'GET', '/links/{id}', '/links/l1'), 404, 'NOT_FOUND'));
  t.ok(isError(await call(fabric, 'PATCH', '/links/{id}', '/links/l1', { down: true }), 404, 'NOT_FOUND'));
  t.equal((await call(fabric, 'DELETE', '/links/{id}', '/links/l1')).status, 200, 'delete link: a no-op as upstream');
  t.ok(isError(await call(fabric, 'GET', '/circuits/{id}', '/circuits/c1'), 404, 'NOT_FOUND'));
  t.equal((await call(fabric, 'DELETE', '/circuits/{id}', '/circuits/c1', { immediate: true })).status, 200, 'delete circuit: a no-op like a link\'s');
});

t.test('inspect: this controller answers, bad input is a 400', async (t) => {
  const ctrl = (await admin.get('/controllers')).body.data[0].id;
  const r = await call(fabric, 'POST', '/inspections', '/inspections', { appRegex: '.*', requestedValues: ['connected-routers', 'Cluster-Config', 'no-such-value'] });
  t.equal(r.status, 200);
  // Upstream's inspectResponse, not enveloped.
  t.equal(r.body.success, true);
  t.same(r.body.errors, []);
  t.same(r.body.values.map((v: any) => [v.appId, v.name]), [[ctrl, 'connected-routers'], [ctrl, 'cluster-config']]);
  t.same(r.body.values[0].value, { routers: [] });
  t.same(r.body.values[1].value, { clustered: false, members: [] });
  const none = await fabric.post('/inspections', { appRegex: 'no-such-app', requestedValues: ['connected-routers'] });
  t.same(none.body, { success: true, errors: [], values: [] }, 'no app matched');
  t.ok(isError(await fabric.post('/inspections', { appRegex: '(', requestedValues: [] }), 400, 'COULD_NOT_VALIDATE'), 'a bad regex → 400');
  t.ok(isError(await fabric.post('/inspections', { requestedValues: [] }), 400, 'COULD_NOT_VALIDATE'), 'appRegex required');
});

t.test('database: the Management API\'s snapshot and integrity machinery', async (t) => {
  const snap = await call(fabric, 'POST', '/database/snapshot', '/database/snapshot', {});
  t.equal(snap.status, 200);
  t.match(snap.body.data.path, /snapshots/, 'the snapshot\'s path');
  t.ok(isError(await call(fabric, 'POST', '/database', '/database'), 429, 'RATE_LIMITED'), 'one snapshot a minute, shared');
  t.ok(isError(await admin.post('/database/snapshot'), 429, 'RATE_LIMITED'), 'shared with the Management API');
  t.ok(isError(await fabric.post('/database/snapshot', { path: '/tmp/elsewhere' }), 400, 'COULD_NOT_VALIDATE'), 'a path is refused');

  t.equal((await call(fabric, 'POST', '/database/check-data-integrity', '/database/check-data-integrity')).status, 202);
  let results: any;
  for (;;) {
    results = await call(fabric, 'GET', '/database/data-integrity-results', '/database/data-integrity-results');
    t.equal(results.status, 200);
    if (!results.body.data.inProgress) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  t.same(results.body.data.results, [], 'no problems');
  t.equal((await call(fabric, 'POST', '/database/fix-data-integrity', '/database/fix-data-integrity')).status, 202);
  const mgmtResults = await admin.get('/database/data-integrity-results');
  t.equal(mgmtResults.body.data.fixingErrors, true, 'the same run the Management API reports');
});

t.test('cluster: a standalone controller answers as upstream without Raft', async (t) => {
  const cases: [string, string, unknown][] = [
    ['GET', '/cluster/list-members', undefined],
    ['POST', '/cluster/add-member', { address: 'tls:ctrl2:6262', isVoter: true }],
    ['POST', '/cluster/remove-member', { id: 'ctrl2' }],
    ['POST', '/cluster/transfer-leadership', { newLeaderId: 'ctrl2' }],
  ];
  for (const [method, path, body] of cases) {
    t.ok(isError(await call(fabric, method, path, path, body), 400, 'SERVER_NOT_RUNNING_IN_HA_MODE'), `${method} ${path} → 400 SERVER_NOT_RUNNING_IN_HA_MODE`);
  }
});

t.test('served in /specs and the version document', async (t) => {
  const specs = await admin.get('/specs');
  t.ok(specs.body.data.some((s: any) => s.id === 'fabric'), 'listed');
  const doc = (await admin.get('/specs/fabric/spec')).body;
  t.equal(doc.info.version, '0.16.54');
  t.equal(doc.basePath, '/fabric/v1');
  let n = 0;
  for (const item of Object.values<any>(doc.paths)) for (const m of ['get', 'post', 'put', 'patch', 'delete']) if (item[m]) n++;
  t.equal(n, FABRIC_OPS, 'every operation');
  t.ok(!JSON.stringify(doc).toLowerCase().includes('ziti'), 'no brand words');
  const v = await admin.get('/version');
  t.same(v.body.data.apiVersions.fabric, { v1: { path: '/fabric/v1', apiBaseUrls: [`https://127.0.0.1:${srv.port}/fabric/v1`] } });
});

t.test('every fabric operation was exercised', async (t) => {
  t.equal(called.size, FABRIC_OPS, `${called.size} operations called: ${[...called].sort().join(', ')}`);
});
