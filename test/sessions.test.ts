/**
 * API sessions, sessions and controller settings (Management API) against the real controller.
 */
import t, { type Test } from 'tap';
import { startServer, isError, sessionIdOf, type Client, type Res, type Server } from './helpers/server.js';
import { RFC3339, base, created, emptyOk, get, hasFields, kind, sleep, type Tap } from './helpers/assert.js';



let srv: Server;
let admin: Client;

t.before(async () => {
  srv = await startServer(t);
  admin = await srv.login();
});

t.test('api sessions: list, detail, delete', async (t) => {
  const ident = created(t, await admin.post('/identities', { name: 'as-user', type: 'User', isAdmin: false }), 'identities');
  const authId = created(t, await admin.post('/authenticators', { identityId: ident, method: 'updb', username: 'as-user-1', password: 'as-pass-123' }), 'authenticators');
  t.equal((await get(admin, `/identities/${ident}`)).hasApiSession, false, 'no api session yet');

  const u1 = await srv.login('as-user-1', 'as-pass-123', 'client');
  const u2 = await srv.login('as-user-1', 'as-pass-123', 'management');
  t.equal((await get(admin, `/identities/${ident}`)).hasApiSession, true, 'hasApiSession after login');

  // non-admin on management api-sessions → 401
  t.ok(isError(await u2.get('/api-sessions'), 401, 'UNAUTHORIZED'), 'non-admin list → 401');

  const list = await admin.get('/api-sessions?limit=-1');
  t.equal(list.status, 200);
  t.ok(Array.isArray(list.body.data));
  const ids = list.body.data.map((s: any) => s.id);
  t.ok(ids.includes(sessionIdOf(admin.token!)), 'admin login listed');
  t.ok(ids.includes(sessionIdOf(u1.token!)), 'user client login listed');
  t.ok(ids.includes(sessionIdOf(u2.token!)), 'user management login listed');
  t.notOk(list.body.data.some((s: any) => [admin.token, u1.token, u2.token].includes(s.token)), 'no listed token is a usable token');
  t.ok(list.body.meta.pagination.totalCount >= 3);
  t.ok(Array.isArray(list.body.meta.filterableFields));

  const mine = await admin.get(`/api-sessions?filter=identity="${ident}"`);
  t.equal(mine.body.data.length, 2, 'filter identity=');
  const s1 = mine.body.data.find((s: any) => s.id === sessionIdOf(u1.token!));
  t.ok(s1, 'client session found by filter');

  const d = await admin.get(`/api-sessions/${s1.id}`);
  t.equal(d.status, 200);
  const x = d.body.data;
  base(t, x, 'api-sessions');
  hasFields(t, x, {
    authQueries: 'array', authenticatorId: 'string', configTypes: 'array', identity: 'object', identityId: 'string', ipAddress: 'string',
    isCertExtendable: 'boolean', isMfaComplete: 'boolean', isMfaRequired: 'boolean', token: 'string', lastActivityAt: 'string', cachedLastActivityAt: 'string',
  }, 'apiSessionDetail');
  t.match(x.token, /^[A-Za-z0-9_-]{43}$/, 'token shown as its SHA-256 digest, not the token');
  t.not(x.token, u1.token, 'not the token itself');
  t.equal(x.identityId, ident);
  t.match(x.identity, { id: ident, name: 'as-user', entity: 'identities' });
  t.equal(x.authenticatorId, authId);
  t.same(x.authQueries, []);
  t.same(x.configTypes, []);
  t.equal(x.isMfaRequired, false);
  t.equal(x.isCertExtendable, false);
  t.match(x.ipAddress, /127\.0\.0\.1/);
  t.match(x.lastActivityAt, RFC3339);
  t.equal(x._links?.sessions?.href, `./api-sessions/${s1.id}/sessions`, 'sessions link');
  t.ok(isError(await admin.get('/api-sessions/no-such-session'), 404, 'NOT_FOUND'), 'unknown id → 404');

  // delete one session: its token stops working, the other keeps working
  emptyOk(t, await admin.delete(`/api-sessions/${s1.id}`), 'delete api session');
  t.ok(isError(await admin.get(`/api-sessions/${s1.id}`), 404, 'NOT_FOUND'), 'detail after delete → 404');
  const dead = await u1.get('/current-identity');
  t.ok(isError(dead, 401, 'UNAUTHORIZED'), `deleted session token → 401 (${dead.status})`);
  t.equal((await u2.get('/current-identity')).status, 200, 'other session still valid');
  t.equal((await get(admin, `/identities/${ident}`)).hasApiSession, true, 'still has one session');
  t.ok(isError(await admin.delete(`/api-sessions/${s1.id}`), 404, 'NOT_FOUND'), 'delete again → 404');

  // logout removes it from the list
  const s2 = mine.body.data.find((s: any) => s.id === sessionIdOf(u2.token!));
  emptyOk(t, await u2.delete('/current-api-session'), 'logout');
  t.ok(isError(await admin.get(`/api-sessions/${s2.id}`), 404, 'NOT_FOUND'), 'logged-out session gone');
  t.equal((await get(admin, `/identities/${ident}`)).hasApiSession, false, 'hasApiSession false after both end');

  // login with config types records their ids
  const ct = created(t, await admin.post('/config-types', { name: 'as-ct' }), 'config-types');
  const r = await srv.client.post('/authenticate?method=password', { username: 'as-user-1', password: 'as-pass-123', configTypes: ['as-ct'] });
  t.equal(r.status, 200);
  const s3 = (await admin.get(`/api-sessions?filter=identity="${ident}"`)).body.data[0];
  t.same(s3?.configTypes, [ct], 'configTypes resolved to ids');
});

