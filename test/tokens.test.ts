/**
 * Signed API-session tokens: ES256 JWTs verifiable with the published JWKS, accepted as
 * `zt-session` and as `Authorization: Bearer` on both APIs and both listeners, kept valid across a
 * restart, never stored in clear, refused after every way of ending them, and every malformed,
 * forged, expired or foreign token refused with 401 in the error envelope. Key rotation runs
 * against a real store and real keys.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { createLocalJWKSet, jwtVerify, SignJWT, importPKCS8, decodeProtectedHeader } from 'jose';
import { startServer, isError, Client, type Server } from './helpers/server.js';
import { createUser } from './helpers/users.js';
import { Store, type ApiSessionRecord } from '../src/store/store.js';
import { createRegistry } from '../src/resources/index.js';
import { BASE_PATHS } from '../src/api/router.js';
import { SigningKeys } from '../src/auth/tokens.js';

// One controller for the cases below that need no fresh one: each uses names of its own.
const srv = await startServer(t);

/** The id of the updb authenticator of identity `id`. */
async function passwordAuthenticator(admin: Client, id: string): Promise<string> {
  return (await admin.get(`/identities/${id}/authenticators`)).body.data.find((a: any) => a.method === 'updb').id;
}

async function login(srv: Server, name: string, password: string, api: 'client' | 'management' = 'client') {
  const c = new Client(srv, api === 'client' ? '/edge/client/v1' : '/edge/management/v1');
  const r = await c.post('/authenticate?method=password', { username: name, password });
  if (r.status !== 200) throw new Error(`login ${name}: ${r.status} ${r.text}`);
  c.token = r.body.data.token;
  return { c, token: r.body.data.token as string, data: r.body.data };
}

const bearer = (token: string) => ({ headers: { 'zt-session': '', authorization: `Bearer ${token}` } });

/** Every file of a directory tree, concatenated. */
function allBytes(dir: string): Buffer {
  const out: Buffer[] = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) out.push(fs.readFileSync(path.join(e.parentPath, e.name)));
  }
  return Buffer.concat(out);
}

t.test('API-session tokens are signed, published, usable everywhere and survive a restart', async (t) => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-tokens-'));
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  let srv = await startServer(undefined, { dataDir, keepData: true });
  const admin = await srv.login();
  await createUser(admin, 'tok-user', 'tok-password-1');
  const { token, data, c } = await login(srv, 'tok-user', 'tok-password-1');

  // The token is an ES256 JWT with a kid, verifiable by anyone with the published JWKS.
  const header = decodeProtectedHeader(token);
  t.equal(header.alg, 'ES256', 'ES256');
  t.type(header.kid, 'string', 'has a kid');
  const jwksRes = await srv.raw('GET', '/oidc/keys');
  t.equal(jwksRes.status, 200, 'JWKS served');
  t.ok(jwksRes.body.keys.some((k: any) => k.kid === header.kid && k.kty === 'EC' && k.crv === 'P-256' && !('d' in k)), 'JWKS holds the public key, no private part');
  const { payload } = await jwtVerify(token, createLocalJWKSet(jwksRes.body));
  t.equal(payload.jti, data.id, 'jti is the API-session id');
  t.equal(payload.sub, data.identity.id, 'sub is the identity');
  t.equal(payload.z_t, 'api-session', 'token type');
  t.equal(data.token, token, 'data.token is the signed token');

  // zt-session and Bearer, both APIs, both listeners.
  t.equal((await c.get('/current-identity')).status, 200, 'client API, zt-session');
  const mgmt = new Client(srv, '/edge/management/v1', token);
  t.equal((await mgmt.get('/current-identity')).status, 200, 'management API, zt-session');
  const anon = new Client(srv, '/edge/client/v1');
  const viaBearer = await anon.get('/current-api-session', bearer(token));
  t.equal(viaBearer.status, 200, 'client API, Bearer');
  t.equal(viaBearer.body.data.id, data.id, 'Bearer resolves the same API session');
  t.equal(viaBearer.body.data.token, token, 'current-api-session shows the presented token');
  t.equal((await new Client(srv, '/edge/management/v1').get('/current-identity', bearer(token))).status, 200, 'management API, Bearer');
  const certClient = srv.tlsClient('client');
  t.equal((await certClient.get('/current-identity', { headers: { 'zt-session': token } })).status, 200, 'cert listener, zt-session');
  t.equal((await certClient.get('/current-identity', bearer(token))).status, 200, 'cert listener, Bearer');
  t.equal((await srv.tlsClient('management').get('/current-identity', bearer(token))).status, 200, 'cert listener management, Bearer');
  t.ok(viaBearer.headers['expires-at'], 'sliding expiry header present with Bearer');

  // The store keeps only a digest: the list shows no usable token, and no file of the data
  // directory holds the token.
  const listed = await admin.get(`/api-sessions/${data.id}`);
  t.equal(listed.status, 200, 'listed');
  t.not(listed.body.data.token, token, 'the management view does not reveal the token');
  t.equal((await anon.get('/current-identity', { headers: { 'zt-session': listed.body.data.token } })).status, 401, 'the listed digest opens nothing');
  await srv.stop();
  t.notOk(allBytes(dataDir).includes(Buffer.from(token.split('.')[2])), 'no file of the data directory holds the token signature');
  t.notOk(allBytes(dataDir).includes(Buffer.from(token)), 'nor the token');

  // A restart keeps the token valid (same key, read back from the data directory).
  srv = await startServer(t, { dataDir, keepData: true });
  const again = new Client(srv, '/edge/client/v1', token);
  t.equal((await again.get('/current-identity')).status, 200, 'token valid after restart');
  const jwks2 = (await srv.raw('GET', '/oidc/keys')).body;
  t.ok(jwks2.keys.some((k: any) => k.kid === header.kid), 'same key published after restart');
});

