/**
 * Identities, identity types and the enrollments created with identities (Management API),
 * against the real controller over HTTPS.
 */
import crypto from 'node:crypto';
import tls from 'node:tls';
import t, { type Test } from 'tap';
import { startServer, isError, type Client, type Res, type Server } from './helpers/server.js';
import { RFC3339, base, created, emptyOk, hasFields, kind, sleep, type Tap } from './helpers/assert.js';


/** Every field present with one of the given `|`-separated kinds. */

function decodeJwt(jwt: string) {
  const [h, c, s] = jwt.split('.');
  return {
    header: JSON.parse(Buffer.from(h, 'base64url').toString()),
    claims: JSON.parse(Buffer.from(c, 'base64url').toString()),
    input: `${h}.${c}`,
    sig: Buffer.from(s ?? '', 'base64url'),
  };
}

async function peerCert(srv: Server): Promise<crypto.X509Certificate> {
  return new Promise((resolve, reject) => {
    const sock = tls.connect({ host: '127.0.0.1', port: srv.port, ca: srv.ca, servername: 'localhost' }, () => {
      const c = sock.getPeerCertificate();
      sock.end();
      resolve(new crypto.X509Certificate(c.raw));
    });
    sock.on('error', reject);
  });
}


let srv: Server;
let admin: Client;

t.before(async () => {
  srv = await startServer(t);
  admin = await srv.login();
});

t.test('identity create, detail shape and defaults', async (t) => {
  const r = await admin.post('/identities', { name: 'id-min', type: 'User', isAdmin: false });
  const id = created(t, r, 'identities');
  const d = await admin.get(`/identities/${id}`);
  t.equal(d.status, 200);
  t.same(d.body.meta, {}, 'detail meta {}');
  const x = d.body.data;
  base(t, x, 'identities');
  hasFields(t, x, {
    authPolicy: 'object', authPolicyId: 'string', authenticators: 'object', defaultHostingCost: 'number',
    disabled: 'boolean', edgeRouterConnectionStatus: 'string', enrollment: 'object', envInfo: 'object',
    externalId: 'string|null', hasApiSession: 'boolean', hasEdgeRouterConnection: 'boolean', isAdmin: 'boolean',
    isDefaultAdmin: 'boolean', isMfaEnabled: 'boolean', name: 'string', permissions: 'array|null',
    roleAttributes: 'array|null', sdkInfo: 'object', serviceHostingCosts: 'object', serviceHostingPrecedences: 'object',
    type: 'object', typeId: 'string',
  }, 'identityDetail');
  t.equal(x.name, 'id-min');
  t.equal(x.authPolicyId, 'default');
  t.match(x.authPolicy, { id: 'default', entity: 'auth-policies', name: 'Default' }, 'authPolicy ref');
  t.equal(x.typeId, 'Default', 'User → Default');
  t.match(x.type, { id: 'Default', name: 'Default', entity: 'identity-types' });
  t.equal(x.defaultHostingPrecedence, 'default');
  t.equal(x.defaultHostingCost, 0);
  t.same(x.roleAttributes, [], 'roleAttributes []');
  t.same(x.tags, {}, 'tags {}');
  t.same(x.serviceHostingCosts, {});
  t.same(x.serviceHostingPrecedences, {});
  t.equal(x.isAdmin, false);
  t.equal(x.isDefaultAdmin, false);
  t.equal(x.disabled, false);
  t.equal(x.hasApiSession, false);
  t.ok(['online', 'offline', 'unknown'].includes(x.edgeRouterConnectionStatus));
  t.same(x.enrollment, {}, 'no enrollments');
  t.same(x.authenticators, {}, 'no authenticators');
  for (const l of ['edge-router-policies', 'edge-routers', 'service-policies', 'services', 'authenticators', 'enrollments']) {
    t.equal(x._links[l]?.href, `./identities/${id}/${l}`, `link ${l}`);
  }
  // Device and Service types also become Default.
  for (const type of ['Device', 'Service', 'Default']) {
    const c = await admin.post('/identities', { name: `id-type-${type}`, type, isAdmin: false });
    const cid = created(t, c, 'identities');
    t.equal((await admin.get(`/identities/${cid}`)).body.data.typeId, 'Default', `${type} → Default`);
  }
});

