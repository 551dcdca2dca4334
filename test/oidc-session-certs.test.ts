/**
 * Session certificates of OIDC logins (upstream's): a CSR at the login step signed at the code
 * exchange (`session_cert`), tokens bound to it and to a certificate login's certificate
 * (`z_cfs`/`z_acf`), refresh and token exchange accepted only over TLS presenting one of them,
 * `csr_pem` renewing the session certificate.
 */
import crypto from 'node:crypto';
import https from 'node:https';
import t from 'tap';
import { startServer, Client } from './helpers/server.js';
import { createUser } from './helpers/users.js';
import { newCsr } from './helpers/pki.js';
import { REDIRECT, form, FORM, pkce, finish, exchange, enrolledDevice } from './helpers/oidc.js';

// One controller for both cases: each uses names of its own.
const srv = await startServer(t);

t.test('a CSR at login: a session certificate, and tokens bound to it (refresh and exchange only with it)', async (t) => {
  const admin = await srv.login();
  const identityId = await createUser(admin, 'oidc-csr', 'oidc-password-5');
  const JSONH = { 'content-type': 'application/json' };
  const claimsOf = (jwt: string) => JSON.parse(Buffer.from(jwt.split('.')[1], 'base64url').toString('utf8'));
  const fingerprint = (pem: string) => new crypto.X509Certificate(pem).fingerprint.replace(/:/g, '').toLowerCase();
  const TX = 'urn:ietf:params:oauth:grant-type:token-exchange';
  const AT = 'urn:ietf:params:oauth:token-type:access_token';

  /** authorize → password login carrying `csrPem` → callback → exchange. */
  async function loginWithCsr(csrPem: string) {
    const { verifier, challenge } = pkce();
    const q = new URLSearchParams({ client_id: 'openziti', response_type: 'code', scope: 'openid offline_access', redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: 'S256', state: 'st-1' });
    const id = new URL(String((await srv.raw('GET', `/oidc/authorize?${q}`)).headers.location)).searchParams.get('authRequestID')!;
    const login = await srv.raw('POST', '/oidc/login/password', Buffer.from(JSON.stringify({ id, username: 'oidc-csr', password: 'oidc-password-5', csrPem })), JSONH);
    const code = await finish(t, srv, login);
    return exchange(srv, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: verifier });
  }

  const bad = await loginWithCsr('-----BEGIN CERTIFICATE REQUEST-----\nnot a csr\n-----END CERTIFICATE REQUEST-----\n');
  t.equal(bad.status, 400, 'a CSR that does not parse: 400 at the exchange');
  t.equal(bad.body.error, 'invalid_request', 'invalid_request');
  t.match(bad.body.error_description, /^invalid CSR/, 'naming the CSR');

  const first = newCsr('oidc-csr-session');
  const tok = await loginWithCsr(first.csr);
  t.equal(tok.status, 200, 'exchanged with a CSR');
  t.match(tok.body.session_cert, /^-----BEGIN CERTIFICATE-----/, 'session_cert in the answer');
  const fp1 = fingerprint(tok.body.session_cert);
  t.same(claimsOf(tok.body.access_token).z_cfs, [fp1], 'the access token is bound to it (z_cfs)');
  t.same(claimsOf(tok.body.refresh_token).z_cfs, [fp1], 'and the refresh token');
  const bearer = { authorization: `Bearer ${tok.body.access_token}` };
  // A bound access token is used with its certificate (proof of possession), else it opens nothing.
  const withCert = new https.Agent({ ca: srv.ca, cert: tok.body.session_cert, key: first.key, keepAlive: false });
  const bare = await new Client(srv, '/edge/client/v1').get('/current-api-session/certificates', { headers: bearer });
  t.equal(bare.status, 401, 'the bound access token without its certificate: 401');
  const listed = await srv.rawOn(srv.certPort, withCert, 'GET', '/edge/client/v1/current-api-session/certificates', undefined, bearer);
  t.equal(listed.status, 200, 'the session certificates of the login');
  t.equal(listed.body.data.length, 1, 'one');
  t.equal(listed.body.data[0].fingerprint, fp1, 'the one issued');

  // The bound refresh token works only over TLS presenting the session certificate.
  const noCert = await exchange(srv, { grant_type: 'refresh_token', refresh_token: tok.body.refresh_token });
  t.equal(noCert.status, 400, 'refresh without the certificate: 400');
  t.equal(noCert.body.error, 'access_denied', 'access_denied');
  const onCert = (fields: Record<string, string>) => srv.rawOn(srv.certPort, withCert, 'POST', '/oidc/oauth/token', form({ client_id: 'openziti', ...fields }), FORM);
  // A new CSR rotates the session certificate.
  const second = newCsr('oidc-csr-session-2');
  const r1 = await onCert({ grant_type: 'refresh_token', refresh_token: tok.body.refresh_token, csr_pem: second.csr });
  t.equal(r1.status, 200, 'refresh over TLS with the session certificate');
  t.match(r1.body.session_cert, /^-----BEGIN CERTIFICATE-----/, 'with a new session certificate for csr_pem');
  const fp2 = fingerprint(r1.body.session_cert);
  t.not(fp2, fp1, 'another certificate');
  t.same(claimsOf(r1.body.refresh_token).z_cfs, [fp2], 'the new tokens are bound to the new certificate');
  const stale = await onCert({ grant_type: 'refresh_token', refresh_token: r1.body.refresh_token });
  t.equal(stale.status, 400, 'the replaced certificate no longer refreshes');
  t.equal(stale.body.error, 'access_denied', 'access_denied');
  const withSecond = new https.Agent({ ca: srv.ca, cert: r1.body.session_cert, key: second.key, keepAlive: false });
  const r2 = await srv.rawOn(srv.certPort, withSecond, 'POST', '/oidc/oauth/token', form({ client_id: 'openziti', grant_type: 'refresh_token', refresh_token: r1.body.refresh_token }), FORM);
  t.equal(r2.status, 200, 'the new certificate refreshes');
  t.notOk(r2.body.session_cert, 'no certificate without csr_pem');
  // Token exchange of a bound access token: the same rule.
  t.equal((await exchange(srv, { grant_type: TX, subject_token: r2.body.access_token, subject_token_type: AT })).body.error, 'access_denied', 'exchange without the certificate: access_denied');
  const ex = await srv.rawOn(srv.certPort, withSecond, 'POST', '/oidc/oauth/token', form({ client_id: 'openziti', grant_type: TX, subject_token: r2.body.access_token, subject_token_type: AT }), FORM);
  t.equal(ex.status, 200, 'exchange with the certificate');
  const exBearer = { authorization: `Bearer ${ex.body.access_token}` };
  const onSecond = (p: string) => srv.rawOn(srv.certPort, withSecond, 'GET', `/edge/client/v1${p}`, undefined, exBearer);
  t.equal((await onSecond('/current-identity')).body.data?.id, identityId, 'the exchanged token is the identity');
  t.equal((await srv.rawOn(srv.certPort, withCert, 'GET', '/edge/client/v1/current-identity', undefined, exBearer)).status, 401, 'not with the replaced certificate');

  const certs = await onSecond('/current-api-session/certificates');
  t.same(certs.body.data.map((c: { fingerprint: string }) => c.fingerprint).sort(), [fp1, fp2].sort(), 'both session certificates are listed for the login');

  // Ending the login ends its bound tokens like any other.
  const asid = claimsOf(r2.body.access_token).z_asid;
  t.equal((await admin.delete(`/api-sessions/${asid}`)).status, 200, 'admin ends the login');
  t.equal((await onSecond('/current-identity')).status, 401, 'its access token is refused, even with the certificate');
  t.equal((await srv.rawOn(srv.certPort, withSecond, 'POST', '/oidc/oauth/token', form({ client_id: 'openziti', grant_type: 'refresh_token', refresh_token: r2.body.refresh_token }), FORM)).body.error, 'invalid_grant', 'and its refresh token, even with the certificate');
});

