/**
 * OIDC login as upstream serves it under /oidc, driven as a client drives it over HTTPS against a
 * real server: discovery, authorize with PKCE (S256), the password login step, the code exchange,
 * the access token as a Bearer token on both APIs, refresh-token rotation with reuse detection,
 * revoke, end session, and the OAuth error JSON for a bad verifier or an unregistered redirect URI.
 * Redirects are followed by hand.
 */
import crypto from 'node:crypto';
import https from 'node:https';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { createLocalJWKSet, jwtVerify, SignJWT } from 'jose';
import { startServer, Client, type Server } from './helpers/server.js';
import { createUser } from './helpers/users.js';
import { newCsr } from './helpers/pki.js';
import { totpCode } from '../src/auth/mfa.js';

const REDIRECT = 'http://127.0.0.1:20314/auth/callback';

const form = (fields: Record<string, string>) => Buffer.from(new URLSearchParams(fields).toString());
const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

/** Path and query of an absolute or relative Location. */
function pathOf(location: string): string {
  const u = new URL(location, 'https://x');
  return u.pathname + u.search;
}

function pkce() {
  const verifier = crypto.randomBytes(32).toString('base64url');
  const challenge = crypto.createHash('sha256').update(verifier).digest('base64url');
  return { verifier, challenge };
}

/** authorize → password login → callback: the code (and the state) sent to the redirect URI. */
async function codeFlow(t: Test, srv: Server, username: string, password: string, challenge: string) {
  const q = new URLSearchParams({ client_id: 'openziti', response_type: 'code', scope: 'openid offline_access', redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: 'S256', state: 'st-1', nonce: 'n-1' });
  const auth = await srv.raw('GET', `/oidc/authorize?${q}`);
  t.equal(auth.status, 302, 'authorize redirects to the login step');
  const loginUrl = pathOf(String(auth.headers.location));
  t.match(loginUrl, /^\/oidc\/login\/password\?authRequestID=/, 'to the password login');
  const id = new URL(loginUrl, 'https://x').searchParams.get('authRequestID')!;
  const page = await srv.raw('GET', loginUrl, undefined, { accept: 'text/html' });
  t.equal(page.status, 200, 'login page');
  t.equal(page.headers['auth-request-id'], id, 'login page names the request');
  const login = await srv.raw('POST', '/oidc/login/password', Buffer.from(JSON.stringify({ id, username, password })), { 'content-type': 'application/json', accept: 'application/json' });
  return { id, login };
}

async function finish(t: Test, srv: Server, login: { status: number; headers: Record<string, unknown> }) {
  t.equal(login.status, 302, 'login step redirects to the callback');
  const cb = await srv.raw('GET', pathOf(String(login.headers.location)));
  t.equal(cb.status, 302, 'callback redirects to the client');
  const back = new URL(String(cb.headers.location));
  t.equal(`${back.origin}${back.pathname}`, REDIRECT, 'to the registered redirect URI');
  t.equal(back.searchParams.get('state'), 'st-1', 'state carried back');
  const code = back.searchParams.get('code');
  t.ok(code, 'a code');
  return code!;
}

const exchange = (srv: Server, fields: Record<string, string>) => srv.raw('POST', '/oidc/oauth/token', form({ client_id: 'openziti', ...fields }), FORM);

