/**
 * `POST /enroll/token` with JWTs of an external JWT signer: certificate credentials (then
 * certificate login) and token credentials, signer selection by `mesh-token-issuer-id`, kid and
 * issuer, and the failure paths (no/invalid token, disabled signer, not allowed, already enrolled).
 */
import t from 'tap';
import crypto from 'node:crypto';
import * as jose from 'jose';
import { startServer, isError } from './helpers/server.js';
import { created } from './helpers/assert.js';
import { newCa, newCsr } from './helpers/pki.js';

t.test('token enrollment', async (t) => {
  const srv = await startServer(t);
  const admin = await srv.login();
  const idp = newCa('IdP signing');
  const key = crypto.createPrivateKey(idp.key);
  const sid = created(t, await admin.post('/external-jwt-signers', {
    name: 'idp', issuer: 'https://idp.example', audience: 'mesh-devices', enabled: true, certPem: idp.cert, kid: 'idp-kid-1',
    enrollToCertEnabled: true, enrollToTokenEnabled: false, enrollNameClaimsSelector: 'name', enrollAttributeClaimsSelector: 'groups',
  }), 'external-jwt-signers');
  const jwt = (claims: Record<string, unknown>, kid = 'idp-kid-1', k: crypto.KeyObject = key) =>
    new jose.SignJWT({ aud: 'mesh-devices', ...claims }).setProtectedHeader({ alg: 'ES256', kid }).setIssuer('https://idp.example').setIssuedAt().setExpirationTime('5m').sign(k);
  const enroll = async (token: string | undefined, body: unknown, headers: Record<string, string> = {}) =>
    srv.client.post('/enroll/token', body, { headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers } });

  const { key: devKey, csr } = newCsr('alice-laptop');
  t.ok(isError(await enroll(undefined, { clientCsr: csr }), 400, 'INVALID_ENROLLMENT_TOKEN'), 'no token → 400');
  t.ok(isError(await enroll('opaque-token', { clientCsr: csr }), 400, 'INVALID_ENROLLMENT_TOKEN'), 'opaque token without issuer id → 400');
  const wrongKey = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
  t.ok(isError(await enroll(await jwt({ sub: 'alice' }, 'idp-kid-1', wrongKey), { clientCsr: csr }), 400, 'INVALID_ENROLLMENT_TOKEN'), 'bad signature → 400');
  t.ok(isError(await enroll(await jwt({ sub: 'alice', aud: 'someone-else' }), { clientCsr: csr }), 400, 'INVALID_ENROLLMENT_TOKEN'), 'wrong audience → 400');

  const r = await enroll(await jwt({ sub: 'alice', name: 'Alice', groups: ['staff', 'eu'] }), { clientCsr: csr });
  t.equal(r.status, 200, `token → certificate (${r.text.slice(0, 200)})`);
  t.match(r.body.data.cert, /BEGIN CERTIFICATE/);
  t.match(r.body.data.ca, /BEGIN CERTIFICATE/);
  const found = (await admin.get(`/identities?filter=${encodeURIComponent('externalId="alice"')}`)).body.data;
  t.equal(found.length, 1);
  t.equal(found[0].name, 'Alice', 'name from enrollNameClaimsSelector');
  t.same(found[0].roleAttributes, ['eu', 'staff'], 'attributes from enrollAttributeClaimsSelector');
  const login = await srv.tlsClient('client', r.body.data.cert, devKey).post('/authenticate?method=cert');
  t.equal(login.status, 200, 'certificate login');
  t.equal(login.body.data.identityId, found[0].id);
  t.ok(isError(await enroll(await jwt({ sub: 'alice' }), { clientCsr: newCsr('again').csr }), 409, 'ENROLLMENT_IDENTITY_ALREADY_ENROLLED'), 'same subject again → 409');

  // Token credentials are not allowed by this signer; then allowed, selected by header.
  t.ok(isError(await enroll(await jwt({ sub: 'bob' }), {}), 409, 'INVALID_ENROLLMENT_NOT_ALLOWED'), 'token credentials not allowed → 409');
  t.equal((await admin.patch(`/external-jwt-signers/${sid}`, { enrollToTokenEnabled: true })).status, 200);
  const bob = await enroll(await jwt({ sub: 'bob' }, 'unknown-kid'), {}, { 'mesh-token-issuer-id': sid });
  t.equal(bob.status, 200, `token credentials via mesh-token-issuer-id (${bob.text.slice(0, 200)})`);
  t.same(bob.body, { data: {}, meta: {} });
  t.equal((await admin.get(`/identities?filter=${encodeURIComponent('externalId="bob"')}`)).body.data.length, 1);
  t.ok(isError(await enroll(await jwt({ sub: 'carol' }), {}, { 'mesh-token-issuer-id': 'nope' }), 400, 'INVALID_ENROLLMENT_TOKEN'), 'unknown issuer id → 400');

  // Disabled signer.
  t.equal((await admin.patch(`/external-jwt-signers/${sid}`, { enabled: false })).status, 200);
  t.ok(isError(await enroll(await jwt({ sub: 'dave' }), {}), 400, 'INVALID_ENROLLMENT_TOKEN'), 'disabled signer → 400');
});
