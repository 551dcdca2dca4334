/**
 * The controllers list (this controller: stable id across restarts, name, addresses, version,
 * online), controller settings (global, per controller, effective: what applies to this
 * controller) and identity tracing (stored, reported, validated). Real server.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { startServer, isError } from './helpers/server.js';

const srv = await startServer(t, { keepData: true });
t.teardown(() => fs.rmSync(srv.dataDir, { recursive: true, force: true }));
const admin = await srv.login();

t.test('the controllers list reports this controller', async (t) => {
  const r = await admin.get('/controllers');
  t.equal(r.status, 200);
  t.equal(r.body.data.length, 1);
  t.same(r.body.meta.pagination, { limit: 10, offset: 0, totalCount: 1 });
  const c = r.body.data[0];
  const id = fs.readFileSync(path.join(srv.dataDir, 'controller.id'), 'utf8').trim();
  t.equal(c.id, id, 'id is the stable controller id kept in the data directory');
  t.equal(c.name, `127.0.0.1:${srv.port}`);
  t.equal(c.isOnline, true);
  t.equal(c.isPreferredLeader, true);
  const serverPem = fs.readFileSync(path.join(srv.dataDir, 'pki', 'server.cert.pem'), 'utf8');
  t.equal(c.fingerprint, crypto.createHash('sha1').update(new crypto.X509Certificate(serverPem).raw).digest('hex'), 'fingerprint of the TLS certificate');
  t.match(c.certPem, /BEGIN CERTIFICATE/);
  t.equal(c.ctrlAddress, `wss://127.0.0.1:${srv.port}/ctrl/v1`, 'where routers connect');
  t.same(c.apiAddresses['edge-client'], [{ url: `https://127.0.0.1:${srv.port}/edge/client/v1`, version: 'v1' }]);
  t.same(c.apiAddresses['edge-management'], [{ url: `https://127.0.0.1:${srv.port}/edge/management/v1`, version: 'v1' }]);
  const version = (await srv.raw('GET', '/version')).body.data;
  t.equal(c.versionInfo.version, version.version, 'the build version');
  t.equal(c.versionInfo.revision, version.revision);
  t.ok(!Number.isNaN(Date.parse(c.lastJoinedAt)));

  const client = await srv.login(undefined, undefined, 'client');
  const cr = await client.get('/controllers');
  t.equal(cr.status, 200, 'client API too');
  t.equal(cr.body.data[0].id, id);
  t.equal((await srv.client.get('/controllers')).status, 401, 'needs a session');

  t.equal((await admin.get('/controllers?filter=' + encodeURIComponent('isOnline = true'))).body.data.length, 1);
  const none = await admin.get('/controllers?filter=' + encodeURIComponent('name = "elsewhere"'));
  t.equal(none.body.data.length, 0, 'filter applies');
  t.equal(none.body.meta.pagination.totalCount, 0);
  t.equal((await admin.get('/controllers?offset=1')).body.data.length, 0, 'offset applies');
  t.ok(isError(await admin.get('/controllers?filter=' + encodeURIComponent('nosuchfield = 1')), 400, 'INVALID_FILTER'));
});

t.test('controller settings: global, this controller, effective', async (t) => {
  const ctrlId = (await admin.get('/controllers')).body.data[0].id;
  const list = await admin.get('/controller-settings');
  t.equal(list.status, 200);
  t.ok(list.body.data.some((s: any) => s.id === 'global'), 'the global settings always exist');
  t.equal((await admin.get('/controller-settings/global')).status, 200);

  let eff = await admin.get(`/controller-settings/${ctrlId}/effective`);
  t.equal(eff.status, 200, 'this controller has effective settings without a record of its own');
  t.same(eff.body.data.effective, { oidc: {} });
  t.equal(eff.body.data.id, ctrlId);

  t.equal((await admin.patch('/controller-settings/global/effective', { oidc: { redirectUris: ['https://app.example/cb'], postLogoutUris: ['https://app.example/bye'] } })).status, 200);
  eff = await admin.get(`/controller-settings/${ctrlId}/effective`);
  t.same(eff.body.data.effective.oidc, { redirectUris: ['https://app.example/cb'], postLogoutUris: ['https://app.example/bye'] }, 'global applies');
  t.same(eff.body.data.instance.oidc, {}, 'nothing of its own yet');

  // Own settings override key by key; created on first write for this controller.
  t.equal((await admin.put(`/controller-settings/${ctrlId}/effective`, { oidc: { redirectUris: ['https://mine.example/cb', 'https://mine.example/cb', 'myapp://callback'] }, tags: { site: 'a' } })).status, 200);
  eff = await admin.get(`/controller-settings/${ctrlId}/effective`);
  t.same(eff.body.data.effective.oidc, { redirectUris: ['https://mine.example/cb', 'myapp://callback'], postLogoutUris: ['https://app.example/bye'] }, 'own redirectUris win, global postLogoutUris stay; duplicates dropped');
  t.same(eff.body.data.instance.oidc, { redirectUris: ['https://mine.example/cb', 'myapp://callback'] });
  const own = await admin.get(`/controller-settings/${ctrlId}`);
  t.equal(own.status, 200);
  t.same(own.body.data.tags, { site: 'a' });

  // PATCH keeps what it does not name.
  t.equal((await admin.patch(`/controller-settings/${ctrlId}/effective`, { oidc: { postLogoutUris: ['https://mine.example/out'] } })).status, 200);
  eff = await admin.get(`/controller-settings/${ctrlId}/effective`);
  t.same(eff.body.data.effective.oidc, { redirectUris: ['https://mine.example/cb', 'myapp://callback'], postLogoutUris: ['https://mine.example/out'] });

  // Bad values: 400 with the field, nothing written.
  for (const bad of [['not a uri'], ['/relative/path'], ['https://'], [''], ['x'.repeat(3000)], Array.from({ length: 101 }, (_, i) => `https://h${i}.example/`)]) {
    const r = await admin.patch(`/controller-settings/${ctrlId}/effective`, { oidc: { redirectUris: bad } });
    t.ok(isError(r, 400, 'COULD_NOT_VALIDATE'), `redirectUris ${JSON.stringify(bad).slice(0, 40)} → 400`);
    t.equal(r.body.error.cause?.field, 'oidc.redirectUris');
  }
  t.ok(isError(await admin.patch(`/controller-settings/${ctrlId}/effective`, { oidc: { redirectUris: 'https://a.example' } }), 400, 'COULD_NOT_VALIDATE'));
  t.same((await admin.get(`/controller-settings/${ctrlId}/effective`)).body.data.effective.oidc.redirectUris, ['https://mine.example/cb', 'myapp://callback'], 'unchanged');

  // Unknown keys under oidc are not stored.
  t.equal((await admin.patch('/controller-settings/global/effective', { oidc: { somethingElse: ['x'] } })).status, 200);
  t.notOk('somethingElse' in (await admin.get('/controller-settings/global')).body.data.oidc);

  // Another controller's settings; unknown controllers are 404.
  t.equal((await admin.post('/controller-settings', { controllerId: 'peer-1', oidc: { redirectUris: ['https://peer.example/cb'] } })).status, 201);
  t.ok(isError(await admin.post('/controller-settings', { controllerId: 'peer-1' }), 400, 'COULD_NOT_VALIDATE'), 'duplicate');
  t.ok(isError(await admin.post('/controller-settings', { controllerId: 'bad id!' }), 400, 'COULD_NOT_VALIDATE'), 'bad id');
  t.ok(isError(await admin.post('/controller-settings', { controllerId: 'peer-2', oidc: { postLogoutUris: ['nope'] } }), 400, 'COULD_NOT_VALIDATE'));
  t.same((await admin.get('/controller-settings/peer-1/effective')).body.data.effective.oidc, { redirectUris: ['https://peer.example/cb'], postLogoutUris: ['https://app.example/bye'] });
  t.equal((await admin.get('/controller-settings/nobody/effective')).status, 404);
  t.equal((await admin.put('/controller-settings/nobody/effective', { oidc: {} })).status, 404);
  t.equal((await admin.delete('/controller-settings/nobody/effective')).status, 404);

  // Delete this controller's own settings: the global ones apply again.
  t.equal((await admin.delete(`/controller-settings/${ctrlId}/effective`)).status, 200);
  eff = await admin.get(`/controller-settings/${ctrlId}/effective`);
  t.same(eff.body.data.effective.oidc, { redirectUris: ['https://app.example/cb'], postLogoutUris: ['https://app.example/bye'] });
  // "Deleting" global resets it.
  t.equal((await admin.delete('/controller-settings/global/effective')).status, 200);
  t.same((await admin.get('/controller-settings/global/effective')).body.data.effective.oidc, {});
  t.equal((await admin.get('/controller-settings/global')).status, 200, 'global still exists');
});

t.test('identity tracing stores and reports its state', async (t) => {
  const id = (await admin.post('/identities', { name: 'traced', type: 'User', isAdmin: false })).body.data.id;
  const before = (await admin.get(`/identities/${id}`)).body.data;
  const t0 = Date.now();
  let r = await admin.put(`/identities/${id}/trace`, { enabled: true, duration: '1h30m', traceId: 'trace-1', channels: ['edge', 'xgress', 'edge'] });
  t.equal(r.status, 200);
  t.equal(r.body.data.enabled, true);
  t.equal(r.body.data.traceId, 'trace-1');
  const until = Date.parse(r.body.data.until);
  t.ok(until >= t0 + 90 * 60_000 - 1000 && until <= Date.now() + 90 * 60_000 + 1000, 'until = now + 1h30m');
  t.equal((await admin.get(`/identities/${id}`)).body.data.updatedAt, before.updatedAt, 'tracing is not an edit of the identity');

  // Extending keeps the trace id unless a new one is given.
  r = await admin.put(`/identities/${id}/trace`, { enabled: true, duration: '250ms' });
  t.equal(r.body.data.traceId, 'trace-1', 'trace id kept');
  await new Promise((res) => setTimeout(res, 300));
  r = await admin.put(`/identities/${id}/trace`, { enabled: true, duration: '2m' });
  t.not(r.body.data.traceId, 'trace-1', 'an expired trace does not lend its id to a new one');
  t.match(r.body.data.traceId, /^[0-9a-f-]{36}$/);

  r = await admin.put(`/identities/${id}/trace`, { enabled: true });
  t.ok(Date.parse(r.body.data.until) - Date.now() > 9 * 60_000, 'default duration 10m');

  r = await admin.put(`/identities/${id}/trace`, { enabled: false });
  t.equal(r.status, 200);
  t.equal(r.body.data.enabled, false, 'disabled');
  t.ok(Date.parse(r.body.data.until) <= Date.now(), 'until is now');

  for (const duration of ['abc', '10', '0s', '-5m', '9000h', '1h30', '', 'h']) {
    const bad = await admin.put(`/identities/${id}/trace`, { enabled: true, duration });
    t.ok(isError(bad, 400, 'COULD_NOT_VALIDATE'), `duration ${JSON.stringify(duration)} → 400`);
    t.equal(bad.body.error.cause?.field, 'duration');
  }
  t.ok(isError(await admin.put(`/identities/${id}/trace`, { enabled: true, duration: '1m', traceId: 'x'.repeat(200) }), 400, 'COULD_NOT_VALIDATE'));
  t.ok(isError(await admin.put(`/identities/${id}/trace`, { enabled: true, duration: '1m', channels: [''] }), 400, 'COULD_NOT_VALIDATE'));
  t.equal((await admin.put('/identities/no-such-identity/trace', { enabled: true, duration: '1m' })).status, 404);
  for (const duration of ['1.5h', '90s', '2h45m30s', '500ms', '.5h']) {
    t.equal((await admin.put(`/identities/${id}/trace`, { enabled: true, duration })).status, 200, `duration ${duration}`);
  }
});

t.test('the controller id survives a restart', async (t) => {
  const before = (await admin.get('/controllers')).body.data[0].id;
  await srv.stop();
  const again = await startServer(t, { dataDir: srv.dataDir, keepData: true });
  const a2 = await again.login();
  t.equal((await a2.get('/controllers')).body.data[0].id, before);
});