t.test('code flow with PKCE, Bearer access tokens, rotation, reuse, revoke, end session', async (t) => {
  const srv = await startServer(t);
  const admin = await srv.login();
  const identityId = await createUser(admin, 'oidc-user', 'oidc-password-1');

  const disc = await srv.raw('GET', '/oidc/.well-known/openid-configuration');
  t.equal(disc.status, 200, 'discovery');
  t.match(disc.body.token_endpoint, /\/oidc\/oauth\/token$/, 'token endpoint');
  t.match(disc.body.authorization_endpoint, /\/oidc\/authorize$/, 'authorize endpoint');
  t.same(disc.body.code_challenge_methods_supported, ['S256'], 'S256 only');
  t.ok(disc.body.grant_types_supported.includes('refresh_token'), 'refresh grant');
  t.match(disc.body.jwks_uri, /\/oidc\/keys$/, 'jwks');

  // Unregistered redirect URI: OAuth error JSON, no redirect.
  const { verifier, challenge } = pkce();
  const bad = await srv.raw('GET', `/oidc/authorize?${new URLSearchParams({ client_id: 'openziti', response_type: 'code', scope: 'openid', redirect_uri: 'https://evil.example/cb', code_challenge: challenge, code_challenge_method: 'S256' })}`);
  t.equal(bad.status, 400, 'unregistered redirect URI: 400');
  t.equal(bad.body.error, 'invalid_request', 'OAuth error JSON');
  t.notOk(bad.headers.location, 'nothing sent to the unregistered URI');
  // A redirect URI registered in the controller settings is allowed from then on.
  const appQ = () => `/oidc/authorize?${new URLSearchParams({ client_id: 'openziti', response_type: 'code', scope: 'openid', redirect_uri: 'https://app.example/cb', code_challenge: challenge, code_challenge_method: 'S256' })}`;
  t.equal((await srv.raw('GET', appQ())).status, 400, 'https://app.example/cb not registered yet');
  t.equal((await admin.patch('/controller-settings/global/effective', { oidc: { redirectUris: ['https://app.example/cb'] } })).status, 200, 'registered in the controller settings');
  t.equal((await srv.raw('GET', appQ())).status, 302, 'now accepted');
  const badClient = await srv.raw('GET', `/oidc/authorize?${new URLSearchParams({ client_id: 'nobody', redirect_uri: REDIRECT })}`);
  t.equal(badClient.status, 400, 'unknown client: 400');
  t.equal(badClient.body.error, 'invalid_client', 'invalid_client');

  // Wrong password at the login step: the error envelope, as /authenticate answers.
  const wrong = await codeFlow(t, srv, 'oidc-user', 'not-the-password', challenge);
  t.equal(wrong.login.status, 401, 'wrong password: 401');
  t.equal(wrong.login.body.error.code, 'INVALID_AUTH', 'INVALID_AUTH');

  // The full flow; a wrong verifier is refused and ends that login.
  const flow1 = await codeFlow(t, srv, 'oidc-user', 'oidc-password-1', challenge);
  const code1 = await finish(t, srv, flow1.login);
  const badVerifier = await exchange(srv, { grant_type: 'authorization_code', code: code1, redirect_uri: REDIRECT, code_verifier: pkce().verifier });
  t.equal(badVerifier.status, 400, 'PKCE verifier that does not match: 400');
  t.equal(badVerifier.body.error, 'invalid_grant', 'invalid_grant');
  const again = await exchange(srv, { grant_type: 'authorization_code', code: code1, redirect_uri: REDIRECT, code_verifier: verifier });
  t.equal(again.status, 400, 'the code is gone after a failed exchange');

  const flow = await codeFlow(t, srv, 'oidc-user', 'oidc-password-1', challenge);
  const code = await finish(t, srv, flow.login);
  const tok = await exchange(srv, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: verifier });
  t.equal(tok.status, 200, 'code exchanged');
  t.equal(tok.body.token_type, 'Bearer', 'Bearer');
  t.equal(tok.body.expires_in, 1800, 'expires_in');
  const reused = await exchange(srv, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: verifier });
  t.equal(reused.status, 400, 'a code works once');
  t.equal(reused.body.error, 'invalid_grant', 'invalid_grant');

  // Tokens verify with the published JWKS and carry upstream's claims.
  const jwks = createLocalJWKSet((await srv.raw('GET', '/oidc/keys')).body);
  const { payload: access } = await jwtVerify(tok.body.access_token, jwks, { audience: 'openziti', issuer: disc.body.issuer });
  t.equal(access.sub, identityId, 'access sub is the identity');
  t.equal(access.z_t, 'a', 'access token type');
  t.type(access.z_asid, 'string', 'names its API session');
  const { payload: idt } = await jwtVerify(tok.body.id_token, jwks, { audience: 'openziti' });
  t.equal(idt.nonce, 'n-1', 'id token carries the nonce');
  const { payload: refresh } = await jwtVerify(tok.body.refresh_token, jwks);
  t.equal(refresh.z_t, 'r', 'refresh token type');

  // The access token is a Bearer token on both APIs and both listeners.
  const bearer = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });
  const client = new Client(srv, '/edge/client/v1');
  const me = await client.get('/current-identity', bearer(tok.body.access_token));
  t.equal(me.status, 200, 'client API with the access token');
  t.equal(me.body.data.id, identityId, 'as the identity');
  const cur = await client.get('/current-api-session', bearer(tok.body.access_token));
  t.equal(cur.body.data.id, access.z_asid, 'the API session it names');
  t.equal((await new Client(srv, '/edge/management/v1').get('/current-identity', bearer(tok.body.access_token))).status, 200, 'management API');
  t.equal((await srv.tlsClient('client').get('/current-identity', bearer(tok.body.access_token))).status, 200, 'cert listener');
  const info = await srv.raw('GET', '/oidc/userinfo', undefined, { authorization: `Bearer ${tok.body.access_token}` });
  t.equal(info.status, 200, 'userinfo');
  t.equal(info.body.sub, identityId, 'userinfo sub');
  t.equal(info.body.name, 'oidc-user', 'userinfo name');
  const tampered = tok.body.access_token.slice(0, -4) + (tok.body.access_token.endsWith('AAAA') ? 'BBBB' : 'AAAA');
  t.equal((await client.get('/current-identity', bearer(tampered))).status, 401, 'tampered access token: 401');
  // The legacy login is unchanged.
  t.equal((await client.post('/authenticate?method=password', { username: 'oidc-user', password: 'oidc-password-1' })).status, 200, 'legacy /authenticate still works');

  // Refresh rotates; the old refresh token reused ends the family.
  const r1 = await exchange(srv, { grant_type: 'refresh_token', refresh_token: tok.body.refresh_token });
  t.equal(r1.status, 200, 'refreshed');
  t.not(r1.body.refresh_token, tok.body.refresh_token, 'a new refresh token');
  t.equal((await client.get('/current-identity', bearer(r1.body.access_token))).status, 200, 'new access token works');
  const r2 = await exchange(srv, { grant_type: 'refresh_token', refresh_token: r1.body.refresh_token });
  t.equal(r2.status, 200, 'the new refresh token works once');
  const reuse = await exchange(srv, { grant_type: 'refresh_token', refresh_token: tok.body.refresh_token });
  t.equal(reuse.status, 400, 'reused refresh token: 400');
  t.equal(reuse.body.error, 'invalid_grant', 'invalid_grant');
  t.equal((await client.get('/current-identity', bearer(r2.body.access_token))).status, 401, 'reuse ended the family: its access tokens are refused');
  t.equal((await exchange(srv, { grant_type: 'refresh_token', refresh_token: r2.body.refresh_token })).status, 400, 'and its latest refresh token');
  const garbage = await exchange(srv, { grant_type: 'refresh_token', refresh_token: 'not.a.token' });
  t.equal(garbage.status, 400, 'malformed refresh token: 400');
  t.equal((await exchange(srv, { grant_type: 'password' })).body.error, 'unsupported_grant_type', 'unsupported grant');

  // Revoke ends the login's tokens.
  const p2 = pkce();
  const f2 = await codeFlow(t, srv, 'oidc-user', 'oidc-password-1', p2.challenge);
  const t2 = await exchange(srv, { grant_type: 'authorization_code', code: await finish(t, srv, f2.login), redirect_uri: REDIRECT, code_verifier: p2.verifier });
  t.equal(t2.status, 200, 'second login');
  const rv = await srv.raw('POST', '/oidc/revoke', form({ token: t2.body.refresh_token, client_id: 'openziti' }), FORM);
  t.equal(rv.status, 200, 'revoke');
  t.equal((await client.get('/current-identity', bearer(t2.body.access_token))).status, 401, 'revoked: access token refused');
  t.equal((await exchange(srv, { grant_type: 'refresh_token', refresh_token: t2.body.refresh_token })).status, 400, 'revoked: refresh refused');
  t.equal((await srv.raw('POST', '/oidc/revoke', form({ token: 'junk' }), FORM)).status, 200, 'revoking junk is 200 (RFC 7009)');

  // End session with the ID token, back to a registered logout URI.
  const p3 = pkce();
  const f3 = await codeFlow(t, srv, 'oidc-user', 'oidc-password-1', p3.challenge);
  const t3 = await exchange(srv, { grant_type: 'authorization_code', code: await finish(t, srv, f3.login), redirect_uri: REDIRECT, code_verifier: p3.verifier });
  const badLogout = await srv.raw('GET', `/oidc/end_session?${new URLSearchParams({ id_token_hint: t3.body.id_token, post_logout_redirect_uri: 'https://evil.example/' })}`);
  t.equal(badLogout.status, 400, 'unregistered logout URI: 400');
  t.equal((await client.get('/current-identity', bearer(t3.body.access_token))).status, 200, 'not ended by the refused request');
  const es = await srv.raw('GET', `/oidc/end_session?${new URLSearchParams({ id_token_hint: t3.body.id_token, post_logout_redirect_uri: 'http://127.0.0.1:20314/auth/logout', state: 'bye' })}`);
  t.equal(es.status, 302, 'end session redirects');
  t.equal(new URL(String(es.headers.location)).searchParams.get('state'), 'bye', 'with the state');
  t.equal((await client.get('/current-identity', bearer(t3.body.access_token))).status, 401, 'ended: access token refused');

  // Admin delete of the API session ends an OIDC login like any other.
  const p4 = pkce();
  const f4 = await codeFlow(t, srv, 'oidc-user', 'oidc-password-1', p4.challenge);
  const t4 = await exchange(srv, { grant_type: 'authorization_code', code: await finish(t, srv, f4.login), redirect_uri: REDIRECT, code_verifier: p4.verifier });
  const asid = (await jwtVerify(t4.body.access_token, jwks)).payload.z_asid as string;
  const listed = await admin.get(`/api-sessions/${asid}`);
  t.equal(listed.status, 200, 'the OIDC login is listed in /api-sessions');
  t.equal(listed.body.data.identityId, identityId, 'as the identity');
  t.notOk(listed.text.includes('refreshJti'), 'the refresh-token state is not shown');
  t.equal((await admin.delete(`/api-sessions/${asid}`)).status, 200, 'admin deletes the API session');
  t.equal((await client.get('/current-identity', bearer(t4.body.access_token))).status, 401, 'access token refused');
  t.equal((await exchange(srv, { grant_type: 'refresh_token', refresh_token: t4.body.refresh_token })).status, 400, 'refresh refused');
});

