/**
 * Certificate lifecycle of an enrolled device over real mutual TLS: enroll → login → flag for
 * extension (session flags, response headers) → extend (old certificate still works, new one not
 * yet) → extend-verify (new one works, old one rejected) → re-enroll → enroll again; the error
 * paths of extension; API-session (ephemeral) certificates; expired certificates and the policy.
 */
import t from 'tap';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { startServer, isError, type Server } from './helpers/server.js';
import { created, emptyOk, type Tap } from './helpers/assert.js';
import { newCsr, csrForKey, fingerprint, issueWith } from './helpers/pki.js';

// One controller for the cases below that need no fresh one: each uses names of its own.
const srv = await startServer(t);

async function enrolledDevice(srv: Server, admin: Awaited<ReturnType<Server['login']>>, name: string) {
  const iid = created(t, await admin.post('/identities', { name, type: 'Device', isAdmin: false, enrollment: { ott: true } }), 'identities');
  const token = (await admin.get(`/identities/${iid}`)).body.data.enrollment.ott.token;
  const { key, csr } = newCsr(name);
  const r = await srv.client.post('/enroll/ott', { token, clientCsr: csr });
  if (r.status !== 200) throw new Error(`enroll failed: ${r.text}`);
  return { iid, key, cert: r.body.data.cert as string };
}

