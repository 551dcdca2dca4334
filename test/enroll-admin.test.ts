/**
 * Enrollment administration and the controller's public enrollment documents: POST /enrollments
 * (every method, 409 ENROLLMENT_EXISTS, each invalid field), refresh, updb enrollment then
 * password login, network JWTs, the enrollment JWKS and challenge, /protocols.
 */
import t from 'tap';
import crypto from 'node:crypto';
import { startServer, isError } from './helpers/server.js';
import { created, fieldError, emptyOk } from './helpers/assert.js';
import { newCa } from './helpers/pki.js';

// One controller for the cases below that need no fresh one: each uses names of its own.
const srv = await startServer(t);

const decode = (jwt: string) => jwt.split('.').slice(0, 2).map((p) => JSON.parse(Buffer.from(p, 'base64url').toString()));
const inAnHour = () => new Date(Date.now() + 3600_000).toISOString();

t.test('POST /enrollments and refresh', async (t) => {
  const admin = await srv.login();
  const iid = created(t, await admin.post('/identities', { name: 'u1', type: 'User', isAdmin: false }), 'identities');
  const ca = newCa('Enroll CA');
  const caId = created(t, await admin.post('/cas', { name: 'eca', certPem: ca.cert, identityRoles: [], isAuthEnabled: true, isAutoCaEnrollmentEnabled: false, isOttCaEnrollmentEnabled: true }), 'cas');

  const at = inAnHour();
  const ottId = created(t, await admin.post('/enrollments', { identityId: iid, method: 'ott', expiresAt: at }), 'enrollments');
  const d = (await admin.get(`/enrollments/${ottId}`)).body.data;
  t.equal(d.method, 'ott');
  t.equal(Date.parse(d.expiresAt), Date.parse(at), 'expiresAt as sent');
  t.equal(d.identityId, iid);
  t.equal(d.identity?.id, iid);
  t.match(d.token, /^[0-9a-f-]{36}$/);
  t.equal(decode(d.jwt)[1].exp, Math.floor(Date.parse(at) / 1000));
  t.ok(isError(await admin.post('/enrollments', { identityId: iid, method: 'ott', expiresAt: at }), 409, 'ENROLLMENT_EXISTS'), 'second ott → 409 ENROLLMENT_EXISTS');
  created(t, await admin.post('/enrollments', { identityId: iid, method: 'ottca', caId, expiresAt: at }), 'enrollments');
  t.ok(isError(await admin.post('/enrollments', { identityId: iid, method: 'ottca', caId, expiresAt: at }), 409, 'ENROLLMENT_EXISTS'), 'second ottca → 409');
  created(t, await admin.post('/enrollments', { identityId: iid, method: 'updb', username: 'u1-login', expiresAt: at }), 'enrollments');
  t.ok(isError(await admin.post('/enrollments', { identityId: iid, method: 'updb', username: 'u1-other', expiresAt: at }), 409, 'ENROLLMENT_EXISTS'), 'second updb → 409');
  const ident = (await admin.get(`/identities/${iid}`)).body.data;
  t.same(Object.keys(ident.enrollment).sort(), ['ott', 'ottca', 'updb'], 'methods coexist');

  const other = created(t, await admin.post('/identities', { name: 'u2', type: 'User', isAdmin: false }), 'identities');
  fieldError(t, await admin.post('/enrollments', { identityId: 'nope', method: 'ott', expiresAt: at }), 'identityId', 'unknown identity');
  fieldError(t, await admin.post('/enrollments', { method: 'ott', expiresAt: at }), 'identityId', 'missing identity');
  fieldError(t, await admin.post('/enrollments', { identityId: other, method: 'ott', expiresAt: new Date(Date.now() - 60_000).toISOString() }), 'expiresAt', 'past expiresAt');
  fieldError(t, await admin.post('/enrollments', { identityId: other, method: 'ott' }), 'expiresAt', 'missing expiresAt');
  fieldError(t, await admin.post('/enrollments', { identityId: other, method: 'ottca', expiresAt: at }), 'caId', 'ottca without caId');
  fieldError(t, await admin.post('/enrollments', { identityId: other, method: 'ottca', caId: 'nope', expiresAt: at }), 'caId', 'unknown caId');
  fieldError(t, await admin.post('/enrollments', { identityId: other, method: 'updb', expiresAt: at }), 'username', 'updb without username');
  t.equal((await admin.post('/enrollments', { identityId: other, method: 'erott', expiresAt: at })).status, 400, 'other method → 400');
  t.equal((await admin.post('/enrollments', { identityId: other, method: 'ott', expiresAt: 'tomorrow' })).status, 400, 'bad date → 400');

  // Refresh.
  const r = await admin.post(`/enrollments/${ottId}/refresh`, { expiresAt: new Date(Date.now() + 7200_000).toISOString() });
  t.equal(r.status, 200);
  t.equal(r.body.data.id, ottId);
  const d2 = (await admin.get(`/enrollments/${ottId}`)).body.data;
  t.not(d2.token, d.token);
  t.not(d2.jwt, d.jwt);
  t.equal(decode(d2.jwt)[1].jti, d2.token, 'new JWT names the new token');
  fieldError(t, await admin.post(`/enrollments/${ottId}/refresh`, { expiresAt: new Date(Date.now() - 1000).toISOString() }), 'expiresAt', 'refresh into the past');
  t.equal((await admin.post(`/enrollments/${ottId}/refresh`, {})).status, 400, 'refresh without expiresAt → 400');
  t.equal((await admin.get(`/enrollments/${ottId}`)).body.data.token, d2.token, 'failed refresh changes nothing');
  t.ok(isError(await admin.post('/enrollments/WE_DO_NOT_EXIST/refresh', { expiresAt: inAnHour() }), 404, 'NOT_FOUND'), 'unknown → 404');
  emptyOk(t, await admin.delete(`/enrollments/${ottId}`), 'delete');
  t.ok(isError(await srv.client.post('/enroll/ott', { token: d2.token, clientCsr: 'x' }), 400, 'INVALID_ENROLLMENT_TOKEN'), 'deleted enrollment no longer enrolls');
});

