/**
 * External JWT login (`authenticate?method=ext-jwt`) and secondary ext-JWT factors against the real
 * controller. Tokens are signed here with test keys; JWKS-backed signers fetch their keys from a
 * local node:http JWKS endpoint started by this file, certificate-backed signers use a self-signed
 * certificate made with the openssl CLI.
 */
import crypto, { type KeyObject } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { SignJWT, exportJWK, type JWK } from 'jose';
import { startServer, isError, type Client, type Server } from './helpers/server.js';
import { emptyOk } from './helpers/assert.js';
import { createUser } from './helpers/users.js';

// --- keys and the JWKS endpoint -------------------------------------------------------------
const ec = () => crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
const keyA = ec(); // in the JWKS from the start
const keyB = ec(); // added to the JWKS later
const rogue = ec(); // never published

const jwks: { keys: JWK[] } = { keys: [] };
let jwksFetches = 0;
const jwksServer = http.createServer((req, res) => {
  if (req.url === '/garbage') {
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"keys": "not a key set"');
    return;
  }
  if (req.url !== '/jwks') {
    res.writeHead(404).end();
    return;
  }
  jwksFetches++;
  res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(jwks));
});
await new Promise<void>((resolve) => jwksServer.listen(0, '127.0.0.1', resolve));
t.teardown(() => new Promise<void>((resolve) => jwksServer.close(() => resolve())));
const jwksUrl = `http://127.0.0.1:${(jwksServer.address() as { port: number }).port}/jwks`;
jwks.keys.push({ ...(await exportJWK(keyA.publicKey)), kid: 'kid-a', alg: 'ES256', use: 'sig' });

// Certificate-backed signer key and certificate.
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-extjwt-'));
t.teardown(() => fs.rmSync(tmp, { recursive: true, force: true }));
execFileSync('openssl', [
  'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', path.join(tmp, 'k.pem'),
  '-out', path.join(tmp, 'c.pem'), '-subj', '/CN=test-idp-signer', '-days', '30',
], { stdio: 'ignore' });
const certKey = crypto.createPrivateKey(fs.readFileSync(path.join(tmp, 'k.pem')));
const certPem = fs.readFileSync(path.join(tmp, 'c.pem'), 'utf8');

const ISS = 'https://idp.example.test';
const AUD = 'mesh-clients';

interface TokenOpts {
  key?: KeyObject;
  kid?: string | null;
  iss?: string | null;
  aud?: string | string[] | null;
  exp?: number | null;
  nbf?: number;
  alg?: string;
  claims?: Record<string, unknown>;
}
const nowS = () => Math.floor(Date.now() / 1000);
async function token(sub: string | undefined, o: TokenOpts = {}): Promise<string> {
  const jwt = new SignJWT({ ...(sub !== undefined ? { sub } : {}), ...o.claims });
  const header: Record<string, unknown> = { alg: o.alg ?? 'ES256' };
  if (o.kid !== null) header.kid = o.kid ?? 'kid-a';
  jwt.setProtectedHeader(header as any);
  if (o.iss !== null) jwt.setIssuer(o.iss ?? ISS);
  if (o.aud !== null) jwt.setAudience(o.aud ?? AUD);
  jwt.setIssuedAt();
  if (o.exp !== null) jwt.setExpirationTime(o.exp ?? nowS() + 300);
  if (o.nbf !== undefined) jwt.setNotBefore(o.nbf);
  return jwt.sign(o.key ?? keyA.privateKey);
}

// --- controller -------------------------------------------------------------------------------
let srv: Server;
let admin: Client;
const ids: Record<string, string> = {};
const signers: Record<string, string> = {};

const extLogin = (jwt: string | undefined, api: 'client' | 'management' = 'client') =>
  (api === 'client' ? srv.client : srv.mgmt).post('/authenticate?method=ext-jwt', undefined, jwt === undefined ? {} : { headers: { authorization: `Bearer ${jwt}` } });

async function policy(name: string, primaryExtJwt: Record<string, unknown>, secondary: Record<string, unknown> = {}): Promise<string> {
  const r = await admin.post('/auth-policies', {
    name,
    primary: {
      cert: { allowed: true, allowExpiredCerts: true },
      extJwt: { allowed: true, allowedSigners: [], ...primaryExtJwt },
      updb: { allowed: true, minPasswordLength: 5, maxAttempts: 0, lockoutDurationMinutes: 0, requireMixedCase: false, requireNumberChar: false, requireSpecialChar: false },
    },
    secondary: { requireTotp: false, ...secondary },
  });
  if (r.status !== 201) throw new Error(`policy ${name}: ${r.status} ${r.text}`);
  return r.body.data.id;
}