t.test('certificate login on the certificate listener; the TOTP step when MFA is required', async (t) => {
  const srv = await startServer(t);
  const admin = await srv.login();

  // Certificate: an enrolled device logs in at /oidc/login/cert over mutual TLS.
  const dev = await admin.post('/identities', { name: 'oidc-dev', type: 'Device', isAdmin: false, enrollment: { ott: true } });
  t.equal(dev.status, 201, 'device created');
  const ott = (await admin.get(`/identities/${dev.body.data.id}`)).body.data.enrollment.ott.token;
  const { key, csr } = newCsr('oidc-dev');
  const en = await srv.client.post('/enroll/ott', { token: ott, clientCsr: csr });
  t.equal(en.status, 200, 'enrolled');
  const agent = new https.Agent({ ca: srv.ca, cert: en.body.data.cert, key, keepAlive: false });
  const onCert = (m: string, p: string, b?: Buffer, h?: Record<string, string>) => srv.rawOn(srv.certPort, agent, m, p, b, h);
  const { verifier, challenge } = pkce();
  const q = new URLSearchParams({ client_id: 'openziti', response_type: 'code', scope: 'openid', redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: 'S256', state: 'st-1' });
  const auth = await onCert('GET', `/oidc/authorize?${q}`);
  t.equal(auth.status, 302, 'authorize on the certificate listener');
  const id = new URL(String(auth.headers.location)).searchParams.get('authRequestID')!;
  const noCert = await srv.raw('POST', '/oidc/login/cert', Buffer.from(JSON.stringify({ id })), { 'content-type': 'application/json' });
  t.equal(noCert.status, 401, 'cert login without a client certificate: 401');
  const certLogin = await onCert('POST', '/oidc/login/cert', Buffer.from(JSON.stringify({ id })), { 'content-type': 'application/json' });
  const code = await finish(t, srv, certLogin);
  const tok = await exchange(srv, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: verifier });
  t.equal(tok.status, 200, 'code exchanged');
  const me = await new Client(srv, '/edge/client/v1').get('/current-identity', { headers: { authorization: `Bearer ${tok.body.access_token}` } });
  t.equal(me.body.data?.id, dev.body.data.id, 'the access token is the device');

  // TOTP: a user with verified MFA passes /oidc/login/totp before a code is issued.
  await createUser(admin, 'oidc-mfa', 'oidc-password-2');
  const u = new Client(srv, '/edge/client/v1');
  u.token = (await u.post('/authenticate?method=password', { username: 'oidc-mfa', password: 'oidc-password-2' })).body.data.token;
  t.equal((await u.post('/current-identity/mfa')).status, 201, 'MFA enrolled');
  const secret = /secret=([A-Z2-7]+)/.exec((await u.get('/current-identity/mfa')).body.data.provisioningUrl)![1];
  t.equal((await u.post('/current-identity/mfa/verify', { code: totpCode(secret) })).status, 200, 'MFA verified');

  const p2 = pkce();
  const flow = await codeFlow(t, srv, 'oidc-mfa', 'oidc-password-2', p2.challenge);
  t.equal(flow.login.status, 200, 'password step answers the auth queries');
  t.equal(flow.login.headers['totp-required'], 'true', 'totp-required header');
  t.equal(flow.login.body.authQueries[0].typeId, 'TOTP', 'a TOTP query');
  const early = await srv.raw('GET', `/oidc/authorize/callback?id=${flow.id}`);
  t.equal(early.status, 401, 'no code before TOTP');
  const queries = await srv.raw('GET', `/oidc/login/auth-queries?id=${flow.id}`);
  t.equal(queries.body.authQueries.length, 1, 'auth-queries lists the pending TOTP');
  const badTotp = await srv.raw('POST', '/oidc/login/totp', Buffer.from(JSON.stringify({ id: flow.id, code: 'abcdef' })), { 'content-type': 'application/json' });
  t.equal(badTotp.status, 400, 'wrong TOTP: 400 (what SDKs read as "did not verify")');
  t.equal(badTotp.body.error.code, 'MFA_INVALID_TOKEN', 'MFA_INVALID_TOKEN');
  const totp = await srv.raw('POST', '/oidc/login/totp', Buffer.from(JSON.stringify({ id: flow.id, code: totpCode(secret) })), { 'content-type': 'application/json' });
  const code2 = await finish(t, srv, totp);
  const tok2 = await exchange(srv, { grant_type: 'authorization_code', code: code2, redirect_uri: REDIRECT, code_verifier: p2.verifier });
  t.equal(tok2.status, 200, 'code exchanged after TOTP');
  const cur = await new Client(srv, '/edge/client/v1').get('/current-api-session', { headers: { authorization: `Bearer ${tok2.body.access_token}` } });
  t.equal(cur.status, 200, 'access token works');
  t.same(cur.body.data.authQueries, [], 'fully authenticated');
});