t.test('deleting an admin session ends it', async (t) => {
  const other = await srv.login();
  const sessions = (await admin.get('/api-sessions?limit=-1')).body.data;
  const s = sessions.find((x: any) => x.id === sessionIdOf(other.token!));
  emptyOk(t, await admin.delete(`/api-sessions/${s.id}`), 'delete admin session');
  t.ok(isError(await other.get('/identities'), 401, 'UNAUTHORIZED'), 'admin token now 401 on management');
  t.equal((await admin.get('/identities')).status, 200, 'own session fine');
});

t.test('sessions', async (t) => {
  const r = await admin.get('/sessions');
  t.equal(r.status, 200);
  t.same(r.body.data, [], 'no sessions');
  t.equal(r.body.meta.pagination.totalCount, 0);
  t.equal(r.body.meta.pagination.offset, 0);
  t.equal(r.body.meta.pagination.limit, 10);
  t.ok(Array.isArray(r.body.meta.filterableFields));
  t.ok(isError(await admin.get('/sessions/nope'), 404, 'NOT_FOUND'), 'detail unknown → 404');
  t.ok(isError(await admin.delete('/sessions/nope'), 404, 'NOT_FOUND'), 'delete unknown → 404');
  const rp = await admin.get('/sessions/nope/route-path');
  t.ok(isError(rp, 404, 'NOT_FOUND'), `route-path of an unknown session → 404 (${rp.status})`);
  t.ok(isError(await admin.get('/sessions?filter=bogus ==='), 400, 'INVALID_FILTER'), 'bad filter → 400');
});