t.before(async () => {
  srv = await startServer(t, { env: { MESH_EXT_JWT_JWKS_COOLDOWN_MS: '0' } });
  admin = await srv.login();
  const mk = async (key: string, body: Record<string, unknown>) => {
    const r = await admin.post('/external-jwt-signers', body);
    if (r.status !== 201) throw new Error(`signer ${key}: ${r.status} ${r.text}`);
    signers[key] = r.body.data.id;
  };
  await mk('jwks', { name: 'idp-jwks', issuer: ISS, audience: AUD, jwksEndpoint: jwksUrl, enabled: true, externalAuthUrl: 'https://idp.example.test/authorize', clientId: 'mesh-cli', scopes: ['openid', 'email'] });
  await mk('cert', { name: 'idp-cert', issuer: 'cert-issuer', audience: 'aud-cert', certPem, kid: 'cert-kid-1', enabled: true, useExternalId: true, claimsProperty: 'email' });
  await mk('off', { name: 'idp-off', issuer: 'https://off.example.test', audience: AUD, jwksEndpoint: jwksUrl, enabled: false });
  ids.u1 = await createUser(admin, 'ext-u1');
  ids.u2 = await createUser(admin, 'ext-u2', undefined, { externalId: 'u2@example.test' });
});

t.test('client signer list is public and shows no key material', async (t) => {
  const r = await srv.client.get('/external-jwt-signers');
  t.equal(r.status, 200, 'no session needed');
  const names = r.body.data.map((s: any) => s.name).sort();
  t.same(names, ['idp-cert', 'idp-jwks'], 'enabled signers only');
  const s = r.body.data.find((x: any) => x.name === 'idp-jwks');
  t.equal(s.externalAuthUrl, 'https://idp.example.test/authorize');
  t.equal(s.clientId, 'mesh-cli');
  t.equal(s.audience, AUD);
  t.same(s.scopes, ['openid', 'email']);
  t.equal(s.targetToken, 'ACCESS');
  t.equal(s._links.self.href, `./external-jwt-signers/${s.id}`);
  for (const secret of ['certPem', 'jwksEndpoint', 'kid', 'fingerprint', 'issuer']) t.notOk(secret in s, `no ${secret}`);
  t.equal(r.body.meta.pagination.totalCount, 2, 'paged list');
  t.ok(isError(await srv.mgmt.get('/external-jwt-signers'), 401, 'UNAUTHORIZED'), 'management list needs a session');
});

t.test('JWKS-backed signer: good and bad tokens', async (t) => {
  const ok = await extLogin(await token(ids.u1));
  t.equal(ok.status, 200, `valid token → 200 ${ok.text.slice(0, 200)}`);
  t.equal(ok.body.data.identityId, ids.u1, 'identity from sub');
  t.equal(ok.headers['zt-session'], ok.body.data.token, 'zt-session header');
  t.same(ok.body.data.authQueries, [], 'fully authenticated');
  const c = new (srv.client.constructor as any)(srv, '/edge/client/v1', ok.body.data.token) as Client;
  t.equal((await c.get('/current-identity')).body.data.id, ids.u1, 'session works');
  t.equal((await extLogin(await token(ids.u1), 'management')).status, 200, 'also on the management API');

  const bad: Array<[string, Promise<string> | string]> = [
    ['no Authorization header', undefined as unknown as string],
    ['malformed token', 'abc.def'],
    ['garbage', 'not-a-jwt'],
    ['wrong issuer', token(ids.u1, { iss: 'https://elsewhere.example.test' })],
    ['no issuer', token(ids.u1, { iss: null })],
    ['wrong audience', token(ids.u1, { aud: 'someone-else' })],
    ['no audience', token(ids.u1, { aud: null })],
    ['no kid', token(ids.u1, { kid: null })],
    ['unknown kid', token(ids.u1, { kid: 'kid-unknown' })],
    ['signed by an unpublished key under a known kid', token(ids.u1, { key: rogue.privateKey })],
    ['expired', token(ids.u1, { exp: nowS() - 600 })],
    ['no exp', token(ids.u1, { exp: null })],
    ['not yet valid', token(ids.u1, { nbf: nowS() + 600 })],
    ['unknown identity', token('no-such-identity')],
    ['no subject', token(undefined)],
    ['externalId where the signer expects an id', token('u2@example.test')],
  ];
  for (const [label, jwt] of bad) {
    const r = await extLogin(jwt === undefined ? undefined : await jwt);
    t.ok(isError(r, 401, 'INVALID_AUTH'), `${label} → 401 INVALID_AUTH (${r.status})`);
    t.notOk(r.headers['zt-session'], `${label}: no session header`);
  }
  const hs = await new SignJWT({ sub: ids.u1 }).setProtectedHeader({ alg: 'HS256', kid: 'kid-a' }).setIssuer(ISS).setAudience(AUD).setExpirationTime('5m').sign(Buffer.from('0123456789abcdef0123456789abcdef'));
  t.ok(isError(await extLogin(hs), 401, 'INVALID_AUTH'), 'HS256 (symmetric) token → 401');
  const none = `${Buffer.from(JSON.stringify({ alg: 'none', kid: 'kid-a' })).toString('base64url')}.${Buffer.from(JSON.stringify({ sub: ids.u1, iss: ISS, aud: AUD, exp: nowS() + 300 })).toString('base64url')}.`;
  t.ok(isError(await extLogin(none), 401, 'INVALID_AUTH'), 'alg none → 401');
  const replayed = await token(ids.u1);
  t.equal((await extLogin(replayed)).status, 200, 'a valid token logs in');
  t.equal((await extLogin(replayed)).status, 200, 'and, like upstream, may log in again while valid');
});

