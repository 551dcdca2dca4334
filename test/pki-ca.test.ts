/**
 * Third-party CAs: create → verify (every error of the state table) → CA JWT → ottca enrollment
 * and CA auto-enrollment with real client certificates over mutual TLS → certificate login →
 * isAuthEnabled off/on → delete (cascades to its authenticators and ottca enrollments).
 */
import t from 'tap';
import crypto from 'node:crypto';
import { startServer, isError } from './helpers/server.js';
import { created, emptyOk } from './helpers/assert.js';
import { newCa, verificationCert, fingerprint } from './helpers/pki.js';

// One controller for the cases below that need no fresh one: each uses names of its own.
const srv = await startServer(t);

const decode = (jwt: string) => jwt.split('.').slice(0, 2).map((p) => JSON.parse(Buffer.from(p, 'base64url').toString()));

t.test('CA verification and the CA JWT', async (t) => {
  const admin = await srv.login();
  const ca = newCa('Third Party CA');
  const other = newCa('Other CA');
  const caId = created(t, await admin.post('/cas', { name: 'tp', certPem: ca.cert, identityRoles: ['from-ca'], isAuthEnabled: true, isAutoCaEnrollmentEnabled: true, isOttCaEnrollmentEnabled: true }), 'cas');
  const detail = (await admin.get(`/cas/${caId}`)).body.data;
  t.equal(detail.isVerified, false);
  const token = detail.verificationToken;
  const verify = (body: string | undefined) => admin.post(`/cas/${caId}/verify`, undefined, { raw: body ?? '', headers: { 'content-type': 'text/plain' } });

  // An unverified CA can not be used: auto-enrollment finds no valid CA.
  const early = ca.sign('early');
  t.ok(isError(await srv.tlsClient('client', early.cert, early.key).post('/enroll/ca'), 400, 'ENROLLMENT_NO_VALID_CAS'), 'unverified CA → 400 ENROLLMENT_NO_VALID_CAS');

  t.ok(isError(await verify(''), 400, 'COULD_NOT_PARSE_BODY'), 'empty body → 400 COULD_NOT_PARSE_BODY');
  t.ok(isError(await verify('garbage'), 400, 'COULD_NOT_PARSE_BODY'), 'garbage → 400 COULD_NOT_PARSE_BODY');
  const keyPem = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
  t.ok(isError(await verify(keyPem), 400, 'EXPECTED_PEM_CERTIFICATE'), 'a key instead of a certificate → 400 EXPECTED_PEM_CERTIFICATE');
  t.ok(isError(await verify('-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n'), 400, 'COULD_NOT_PARSE_DER_BLOCK'), 'bad DER → 400 COULD_NOT_PARSE_DER_BLOCK');
  t.ok(isError(await verify(ca.sign('not-the-token').cert), 400, 'INVALID_COMMON_NAME'), 'wrong CN → 400 INVALID_COMMON_NAME');
  t.ok(isError(await verify(verificationCert(other, token)), 400, 'CERTIFICATE_FAILED_VALIDATION'), 'signed by another CA → 400 CERTIFICATE_FAILED_VALIDATION');
  t.ok(isError(await admin.post(`/cas/nope/verify`, undefined, { raw: verificationCert(ca, token), headers: { 'content-type': 'text/plain' } }), 404, 'NOT_FOUND'), 'unknown CA → 404');
  emptyOk(t, await verify(verificationCert(ca, token)), 'verify with CN = verificationToken');
  t.equal((await admin.get(`/cas/${caId}`)).body.data.isVerified, true);
  t.ok(isError(await verify(verificationCert(ca, token)), 409, 'CA_ALREADY_VERIFIED'), 'again → 409 CA_ALREADY_VERIFIED');

  const jwt = await admin.get(`/cas/${caId}/jwt`);
  t.equal(jwt.status, 200);
  t.equal(jwt.headers['content-type'], 'application/jwt');
  const [h, c] = decode(jwt.text);
  t.equal(h.kid.length, 40);
  t.same({ em: c.em, sub: c.sub, jti: c.jti, aud: c.aud }, { em: 'ca', sub: caId, jti: caId, aud: ['mesh-enroller'] });
  t.equal(c.exp, undefined, 'no expiry');
  t.ok(isError(await admin.get('/cas/nope/jwt'), 404, 'NOT_FOUND'));
});

