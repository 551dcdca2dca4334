/**
 * Process lifecycle: restart keeps data and keys, SIGTERM exits cleanly with requests in flight,
 * the generated admin password is printed exactly once, and secrets never reach the logs.
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { startServer, isError, ADMIN_PASSWORD, type Res } from './helpers/server.js';

t.test('restart keeps data and keys', async (t) => {
  const first = await startServer(t, { keepData: true });
  const dataDir = first.dataDir;
  const caBefore = fs.readFileSync(path.join(dataDir, 'pki', 'ca-bundle.pem'), 'utf8');
  const a1 = await first.login();
  const ident = await a1.post('/identities', { name: 'survivor', type: 'User', isAdmin: false, roleAttributes: ['keep'], tags: { k: 'v' } });
  t.equal(ident.status, 201);
  const user = await a1.post('/identities', { name: 'survivor-user', type: 'User', isAdmin: false });
  t.equal(user.status, 201);
  const auth = await a1.post('/authenticators', { method: 'updb', identityId: user.body.data.id, username: 'survivor-user', password: 'survivor-pass-1' });
  t.equal(auth.status, 201);
  const svc = await a1.post('/services', { name: 'survivor-svc', encryptionRequired: true });
  t.equal(svc.status, 201);
  const ct = await a1.post('/config-types', { name: 'survivor-ct', schema: { type: 'object', properties: { port: { type: 'integer' } }, required: ['port'] } });
  t.equal(ct.status, 201);
  const cfg = await a1.post('/configs', { name: 'survivor-cfg', configTypeId: ct.body.data.id, data: { port: 22 } });
  t.equal(cfg.status, 201);
  const pol = await a1.post('/service-policies', { name: 'survivor-sp', type: 'Dial', semantic: 'AnyOf', identityRoles: ['#keep'], serviceRoles: [`@${svc.body.data.id}`] });
  t.equal(pol.status, 201);
  const patched = await a1.patch(`/identities/${ident.body.data.id}`, { tags: { k: 'patched' } });
  t.equal(patched.status, 200);
  const countBefore = (await a1.get('/identities')).body.meta.pagination.totalCount;
  const oldToken = a1.token;

  const code = await first.stop();
  t.equal(code, 0, 'clean exit on SIGTERM');

  const second = await startServer(t, { dataDir });
  const caAfter = fs.readFileSync(path.join(dataDir, 'pki', 'ca-bundle.pem'), 'utf8');
  t.equal(caAfter, caBefore, 'same CA bundle');
  t.equal(second.ca, caBefore, 'server certificate still chains to the old CA (harness verified TLS)');
  const a2 = await second.login(); // the same admin password still works
  t.ok(a2.token, 'admin login after restart');
  t.notOk(/created the default admin/.test(second.output), 'no second default admin on restart');
  const i2 = await a2.get(`/identities/${ident.body.data.id}`);
  t.equal(i2.status, 200);
  t.equal(i2.body.data.name, 'survivor');
  t.same(i2.body.data.roleAttributes, ['keep']);
  t.same(i2.body.data.tags, { k: 'patched' }, 'the patch survived');
  t.equal(i2.body.data.createdAt, ident.body.data.createdAt ?? i2.body.data.createdAt);
  const s2 = await a2.get(`/services/${svc.body.data.id}`);
  t.equal(s2.status, 200);
  t.equal(s2.body.data.name, 'survivor-svc');
  const c2 = await a2.get(`/configs/${cfg.body.data.id}`);
  t.equal(c2.status, 200);
  t.same(c2.body.data.data, { port: 22 });
  const ct2 = await a2.get(`/config-types/${ct.body.data.id}`);
  t.equal(ct2.status, 200);
  // The schema still validates after a restart.
  const badCfg = await a2.post('/configs', { name: 'bad-after-restart', configTypeId: ct.body.data.id, data: { port: 'x' } });
  t.ok(isError(badCfg, 400, 'COULD_NOT_VALIDATE'), 'config type schema still enforced');
  const p2 = await a2.get(`/service-policies/${pol.body.data.id}`);
  t.equal(p2.status, 200);
  t.same(p2.body.data.identityRoles, ['#keep']);
  t.equal((await a2.get('/identities')).body.meta.pagination.totalCount, countBefore, 'same number of identities');
  const dup = await a2.post('/identities', { name: 'survivor', type: 'User', isAdmin: false });
  t.ok(isError(dup, 400, 'COULD_NOT_VALIDATE'), 'unique name index survived');
  const userLogin = await second.login('survivor-user', 'survivor-pass-1');
  t.ok(userLogin.token, 'updb authenticator survived');
  // API sessions survive a restart (upstream keeps them in the store).
  const old = await second.mgmt.get('/current-api-session', { headers: { 'zt-session': oldToken! } });
  t.equal(old.status, 200, 'API session from before the restart is still valid');
});

t.test('SIGTERM exits 0 within 15 s with requests in flight', async (t) => {
  const srv = await startServer(t);
  const a = await srv.login();
  const results: Array<{ what: string; r?: Res; err?: Error }> = [];
  const inflight: Promise<void>[] = [];
  for (let i = 0; i < 60; i++) {
    const what = i % 3 === 0 ? 'POST /identities' : i % 3 === 1 ? 'GET /identities?limit=100' : 'POST /authenticate?method=password';
    const p = (i % 3 === 0
      ? a.post('/identities', { name: `inflight-${i}`, type: 'User', isAdmin: false })
      : i % 3 === 1
        ? a.get('/identities?limit=100')
        : srv.mgmt.post('/authenticate?method=password', { username: 'admin', password: ADMIN_PASSWORD }))
      .then((r) => void results.push({ what, r }))
      .catch((err: Error) => void results.push({ what, err }));
    inflight.push(p);
  }
  await new Promise((r) => setTimeout(r, 15));
  const started = Date.now();
  const exited = new Promise<number | null>((resolve) => srv.proc.once('exit', (code) => resolve(code)));
  srv.proc.kill('SIGTERM');
  const code = await Promise.race([exited, new Promise<string>((r) => setTimeout(() => r('timeout'), 15_000))]);
  const elapsed = Date.now() - started;
  await Promise.all(inflight);
  t.equal(code, 0, `exit code 0 (${String(code)})`);
  t.ok(elapsed < 15_000, `stopped in ${elapsed} ms`);
  const responses = results.filter((x) => x.r);
  t.ok(responses.length > 0, `${responses.length} of 60 requests answered`);
  for (const { what, r } of responses) t.ok(r!.status < 500, `in-flight ${what} not 5xx (${r!.status} ${r!.text.slice(0, 300)})`);
  t.notMatch(srv.output, /UNHANDLED|uncaught|FATAL/i, 'no crash logged during shutdown');
});

t.test('SIGINT also stops cleanly', async (t) => {
  const srv = await startServer(t);
  await srv.login();
  const started = Date.now();
  const code = await srv.stop('SIGINT');
  t.equal(code, 0);
  t.ok(Date.now() - started < 15_000);
});

t.test('generated admin password is printed once', async (t) => {
  const first = await startServer(t, { keepData: true, env: { MESH_ADMIN_PASSWORD: '', MESH_LOG_LEVEL: 'info' } });
  const m = /created the default admin "admin" with password: (\S+)/.exec(first.output);
  t.ok(m, 'password printed on first start');
  const password = m?.[1] ?? '';
  t.ok(password.length >= 16, 'random password is long');
  t.not(password, ADMIN_PASSWORD);
  t.equal(first.output.split(password).length - 1, 1, 'printed exactly once');
  const a = await first.login('admin', password);
  t.ok(a.token, 'the printed password logs in');
  const wrong = await first.mgmt.post('/authenticate?method=password', { username: 'admin', password: ADMIN_PASSWORD });
  t.ok(isError(wrong, 401, 'INVALID_AUTH'), 'the test default password is not set');
  t.equal(await first.stop(), 0);

  const second = await startServer(t, { dataDir: first.dataDir, env: { MESH_ADMIN_PASSWORD: '', MESH_LOG_LEVEL: 'info' } });
  t.notOk(second.output.includes(password), 'not printed again on the second start');
  t.notMatch(second.output, /with password:/, 'no new password generated');
  const again = await second.login('admin', password);
  t.ok(again.token, 'same generated password after restart');
  t.equal(await second.stop(), 0);

  // Another fresh data dir generates a different password.
  const other = await startServer(t, { env: { MESH_ADMIN_PASSWORD: '' } });
  const m2 = /created the default admin "admin" with password: (\S+)/.exec(other.output);
  t.ok(m2 && m2[1] !== password, 'each new install gets its own password');
});

t.test('no password or token in the logs', async (t) => {
  const srv = await startServer(t, { env: { MESH_LOG_LEVEL: 'debug' } });
  const secrets: string[] = [ADMIN_PASSWORD];
  const a = await srv.login();
  secrets.push(a.token!);
  const cl = await srv.login(undefined, undefined, 'client');
  secrets.push(cl.token!);
  const userPw = 'Log-Secret-Password-42';
  const u = await a.post('/identities', { name: 'log-user', type: 'User', isAdmin: false });
  const au = await a.post('/authenticators', { method: 'updb', identityId: u.body.data.id, username: 'log-user', password: userPw });
  t.equal(au.status, 201);
  secrets.push(userPw);
  const ul = await srv.login('log-user', userPw);
  secrets.push(ul.token!);
  const wrongPw = 'Wrong-Secret-Password-77';
  const bad = await srv.mgmt.post('/authenticate?method=password', { username: 'log-user', password: wrongPw });
  t.ok(isError(bad, 401, 'INVALID_AUTH'));
  secrets.push(wrongPw);
  const bad2 = await srv.client.post('/authenticate?method=password', { username: 'admin', password: wrongPw + 'x' });
  t.equal(bad2.status, 401);
  secrets.push(wrongPw + 'x');
  const np = 'Changed-Secret-Password-9';
  const put = await a.put(`/authenticators/${au.body.data.id}`, { username: 'log-user', password: np });
  t.equal(put.status, 200);
  secrets.push(np);
  const badJson = await srv.mgmt.post('/authenticate?method=password', undefined, { raw: `{"username":"admin","password":"${'Junk-Secret-Pw-5'}"`, headers: { 'content-type': 'application/json' } });
  t.equal(badJson.status, 400);
  secrets.push('Junk-Secret-Pw-5');
  const badTok = await srv.mgmt.get('/identities', { headers: { 'zt-session': '0badc0de-dead-4bee-8eef-feedfacecafe' } });
  t.equal(badTok.status, 401);
  secrets.push('0badc0de-dead-4bee-8eef-feedfacecafe');
  await a.get('/identities');
  await ul.get('/current-identity');
  await ul.delete('/current-api-session');
  await a.delete('/current-api-session');
  await srv.stop();
  t.ok(srv.output.length > 0, 'debug logging produced output');
  t.match(srv.output, /"level"/, 'structured JSON logs');
  for (const s of secrets) t.notOk(srv.output.includes(s), `log does not contain secret ${s.slice(0, 4)}…`);
});