t.test('ext-JWT login step; token exchange', async (t) => {
  const srv = await startServer(t);
  const admin = await srv.login();
  const identityId = await createUser(admin, 'oidc-ext', 'oidc-password-3');
  // A certificate-backed external signer (its key signs the IdP token).
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-oidc-ext-'));
  t.teardown(() => fs.rmSync(tmp, { recursive: true, force: true }));
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', path.join(tmp, 'k.pem'), '-out', path.join(tmp, 'c.pem'), '-subj', '/CN=oidc-idp', '-days', '30'], { stdio: 'ignore' });
  const idpKey = crypto.createPrivateKey(fs.readFileSync(path.join(tmp, 'k.pem')));
  const signer = await admin.post('/external-jwt-signers', { name: 'oidc-idp', issuer: 'https://idp.oidc.test', audience: 'mesh', certPem: fs.readFileSync(path.join(tmp, 'c.pem'), 'utf8'), kid: 'idp-1', enabled: true });
  t.equal(signer.status, 201, 'signer created');
  const idpToken = (sub: string) => new SignJWT({ sub }).setProtectedHeader({ alg: 'ES256', kid: 'idp-1' }).setIssuer('https://idp.oidc.test').setAudience('mesh').setIssuedAt().setExpirationTime('5m').sign(idpKey);

  const { verifier, challenge } = pkce();
  const q = new URLSearchParams({ client_id: 'openziti', response_type: 'code', scope: 'openid offline_access', redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: 'S256', state: 'st-1' });
  const id = new URL(String((await srv.raw('GET', `/oidc/authorize?${q}`)).headers.location)).searchParams.get('authRequestID')!;
  const body = Buffer.from(JSON.stringify({ id }));
  const JSONH = { 'content-type': 'application/json' };
  const foreign = await srv.raw('POST', '/oidc/login/ext-jwt', body, { ...JSONH, authorization: `Bearer ${await idpToken('someone-else')}` });
  t.equal(foreign.status, 401, 'ext-JWT of no identity: 401');
  t.equal((await srv.raw('POST', '/oidc/login/ext-jwt', body, JSONH)).status, 401, 'no ext-JWT: 401');
  const login = await srv.raw('POST', '/oidc/login/ext-jwt', body, { ...JSONH, authorization: `Bearer ${await idpToken(identityId)}` });
  const code = await finish(t, srv, login);
  const tok = await exchange(srv, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: verifier });
  t.equal(tok.status, 200, 'code exchanged');
  const client = new Client(srv, '/edge/client/v1');
  const bearer = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });
  t.equal((await client.get('/current-identity', bearer(tok.body.access_token))).body.data?.id, identityId, 'access token of the ext-JWT identity');

  // Token exchange, as upstream allows it.
  const TX = 'urn:ietf:params:oauth:grant-type:token-exchange';
  const AT = 'urn:ietf:params:oauth:token-type:access_token';
  const RT = 'urn:ietf:params:oauth:token-type:refresh_token';
  const IT = 'urn:ietf:params:oauth:token-type:id_token';
  const a2 = await exchange(srv, { grant_type: TX, subject_token: tok.body.access_token, subject_token_type: AT });
  t.equal(a2.status, 200, 'access token exchanged');
  t.equal(a2.body.issued_token_type, AT, 'for an access token');
  t.notOk(a2.body.refresh_token, 'no refresh token for an access token');
  t.equal((await client.get('/current-identity', bearer(a2.body.access_token))).status, 200, 'the exchanged access token works');
  const r2 = await exchange(srv, { grant_type: TX, subject_token: tok.body.refresh_token, subject_token_type: RT, audience: 'openziti', scope: 'openid offline_access' });
  t.equal(r2.status, 200, 'refresh token exchanged');
  t.equal(r2.body.issued_token_type, RT, 'for a refresh token');
  t.type(r2.body.refresh_token, 'string', 'a new refresh token');
  const checks: [string, Record<string, string>, string][] = [
    ['an id token as subject', { subject_token: tok.body.id_token, subject_token_type: IT }, 'invalid_request'],
    ['an access token for a refresh token', { subject_token: tok.body.access_token, subject_token_type: AT, requested_token_type: RT }, 'invalid_request'],
    ['another audience', { subject_token: r2.body.refresh_token, subject_token_type: RT, audience: 'someone' }, 'invalid_target'],
    ['another scope', { subject_token: r2.body.refresh_token, subject_token_type: RT, scope: 'admin' }, 'invalid_scope'],
    ['a forged subject token', { subject_token: 'x.y.z', subject_token_type: AT }, 'invalid_grant'],
    ['no subject token', { subject_token_type: AT }, 'invalid_request'],
  ];
  for (const [what, fields, error] of checks) {
    const r = await exchange(srv, { grant_type: TX, ...fields });
    t.equal(r.status, 400, `${what}: 400`);
    t.equal(r.body.error, error, `${what}: ${error}`);
  }
  // The exchange rotated the refresh token: the old one is a reuse and ends the family.
  const reuse = await exchange(srv, { grant_type: TX, subject_token: tok.body.refresh_token, subject_token_type: RT });
  t.equal(reuse.status, 400, 'rotated refresh token reused in an exchange: 400');
  t.equal((await client.get('/current-identity', bearer(a2.body.access_token))).status, 401, 'the family ended');

  // An auth policy whose secondary factor is this signer's token: proven at the login step.
  const pol = await admin.post('/auth-policies', {
    name: 'oidc-secondary-ext-jwt',
    primary: { cert: { allowed: true, allowExpiredCerts: true }, extJwt: { allowed: true, allowedSigners: [] }, updb: { allowed: true, minPasswordLength: 5, maxAttempts: 0, lockoutDurationMinutes: 0, requireMixedCase: false, requireNumberChar: false, requireSpecialChar: false } },
    secondary: { requireTotp: false, requireExtJwtSigner: signer.body.data.id },
  });
  t.equal(pol.status, 201, 'policy requiring the ext-JWT signer as a secondary factor');
  const secondId = await createUser(admin, 'oidc-ext-2fa', 'oidc-password-8');
  t.equal((await admin.patch(`/identities/${secondId}`, { authPolicyId: pol.body.data.id })).status, 200, 'assigned');
  const p2 = pkce();
  const q2 = new URLSearchParams({ client_id: 'openziti', response_type: 'code', scope: 'openid', redirect_uri: REDIRECT, code_challenge: p2.challenge, code_challenge_method: 'S256', state: 'st-1' });
  const id2 = new URL(String((await srv.raw('GET', `/oidc/authorize?${q2}`)).headers.location)).searchParams.get('authRequestID')!;
  const creds = Buffer.from(JSON.stringify({ id: id2, username: 'oidc-ext-2fa', password: 'oidc-password-8' }));
  const without = await srv.raw('POST', '/oidc/login/password', creds, JSONH);
  t.equal(without.status, 200, 'password alone: the login stays pending');
  t.equal(without.body.authQueries[0]?.typeId, 'EXT-JWT', 'with an EXT-JWT auth query');
  t.equal(without.body.authQueries[0]?.id, signer.body.data.id, 'naming the signer');
  t.notOk(without.headers['totp-required'], 'no TOTP asked');
  t.equal((await srv.raw('GET', `/oidc/authorize/callback?id=${id2}`)).status, 401, 'no code without the factor');
  const withToken = await srv.raw('POST', '/oidc/login/password', creds, { ...JSONH, authorization: `Bearer ${await idpToken(secondId)}` });
  const code2 = await finish(t, srv, withToken);
  const tok2 = await exchange(srv, { grant_type: 'authorization_code', code: code2, redirect_uri: REDIRECT, code_verifier: p2.verifier });
  t.equal(tok2.status, 200, 'with the signer token at the login step: a code, exchanged');
  const me2 = await client.get('/current-identity', bearer(tok2.body.access_token));
  t.equal(me2.status, 200, 'the access token alone works: the factor was proven at login');
  t.equal(me2.body.data?.id, secondId, 'as the identity');
  const afterExchange = await srv.raw('POST', '/oidc/login/password', Buffer.from(JSON.stringify({ id: id2, username: 'oidc-ext-2fa', password: 'oidc-password-8' })), { ...JSONH, authorization: `Bearer ${await idpToken(identityId)}` });
  t.equal(afterExchange.status, 401, 'the request is gone once exchanged');
});