t.test('ending a token refuses it from the next request on', async (t) => {
  const admin = await srv.login();
  const u = await createUser(admin, 'rev-user', 'rev-password-1');

  const a = await login(srv, 'rev-user', 'rev-password-1');
  t.equal((await a.c.delete('/current-api-session')).status, 200, 'logout');
  t.ok(isError(await a.c.get('/current-identity'), 401, 'UNAUTHORIZED'), 'logout: refused');
  t.ok(isError(await new Client(srv, '/edge/client/v1').get('/current-identity', bearer(a.token)), 401, 'UNAUTHORIZED'), 'logout: refused as Bearer too');

  const b = await login(srv, 'rev-user', 'rev-password-1');
  t.equal((await admin.delete(`/api-sessions/${b.data.id}`)).status, 200, 'admin delete');
  t.ok(isError(await b.c.get('/current-identity'), 401, 'UNAUTHORIZED'), 'admin delete: refused');

  const c = await login(srv, 'rev-user', 'rev-password-1');
  t.equal((await admin.post(`/identities/${u}/disable`, { durationMinutes: 0 })).status, 200, 'disable');
  t.ok(isError(await c.c.get('/current-identity'), 401, 'UNAUTHORIZED'), 'identity disable: refused');
  t.equal((await admin.post(`/identities/${u}/enable`)).status, 200, 'enable');
  t.ok(isError(await c.c.get('/current-identity'), 401, 'UNAUTHORIZED'), 'enable does not bring the old token back');

  const d = await login(srv, 'rev-user', 'rev-password-1');
  t.equal((await admin.delete(`/authenticators/${await passwordAuthenticator(admin, u)}`)).status, 200, 'authenticator delete');
  t.ok(isError(await d.c.get('/current-identity'), 401, 'UNAUTHORIZED'), 'authenticator delete: refused');

  // Auth-policy change that forbids the method.
  const pol = await admin.post('/auth-policies', {
    name: 'updb-ok', primary: { cert: { allowed: true, allowExpiredCerts: false }, extJwt: { allowed: false, allowedSigners: [] }, updb: { allowed: true, maxAttempts: 0, lockoutDurationMinutes: 0, minPasswordLength: 5, requireMixedCase: false, requireNumberChar: false, requireSpecialChar: false } },
    secondary: { requireTotp: false },
  });
  t.equal(pol.status, 201, 'policy created');
  const v = await createUser(admin, 'pol-user', 'pol-password-1', { authPolicyId: pol.body.data.id });
  const e = await login(srv, 'pol-user', 'pol-password-1');
  t.equal((await e.c.get('/current-identity')).status, 200, 'allowed by its policy');
  const off = await admin.patch(`/auth-policies/${pol.body.data.id}`, { primary: { updb: { allowed: false, maxAttempts: 0, lockoutDurationMinutes: 0, minPasswordLength: 5, requireMixedCase: false, requireNumberChar: false, requireSpecialChar: false } } });
  t.equal(off.status, 200, `policy now forbids passwords (${off.text})`);
  t.ok(isError(await e.c.get('/current-identity'), 401, 'UNAUTHORIZED'), 'policy change: refused');
  // The record is deleted by a write that follows the policy change.
  let gone = false;
  for (let i = 0; i < 50 && !gone; i++) {
    gone = (await admin.get(`/api-sessions/${e.data.id}`)).status === 404;
    if (!gone) await new Promise((r) => setTimeout(r, 20));
  }
  t.ok(gone, 'and the API session is deleted right after');

  // Moving an identity to a policy that forbids its method.
  const strict = await admin.post('/auth-policies', {
    name: 'no-updb', primary: { cert: { allowed: true, allowExpiredCerts: false }, extJwt: { allowed: false, allowedSigners: [] }, updb: { allowed: false, maxAttempts: 0, lockoutDurationMinutes: 0, minPasswordLength: 5, requireMixedCase: false, requireNumberChar: false, requireSpecialChar: false } },
    secondary: { requireTotp: false },
  });
  t.equal(strict.status, 201, 'strict policy created');
  const mover = await createUser(admin, 'move-user', 'move-password-1');
  const m = await login(srv, 'move-user', 'move-password-1');
  t.equal((await admin.patch(`/identities/${mover}`, { authPolicyId: strict.body.data.id })).status, 200, 'identity moved to a policy without passwords');
  t.ok(isError(await m.c.get('/current-identity'), 401, 'UNAUTHORIZED'), 'identity policy change: refused');

  // Authenticator re-enroll.
  const re = await createUser(admin, 're-user', 're-password-1');
  const r = await login(srv, 're-user', 're-password-1');
  const expiresAt = new Date(Date.now() + 3_600_000).toISOString();
  t.equal((await admin.post(`/authenticators/${await passwordAuthenticator(admin, re)}/re-enroll`, { expiresAt })).status, 201, 'authenticator re-enroll');
  t.ok(isError(await r.c.get('/current-identity'), 401, 'UNAUTHORIZED'), 'authenticator re-enroll: refused');

  // Identity delete.
  const w = await createUser(admin, 'del-user', 'del-password-1');
  const f = await login(srv, 'del-user', 'del-password-1');
  t.equal((await admin.delete(`/identities/${w}`)).status, 200, 'identity delete');
  t.ok(isError(await f.c.get('/current-identity'), 401, 'UNAUTHORIZED'), 'identity delete: refused');
  t.ok(v, 'policy user existed');
});