t.test('controller settings', async (t) => {
  const body = { controllerId: 'ctrl-a', oidc: { redirectUris: ['https://a.example/cb'], postLogoutUris: ['https://a.example/out'] }, tags: { site: 'a' } };
  const r = await admin.post('/controller-settings', body);
  const id = created(t, r, 'controller-settings');
  t.equal(id, 'ctrl-a', 'id is the controller id');

  const d = await admin.get('/controller-settings/ctrl-a');
  t.equal(d.status, 200);
  base(t, d.body.data, 'controller-settings');
  t.same(d.body.data.oidc, body.oidc, 'oidc echoed');
  t.same(d.body.data.tags, { site: 'a' });

  const l = await admin.get('/controller-settings');
  t.equal(l.status, 200);
  t.ok(l.body.data.some((x: any) => x.id === 'ctrl-a'), 'listed');

  const dup = await admin.post('/controller-settings', body);
  t.ok(isError(dup, 400, 'COULD_NOT_VALIDATE'), `duplicate controllerId → 400 (${dup.status})`);
  const missing = await admin.post('/controller-settings', { oidc: {} });
  t.ok(isError(missing, 400, 'COULD_NOT_VALIDATE'), 'missing controllerId → 400');
  t.ok(isError(await admin.get('/controller-settings/ctrl-none'), 404, 'NOT_FOUND'), 'unknown detail → 404');

  // global settings and effective view
  emptyOk(t, await admin.put('/controller-settings/global/effective', { oidc: { redirectUris: ['https://global.example/cb'] } }), 'put global');
  emptyOk(t, await admin.put('/controller-settings/ctrl-a/effective', { oidc: { postLogoutUris: ['https://a2.example/out'] } }), 'put instance');
  const e = await admin.get('/controller-settings/ctrl-a/effective');
  t.equal(e.status, 200);
  const ed = e.body.data;
  base(t, ed, 'controller-settings');
  // Spec: controllerSettingEffective = baseEntity + {effective: controllerSettings, instance: controllerSettings}.
  hasFields(t, ed, { effective: 'object', instance: 'object' }, 'controllerSettingEffective');
  const eff = ed.effective ?? ed;
  t.same(eff.oidc?.redirectUris, ['https://global.example/cb'], 'effective inherits global redirectUris');
  t.same(eff.oidc?.postLogoutUris, ['https://a2.example/out'], 'effective has instance postLogoutUris');
  if (ed.instance) t.same(ed.instance.oidc, { postLogoutUris: ['https://a2.example/out'] }, 'instance settings');

  // PUT replaced the instance oidc
  const afterPut = await get(admin, '/controller-settings/ctrl-a');
  t.same(afterPut.oidc, { postLogoutUris: ['https://a2.example/out'] }, 'put replaces oidc');
  t.same(afterPut.tags, {}, 'put resets tags');
  t.ok(Date.parse(afterPut.updatedAt) >= Date.parse(d.body.data.updatedAt), 'updatedAt not before');

  // PATCH merges
  await sleep(5);
  emptyOk(t, await admin.patch('/controller-settings/ctrl-a/effective', { oidc: { redirectUris: ['https://a3.example/cb'] } }), 'patch instance');
  const afterPatch = await get(admin, '/controller-settings/ctrl-a');
  t.same(afterPatch.oidc, { postLogoutUris: ['https://a2.example/out'], redirectUris: ['https://a3.example/cb'] }, 'patch merges oidc');
  t.ok(Date.parse(afterPatch.updatedAt) > Date.parse(afterPut.updatedAt), 'updatedAt advances');
  const e2 = await get(admin, '/controller-settings/ctrl-a/effective');
  t.same((e2.effective ?? e2).oidc?.redirectUris, ['https://a3.example/cb'], 'instance overrides global');

  // global effective
  const g = await admin.get('/controller-settings/global/effective');
  t.equal(g.status, 200);
  t.same((g.body.data.effective ?? g.body.data).oidc?.redirectUris, ['https://global.example/cb']);

  // unknown controller
  t.ok(isError(await admin.get('/controller-settings/ctrl-none/effective'), 404, 'NOT_FOUND'), 'effective unknown → 404');
  t.ok(isError(await admin.put('/controller-settings/ctrl-none/effective', { oidc: {} }), 404, 'NOT_FOUND'), 'put unknown → 404');
  t.ok(isError(await admin.patch('/controller-settings/ctrl-none/effective', { oidc: {} }), 404, 'NOT_FOUND'), 'patch unknown → 404');

  // delete
  emptyOk(t, await admin.delete('/controller-settings/ctrl-a/effective'), 'delete instance settings');
  t.ok(isError(await admin.get('/controller-settings/ctrl-a'), 404, 'NOT_FOUND'), 'gone');
  t.notOk((await admin.get('/controller-settings')).body.data.some((x: any) => x.id === 'ctrl-a'), 'not listed');
  created(t, await admin.post('/controller-settings', body), 'controller-settings');
});