t.test('TOTP enrollment during an OIDC login when the auth policy requires TOTP', async (t) => {
  const srv = await startServer(t);
  const admin = await srv.login();
  const pol = await admin.post('/auth-policies', {
    name: 'oidc-totp-required',
    primary: { cert: { allowed: true, allowExpiredCerts: true }, extJwt: { allowed: true, allowedSigners: [] }, updb: { allowed: true, minPasswordLength: 5, maxAttempts: 0, lockoutDurationMinutes: 0, requireMixedCase: false, requireNumberChar: false, requireSpecialChar: false } },
    secondary: { requireTotp: true },
  });
  t.equal(pol.status, 201, 'policy requiring TOTP');
  const identityId = await createUser(admin, 'oidc-enroll', 'oidc-password-4');
  t.equal((await admin.patch(`/identities/${identityId}`, { authPolicyId: pol.body.data.id })).status, 200, 'policy assigned');
  const JSONH = { 'content-type': 'application/json' };
  const post = (p: string, body: unknown) => srv.raw('POST', p, Buffer.from(JSON.stringify(body)), JSONH);

  const disc = (await srv.raw('GET', '/oidc/.well-known/openid-configuration')).body;
  t.match(disc.openziti_endpoints.totp_enroll, /\/oidc\/login\/totp\/enroll$/, 'discovery names the enrollment endpoint');
  t.match(disc.openziti_endpoints.totp_enroll_verify, /\/oidc\/login\/totp\/enroll\/verify$/, 'and its verify step');

  const { verifier, challenge } = pkce();
  // Before any primary login step of the request, enrollment is refused.
  const q = new URLSearchParams({ client_id: 'openziti', response_type: 'code', scope: 'openid', redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: 'S256', state: 'st-1' });
  const fresh = new URL(String((await srv.raw('GET', `/oidc/authorize?${q}`)).headers.location)).searchParams.get('authRequestID')!;
  t.equal((await post('/oidc/login/totp/enroll', { id: fresh })).status, 401, 'no enrollment before the password step');
  t.equal((await post('/oidc/login/totp/enroll', { id: 'no-such-request' })).status, 401, 'unknown request: 401');
  const malformed = await srv.raw('POST', '/oidc/login/totp/enroll', Buffer.from('{"id":'), JSONH);
  t.equal(malformed.status, 400, 'malformed body: 400');
  t.equal(malformed.body.error, 'invalid_request', 'OAuth error JSON');

  const flow = await codeFlow(t, srv, 'oidc-enroll', 'oidc-password-4', challenge);
  t.equal(flow.login.status, 200, 'password step answers the auth queries');
  t.equal(flow.login.headers['totp-required'], 'true', 'totp-required');
  t.equal(flow.login.body.authQueries[0].isTotpEnrolled, false, 'TOTP not enrolled yet');
  t.equal((await post('/oidc/login/totp', { id: flow.id, code: '123456' })).status, 400, 'the TOTP step before enrollment: 400');
  t.equal((await srv.raw('GET', `/oidc/authorize/callback?id=${flow.id}`)).status, 401, 'no code before TOTP');

  // Start, drop the unverified enrollment, start again.
  const first = await post('/oidc/login/totp/enroll', { id: flow.id });
  t.equal(first.status, 201, 'enrollment started');
  t.match(first.body.provisioningUrl, /^otpauth:\/\/totp\/.+secret=[A-Z2-7]+/, 'provisioning URL');
  t.equal(first.body.recoveryCodes.length, 20, '20 recovery codes');
  t.equal(first.body.isVerified, false, 'not verified');
  const twice = await post('/oidc/login/totp/enroll', { id: flow.id });
  t.equal(twice.status, 409, 'a second enrollment: 409');
  t.equal(twice.body.error.code, 'MFA_EXISTS', 'MFA_EXISTS');
  const dropped = await srv.raw('DELETE', '/oidc/login/totp/enroll', Buffer.from(JSON.stringify({ id: flow.id })), JSONH);
  t.equal(dropped.status, 200, 'an unverified enrollment is dropped without a code');
  t.equal((await srv.raw('DELETE', '/oidc/login/totp/enroll', Buffer.from(JSON.stringify({ id: flow.id })), JSONH)).status, 404, 'nothing left to drop: 404');
  const second = await post('/oidc/login/totp/enroll', { id: flow.id });
  t.equal(second.status, 201, 'enrollment started again');
  const secret = /secret=([A-Z2-7]+)/.exec(second.body.provisioningUrl)![1];
  t.not(second.body.provisioningUrl, first.body.provisioningUrl, 'with a new secret');

  const wrong = await post('/oidc/login/totp/enroll/verify', { id: flow.id, code: '000000' === totpCode(secret) ? '111111' : '000000' });
  t.equal(wrong.status, 400, 'wrong code: 400');
  t.equal(wrong.body.error.code, 'MFA_INVALID_TOKEN', 'MFA_INVALID_TOKEN');
  t.equal((await post('/oidc/login/totp/enroll/verify', { id: flow.id, code: 'abc' })).status, 400, 'not a code: 400');
  const verified = await post('/oidc/login/totp/enroll/verify', { id: flow.id, code: totpCode(secret) });
  const code = await finish(t, srv, verified);
  const tok = await exchange(srv, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: verifier });
  t.equal(tok.status, 200, 'the code is issued and exchanged');
  const client = new Client(srv, '/edge/client/v1');
  const bearer = { headers: { authorization: `Bearer ${tok.body.access_token}` } };
  const cur = await client.get('/current-api-session', bearer);
  t.equal(cur.status, 200, 'the access token works');
  t.same(cur.body.data.authQueries, [], 'fully authenticated');
  t.equal((await client.get('/current-identity', bearer)).body.data?.id, identityId, 'as the identity');
  t.equal((await admin.get(`/identities/${identityId}`)).body.data.isMfaEnabled, true, 'MFA is enabled on the identity');
  t.equal((await post('/oidc/login/totp/enroll/verify', { id: flow.id, code: totpCode(secret) })).status, 401, 'the request is gone once its code was exchanged');

  // The next login passes the enrolled TOTP; enrollment cannot replace it without a code.
  const p2 = pkce();
  const flow2 = await codeFlow(t, srv, 'oidc-enroll', 'oidc-password-4', p2.challenge);
  t.equal(flow2.login.body.authQueries[0].isTotpEnrolled, true, 'TOTP enrolled now');
  t.equal((await post('/oidc/login/totp/enroll', { id: flow2.id })).status, 409, 'no second enrollment over a verified one');
  t.equal((await post('/oidc/login/totp/enroll/verify', { id: flow2.id, code: totpCode(secret) })).status, 404, 'nothing to verify');
  const noCode = await srv.raw('DELETE', '/oidc/login/totp/enroll', Buffer.from(JSON.stringify({ id: flow2.id, code: '' })), JSONH);
  t.equal(noCode.status, 400, 'a verified enrollment is not dropped without a code');
  t.equal(noCode.body.error.code, 'MFA_INVALID_TOKEN', 'MFA_INVALID_TOKEN');
  t.equal((await admin.get(`/identities/${identityId}`)).body.data.isMfaEnabled, true, 'still enabled');
  const code2 = await finish(t, srv, await post('/oidc/login/totp', { id: flow2.id, code: totpCode(secret) }));
  t.equal((await exchange(srv, { grant_type: 'authorization_code', code: code2, redirect_uri: REDIRECT, code_verifier: p2.verifier })).status, 200, 'second login with the enrolled TOTP');

  // A recovery code shown at enrollment passes the TOTP step once.
  const recovery = second.body.recoveryCodes[0] as string;
  const pr = pkce();
  const flowR = await codeFlow(t, srv, 'oidc-enroll', 'oidc-password-4', pr.challenge);
  const codeR = await finish(t, srv, await post('/oidc/login/totp', { id: flowR.id, code: recovery }));
  t.equal((await exchange(srv, { grant_type: 'authorization_code', code: codeR, redirect_uri: REDIRECT, code_verifier: pr.verifier })).status, 200, 'a login with a recovery code');
  const pr2 = pkce();
  const flowR2 = await codeFlow(t, srv, 'oidc-enroll', 'oidc-password-4', pr2.challenge);
  const usedUp = await post('/oidc/login/totp', { id: flowR2.id, code: recovery });
  t.equal(usedUp.status, 400, 'the same recovery code again: 400');
  t.equal(usedUp.body.error.code, 'MFA_INVALID_TOKEN', 'MFA_INVALID_TOKEN');

  // With a good code a verified enrollment is dropped (the identity's sessions lose their MFA pass).
  const p3 = pkce();
  const flow3 = await codeFlow(t, srv, 'oidc-enroll', 'oidc-password-4', p3.challenge);
  const del = await srv.raw('DELETE', '/oidc/login/totp/enroll', Buffer.from(JSON.stringify({ id: flow3.id, code: totpCode(secret) })), JSONH);
  t.equal(del.status, 200, 'verified enrollment dropped with a good code');
  t.equal((await admin.get(`/identities/${identityId}`)).body.data.isMfaEnabled, false, 'MFA no longer enabled');
  t.equal((await client.get('/current-identity', bearer)).status, 401, 'the earlier login is partial again (the policy requires TOTP)');
});