t.test('bad tokens: each a 401 in the error envelope, never a 5xx', async (t) => {
  const admin = await srv.login();
  await createUser(admin, 'bad-user', 'bad-password-1');
  const { token, data } = await login(srv, 'bad-user', 'bad-password-1');
  const [h, p, s] = token.split('.');
  const claims = JSON.parse(Buffer.from(p, 'base64url').toString());
  const header = JSON.parse(Buffer.from(h, 'base64url').toString());
  const enc = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64url');

  // The controller's own private key, read from the data directory, signs tokens the controller
  // never issued: expired ones, and ones naming an API session that does not exist.
  const pem = fs.readFileSync(path.join(srv.dataDir, 'signing-keys', `${header.kid}.pem`), 'utf8');
  const ownKey = await importPKCS8(pem, 'ES256');
  const own = (c: Record<string, unknown>) => new SignJWT(c).setProtectedHeader({ alg: 'ES256', kid: header.kid, typ: 'JWT' }).sign(ownKey);
  const stranger = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey;
  const foreign = (kid: string) => new SignJWT(claims).setProtectedHeader({ alg: 'ES256', kid, typ: 'JWT' }).sign(stranger);
  const hs = crypto.createHmac('sha256', 'secret').update(`${enc({ alg: 'HS256', kid: header.kid })}.${p}`).digest('base64url');

  const cases: [string, string][] = [
    ['empty-ish', '   x   '],
    ['not a JWT', 'not-a-token'],
    ['two parts', `${h}.${p}`],
    ['four parts', `${token}.x`],
    ['bad base64 header', `!!!.${p}.${s}`],
    ['header not JSON', `${Buffer.from('nope').toString('base64url')}.${p}.${s}`],
    ['payload tampered', `${h}.${enc({ ...claims, sub: 'someone-else' })}.${s}`],
    ['signature tampered', `${h}.${p}.${s.slice(0, -4)}AAAA`],
    ['signature truncated', `${h}.${p}.${s.slice(0, 20)}`],
    ['alg none', `${enc({ alg: 'none', kid: header.kid })}.${p}.`],
    ['alg none with signature', `${enc({ alg: 'none', kid: header.kid })}.${p}.${s}`],
    ['HS256 with the kid as secret guess', `${enc({ alg: 'HS256', kid: header.kid })}.${p}.${hs}`],
    ['wrong key, known kid', await foreign(header.kid)],
    ['unknown kid (another controller)', await foreign('unknown-controller-key')],
    ['expired', await own({ ...claims, exp: Math.floor(Date.now() / 1000) - 60 })],
    ['no such API session', await own({ ...claims, jti: 'no-such-session' })],
    ['valid session, other identity', await own({ ...claims, sub: 'another-identity' })],
    ['same claims re-signed (not the issued token)', await own(claims)],
    ['wrong token type', await own({ ...claims, z_t: 'session' })],
    ['huge', 'a'.repeat(8000)],
  ];
  const anon = new Client(srv, '/edge/client/v1');
  const anonMgmt = new Client(srv, '/edge/management/v1');
  for (const [name, bad] of cases) {
    for (const [label, res] of [
      ['client zt-session', await anon.get('/current-identity', { headers: { 'zt-session': bad } })],
      ['client Bearer', await anon.get('/services', bearer(bad))],
      ['management zt-session', await anonMgmt.get('/identities', { headers: { 'zt-session': bad } })],
      ['management Bearer', await anonMgmt.post('/services', { name: 'x' }, bearer(bad))],
    ] as const) {
      t.ok(isError(res, 401, 'UNAUTHORIZED'), `${name}: ${label} → 401 (${res.status})`);
    }
  }
  t.equal((await anon.get('/current-identity', { headers: { 'zt-session': token } })).status, 200, 'the issued token still works');
  t.equal((await admin.get(`/api-sessions/${data.id}`)).status, 200, 'its API session untouched');
  t.ok(isError(await srv.raw('POST', '/oidc/keys'), 405, 'METHOD_NOT_ALLOWED'), 'JWKS is read-only');
});