t.test('a key published later is fetched again', async (t) => {
  const before = jwksFetches;
  const jwt = await token(ids.u1, { key: keyB.privateKey, kid: 'kid-b' });
  t.ok(isError(await extLogin(jwt), 401, 'INVALID_AUTH'), 'kid not (yet) in the JWKS → 401');
  jwks.keys.push({ ...(await exportJWK(keyB.publicKey)), kid: 'kid-b', alg: 'ES256', use: 'sig' });
  const r = await extLogin(jwt);
  t.equal(r.status, 200, `after publishing the key → 200 (${r.status})`);
  t.ok(jwksFetches > before, 'the JWKS was fetched again');
});

t.test('a JWKS endpoint that is down or serves garbage is a 401, never a 5xx', async (t) => {
  const base = jwksUrl.replace(/\/jwks$/, '');
  for (const [name, endpoint] of [['idp-down', 'http://127.0.0.1:1/jwks'], ['idp-garbage', `${base}/garbage`], ['idp-404', `${base}/nothing-here`]]) {
    const iss = `https://${name}.example.test`;
    const r = await admin.post('/external-jwt-signers', { name, issuer: iss, audience: AUD, jwksEndpoint: endpoint, enabled: true });
    t.equal(r.status, 201, `${name} created`);
    const res = await extLogin(await token(ids.u1, { iss }));
    t.ok(isError(res, 401, 'INVALID_AUTH'), `${name}: login → 401 (${res.status})`);
    t.equal((await admin.delete(`/external-jwt-signers/${r.body.data.id}`)).status, 200, `${name} removed`);
  }
  t.equal((await extLogin(await token(ids.u1))).status, 200, 'the healthy signer still works');
});

t.test('certificate-backed signer with externalId and a custom claims property', async (t) => {
  const signed = (claims: Record<string, unknown>, o: TokenOpts = {}) => token('ignored-subject', { key: certKey, kid: 'cert-kid-1', iss: 'cert-issuer', aud: 'aud-cert', claims, ...o });
  const r = await extLogin(await signed({ email: 'u2@example.test' }));
  t.equal(r.status, 200, `externalId from the email claim → 200 ${r.text.slice(0, 200)}`);
  t.equal(r.body.data.identityId, ids.u2);
  t.ok(isError(await extLogin(await signed({ email: 'nobody@example.test' })), 401, 'INVALID_AUTH'), 'unknown externalId → 401');
  t.ok(isError(await extLogin(await signed({})), 401, 'INVALID_AUTH'), 'claim missing → 401');
  t.ok(isError(await extLogin(await signed({ email: 'u2@example.test' }, { key: keyA.privateKey })), 401, 'INVALID_AUTH'), 'wrong key for the certificate → 401');
  t.ok(isError(await extLogin(await signed({ email: 'u2@example.test' }, { aud: AUD })), 401, 'INVALID_AUTH'), 'audience of another signer → 401');
  t.ok(isError(await extLogin(await token('u2@example.test')), 401, 'INVALID_AUTH'), 'the externalId through a signer without useExternalId → 401');
});

t.test('disabled signer, then enabled', async (t) => {
  const jwt = await token(ids.u1, { iss: 'https://off.example.test' });
  t.ok(isError(await extLogin(jwt), 401, 'INVALID_AUTH'), 'disabled signer → 401');
  t.equal((await admin.patch(`/external-jwt-signers/${signers.off}`, { enabled: true })).status, 200);
  t.equal((await extLogin(jwt)).status, 200, 'enabled → 200');
  t.equal((await srv.client.get('/external-jwt-signers')).body.data.length, 3, 'now listed for clients');
  t.equal((await admin.patch(`/external-jwt-signers/${signers.off}`, { enabled: false })).status, 200);
  t.ok(isError(await extLogin(jwt), 401, 'INVALID_AUTH'), 'disabled again → 401');
});