t.test('a CSR at login: a session certificate, and tokens bound to it (refresh and exchange only with it)', async (t) => {
  const srv = await startServer(t);
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
  const bearer = { headers: { authorization: `Bearer ${tok.body.access_token}` } };
  const listed = await new Client(srv, '/edge/client/v1').get('/current-api-session/certificates', bearer);
  t.equal(listed.status, 200, 'the session certificates of the login');
  t.equal(listed.body.data.length, 1, 'one');
  t.equal(listed.body.data[0].fingerprint, fp1, 'the one issued');

  // The bound refresh token works only over TLS presenting the session certificate.
  const noCert = await exchange(srv, { grant_type: 'refresh_token', refresh_token: tok.body.refresh_token });
  t.equal(noCert.status, 400, 'refresh without the certificate: 400');
  t.equal(noCert.body.error, 'access_denied', 'access_denied');
  const withCert = new https.Agent({ ca: srv.ca, cert: tok.body.session_cert, key: first.key, keepAlive: false });
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
  t.equal((await new Client(srv, '/edge/client/v1').get('/current-identity', { headers: { authorization: `Bearer ${ex.body.access_token}` } })).body.data?.id, identityId, 'the exchanged token is the identity');

  const certs = await new Client(srv, '/edge/client/v1').get('/current-api-session/certificates', { headers: { authorization: `Bearer ${ex.body.access_token}` } });
  t.same(certs.body.data.map((c: { fingerprint: string }) => c.fingerprint).sort(), [fp1, fp2].sort(), 'both session certificates are listed for the login');

  // Ending the login ends its bound tokens like any other.
  const asid = claimsOf(r2.body.access_token).z_asid;
  t.equal((await admin.delete(`/api-sessions/${asid}`)).status, 200, 'admin ends the login');
  t.equal((await new Client(srv, '/edge/client/v1').get('/current-identity', { headers: { authorization: `Bearer ${ex.body.access_token}` } })).status, 401, 'its access token is refused');
  t.equal((await srv.rawOn(srv.certPort, withSecond, 'POST', '/oidc/oauth/token', form({ client_id: 'openziti', grant_type: 'refresh_token', refresh_token: r2.body.refresh_token }), FORM)).body.error, 'invalid_grant', 'and its refresh token, even with the certificate');
});