t.test('extend and verify a certificate authenticator', async (t) => {
  const admin = await srv.login();
  const dev = await enrolledDevice(srv, admin, 'dev-ext');
  const authId = (await admin.get(`/identities/${dev.iid}`)).body.data.authenticators.cert.id;

  // Flag for extension with key rolling: the next login carries the flags and headers.
  emptyOk(t, await admin.post(`/authenticators/${authId}/request-extend`, { rollKeys: true }), 'request-extend');
  const a = (await admin.get(`/authenticators/${authId}`)).body.data;
  t.equal(a.isExtendRequested, true);
  t.equal(a.isKeyRollRequested, true);
  t.type(a.extendRequestedAt, 'string');
  t.ok(isError(await admin.post('/authenticators/nope/request-extend', { rollKeys: false }), 404, 'NOT_FOUND'), 'unknown → 404');
  const c = srv.tlsClient('client', dev.cert, dev.key);
  const login = await c.post('/authenticate?method=cert');
  t.equal(login.status, 200);
  t.equal(login.body.data.isCertExtendRequested, true);
  t.equal(login.body.data.isCertKeyRollRequested, true);
  t.equal(login.headers['mesh-authenticator-extend-requested'], 'true');
  t.equal(login.headers['mesh-authenticator-roll-key-requested'], 'true');
  c.token = login.body.data.token;
  const cur = await c.get('/current-api-session');
  t.equal(cur.body.data.isCertExtendRequested, true, 'current-api-session shows the flag');

  // The caller's own authenticators; a certificate has no password to change.
  const mine = await c.get('/current-identity/authenticators');
  t.equal(mine.body.data.length, 1);
  t.equal(mine.body.data[0].id, authId);
  t.equal((await c.get(`/current-identity/authenticators/${authId}`)).body.data.certPem.trim(), (await admin.get(`/authenticators/${authId}`)).body.data.certPem.trim());
  t.ok(isError(await c.put(`/current-identity/authenticators/${authId}`, { username: 'dev-ext', password: 'whatever1', currentPassword: 'whatever0' }), 409, 'CAN_NOT_UPDATE_AUTHENTICATOR'), 'PUT own cert authenticator → 409');
  t.ok(isError(await c.patch(`/current-identity/authenticators/${authId}`, { password: 'whatever1', currentPassword: 'whatever0' }), 409, 'CAN_NOT_UPDATE_AUTHENTICATOR'), 'PATCH own cert authenticator → 409');
  t.ok(isError(await admin.patch(`/authenticators/${authId}`, { username: 'dev-ext-user' }), 409, 'CAN_NOT_UPDATE_AUTHENTICATOR'), 'admin username on a cert authenticator → 409');

  // Extension error paths.
  const other = await enrolledDevice(srv, admin, 'dev-other');
  const otherAuth = (await admin.get(`/identities/${other.iid}`)).body.data.authenticators.cert.id;
  t.ok(isError(await c.post('/current-identity/authenticators/nope/extend', { clientCertCsr: newCsr('x').csr }), 404, 'NOT_FOUND'), 'made-up authenticator → 404');
  t.ok(isError(await c.post(`/current-identity/authenticators/${otherAuth}/extend`, { clientCertCsr: newCsr('x').csr }), 401, 'UNAUTHORIZED'), "another identity's authenticator → 401");
  const tokenOnly = await srv.client.post(`/current-identity/authenticators/${authId}/extend`, { clientCertCsr: newCsr('x').csr }, { headers: { 'zt-session': c.token! } });
  t.ok(isError(tokenOnly, 401, 'UNAUTHORIZED'), 'token without the client certificate (API listener) → 401');
  const wrongCert = srv.tlsClient('client', other.cert, other.key);
  wrongCert.token = c.token;
  t.ok(isError(await wrongCert.post(`/current-identity/authenticators/${authId}/extend`, { clientCertCsr: newCsr('x').csr }), 401, 'UNAUTHORIZED'), "another identity's certificate on TLS → 401");
  t.ok(isError(await c.post(`/current-identity/authenticators/${authId}/extend`, { clientCertCsr: 'junk' }), 400, 'COULD_NOT_PROCESS_CSR'), 'junk CSR → 400');
  t.ok(isError(await c.post(`/current-identity/authenticators/${authId}/extend-verify`, { clientCert: dev.cert }), 409, 'CAN_NOT_UPDATE_AUTHENTICATOR'), 'verify without a pending extension → 409');

  // Extend twice (the second replaces the first), then verify.
  const first = await c.post(`/current-identity/authenticators/${authId}/extend`, { clientCertCsr: newCsr('dev-ext').csr });
  t.equal(first.status, 200, `extend → 200 (${first.text.slice(0, 200)})`);
  const rolled = newCsr('dev-ext');
  const ext = await c.post(`/current-identity/authenticators/${authId}/extend`, { clientCertCsr: rolled.csr });
  t.equal(ext.status, 200, 'second extend → 200');
  t.equal(ext.headers['content-type'], 'application/json');
  const newCert: string = ext.body.data.clientCert;
  t.match(ext.body.data.ca, /BEGIN CERTIFICATE/);
  t.equal((await srv.tlsClient('client', dev.cert, dev.key).post('/authenticate?method=cert')).status, 200, 'old certificate still works before verify');
  t.ok(isError(await srv.tlsClient('client', newCert, rolled.key).post('/authenticate?method=cert'), 401, 'INVALID_AUTH'), 'new certificate not yet');
  t.ok(isError(await c.post(`/current-identity/authenticators/${authId}/extend-verify`, { clientCert: first.body.data.clientCert }), 400, 'INVALID_CLIENT_CERT'), 'verify with the replaced certificate → 400');
  t.ok(isError(await c.post(`/current-identity/authenticators/${authId}/extend-verify`, { clientCert: dev.cert }), 400, 'INVALID_CLIENT_CERT'), 'verify with the old certificate → 400');
  t.ok(isError(await c.post(`/current-identity/authenticators/${authId}/extend-verify`, { clientCert: 'mangled' }), 400, 'INVALID_CLIENT_CERT'), 'mangled → 400');
  emptyOk(t, await c.post(`/current-identity/authenticators/${authId}/extend-verify`, { clientCert: newCert }), 'extend-verify');
  t.ok(isError(await srv.tlsClient('client', dev.cert, dev.key).post('/authenticate?method=cert'), 401, 'INVALID_AUTH'), 'old certificate rejected after verify');
  const nl = await srv.tlsClient('client', newCert, rolled.key).post('/authenticate?method=cert');
  t.equal(nl.status, 200, 'new certificate logs in');
  t.equal(nl.body.data.isCertExtendRequested, false, 'flags cleared');
  t.equal(nl.headers['mesh-authenticator-extend-requested'], undefined);
  const after = (await admin.get(`/authenticators/${authId}`)).body.data;
  t.equal(after.fingerprint, fingerprint(newCert));
  t.equal(after.isExtendRequested, false);
  t.equal(after.isKeyRollRequested, false);
  t.equal(after.lastExtendRolledKeys, true, 'a new key was used');

  // Extension keeping the key.
  const c2 = srv.tlsClient('client', newCert, rolled.key);
  c2.token = nl.body.data.token;
  const same = await c2.post(`/current-identity/authenticators/${authId}/extend`, { clientCertCsr: csrForKey(rolled.key, 'dev-ext') });
  emptyOk(t, await c2.post(`/current-identity/authenticators/${authId}/extend-verify`, { clientCert: same.body.data.clientCert }), 'verify same-key extension');
  t.equal((await admin.get(`/authenticators/${authId}`)).body.data.lastExtendRolledKeys, false, 'same key');

  // Re-enroll the authenticator: ott enrollment, sessions of the authenticator end, enroll again.
  const re = await admin.post(`/authenticators/${authId}/re-enroll`, { expiresAt: new Date(Date.now() + 3600_000).toISOString() });
  const eid = created(t, re, 'enrollments');
  const enr = (await admin.get(`/enrollments/${eid}`)).body.data;
  t.equal(enr.method, 'ott');
  t.type(enr.jwt, 'string');
  t.ok(isError(await admin.get(`/authenticators/${authId}`), 404, 'NOT_FOUND'), 'authenticator gone');
  t.ok(isError(await c2.get('/current-identity'), 401, 'UNAUTHORIZED'), 'its API sessions ended');
  t.ok(isError(await srv.tlsClient('client', same.body.data.clientCert, rolled.key).post('/authenticate?method=cert'), 401, 'INVALID_AUTH'), 'certificate no longer logs in');
  fieldErrorLike(t, await admin.post(`/authenticators/${otherAuth}/re-enroll`, { expiresAt: new Date(Date.now() - 1000).toISOString() }));
  t.ok(isError(await admin.post('/authenticators/nope/re-enroll', { expiresAt: new Date(Date.now() + 3600_000).toISOString() }), 404, 'NOT_FOUND'));
  const fresh = newCsr('dev-ext');
  const again = await srv.client.post('/enroll/ott', { token: enr.token, clientCsr: fresh.csr });
  t.equal(again.status, 200, 'enroll with the re-enrollment');
  t.equal((await srv.tlsClient('client', again.body.data.cert, fresh.key).post('/authenticate?method=cert')).status, 200, 'and log in');
});