t.test('identity full create, tags round-trip, PUT and PATCH', async (t) => {
  const ap = await admin.post('/auth-policies', {
    name: 'id-ap',
    primary: { cert: { allowed: true, allowExpiredCerts: true }, extJwt: { allowed: false, allowedSigners: [] }, updb: { allowed: true, minPasswordLength: 5, maxAttempts: 3, lockoutDurationMinutes: 1, requireMixedCase: false, requireNumberChar: false, requireSpecialChar: false } },
    secondary: { requireTotp: false },
  });
  const apId = created(t, ap, 'auth-policies');
  const tags = { owner: 'ops', critical: true, none: null };
  // Hosting costs and precedences are keyed by the id of an existing service.
  const svc1 = created(t, await admin.post('/services', { name: 'id-hosting-svc', encryptionRequired: true }), 'services');
  const r = await admin.post('/identities', {
    name: 'id-full', type: 'Device', isAdmin: true, roleAttributes: ['zeta', 'alpha'], tags,
    appData: { team: 'a' }, authPolicyId: apId, defaultHostingCost: 42, defaultHostingPrecedence: 'required',
    externalId: 'ext-full-1', serviceHostingCosts: { [svc1]: 200 }, serviceHostingPrecedences: { [svc1]: 'failed' },
  });
  const id = created(t, r, 'identities');
  const x = (await admin.get(`/identities/${id}`)).body.data;
  t.same(x.tags, tags, 'tags round-trip');
  t.same(x.roleAttributes, ['alpha', 'zeta'], 'roleAttributes sorted');
  t.same(x.appData, { team: 'a' });
  t.equal(x.authPolicyId, apId);
  t.equal(x.authPolicy?.name, 'id-ap');
  t.equal(x.defaultHostingCost, 42);
  t.equal(x.defaultHostingPrecedence, 'required');
  t.equal(x.externalId, 'ext-full-1');
  t.equal(x.isAdmin, true);
  t.same(x.serviceHostingCosts, { [svc1]: 200 });
  t.same(x.serviceHostingPrecedences, { [svc1]: 'failed' });

  // PATCH only name: everything else stays.
  await sleep(5);
  emptyOk(t, await admin.patch(`/identities/${id}`, { name: 'id-full-2' }), 'patch name');
  const p = (await admin.get(`/identities/${id}`)).body.data;
  t.equal(p.name, 'id-full-2');
  t.same(p.roleAttributes, ['alpha', 'zeta'], 'patch keeps roleAttributes');
  t.same(p.tags, tags, 'patch keeps tags');
  t.equal(p.defaultHostingCost, 42, 'patch keeps cost');
  t.equal(p.externalId, 'ext-full-1', 'patch keeps externalId');
  t.equal(p.createdAt, x.createdAt, 'createdAt unchanged');
  t.ok(Date.parse(p.updatedAt) > Date.parse(x.updatedAt), 'updatedAt advances on patch');

  // PATCH with null = not supplied.
  emptyOk(t, await admin.patch(`/identities/${id}`, { name: null, roleAttributes: ['beta'], isAdmin: false }), 'patch roleAttributes');
  const p2 = (await admin.get(`/identities/${id}`)).body.data;
  t.equal(p2.name, 'id-full-2', 'null name keeps name');
  t.same(p2.roleAttributes, ['beta'], 'patch replaces whole list');
  t.equal(p2.isAdmin, false, 'patch isAdmin false');

  // PUT: omitted optional fields reset.
  await sleep(5);
  emptyOk(t, await admin.put(`/identities/${id}`, { name: 'id-full-3', type: 'User', isAdmin: false, isDefaultAdmin: true }), 'put');
  const u = (await admin.get(`/identities/${id}`)).body.data;
  t.equal(u.name, 'id-full-3');
  t.same(u.roleAttributes, [], 'put resets roleAttributes');
  t.same(u.tags, {}, 'put resets tags');
  t.equal(u.defaultHostingCost, 0, 'put resets cost');
  t.equal(u.defaultHostingPrecedence, 'default', 'put resets precedence');
  t.equal(u.authPolicyId, 'default', 'put resets authPolicyId');
  t.same(u.serviceHostingCosts, {}, 'put resets serviceHostingCosts');
  t.equal(u.isDefaultAdmin, false, 'isDefaultAdmin not writable');
  t.ok(Date.parse(u.updatedAt) > Date.parse(p.updatedAt), 'updatedAt advances on put');
  t.equal(u.createdAt, x.createdAt);

  // auth policy now unused → deletable.
  emptyOk(t, await admin.delete(`/auth-policies/${apId}`), 'delete unused auth policy');
});

