/**
 * OIDC login as upstream serves it under /oidc, driven as a client drives it over HTTPS against a
 * real server: discovery, authorize with PKCE (S256), the password login step, the code exchange,
 * the access token as a Bearer token on both APIs, refresh-token rotation with reuse detection,
 * revoke, end session, the certificate, ext-JWT and TOTP steps, token exchange, the login as the Go
 * SDK posts it, and the OAuth error JSON (never a 5xx) for bad input anywhere under /oidc.
 * Redirects are followed by hand.
 */
import crypto from 'node:crypto';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { createLocalJWKSet, jwtVerify, SignJWT } from 'jose';
import { startServer, Client } from './helpers/server.js';
import { createUser } from './helpers/users.js';
import { authPolicyBody } from './helpers/bodies.js';
import { REDIRECT, form, FORM, pkce, codeFlow, finish, exchange, enrolledDevice } from './helpers/oidc.js';
import { totpCode } from '../src/auth/mfa.js';

// One controller for every case: each uses identities, signers and policies of its own.
const srv = await startServer(t);

t.test('code flow with PKCE, Bearer access tokens, rotation, reuse, revoke, end session', async (t) => {
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

t.test("the endpoint names upstream's clients use; a console logout (revoke at /oidc/oauth/revoke) ends the token everywhere", async (t) => {
  const admin = await srv.login();
  await createUser(admin, 'alias-user', 'alias-password-1');
  const bearer = (token: string) => ({ headers: { authorization: `Bearer ${token}` } });
  const login = async () => {
    const { verifier, challenge } = pkce();
    const flow = await codeFlow(t, srv, 'alias-user', 'alias-password-1', challenge);
    // `/oidc/token`: the token URL of the oauth2 security definition in upstream's edge specs.
    const tok = await srv.raw('POST', '/oidc/token', form({ client_id: 'openziti', grant_type: 'authorization_code', code: await finish(t, srv, flow.login), redirect_uri: REDIRECT, code_verifier: verifier }), FORM);
    t.equal(tok.status, 200, 'code exchanged at /oidc/token');
    return tok.body as { access_token: string; refresh_token: string };
  };

  const root = await srv.raw('GET', '/.well-known/openid-configuration');
  t.equal(root.status, 200, 'discovery at the host root too, as upstream serves it');
  t.same(root.body, (await srv.raw('GET', '/oidc/.well-known/openid-configuration')).body, 'the same document');
  t.equal((await srv.raw('POST', '/.well-known/openid-configuration')).status, 405, 'GET and HEAD only');

  // Introspection (RFC 7662) for the token's holder.
  const tok = await login();
  const introspect = (fields: Record<string, string>) => srv.raw('POST', '/oidc/oauth/introspect', form(fields), FORM);
  const ia = await introspect({ token: tok.access_token });
  t.equal(ia.status, 200, 'introspect an access token');
  t.match(ia.body, { active: true, token_type: 'Bearer', client_id: 'openziti', scope: 'openid offline_access' }, 'active, with its client and scope');
  t.match((await introspect({ token: tok.refresh_token, token_type_hint: 'refresh_token' })).body, { active: true, token_type: 'refresh_token' }, 'the refresh token too');
  t.same((await introspect({ token: 'junk' })).body, { active: false }, 'junk is inactive');
  t.equal((await introspect({})).status, 400, 'no token: 400');

  // What upstream's admin console sends at logout: its refresh token, with a hint and its client.
  const rv = await srv.raw('POST', '/oidc/oauth/revoke', form({ token: tok.refresh_token, token_type_hint: 'refresh_token', client_id: 'openziti' }), FORM);
  t.equal(rv.status, 200, 'revoked at /oidc/oauth/revoke');
  t.equal((await srv.client.get('/current-identity', bearer(tok.access_token))).status, 401, 'its access token is refused on the Client API');
  t.equal((await srv.mgmt.get('/current-identity', bearer(tok.access_token))).status, 401, 'on the Management API');
  t.equal((await srv.tlsClient('client').get('/current-identity', bearer(tok.access_token))).status, 401, 'and on the certificate listener');
  t.equal((await srv.raw('GET', '/oidc/userinfo', undefined, { authorization: `Bearer ${tok.access_token}` })).status, 401, 'userinfo refuses it');
  t.equal((await exchange(srv, { grant_type: 'refresh_token', refresh_token: tok.refresh_token })).status, 400, 'the refresh token is refused');
  t.same((await introspect({ token: tok.access_token })).body, { active: false }, 'introspection says inactive');

  // Revoking the access token ends the login as well.
  const tok2 = await login();
  t.equal((await srv.mgmt.get('/current-identity', bearer(tok2.access_token))).status, 200, 'a second login works');
  t.equal((await srv.raw('POST', '/oidc/oauth/revoke', form({ token: tok2.access_token, token_type_hint: 'access_token', client_id: 'openziti' }), FORM)).status, 200, 'access token revoked');
  t.equal((await srv.tlsClient('management').get('/current-identity', bearer(tok2.access_token))).status, 401, 'refused on the certificate listener');
  t.equal((await exchange(srv, { grant_type: 'refresh_token', refresh_token: tok2.refresh_token })).status, 400, 'its refresh token with it');
  t.equal((await srv.raw('POST', '/oidc/oauth/revoke', form({ client_id: 'openziti' }), FORM)).status, 400, 'no token: 400');
  t.equal((await srv.raw('GET', '/oidc/oauth/revoke')).status, 404, 'POST only, as /oidc/revoke');
});

t.test('certificate login on the certificate listener; the TOTP step when MFA is required', async (t) => {
  const admin = await srv.login();

  // Certificate: an enrolled device logs in at /oidc/login/cert over mutual TLS.
  const dev = await enrolledDevice(t, srv, admin, 'oidc-dev');
  const onCert = dev.onCert;
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
  // The token is bound to the login certificate (z_cfs): it opens nothing without it.
  const bearerOf = { authorization: `Bearer ${tok.body.access_token}` };
  const me = await onCert('GET', '/edge/client/v1/current-identity', undefined, bearerOf);
  t.equal(me.status, 200, 'the bound access token with its certificate: 200');
  t.equal(me.body.data?.id, dev.id, 'the access token is the device');
  const bare = await new Client(srv, '/edge/client/v1').get('/current-identity', { headers: bearerOf });
  t.equal(bare.status, 401, 'the bound access token without a client certificate: 401');
  t.equal(bare.body.error?.code, 'UNAUTHORIZED', 'in the error envelope');
  const other = await enrolledDevice(t, srv, admin, 'oidc-dev-2');
  const stolen = await other.onCert('GET', '/edge/client/v1/current-identity', undefined, bearerOf);
  t.equal(stolen.status, 401, "the bound access token with another identity's certificate: 401");

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
  t.equal(flow.login.body.authQueries[0].provider, 'mesh', 'by the brand provider, as /authenticate names it');
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
  // Upstream's Go SDK renews with two exchanges of one refresh token: for a refresh token, then for
  // an ID token (answered in access_token). The second neither rotates nor counts as a reuse.
  const sdk = await exchange(srv, { grant_type: TX, subject_token: r2.body.refresh_token, subject_token_type: RT, requested_token_type: RT });
  t.equal(sdk.status, 200, 'SDK renewal: refresh token exchanged');
  const sdkId = await exchange(srv, { grant_type: TX, subject_token: r2.body.refresh_token, subject_token_type: RT, requested_token_type: IT });
  t.equal(sdkId.status, 200, 'SDK renewal: the same refresh token exchanged for an ID token');
  t.equal(sdkId.body.issued_token_type, IT, 'issued_token_type id_token');
  t.equal(sdkId.body.token_type, 'N_A', 'token_type N_A');
  const { payload: idClaims } = await jwtVerify(sdkId.body.access_token, createLocalJWKSet((await srv.raw('GET', '/oidc/keys')).body), { audience: 'openziti' });
  t.equal(idClaims.sub, identityId, 'an ID token of the identity, in access_token');
  t.equal((await client.get('/current-identity', bearer(sdkId.body.access_token))).status, 401, 'an ID token opens no API');
  t.equal((await client.get('/current-identity', bearer(sdk.body.access_token))).status, 200, 'the renewed access token works: nothing was taken as a reuse');
  const idFromAccess = await exchange(srv, { grant_type: TX, subject_token: sdk.body.access_token, subject_token_type: AT, requested_token_type: IT });
  t.equal(idFromAccess.status, 200, 'an access token exchanged for an ID token');
  t.equal((await exchange(srv, { grant_type: TX, subject_token: 'x.y.z', subject_token_type: RT, requested_token_type: IT })).body.error, 'invalid_grant', 'a forged subject for an ID token: invalid_grant');
  const r2b = await exchange(srv, { grant_type: TX, subject_token: sdk.body.refresh_token, subject_token_type: RT });
  t.equal(r2b.status, 200, 'the renewed refresh token keeps working');
  t.equal((await exchange(srv, { grant_type: TX, subject_token: r2.body.refresh_token, subject_token_type: RT })).status, 400, 'a rotated refresh token exchanged for tokens again is still a reuse');
  // That reuse ended the family; a fresh login for the checks below.
  const p3 = pkce();
  const q3 = new URLSearchParams({ client_id: 'openziti', response_type: 'code', scope: 'openid offline_access', redirect_uri: REDIRECT, code_challenge: p3.challenge, code_challenge_method: 'S256', state: 'st-1' });
  const id3 = new URL(String((await srv.raw('GET', `/oidc/authorize?${q3}`)).headers.location)).searchParams.get('authRequestID')!;
  const login3 = await srv.raw('POST', '/oidc/login/ext-jwt', Buffer.from(JSON.stringify({ id: id3 })), { ...JSONH, authorization: `Bearer ${await idpToken(identityId)}` });
  const tok3 = await exchange(srv, { grant_type: 'authorization_code', code: await finish(t, srv, login3), redirect_uri: REDIRECT, code_verifier: p3.verifier });
  t.equal(tok3.status, 200, 'a fresh login');
  const r3 = await exchange(srv, { grant_type: TX, subject_token: tok3.body.refresh_token, subject_token_type: RT });
  const a3 = await exchange(srv, { grant_type: TX, subject_token: tok3.body.access_token, subject_token_type: AT });
  t.equal(r3.status, 200, 'its refresh token exchanged');
  t.equal(a3.status, 200, 'its access token exchanged');

  // The exchange rotated the refresh token: the old one is a reuse and ends the family.
  const reuse = await exchange(srv, { grant_type: TX, subject_token: tok3.body.refresh_token, subject_token_type: RT });
  t.equal(reuse.status, 400, 'rotated refresh token reused in an exchange: 400');
  t.equal((await client.get('/current-identity', bearer(a3.body.access_token))).status, 401, 'the family ended');

  // An auth policy whose secondary factor is this signer's token: proven at the login step.
  const pol = await admin.post('/auth-policies', { ...authPolicyBody('oidc-secondary-ext-jwt'), secondary: { requireTotp: false, requireExtJwtSigner: signer.body.data.id } });
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

t.test("the login as upstream's Go SDK posts it: client native, a form with flat env/sdk fields and configTypes", async (t) => {
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

t.test('bad input anywhere under /oidc: a 4xx with a JSON error, never a 5xx', async (t) => {
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
    ["revoke at the console's name, broken JSON", 'POST', '/oidc/oauth/revoke', json('{'), J],
    ['introspect, token an array', 'POST', '/oidc/oauth/introspect', json({ token: ['x'] }), J],
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