t.test('auth policy: allowed signers and ext-jwt allowance', async (t) => {
  const onlyCert = await policy('only-cert-signer', { allowedSigners: [signers.cert] });
  const u3 = await createUser(admin, 'ext-u3', undefined, { externalId: 'u3@example.test', authPolicyId: onlyCert });
  const certToken = await token('x', { key: certKey, kid: 'cert-kid-1', iss: 'cert-issuer', aud: 'aud-cert', claims: { email: 'u3@example.test' } });
  t.equal((await extLogin(certToken)).status, 200, 'allowed signer → 200');
  t.ok(isError(await extLogin(await token(u3)), 401, 'INVALID_AUTH'), 'another enabled signer → 401');

  const noExt = await policy('no-ext-jwt', { allowed: false });
  const u4 = await createUser(admin, 'ext-u4', undefined, { authPolicyId: noExt });
  t.ok(isError(await extLogin(await token(u4)), 401, 'INVALID_AUTH'), 'extJwt.allowed=false → 401');
  t.equal((await admin.patch(`/identities/${u4}`, { authPolicyId: 'default' })).status, 200);
  t.equal((await extLogin(await token(u4))).status, 200, 'default policy → 200');

  t.ok(isError(await admin.delete(`/external-jwt-signers/${signers.cert}`), 409, 'CAN_NOT_DELETE_REFERENCED_ENTITY'), 'referenced signer cannot be deleted');
  t.ok(isError(await admin.delete(`/auth-policies/${onlyCert}`), 409, 'CAN_NOT_DELETE_REFERENCED_ENTITY'), 'policy in use cannot be deleted');
});

t.test('disabled identity cannot log in with ext-jwt', async (t) => {
  emptyOk(t, await admin.post(`/identities/${ids.u1}/disable`, { durationMinutes: 0 }), 'disable');
  t.ok(isError(await extLogin(await token(ids.u1)), 401, 'INVALID_AUTH'), 'disabled → 401');
  emptyOk(t, await admin.post(`/identities/${ids.u1}/enable`), 'enable');
  t.equal((await extLogin(await token(ids.u1))).status, 200, 'enabled → 200');
});

t.test('secondary ext-jwt factor required by the auth policy', async (t) => {
  const pol = await policy('needs-idp-token', {}, { requireExtJwtSigner: signers.jwks });
  const u5 = await createUser(admin, 'ext-u5', 'ext-password-5', { authPolicyId: pol });
  const login = await srv.client.post('/authenticate?method=password', { username: 'ext-u5', password: 'ext-password-5' });
  t.equal(login.status, 200, 'password login → 200');
  const q = login.body.data.authQueries;
  t.equal(q.length, 1, 'one auth query');
  t.same(q[0], { typeId: 'EXT-JWT', provider: 'url', httpUrl: 'https://idp.example.test/authorize', clientId: 'mesh-cli', scopes: ['openid', 'email'], id: signers.jwks }, 'EXT-JWT auth query');
  const c = new (srv.client.constructor as any)(srv, '/edge/client/v1', login.body.data.token) as Client;
  t.ok(isError(await c.get('/current-identity/authenticators'), 401, 'UNAUTHORIZED'), 'zt-session alone → 401');
  const bearer = (jwt: string) => ({ headers: { authorization: `Bearer ${jwt}` } });
  const good = await token(u5);
  t.equal((await c.get('/current-identity/authenticators', bearer(good))).status, 200, 'with a valid signer token → 200');
  t.equal((await c.get('/current-identity/authenticators', bearer(good))).status, 200, 'the same token on the next request → 200');
  t.same((await c.get('/current-api-session', bearer(good))).body.data.authQueries, [], 'no auth query while the token is sent');
  t.equal((await c.get('/current-api-session')).body.data.authQueries.length, 1, 'auth query again without it');
  t.ok(isError(await c.get('/current-identity/authenticators', bearer(await token(ids.u1))), 401, 'UNAUTHORIZED'), 'a token for another identity → 401');
  t.ok(isError(await c.get('/current-identity/authenticators', bearer(await token(u5, { exp: nowS() - 600 }))), 401, 'UNAUTHORIZED'), 'an expired token → 401');
  const certToken = await token('x', { key: certKey, kid: 'cert-kid-1', iss: 'cert-issuer', aud: 'aud-cert', claims: { email: 'none' } });
  t.ok(isError(await c.get('/current-identity/authenticators', bearer(certToken)), 401, 'UNAUTHORIZED'), 'a token of another signer → 401');
  const m = new (srv.mgmt.constructor as any)(srv, '/edge/management/v1', login.body.data.token) as Client;
  t.equal((await m.get('/current-identity', bearer(good))).status, 200, 'management API honours the token too');
});