t.test('identity permissions are checked against the known set', async (t) => {
  const before = (await admin.get('/identities?limit=1')).body.meta.pagination.totalCount;
  const bad = await admin.post('/identities', { name: 'v8', type: 'User', isAdmin: false, permissions: ['service.read', 'fly.to.moon'] });
  t.ok(isError(bad, 400, 'COULD_NOT_VALIDATE') && String(bad.body.error.cause?.field).split('.')[0] === 'permissions', `unknown permission → 400 permissions (got ${bad.status} ${bad.body?.error?.cause?.field})`);
  t.equal((await admin.get('/identities?limit=1')).body.meta.pagination.totalCount, before, 'nothing written');
  // valid permissions are accepted and returned
  const ok = await admin.post('/identities', { name: 'id-perms', type: 'User', isAdmin: false, permissions: ['service.read', 'admin_readonly'] });
  const id = created(t, ok, 'identities');
  t.same((await admin.get(`/identities/${id}`)).body.data.permissions?.slice().sort(), ['admin_readonly', 'service.read']);
  const badPatch = await admin.patch(`/identities/${id}`, { permissions: ['nope'] });
  t.ok(isError(badPatch, 400, 'COULD_NOT_VALIDATE'), 'patch unknown permission → 400');
});

t.test('identity list', async (t) => {
  const r = await admin.get('/identities?filter=name contains "id-type-"&limit=2');
  t.equal(r.status, 200);
  t.equal(r.body.data.length, 2);
  t.equal(r.body.meta.pagination.totalCount, 3);
  t.equal(r.body.meta.pagination.limit, 2);
  t.ok(Array.isArray(r.body.meta.filterableFields));
  const def = await admin.get('/identities?filter=isDefaultAdmin = true');
  t.equal(def.body.data.length, 1);
  t.equal(def.body.data[0].isDefaultAdmin, true);
});

t.test('identity types', async (t) => {
  const r = await admin.get('/identity-types');
  t.equal(r.status, 200);
  t.same(r.body.data.map((x: any) => x.name).sort(), ['Default', 'Router']);
  t.same(r.body.data.map((x: any) => x.id).sort(), ['Default', 'Router']);
  for (const x of r.body.data) base(t, x, 'identity-types');
  t.equal(r.body.meta.pagination.totalCount, 2);
  const d = await admin.get('/identity-types/Router');
  t.equal(d.status, 200);
  t.equal(d.body.data.name, 'Router');
  t.ok(isError(await admin.get('/identity-types/User'), 404, 'NOT_FOUND'), 'unknown type → 404');
  t.equal((await admin.post('/identity-types', { name: 'x' })).status, 405, 'identity types are read-only');
});

t.test('default admin cannot be deleted', async (t) => {
  const r = await admin.get('/identities?filter=isDefaultAdmin = true');
  const id = r.body.data[0].id;
  t.equal(r.body.data[0].isDefaultAdmin, true);
  const del = await admin.delete(`/identities/${id}`);
  t.ok(isError(del, 400, 'ENTITY_CAN_NOT_BE_DELETED'), `default admin delete → 400 ENTITY_CAN_NOT_BE_DELETED (${del.text.slice(0, 200)})`);
  t.equal((await admin.get(`/identities/${id}`)).status, 200, 'still there');
});