t.test('key rotation: a new key signs, the old one verifies until nothing needs it', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-keys-'));
  const store = new Store(path.join(dir, 'db'), createRegistry().collectionSpecs());
  let needed = true;
  const keys = new SigningKeys(store, dir, { controllerId: 'ctrl-a', rotationMs: 3_600_000, stillNeeded: (k) => needed && k.retiredAt !== undefined });
  t.teardown(async () => {
    keys.close();
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  await keys.start();
  const first = keys.currentKid;
  const claims = { iss: 'https://x', sub: 'i1', jti: 's1', iat: Math.floor(Date.now() / 1000), z_t: 'api-session' };
  const old = keys.sign(claims);
  t.equal(keys.verify(old, 'api-session')?.jti, 's1', 'verifies');

  await keys.maintain(Date.now() + 3_600_001);
  const second = keys.currentKid;
  t.not(second, first, 'rotated once due');
  const fresh = keys.sign(claims);
  t.equal(decodeProtectedHeader(fresh).kid, second, 'new tokens carry the new kid');
  t.equal(keys.verify(old, 'api-session')?.jti, 's1', 'the old token still verifies (overlap)');
  t.same(keys.jwks().keys.map((k) => k.kid).sort(), [first, second].sort(), 'both keys published');
  t.ok(store.get('signingKeys', first)?.retiredAt, 'the old key is marked retired in the store');

  // Another controller reading the same store verifies both.
  const other = new SigningKeys(store, fs.mkdtempSync(path.join(dir, 'other-')), { controllerId: 'ctrl-b', rotationMs: 3_600_000 });
  t.equal(other.verify(old, 'api-session')?.jti, 's1', 'a second controller verifies the old token from the store');
  t.equal(other.verify(fresh, 'api-session')?.jti, 's1', 'and the new one');

  needed = false;
  await keys.maintain();
  t.equal(keys.verify(old, 'api-session'), undefined, 'once nothing needs it, the old key is gone');
  t.equal(keys.verify(fresh, 'api-session')?.jti, 's1', 'the current key stays');
  t.notOk(fs.existsSync(path.join(dir, 'signing-keys', `${first}.pem`)), 'its private key file removed');
  t.equal(other.verify(old, 'api-session'), undefined, 'the other controller follows the store');
  t.same(keys.jwks().keys.map((k) => k.kid), [second], 'JWKS holds the current key only');

  // A restart picks the current key back up.
  const again = new SigningKeys(store, dir, { controllerId: 'ctrl-a', rotationMs: 3_600_000 });
  await again.start();
  t.equal(again.currentKid, second, 'restart: same current key');
  again.close();
});

t.test('tampered, expired, revoked and partial tokens on every secured operation of both APIs', async (t) => {
  const { buildOperations } = await import('../src/api/operations.js');
  const ops = buildOperations(createRegistry()).filter((o) => o.auth !== 'none');
  const admin = await srv.login();
  const [h, p, s] = admin.token!.split('.');
  const header = JSON.parse(Buffer.from(h, 'base64url').toString());
  const claims = JSON.parse(Buffer.from(p, 'base64url').toString());
  const ownKey = await importPKCS8(fs.readFileSync(path.join(srv.dataDir, 'signing-keys', `${header.kid}.pem`), 'utf8'), 'ES256');
  const tampered = `${h}.${Buffer.from(JSON.stringify({ ...claims, sub: 'x' })).toString('base64url')}.${s}`;
  const expired = await new SignJWT({ ...claims, exp: Math.floor(Date.now() / 1000) - 1 }).setProtectedHeader({ alg: 'ES256', kid: header.kid }).sign(ownKey);
  const revoked = (await srv.login()).token!;
  await createUser(admin, 'mx-partial', 'mx-partial-pw');
  // An identity with MFA: its next login is partial.
  const first = await login(srv, 'mx-partial', 'mx-partial-pw');
  t.equal((await first.c.post('/current-identity/mfa')).status, 201, 'MFA enrolled');
  const secret = /secret=([A-Z2-7]+)/.exec((await first.c.get('/current-identity/mfa')).body.data.provisioningUrl)![1];
  const { generateSync } = await import('otplib');
  t.equal((await first.c.post('/current-identity/mfa/verify', { code: generateSync({ secret }) })).status, 200, 'MFA verified');
  const partial = (await login(srv, 'mx-partial', 'mx-partial-pw')).token;
  t.equal((await new Client(srv, '/edge/management/v1', revoked).delete('/current-api-session')).status, 200, 'revoked by logout');

  const PARTIAL_OK = new Set(['getCurrentAPISession', 'deleteCurrentAPISession', 'authenticateMfa', 'detailMfa', 'enrollMfa', 'verifyMfa', 'detailMfaQrCode']);
  let n = 0;
  for (const op of ops) {
    const c = new Client(srv, BASE_PATHS[op.api]);
    const url = op.path.replace(/\{[^}]+\}/g, 'made-up-id-0001');
    const body = ['post', 'put', 'patch'].includes(op.method) ? {} : undefined;
    const kinds: [string, string][] = [['tampered', tampered], ['expired', expired], ['revoked', revoked]];
    if (!PARTIAL_OK.has(op.operationId)) kinds.push(['partial', partial]);
    for (const [kind, token] of kinds) {
      // Alternate the two schemes.
      const headers: Record<string, string> = n++ % 2 ? { 'zt-session': token } : { 'zt-session': '', authorization: `Bearer ${token}` };
      const res = await c.request(op.method.toUpperCase(), url, body, { headers });
      t.ok(isError(res, 401, 'UNAUTHORIZED'), `${kind}: ${op.api} ${op.operationId} → 401 (${res.status})`);
    }
  }
  t.equal((await new Client(srv, '/edge/client/v1', partial).get('/current-api-session')).status, 200, 'the partial session itself is still live');
});