t.test('CA auto-enrollment, ottca, certificate login, delete', async (t) => {
  const admin = await srv.login();
  const ca = newCa('Device CA');
  const caId = created(t, await admin.post('/cas', { name: 'devca', certPem: ca.cert, identityRoles: ['b', 'a'], isAuthEnabled: true, isAutoCaEnrollmentEnabled: true, isOttCaEnrollmentEnabled: true, identityNameFormat: '[caName]-[commonName]' }), 'cas');
  const token = (await admin.get(`/cas/${caId}`)).body.data.verificationToken;
  emptyOk(t, await admin.post(`/cas/${caId}/verify`, undefined, { raw: verificationCert(ca, token), headers: { 'content-type': 'text/plain' } }), 'verify');

  // Auto-enrollment: identity named by the format, roles from the CA; then certificate login.
  const d1 = ca.sign('laptop-1');
  const e1 = await srv.tlsClient('client', d1.cert, d1.key).post('/enroll/ca', {});
  t.equal(e1.status, 200, `enroll/ca → 200 (${e1.text.slice(0, 200)})`);
  t.same(e1.body, { data: {}, meta: {} });
  t.equal(e1.headers['content-type'], 'application/json');
  const found = (await admin.get(`/identities?filter=${encodeURIComponent('name="devca-laptop-1"')}`)).body.data;
  t.equal(found.length, 1, 'identity named [caName]-[commonName]');
  t.same(found[0].roleAttributes, ['a', 'b'], 'roleAttributes = CA identityRoles');
  t.equal(found[0].isAdmin, false);
  t.equal(found[0].authenticators.cert?.fingerprint, fingerprint(d1.cert));
  t.ok(isError(await srv.tlsClient('client', d1.cert, d1.key).post('/enroll/ca'), 409, 'CERT_IN_USE'), 'same certificate again → 409 CERT_IN_USE');
  const login = await srv.tlsClient('client', d1.cert, d1.key).post('/authenticate?method=cert');
  t.equal(login.status, 200, `CA certificate login → 200 (${login.text.slice(0, 200)})`);
  t.equal(login.body.data.identityId, found[0].id);
  t.equal(login.body.data.isCertExtendable, false, 'third-party certificate → not extendable');

  // Name collisions get a counter; legacy endpoint with method=ca.
  t.equal((await admin.patch(`/cas/${caId}`, { identityNameFormat: 'fixed-name' })).status, 200);
  for (const [i, expect] of [[2, 'fixed-name'], [3, 'fixed-name000001'], [4, 'fixed-name000002']] as const) {
    const d = ca.sign(`dev-${i}`);
    const r = await srv.tlsClient('client', d.cert, d.key).post('/enroll?method=ca', {});
    t.equal(r.status, 200, `enroll?method=ca → 200 (${r.text.slice(0, 200)})`);
    t.equal((await admin.get(`/identities?filter=${encodeURIComponent(`name="${expect}"`)}`)).body.data.length, 1, `identity ${expect}`);
  }

  // Certificates that do not qualify.
  const stranger = newCa('Stranger CA').sign('x');
  t.ok(isError(await srv.tlsClient('client', stranger.cert, stranger.key).post('/enroll/ca'), 400, 'CERT_FAILED_VALIDATION'), 'foreign certificate → 400 CERT_FAILED_VALIDATION');
  t.ok(isError(await srv.tlsClient('client').post('/enroll/ca'), 400, 'CERT_FAILED_VALIDATION'), 'no certificate → 400');
  const expired = ca.sign('old', { validFromMs: Date.now() - 10 * 86400_000, validityMs: 2 * 3600_000 });
  t.ok(isError(await srv.tlsClient('client', expired.cert, expired.key).post('/enroll/ca'), 400, 'CERT_FAILED_VALIDATION'), 'expired certificate → 400');

  // ottca: the identity exists; its certificate must come from the enrollment's CA.
  const oid = created(t, await admin.post('/identities', { name: 'ottca-user', type: 'User', isAdmin: false, enrollment: { ottca: caId } }), 'identities');
  const ottca = (await admin.get(`/identities/${oid}`)).body.data.enrollment.ottca;
  t.equal(ottca.caId, caId);
  t.ok(isError(await srv.tlsClient('client', stranger.cert, stranger.key).post('/enroll/ottca', { token: ottca.token }), 400, 'CERTIFICATE_FAILED_VALIDATION'), 'ottca with a foreign certificate → 400');
  const d5 = ca.sign('ottca-user');
  t.equal((await admin.patch(`/cas/${caId}`, { isOttCaEnrollmentEnabled: false })).status, 200);
  t.ok(isError(await srv.tlsClient('client', d5.cert, d5.key).post('/enroll/ottca', { token: ottca.token }), 400, 'ENROLLMENT_CA_NOT_VALID'), 'CA without ottca → 400 ENROLLMENT_CA_NOT_VALID');
  t.equal((await admin.patch(`/cas/${caId}`, { isOttCaEnrollmentEnabled: true })).status, 200);
  const ok = await srv.tlsClient('client', d5.cert, d5.key).post(`/enroll/ottca?token=${ottca.token}`, undefined, { raw: '', headers: { 'content-type': 'text/plain' } });
  t.equal(ok.status, 200, `ottca with an empty text/plain body, token in the query → 200 (${ok.text.slice(0, 200)})`);
  t.equal((await admin.get(`/identities/${oid}`)).body.data.authenticators.cert?.fingerprint, fingerprint(d5.cert));
  t.equal((await srv.tlsClient('client', d5.cert, d5.key).post('/authenticate?method=cert')).status, 200, 'ottca identity logs in');

  // isAuthEnabled off → 401; on → 200.
  t.equal((await admin.patch(`/cas/${caId}`, { isAuthEnabled: false })).status, 200);
  t.ok(isError(await srv.tlsClient('client', d1.cert, d1.key).post('/authenticate?method=cert'), 401, 'INVALID_AUTH'), 'CA auth disabled → 401');
  t.equal((await admin.patch(`/cas/${caId}`, { isAuthEnabled: true })).status, 200);
  t.equal((await srv.tlsClient('client', d1.cert, d1.key).post('/authenticate?method=cert')).status, 200, 'CA auth enabled again → 200');

  // Re-enroll of a CA authenticator gives an ottca enrollment.
  const auth = (await admin.get(`/identities/${oid}`)).body.data.authenticators.cert.id;
  const re = await admin.post(`/authenticators/${auth}/re-enroll`, { expiresAt: new Date(Date.now() + 3600_000).toISOString() });
  const reId = created(t, re, 'enrollments');
  const enr = (await admin.get(`/enrollments/${reId}`)).body.data;
  t.equal(enr.method, 'ottca');
  t.equal(enr.caId, caId);

  // Delete: authenticators and ottca enrollments of the CA go with it.
  emptyOk(t, await admin.delete(`/cas/${caId}`), 'delete CA');
  t.ok(isError(await admin.get(`/enrollments/${reId}`), 404, 'NOT_FOUND'), 'its ottca enrollment is gone');
  t.ok(isError(await srv.tlsClient('client', d1.cert, d1.key).post('/authenticate?method=cert'), 401, 'INVALID_AUTH'), 'CA deleted → 401');
  t.same((await admin.get(`/identities/${found[0].id}`)).body.data.authenticators, {}, 'authenticator deleted');
});