t.test('updb enrollment then password login', async (t) => {
  const admin = await srv.login();
  const iid = created(t, await admin.post('/identities', { name: 'pw-user', type: 'User', isAdmin: false, enrollment: { updb: 'pw-user-login' } }), 'identities');
  const e = (await admin.get(`/identities/${iid}`)).body.data.enrollment.updb;
  t.equal(decode(e.jwt)[1].em, 'updb');
  fieldError(t, await srv.client.post(`/enroll/updb?token=${e.token}`, { password: 'abc' }), 'password', 'short password');
  t.ok(isError(await srv.client.post(`/enroll/updb?token=${crypto.randomUUID()}`, { password: 'long-enough' }), 400, 'INVALID_ENROLLMENT_TOKEN'), 'random token');
  const r = await srv.client.post(`/enroll/updb?token=${e.token}`, { password: 'pw-user-secret' });
  t.equal(r.status, 200, `updb → 200 (${r.text.slice(0, 200)})`);
  t.same(r.body, { data: { username: 'pw-user-login' }, meta: {} });
  t.equal(r.headers['content-type'], 'application/json');
  const login = await srv.login('pw-user-login', 'pw-user-secret', 'client');
  t.ok(login.token, 'password login works');
  t.ok(isError(await srv.client.post(`/enroll/updb?token=${e.token}`, { password: 'pw-user-secret' }), 400, 'INVALID_ENROLLMENT_TOKEN'), 'reuse → 400');
  // Legacy endpoint, and re-enroll keeps the username.
  const aid = (await admin.get(`/identities/${iid}`)).body.data.authenticators.updb.id;
  const eid = created(t, await admin.post(`/authenticators/${aid}/re-enroll`, { expiresAt: inAnHour() }), 'enrollments');
  const re = (await admin.get(`/enrollments/${eid}`)).body.data;
  t.equal(re.method, 'updb');
  t.equal(re.username, 'pw-user-login');
  t.equal((await srv.client.post(`/enroll?token=${re.token}`, { password: 'another-secret' })).status, 200, 'legacy /enroll with a updb token');
  t.ok(await srv.login('pw-user-login', 'another-secret', 'client'));
});

t.test('network JWTs, enrollment JWKS and challenge, protocols', async (t) => {
  for (const c of [srv.client, srv.mgmt]) {
    const r = await c.get('/network-jwts');
    t.equal(r.status, 200);
    t.equal(r.body.data.length, 1);
    t.equal(r.body.data[0].name, 'default');
    const [h, cl] = decode(r.body.data[0].token);
    t.equal(h.alg, 'ES256');
    t.same({ em: cl.em, iss: cl.iss, sub: cl.sub, aud: cl.aud }, { em: 'network', iss: srv.certOrigin + '/', sub: srv.certOrigin + '/', aud: ['mesh-enroller'] });
  }
  const jwks = await srv.client.get('/enroll/jwks');
  t.equal(jwks.status, 200);
  const key = jwks.body.keys[0];
  t.equal(key.kty, 'EC');
  t.equal(key.crv, 'P-256');
  t.notOk(key.d, 'no private part');
  const ott = (await (await srv.login()).post('/identities', { name: 'j', type: 'Device', isAdmin: false, enrollment: { ott: true } })).body.data.id;
  const jwt = (await (await srv.login()).get(`/identities/${ott}`)).body.data.enrollment.ott.jwt;
  const [h] = decode(jwt);
  t.equal(key.kid, h.kid, 'the JWKS names the enrollment signing key');
  const pub = crypto.createPublicKey({ key, format: 'jwk' });
  const [h64, c64, s64] = jwt.split('.');
  t.ok(crypto.verify('sha256', Buffer.from(`${h64}.${c64}`), { key: pub, dsaEncoding: 'ieee-p1363' }, Buffer.from(s64, 'base64url')), 'enrollment JWT verifies with the JWK');
  t.ok(new crypto.X509Certificate(Buffer.from(key.x5c[0], 'base64')).publicKey.equals(pub), 'x5c[0] is the signing certificate');

  const nonce = crypto.randomUUID();
  const ch = await srv.client.post('/enroll/challenge', { keyId: key.kid, nonce });
  t.equal(ch.status, 200, `challenge → 200 (${ch.text.slice(0, 200)})`);
  t.equal(ch.body.kid, key.kid);
  t.equal(ch.body.algorithm, 'ES256');
  t.match(ch.body.caPool, /BEGIN CERTIFICATE/);
  t.ok(crypto.verify('sha256', Buffer.from(nonce), { key: pub, dsaEncoding: 'ieee-p1363' }, Buffer.from(ch.body.signature, 'base64url')), 'signature of the nonce verifies');
  fieldError(t, await srv.client.post('/enroll/challenge', { keyId: 'nope', nonce }), 'keyId', 'unknown key');
  t.equal((await srv.client.post('/enroll/challenge', { keyId: key.kid, nonce: 'not-a-uuid' })).status, 400, 'nonce must be a UUID');

  const p = await srv.client.get('/protocols');
  t.equal(p.body.data.https.address, `127.0.0.1:${srv.port}`);
  t.equal(p.body.data.mtls.address, `127.0.0.1:${srv.certPort}`, 'the certificate listener is listed');
});