t.test('a data directory from before signed tokens: plain stored tokens are ended at start', async (t) => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-plain-'));
  const store = new Store(path.join(dataDir, 'db'), createRegistry().collectionSpecs());
  const now = Date.now();
  const plain = crypto.randomUUID();
  await store.write((tx) => {
    tx.put('apiSessions', { id: 'old-api-session', createdAt: now, updatedAt: now, token: plain, identityId: 'someone', authenticatorId: 'a', lastActivityAt: now, configTypes: [], isMfaRequired: false, isMfaComplete: false } as Partial<ApiSessionRecord> as ApiSessionRecord);
    tx.put('sessions', { id: 'old-session', createdAt: now, updatedAt: now, token: crypto.randomUUID(), apiSessionId: 'old-api-session', identityId: 'someone', serviceId: 'svc', type: 'Dial' });
  });
  await store.close();
  const srv = await startServer(t, { dataDir });
  const admin = await srv.login();
  t.ok(isError(await admin.get('/api-sessions/old-api-session'), 404, 'NOT_FOUND'), 'the API session with a plain token is gone');
  t.ok(isError(await admin.get('/sessions/old-session'), 404, 'NOT_FOUND'), 'and the session with a plain token');
  t.ok(isError(await new Client(srv, '/edge/client/v1', plain).get('/current-identity'), 401, 'UNAUTHORIZED'), 'the old token opens nothing');
});
