/**
 * TOTP enrollment during an OIDC login (upstream's /oidc/login/totp/enroll and its verify step),
 * for an identity whose auth policy requires TOTP and that has none, ending in the code being
 * issued; recovery codes at the TOTP step; dropping an enrollment with and without a code.
 */
import t from 'tap';
import { startServer, Client } from './helpers/server.js';
import { createUser } from './helpers/users.js';
import { authPolicyBody } from './helpers/bodies.js';
import { REDIRECT, pkce, codeFlow, finish, exchange } from './helpers/oidc.js';
import { totpCode } from '../src/auth/mfa.js';

t.test('TOTP enrollment during an OIDC login when the auth policy requires TOTP', async (t) => {
  const srv = await startServer(t);
  const admin = await srv.login();
  const pol = await admin.post('/auth-policies', { ...authPolicyBody('oidc-totp-required'), secondary: { requireTotp: true, requireExtJwtSigner: null } });
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