function fieldErrorLike(t: Tap, r: { status: number; body: any }) {
  t.equal(r.status, 400, 're-enroll with a past expiresAt → 400');
  t.equal(r.body?.error?.cause?.field, 'expiresAt');
}

t.test('updb authenticators cannot be extended; expired certificates follow the policy', async (t) => {
  const admin = await srv.login();
  const me = (await admin.get('/current-identity')).body.data;
  const updbAuth = me.authenticators.updb.id;
  t.ok(isError(await admin.post(`/authenticators/${updbAuth}/request-extend`, { rollKeys: false }), 403, 'FORBIDDEN'), 'request-extend on updb → 403');
  const client = await srv.login(undefined, undefined, 'client');
  t.ok(isError(await client.post(`/current-identity/authenticators/${updbAuth}/extend`, { clientCertCsr: newCsr('x').csr }), 409, 'CAN_NOT_UPDATE_AUTHENTICATOR'), 'extend a updb authenticator → 409');

  // An expired certificate signed by the controller, registered by the admin.
  const pki = path.join(srv.dataDir, 'pki');
  const old = issueWith(fs.readFileSync(path.join(pki, 'intermediate.cert.pem'), 'utf8'), fs.readFileSync(path.join(pki, 'intermediate.key.pem'), 'utf8'), 'old-device', { validFromMs: Date.now() - 20 * 86400_000, validityMs: 2 * 86400_000 });
  t.ok(Date.parse(new crypto.X509Certificate(old.cert).validTo) < Date.now(), 'fixture is expired');
  const iid = created(t, await admin.post('/identities', { name: 'old-device', type: 'Device', isAdmin: false }), 'identities');
  const aid = created(t, await admin.post('/authenticators', { identityId: iid, method: 'cert', certPem: old.cert }), 'authenticators');
  t.equal((await admin.get(`/authenticators/${aid}`)).body.data.isIssuedByNetwork, true, 'signed by the controller → issued by network');
  t.equal((await srv.tlsClient('client', old.cert, old.key).post('/authenticate?method=cert')).status, 200, 'expired certificate, default policy → 200');
  const pol = created(t, await admin.post('/auth-policies', {
    name: 'strict', primary: { cert: { allowed: true, allowExpiredCerts: false }, extJwt: { allowed: true, allowedSigners: [] }, updb: { allowed: true, minPasswordLength: 5, maxAttempts: 0, lockoutDurationMinutes: 0, requireMixedCase: false, requireNumberChar: false, requireSpecialChar: false } },
    secondary: { requireTotp: false },
  }), 'auth-policies');
  t.equal((await admin.patch(`/identities/${iid}`, { authPolicyId: pol })).status, 200);
  t.ok(isError(await srv.tlsClient('client', old.cert, old.key).post('/authenticate?method=cert'), 401, 'INVALID_AUTH'), 'expired certificate, allowExpiredCerts=false → 401');
});