t.test('enrollments created with identities', async (t) => {
  const cert = await peerCert(srv);
  const kid = crypto.createHash('sha1').update(cert.raw).digest('hex');

  const r = await admin.post('/identities', { name: 'id-ott', type: 'User', isAdmin: false, enrollment: { ott: true } });
  const id = created(t, r, 'identities');
  const x = (await admin.get(`/identities/${id}`)).body.data;
  t.ok(x.enrollment.ott, 'enrollment.ott present');
  t.notOk(x.enrollment.updb, 'no updb');
  t.notOk(x.enrollment.ottca, 'no ottca');
  hasFields(t, x.enrollment.ott, { id: 'string', jwt: 'string', token: 'string', expiresAt: 'string' }, 'enrollment.ott');
  const exp = Date.parse(x.enrollment.ott.expiresAt);
  t.ok(Math.abs(exp - (Date.now() + 180 * 60_000)) < 5 * 60_000, 'default expiry ≈ now + 180 min');

  const j = decodeJwt(x.enrollment.ott.jwt);
  t.equal(j.header.kid, kid, 'kid = sha1 of server cert');
  t.ok(['ES256', 'ES384', 'ES512', 'RS256'].includes(j.header.alg), 'alg');
  t.equal(j.claims.em, 'ott');
  t.equal(j.claims.sub, id);
  t.equal(j.claims.jti, x.enrollment.ott.token);
  t.match(j.claims.jti, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, 'token UUIDv4');
  t.equal(j.claims.iss, `https://127.0.0.1:${srv.certPort}`, 'iss: the certificate listener');
  t.same(j.claims.aud, [''], 'aud');
  t.equal(j.claims.exp, Math.floor(exp / 1000), 'exp = expiresAt');
  t.ok(Array.isArray(j.claims.ctrls) && j.claims.ctrls.length > 0 && j.claims.ctrls.every((c: any) => typeof c === 'string'), 'ctrls');
  const hash = { ES256: 'sha256', ES384: 'sha384', ES512: 'sha512', RS256: 'sha256' }[j.header.alg as string] ?? 'sha256';
  const verified = crypto.verify(hash, Buffer.from(j.input), j.header.alg.startsWith('ES') ? { key: cert.publicKey, dsaEncoding: 'ieee-p1363' } : cert.publicKey, j.sig);
  t.ok(verified, 'JWT signature verifies against the server certificate');

  // enrollment list/detail
  const list = await admin.get(`/enrollments?filter=identity="${id}"`);
  t.equal(list.status, 200);
  t.equal(list.body.data.length, 1);
  const sub = await admin.get(`/identities/${id}/enrollments`);
  t.equal(sub.status, 200);
  t.equal(sub.body.data.length, 1, 'identity enrollments sub-list');
  const eid = x.enrollment.ott.id;
  const e = await admin.get(`/enrollments/${eid}`);
  t.equal(e.status, 200);
  base(t, e.body.data, 'enrollments');
  hasFields(t, e.body.data, { method: 'string', token: 'string', jwt: 'string', expiresAt: 'string', identityId: 'string', identity: 'object' }, 'enrollmentDetail');
  t.equal(e.body.data.method, 'ott');
  t.equal(e.body.data.identityId, id);
  t.match(e.body.data.identity, { id, name: 'id-ott', entity: 'identities' });
  t.equal(e.body.data.token, x.enrollment.ott.token);
  t.match(e.body.data.expiresAt, RFC3339);

  // updb
  const u = await admin.post('/identities', { name: 'id-updb', type: 'User', isAdmin: false, enrollment: { updb: 'updb-user-1' } });
  const uid = created(t, u, 'identities');
  const ux = (await admin.get(`/identities/${uid}`)).body.data;
  t.ok(ux.enrollment.updb, 'enrollment.updb');
  t.notOk(ux.enrollment.ott, 'no ott');
  hasFields(t, ux.enrollment.updb ?? {}, { id: 'string', jwt: 'string', token: 'string', expiresAt: 'string' }, 'enrollment.updb');
  const uj = decodeJwt(ux.enrollment.updb.jwt);
  t.equal(uj.claims.em, 'updb');
  t.equal(uj.claims.sub, uid);
  t.equal(uj.claims.jti, ux.enrollment.updb.token);
  const ue = (await admin.get(`/enrollments/${ux.enrollment.updb.id}`)).body.data;
  t.equal(ue.method, 'updb');
  t.equal(ue.username, 'updb-user-1', 'updb enrollment username');

  // bad enrollment on create
  const bad = await admin.post('/identities', { name: 'id-bad-enr', type: 'User', isAdmin: false, enrollment: { ottca: 'no-such-ca' } });
  t.equal(bad.status, 400, 'ottca unknown CA → 400');
  t.equal((await admin.get('/identities?filter=name="id-bad-enr"')).body.data.length, 0, 'nothing written');

  // PUT never changes the enrollment section
  emptyOk(t, await admin.put(`/identities/${id}`, { name: 'id-ott', type: 'User', isAdmin: false }), 'put identity with enrollment');
  t.equal((await admin.get(`/identities/${id}`)).body.data.enrollment?.ott?.id, eid, 'enrollment kept after PUT');

  // delete enrollment
  emptyOk(t, await admin.delete(`/enrollments/${eid}`), 'delete enrollment');
  t.ok(isError(await admin.get(`/enrollments/${eid}`), 404, 'NOT_FOUND'), 'enrollment gone');
  t.same((await admin.get(`/identities/${id}`)).body.data.enrollment, {}, 'identity has no enrollment');
  t.ok(isError(await admin.delete(`/enrollments/${eid}`), 404, 'NOT_FOUND'), 'second delete 404');

  // enrollment creation (the full matrix is in test/enroll-admin.test.ts)
  const ce = await admin.post('/enrollments', { identityId: id, method: 'ott', expiresAt: new Date(Date.now() + 3600_000).toISOString() });
  created(t, ce, 'enrollments');
});