t.test('a certificate login binds its tokens to the certificate', async (t) => {
  const admin = await srv.login();
  const dev = await enrolledDevice(t, srv, admin, 'oidc-bound-dev');
  const onCert = dev.onCert;
  const { verifier, challenge } = pkce();
  const q = new URLSearchParams({ client_id: 'openziti', response_type: 'code', scope: 'openid offline_access', redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: 'S256', state: 'st-1' });
  const id = new URL(String((await onCert('GET', `/oidc/authorize?${q}`)).headers.location)).searchParams.get('authRequestID')!;
  const code = await finish(t, srv, await onCert('POST', '/oidc/login/cert', Buffer.from(JSON.stringify({ id })), { 'content-type': 'application/json' }));
  const tok = await exchange(srv, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: verifier });
  t.equal(tok.status, 200, 'code exchanged');
  const fp = new crypto.X509Certificate(dev.cert).fingerprint.replace(/:/g, '').toLowerCase();
  const claims = JSON.parse(Buffer.from(tok.body.refresh_token.split('.')[1], 'base64url').toString('utf8'));
  t.same(claims.z_cfs, [fp], 'bound to the login certificate (z_cfs)');
  t.equal(claims.z_acf, fp, 'named as the authentication certificate (z_acf)');
  const plain = await exchange(srv, { grant_type: 'refresh_token', refresh_token: tok.body.refresh_token });
  t.equal(plain.status, 400, 'refresh without the certificate: 400');
  t.equal(plain.body.error, 'access_denied', 'access_denied');
  const other = await enrolledDevice(t, srv, admin, 'oidc-other-dev');
  const wrongCert = await other.onCert('POST', '/oidc/oauth/token', form({ client_id: 'openziti', grant_type: 'refresh_token', refresh_token: tok.body.refresh_token }), FORM);
  t.equal(wrongCert.body.error, 'access_denied', "another identity's certificate: access_denied");
  const ok = await onCert('POST', '/oidc/oauth/token', form({ client_id: 'openziti', grant_type: 'refresh_token', refresh_token: tok.body.refresh_token }), FORM);
  t.equal(ok.status, 200, 'refresh over TLS with the login certificate');
});