t.test('a certificate login binds its tokens to the certificate', async (t) => {
  const srv = await startServer(t);
  const admin = await srv.login();
  const dev = await admin.post('/identities', { name: 'oidc-bound-dev', type: 'Device', isAdmin: false, enrollment: { ott: true } });
  const ott = (await admin.get(`/identities/${dev.body.data.id}`)).body.data.enrollment.ott.token;
  const { key, csr } = newCsr('oidc-bound-dev');
  const en = await srv.client.post('/enroll/ott', { token: ott, clientCsr: csr });
  t.equal(en.status, 200, 'enrolled');
  const agent = new https.Agent({ ca: srv.ca, cert: en.body.data.cert, key, keepAlive: false });
  const onCert = (m: string, p: string, b?: Buffer, h?: Record<string, string>) => srv.rawOn(srv.certPort, agent, m, p, b, h);
  const { verifier, challenge } = pkce();
  const q = new URLSearchParams({ client_id: 'openziti', response_type: 'code', scope: 'openid offline_access', redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: 'S256', state: 'st-1' });
  const id = new URL(String((await onCert('GET', `/oidc/authorize?${q}`)).headers.location)).searchParams.get('authRequestID')!;
  const code = await finish(t, srv, await onCert('POST', '/oidc/login/cert', Buffer.from(JSON.stringify({ id })), { 'content-type': 'application/json' }));
  const tok = await exchange(srv, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: verifier });
  t.equal(tok.status, 200, 'code exchanged');
  const fp = new crypto.X509Certificate(en.body.data.cert).fingerprint.replace(/:/g, '').toLowerCase();
  const claims = JSON.parse(Buffer.from(tok.body.refresh_token.split('.')[1], 'base64url').toString('utf8'));
  t.same(claims.z_cfs, [fp], 'bound to the login certificate (z_cfs)');
  t.equal(claims.z_acf, fp, 'named as the authentication certificate (z_acf)');
  const plain = await exchange(srv, { grant_type: 'refresh_token', refresh_token: tok.body.refresh_token });
  t.equal(plain.status, 400, 'refresh without the certificate: 400');
  t.equal(plain.body.error, 'access_denied', 'access_denied');
  const other = newCsr('someone-else');
  const otherDev = await admin.post('/identities', { name: 'oidc-other-dev', type: 'Device', isAdmin: false, enrollment: { ott: true } });
  const otherOtt = (await admin.get(`/identities/${otherDev.body.data.id}`)).body.data.enrollment.ott.token;
  const otherEn = await srv.client.post('/enroll/ott', { token: otherOtt, clientCsr: other.csr });
  const otherAgent = new https.Agent({ ca: srv.ca, cert: otherEn.body.data.cert, key: other.key, keepAlive: false });
  const wrongCert = await srv.rawOn(srv.certPort, otherAgent, 'POST', '/oidc/oauth/token', form({ client_id: 'openziti', grant_type: 'refresh_token', refresh_token: tok.body.refresh_token }), FORM);
  t.equal(wrongCert.body.error, 'access_denied', "another identity's certificate: access_denied");
  const ok = await onCert('POST', '/oidc/oauth/token', form({ client_id: 'openziti', grant_type: 'refresh_token', refresh_token: tok.body.refresh_token }), FORM);
  t.equal(ok.status, 200, 'refresh over TLS with the login certificate');
});