t.test('deleting an identity cleans up what points at it', async (t) => {
  const r = await admin.post('/identities', { name: 'id-doomed', type: 'User', isAdmin: false, enrollment: { ott: true } });
  const id = created(t, r, 'identities');
  const other = created(t, await admin.post('/identities', { name: 'id-other', type: 'User', isAdmin: false }), 'identities');
  const auth = await admin.post('/authenticators', { identityId: id, method: 'updb', username: 'doomed-user', password: 'doomed-pass-1' });
  const authId = created(t, auth, 'authenticators');
  const userClient = await srv.login('doomed-user', 'doomed-pass-1', 'client');
  t.equal((await userClient.get('/current-identity')).status, 200, 'doomed user logged in');
  const sessions = await admin.get(`/api-sessions?filter=identity="${id}"`);
  t.equal(sessions.body.data.length, 1, 'one api session');
  const asId = sessions.body.data[0].id;
  t.equal((await admin.get(`/identities/${id}`)).body.data.hasApiSession, true, 'hasApiSession true');

  const sp = created(t, await admin.post('/service-policies', { name: 'id-del-sp', type: 'Dial', semantic: 'AnyOf', identityRoles: [`@${id}`, `@${other}`, '#x'], serviceRoles: ['#all'] }), 'service-policies');
  const erp = created(t, await admin.post('/edge-router-policies', { name: 'id-del-erp', semantic: 'AllOf', identityRoles: [`@${id}`], edgeRouterRoles: ['#all'] }), 'edge-router-policies');
  const enrollmentId = (await admin.get(`/identities/${id}`)).body.data.enrollment.ott.id;

  emptyOk(t, await admin.delete(`/identities/${id}`), 'delete identity');
  t.ok(isError(await admin.get(`/identities/${id}`), 404, 'NOT_FOUND'), 'identity gone');
  t.same((await admin.get(`/service-policies/${sp}`)).body.data.identityRoles, ['#x', `@${other}`].sort(), '@id removed from service policy');
  t.same((await admin.get(`/edge-router-policies/${erp}`)).body.data.identityRoles, [], '@id removed from edge router policy');
  t.ok(isError(await admin.get(`/authenticators/${authId}`), 404, 'NOT_FOUND'), 'authenticator gone');
  t.ok(isError(await admin.get(`/enrollments/${enrollmentId}`), 404, 'NOT_FOUND'), 'enrollment gone');
  t.ok(isError(await admin.get(`/api-sessions/${asId}`), 404, 'NOT_FOUND'), 'api session gone');
  t.ok(isError(await userClient.get('/current-identity'), 401, 'UNAUTHORIZED'), 'token no longer valid');
});

t.test('policy-derived identity sub-lists answer', async (t) => {
  const id = created(t, await admin.post('/identities', { name: 'id-pend', type: 'User', isAdmin: false }), 'identities');
  for (const p of ['service-policies', 'edge-routers', 'edge-router-policies', 'services', 'service-configs', 'posture-data', 'failed-service-requests']) {
    const r = await admin.get(`/identities/${id}/${p}`);
    t.equal(r.status, 200, `/identities/{id}/${p} → 200 (${r.status})`);
  }
  const a = await admin.get(`/identities/${id}/authenticators`);
  t.equal(a.status, 200, 'authenticators sub-list implemented');
  t.same(a.body.data, []);
});
