/**
 * Router enrollment (erott, trott), router certificate extension and edge router re-enrollment,
 * with real CSRs and real TLS. The router record's `fingerprint` (hex SHA-1 of the client
 * certificate DER) and `certPem` are the contract the control channel authenticates with.
 */
import t from 'tap';
import crypto from 'node:crypto';
import path from 'node:path';
import { startServer, isError } from './helpers/server.js';
import { created, fieldError } from './helpers/assert.js';
import { newCsr, opensslVerify, fingerprint } from './helpers/pki.js';

// One controller for both cases: each uses names of its own.
const srv = await startServer(t);

const firstCert = (chain: string) => chain.slice(0, chain.indexOf('-----END CERTIFICATE-----') + 26);

t.test('edge router: erott enrollment, extension, re-enrollment', async (t) => {
  const admin = await srv.login();
  const caFile = path.join(srv.dataDir, 'pki', 'ca-bundle.pem');
  const rid = created(t, await admin.post('/edge-routers', { name: 'er-1', isTunnelerEnabled: true }), 'edge-routers');
  let er = (await admin.get(`/edge-routers/${rid}`)).body.data;
  t.equal(er.isVerified, false);
  const [, claims] = er.enrollmentJwt.split('.').slice(0, 2).map((p: string) => JSON.parse(Buffer.from(p, 'base64url').toString()));
  t.same({ em: claims.em, sub: claims.sub, jti: claims.jti, iss: claims.iss }, { em: 'erott', sub: rid, jti: er.enrollmentToken, iss: srv.certOrigin });

  // Error paths.
  t.ok(isError(await srv.client.post('/enroll/erott', { token: crypto.randomUUID(), clientCsr: newCsr('a').csr, serverCsr: newCsr('b').csr }), 400, 'INVALID_ENROLLMENT_TOKEN'), 'random token → 400');
  t.ok(isError(await srv.client.post(`/enroll?method=erott&token=${crypto.randomUUID()}`, {}), 400, 'INVALID_ENROLLMENT_TOKEN'), 'legacy random token → 400');
  t.ok(isError(await srv.client.post('/enroll/erott', { token: er.enrollmentToken, serverCsr: newCsr('b').csr }), 400, 'MISSING_OR_INVALID_CSR'), 'missing client CSR → 400 MISSING_OR_INVALID_CSR');
  t.ok(isError(await srv.client.post(`/enroll?method=erott&token=${er.enrollmentToken}`, { certCsr: '', serverCertCsr: newCsr('b').csr }), 400, 'MISSING_OR_INVALID_CSR'), 'empty certCsr → 400');
  t.ok(isError(await srv.client.post('/enroll/erott', { token: er.enrollmentToken, clientCsr: 'junk', serverCsr: newCsr('b').csr }), 400, 'COULD_NOT_PROCESS_CSR'), 'junk CSR → 400');
  t.ok(isError(await srv.client.post('/enroll/ott', { token: er.enrollmentToken, clientCsr: newCsr('b').csr }), 400, 'INVALID_ENROLL_METHOD'), 'router token on the ott endpoint → 400 INVALID_ENROLL_METHOD');

  const client = newCsr(rid);
  const server = newCsr(rid, { sans: 'DNS:er-1.example,IP:127.0.0.1' });
  const r = await srv.client.post('/enroll/erott', { token: er.enrollmentToken, clientCsr: client.csr, serverCsr: server.csr });
  t.equal(r.status, 200, `erott → 200 (${r.text.slice(0, 200)})`);
  t.equal(r.headers['content-type'], 'application/json');
  const { cert, serverCert, ca } = r.body.data;
  t.equal(cert.match(/BEGIN CERTIFICATE/g).length, 2, 'client chain of 2');
  t.equal(serverCert.match(/BEGIN CERTIFICATE/g).length, 2, 'server chain of 2');
  t.match(ca, /BEGIN CERTIFICATE/);
  t.match(opensslVerify(caFile, firstCert(serverCert), 'sslserver'), /OK/, 'server certificate verifies for sslserver');
  t.match(opensslVerify(caFile, firstCert(cert), 'sslclient'), /OK/, 'client certificate verifies for sslclient');
  const sc = new crypto.X509Certificate(firstCert(serverCert));
  t.match(sc.subjectAltName, /DNS:er-1.example/, 'SANs from the CSR');
  t.ok(sc.checkHost('er-1.example'));
  er = (await admin.get(`/edge-routers/${rid}`)).body.data;
  t.equal(er.isVerified, true, 'router verified');
  t.equal(er.fingerprint, fingerprint(cert), 'fingerprint = hex SHA-1 of the client certificate');
  t.match(er.fingerprint, /^[0-9a-f]{40}$/);
  t.equal(new crypto.X509Certificate(er.certPem).fingerprint, new crypto.X509Certificate(cert).fingerprint, 'certPem = the client certificate');
  t.equal(er.enrollmentJwt, null, 'enrollment consumed');
  t.ok(isError(await srv.client.post('/enroll/erott', { token: claims.jti, clientCsr: newCsr('a').csr, serverCsr: newCsr('b').csr }), 400, 'INVALID_ENROLLMENT_TOKEN'), 'token reuse → 400');

  // The tunneler identity logs in with the router's certificate.
  const tun = await srv.tlsClient('client', cert, client.key).post('/authenticate?method=cert');
  t.equal(tun.status, 200, `router identity cert login → 200 (${tun.text.slice(0, 200)})`);

  // Extension over TLS with the current client certificate.
  const routerTls = srv.tlsClient('client', cert, client.key);
  t.ok(isError(await srv.tlsClient('client').post('/enroll/extend/router', { certCsr: newCsr('a').csr, serverCertCsr: newCsr('b').csr }), 401, 'UNAUTHORIZED'), 'no certificate → 401');
  fieldError(t, await routerTls.post('/enroll/extend/router', { certCsr: newCsr('a').csr }), 'serverCertCsr', 'missing serverCertCsr');
  t.ok(isError(await routerTls.post('/enroll/extend/router', { certCsr: '', serverCertCsr: '' }), 400, 'COULD_NOT_PROCESS_CSR'), 'empty CSRs → 400');
  const client2 = newCsr(rid);
  const ext = await routerTls.post('/enroll/extend/router', { certCsr: client2.csr, serverCertCsr: newCsr(rid, { sans: 'DNS:er-1.example' }).csr });
  t.equal(ext.status, 200, `extend → 200 (${ext.text.slice(0, 200)})`);
  const newCert = ext.body.data.cert;
  t.ok(Date.parse(new crypto.X509Certificate(newCert).validFrom) <= Date.now());
  er = (await admin.get(`/edge-routers/${rid}`)).body.data;
  t.equal(er.fingerprint, fingerprint(newCert), 'fingerprint moved to the new certificate');
  t.ok(isError(await srv.tlsClient('client', cert, client.key).post('/enroll/extend/router', { certCsr: newCsr('a').csr, serverCertCsr: newCsr('b').csr }), 401, 'UNAUTHORIZED'), 'old client certificate no longer accepted');
  const client3 = newCsr(rid);
  const ext3 = await srv.tlsClient('client', newCert, client2.key).post('/enroll/extend/router', { certCsr: client3.csr, serverCertCsr: newCsr('d').csr });
  t.equal(ext3.status, 200, 'new certificate extends');
  const latest: string = ext3.body.data.cert;
  t.equal((await srv.tlsClient('client', latest, client3.key).post('/authenticate?method=cert')).status, 200, 'tunneler identity follows the extension');

  // Re-enroll: certificate authentication removed, new JWT, enroll again.
  const cur = (await admin.get(`/edge-routers/${rid}`)).body.data;
  const re = await admin.post(`/edge-routers/${rid}/re-enroll`);
  t.equal(re.status, 200, `re-enroll → 200 (${re.text.slice(0, 200)})`);
  er = (await admin.get(`/edge-routers/${rid}`)).body.data;
  t.equal(er.isVerified, false);
  t.notOk(er.fingerprint, 'fingerprint removed');
  t.type(er.enrollmentJwt, 'string', 'new enrollment JWT');
  t.not(er.enrollmentToken, claims.jti);
  t.equal(cur.fingerprint, fingerprint(latest), 'was enrolled with the last certificate');
  t.ok(isError(await admin.post(`/edge-routers/nope/re-enroll`), 404, 'NOT_FOUND'), 'unknown router → 404');
  // Re-enroll again before enrolling: the outstanding JWT is replaced, the previous token dies.
  const firstReToken = er.enrollmentToken;
  t.equal((await admin.post(`/edge-routers/${rid}/re-enroll`)).status, 200, 're-enroll twice');
  er = (await admin.get(`/edge-routers/${rid}`)).body.data;
  t.not(er.enrollmentToken, firstReToken, 'replaced enrollment');
  t.equal((await admin.get(`/enrollments?filter=${encodeURIComponent(`edgeRouter="${rid}"`)}`)).body.data.length, 1, 'one outstanding enrollment');
  t.ok(isError(await srv.client.post('/enroll/erott', { token: firstReToken, clientCsr: newCsr('a').csr, serverCsr: newCsr('b').csr }), 400, 'INVALID_ENROLLMENT_TOKEN'), 'replaced token → 400');
  t.ok(isError(await srv.tlsClient('client', latest, client3.key).post('/enroll/extend/router', { certCsr: newCsr('c').csr, serverCertCsr: newCsr('d').csr }), 401, 'UNAUTHORIZED'), 'the last certificate of a re-enrolled router → 401');
  t.ok(isError(await srv.tlsClient('client', latest, client3.key).post('/authenticate?method=cert'), 401, 'INVALID_AUTH'), 'its tunneler identity can no longer log in with it');
  const again = await srv.client.post(`/enroll?method=erott&token=${er.enrollmentToken}`, { certCsr: newCsr(rid).csr, serverCertCsr: newCsr(rid).csr });
  t.equal(again.status, 200, 'enrolls again with the new JWT (legacy endpoint, certCsr/serverCertCsr)');
  t.equal((await admin.get(`/edge-routers/${rid}`)).body.data.isVerified, true);
});

t.test('transit router: trott enrollment', async (t) => {
  const admin = await srv.login();
  const rid = created(t, await admin.post('/transit-routers', { name: 'tr-1' }), 'transit-routers');
  let tr = (await admin.get(`/transit-routers/${rid}`)).body.data;
  t.type(tr.enrollmentToken, 'string');
  const client = newCsr(rid);
  const r = await srv.client.post(`/enroll?method=trott&token=${tr.enrollmentToken}`, { certCsr: client.csr, serverCertCsr: newCsr(rid, { sans: 'DNS:tr-1.example' }).csr });
  t.equal(r.status, 200, `trott → 200 (${r.text.slice(0, 200)})`);
  tr = (await admin.get(`/routers/${rid}`)).body.data;
  t.equal(tr.isVerified, true);
  t.equal(tr.fingerprint, fingerprint(r.body.data.cert));
  const ext = await srv.tlsClient('client', r.body.data.cert, client.key).post('/enroll/extend/router', { certCsr: newCsr(rid).csr, serverCertCsr: newCsr(rid).csr });
  t.equal(ext.status, 200, 'transit router extends');
});