t.test('CA with an externalIdClaim', async (t) => {
  const admin = await srv.login();
  const ca = newCa('Claim CA');
  const caId = created(t, await admin.post('/cas', {
    name: 'claimca', certPem: ca.cert, identityRoles: [], isAuthEnabled: true, isAutoCaEnrollmentEnabled: true, isOttCaEnrollmentEnabled: false,
    externalIdClaim: { location: 'SAN_URI', matcher: 'SCHEME', matcherCriteria: 'spiffe', parser: 'NONE', parserCriteria: '', index: 0 },
  }), 'cas');
  const token = (await admin.get(`/cas/${caId}`)).body.data.verificationToken;
  emptyOk(t, await admin.post(`/cas/${caId}/verify`, undefined, { raw: verificationCert(ca, token), headers: { 'content-type': 'text/plain' } }), 'verify');
  const noClaim = ca.sign('no-claim');
  t.ok(isError(await srv.tlsClient('client', noClaim.cert, noClaim.key).post('/enroll/ca'), 400, 'MISSING_CERT_CLAIM'), 'claim missing → 400 MISSING_CERT_CLAIM');
  const d = ca.sign('workload', { sans: 'URI:spiffe://example.org/ns/a/sa/b' });
  t.equal((await srv.tlsClient('client', d.cert, d.key).post('/enroll/ca')).status, 200, 'enroll with the claim');
  const ident = (await admin.get(`/identities?filter=${encodeURIComponent('externalId="spiffe://example.org/ns/a/sa/b"')}`)).body.data;
  t.equal(ident.length, 1, 'identity carries the external id');
  t.same(ident[0].authenticators, {}, 'no certificate authenticator');
  // A different certificate with the same claim logs in as that identity.
  const d2 = ca.sign('workload-2', { sans: 'URI:spiffe://example.org/ns/a/sa/b' });
  const login = await srv.tlsClient('client', d2.cert, d2.key).post('/authenticate?method=cert');
  t.equal(login.status, 200, `login by external id → 200 (${login.text.slice(0, 200)})`);
  t.equal(login.body.data.identityId, ident[0].id);
});