t.test('API-session certificates', async (t) => {
  const admin = await srv.login();
  const c = await srv.login(undefined, undefined, 'client');
  const { key, csr } = newCsr('ephemeral');
  const r = await c.post('/current-api-session/certificates', { csr });
  t.equal(r.status, 201, `create → 201 (${r.text.slice(0, 200)})`);
  const id = r.body.data.id;
  t.equal(r.body.data._links.self.href, `./current-api-session/certificates/${id}`);
  t.match(r.body.data.certificate, /BEGIN CERTIFICATE/);
  t.match(r.body.data.cas, /BEGIN CERTIFICATE/);
  const x = new crypto.X509Certificate(r.body.data.certificate);
  t.ok(x.checkPrivateKey(crypto.createPrivateKey(key)));
  t.ok(Date.parse(x.validTo) - Date.now() <= 13 * 3600_000, 'short-lived');
  t.ok(isError(await c.post('/current-api-session/certificates', { csr: 'junk' }), 400, 'COULD_NOT_PROCESS_CSR'), 'junk CSR → 400');
  t.equal((await c.post('/current-api-session/certificates', {})).status, 400, 'missing csr → 400');
  const list = await c.get('/current-api-session/certificates');
  t.equal(list.status, 200);
  t.equal(list.body.data.length, 1);
  const d = list.body.data[0];
  t.equal(d.id, id);
  t.equal(d.fingerprint, fingerprint(r.body.data.certificate));
  t.match(d.subject, /CN=ephemeral/);
  t.type(d.validFrom, 'string');
  t.type(d.validTo, 'string');
  t.match(d.certificate, /BEGIN CERTIFICATE/);
  t.equal((await c.get(`/current-api-session/certificates/${id}`)).body.data.id, id, 'detail');
  // Another session does not see it.
  const other = await srv.login(undefined, undefined, 'client');
  t.equal((await other.get('/current-api-session/certificates')).body.data.length, 0, 'other session lists none');
  t.ok(isError(await other.get(`/current-api-session/certificates/${id}`), 404, 'NOT_FOUND'), 'other session → 404');
  t.ok(isError(await other.delete(`/current-api-session/certificates/${id}`), 404, 'NOT_FOUND'));
  emptyOk(t, await c.delete(`/current-api-session/certificates/${id}`), 'delete');
  t.ok(isError(await c.get(`/current-api-session/certificates/${id}`), 404, 'NOT_FOUND'), 'gone');
  t.ok(isError(await srv.client.get('/current-api-session/certificates'), 401, 'UNAUTHORIZED'), 'no session → 401');
  // Logout ends the session and its certificates with it.
  const again = await c.post('/current-api-session/certificates', { csr: newCsr('e2').csr });
  t.equal(again.status, 201);
  const sid = (await c.get('/current-api-session')).body.data.id;
  emptyOk(t, await c.delete('/current-api-session'), 'logout');
  t.ok(isError(await admin.get(`/api-sessions/${sid}`), 404, 'NOT_FOUND'), 'session gone');
  t.ok(isError(await c.get(`/current-api-session/certificates/${again.body.data.id}`), 401, 'UNAUTHORIZED'), 'its certificates are out of reach');
  void admin;
});