t.test('bad input anywhere under /oidc: a 4xx with a JSON error, never a 5xx', async (t) => {
  const srv = await startServer(t);
  const admin = await srv.login();
  await createUser(admin, 'oidc-bad', 'oidc-password-6');
  const { challenge } = pkce();
  const q = (extra: Record<string, string>) => new URLSearchParams({ client_id: 'openziti', response_type: 'code', scope: 'openid', redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: 'S256', ...extra });
  const id = new URL(String((await srv.raw('GET', `/oidc/authorize?${q({})}`)).headers.location)).searchParams.get('authRequestID')!;
  const J = { 'content-type': 'application/json' };
  const json = (v: unknown) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v));
  const cases: [string, string, string, Buffer | undefined, Record<string, string>][] = [
    ['redirect URI matching a pattern but not a URL', 'GET', `/oidc/authorize?${q({ redirect_uri: 'http://127.0.0.1:[x]/auth/callback' })}`, undefined, {}],
    ['authorize with a JSON array', 'POST', '/oidc/authorize', json([]), J],
    ['authorize with broken JSON', 'POST', '/oidc/authorize', json('{'), J],
    ['password step, password a number', 'POST', '/oidc/login/password', json({ id, username: 'oidc-bad', password: 12345 }), J],
    ['password step, username an object', 'POST', '/oidc/login/password', json({ id, username: { a: 1 }, password: 'x' }), J],
    ['password step, configTypes an object', 'POST', '/oidc/login/password', json({ id, username: 'oidc-bad', password: 'oidc-password-6', configTypes: { a: 1 } }), J],
    ['password step, id a number', 'POST', '/oidc/login/password', json({ id: 7, username: 'oidc-bad', password: 'x' }), J],
    ['password step, a JSON string', 'POST', '/oidc/login/password', json('"x"'), J],
    ['ext-jwt step, a malformed bearer', 'POST', '/oidc/login/ext-jwt', json({ id }), { ...J, authorization: 'Bearer a.b.c' }],
    ['cert step without a certificate', 'POST', '/oidc/login/cert', json({ id }), J],
    ['totp step, code a number', 'POST', '/oidc/login/totp', json({ id, code: 123456 }), J],
    ['totp enroll verify, code an array', 'POST', '/oidc/login/totp/enroll/verify', json({ id, code: ['1'] }), J],
    ['totp enroll delete, broken JSON', 'DELETE', '/oidc/login/totp/enroll', json('{'), J],
    ['token, grant_type an array', 'POST', '/oidc/oauth/token', json({ client_id: 'openziti', grant_type: ['refresh_token'] }), J],
    ['token, code an object', 'POST', '/oidc/oauth/token', json({ client_id: 'openziti', grant_type: 'authorization_code', code: { a: 1 } }), J],
    ['token, refresh token a number', 'POST', '/oidc/oauth/token', json({ client_id: 'openziti', grant_type: 'refresh_token', refresh_token: 5 }), J],
    ['token, exchange with an audience object', 'POST', '/oidc/oauth/token', json({ client_id: 'openziti', grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange', subject_token: 'x', subject_token_type: 'urn:ietf:params:oauth:token-type:access_token', audience: { a: 1 } }), J],
    ['token, csr_pem on an unbound refresh token', 'POST', '/oidc/oauth/token', json({ client_id: 'openziti', grant_type: 'refresh_token', refresh_token: 'a.b.c', csr_pem: 'junk' }), J],
    ['token, no client', 'POST', '/oidc/oauth/token', json({}), J],
    ['revoke, token an object', 'POST', '/oidc/revoke', json({ token: { a: 1 } }), J],
    ['end session, logout URI matching a pattern but not a URL', 'GET', `/oidc/end_session?${new URLSearchParams({ post_logout_redirect_uri: 'http://127.0.0.1:[x]/auth/logout' })}`, undefined, {}],
    ['end session, broken JSON', 'POST', '/oidc/end_session', json('{'), J],
    ['userinfo, garbage bearer', 'GET', '/oidc/userinfo', undefined, { authorization: 'Bearer x' }],
    ['auth queries of no request', 'GET', '/oidc/login/auth-queries?id=nope', undefined, {}],
    ['callback of no request', 'GET', '/oidc/authorize/callback?id=nope', undefined, {}],
    ['an unknown endpoint', 'GET', '/oidc/nothing-here', undefined, {}],
    ['a known endpoint, wrong method', 'PUT', '/oidc/oauth/token', json({}), J],
  ];
  for (const [what, method, p, body, headers] of cases) {
    const r = await srv.raw(method, p, body, headers);
    t.ok(r.status >= 400 && r.status < 500, `${what}: 4xx (got ${r.status} ${r.text.slice(0, 160)})`);
    t.ok(r.body && typeof r.body === 'object', `${what}: a JSON error`);
  }
  t.equal((await srv.raw('GET', '/oidc/.well-known/openid-configuration')).status, 200, 'the controller still answers');
});

t.test("the login as upstream's Go SDK posts it: client native, a form with flat env/sdk fields and configTypes", async (t) => {
  const srv = await startServer(t);
  const admin = await srv.login();
  const identityId = await createUser(admin, 'oidc-sdk', 'oidc-password-7');
  const ct = await admin.post('/config-types', { name: 'oidc-sdk-config', schema: {} });
  t.equal(ct.status, 201, 'a config type');
  const { verifier, challenge } = pkce();
  const q = new URLSearchParams({ client_id: 'native', response_type: 'code', scope: 'openid offline_access', state: 'st-1', code_challenge: challenge, code_challenge_method: 'S256', redirect_uri: REDIRECT, nonce: 'n-sdk' });
  const auth = await srv.raw('GET', `/oidc/authorize?${q}`);
  t.equal(auth.status, 302, 'authorize for the native client');
  const id = String(auth.headers['auth-request-id']);
  const fields = new URLSearchParams({
    id, username: 'oidc-sdk', password: 'oidc-password-7',
    envArch: 'amd64', envOs: 'linux', envOsRelease: '6.1', envOsVersion: '#1 SMP',
    sdkAppID: 'oidc-test-app', sdkAppVersion: '1.2.3', sdkBranch: 'main', sdkRevision: 'abc123', sdkType: 'golang', sdkVersion: 'v1.2.0',
  });
  fields.append('configTypes', 'oidc-sdk-config');
  const login = await srv.raw('POST', '/oidc/login/password', Buffer.from(fields.toString()), FORM);
  const code = await finish(t, srv, login);
  const tok = await srv.raw('POST', '/oidc/oauth/token', form({ client_id: 'native', grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: verifier }), FORM);
  t.equal(tok.status, 200, 'exchanged for the native client');
  const claims = JSON.parse(Buffer.from(tok.body.access_token.split('.')[1], 'base64url').toString('utf8'));
  t.same(claims.z_ct, [ct.body.data.id], 'the config types asked for are on the token (by id)');
  const me = (await admin.get(`/identities/${identityId}`)).body.data;
  t.match(me.envInfo, { arch: 'amd64', os: 'linux', osRelease: '6.1', osVersion: '#1 SMP' }, 'envInfo kept on the identity');
  t.match(me.sdkInfo, { appId: 'oidc-test-app', appVersion: '1.2.3', branch: 'main', revision: 'abc123', type: 'golang', version: 'v1.2.0' }, 'sdkInfo kept on the identity');
});
