/**
 * Certificate authorities, auth policies, external JWT signers and authenticators (Management API)
 * against the real controller. Certificates are generated here with the openssl CLI.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { startServer, isError, type Client, type Res, type Server } from './helpers/server.js';
import { selfSignedCert } from './helpers/pki.js';
import { RFC3339, base, created, emptyOk, fieldError, get, hasFields, kind, sleep, type Tap } from './helpers/assert.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;


const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-authres-'));
t.teardown(() => fs.rmSync(tmp, { recursive: true, force: true }));
let n = 0;
const genCert = (cn: string, ca: boolean) => selfSignedCert(cn, ca);
const fp = (pem: string) => new crypto.X509Certificate(pem).fingerprint.replace(/:/g, '').toLowerCase();

let srv: Server;
let admin: Client;

t.before(async () => {
  srv = await startServer(t);
  admin = await srv.login();
});

t.test('certificate authorities', async (t) => {
  const caPem = genCert('Test Root CA 1', true);
  const body = {
    name: 'ca-1', certPem: caPem, identityRoles: ['r2', 'r1'], isAuthEnabled: true, isAutoCaEnrollmentEnabled: true,
    isOttCaEnrollmentEnabled: false, identityNameFormat: '[caName]-[commonName]-x', tags: { src: 'test' },
  };
  const id = created(t, await admin.post('/cas', body), 'cas');
  const x = await get(admin, `/cas/${id}`);
  base(t, x, 'cas');
  hasFields(t, x, {
    certPem: 'string', fingerprint: 'string', identityNameFormat: 'string', identityRoles: 'array', isAuthEnabled: 'boolean',
    isAutoCaEnrollmentEnabled: 'boolean', isOttCaEnrollmentEnabled: 'boolean', isVerified: 'boolean', name: 'string', verificationToken: 'string',
  }, 'caDetail');
  t.equal(x.name, 'ca-1');
  t.equal(x.certPem.trim(), caPem.trim(), 'certPem echoed');
  t.equal(x.fingerprint.replace(/:/g, '').toLowerCase(), fp(caPem), 'fingerprint = sha1 of cert');
  t.same([...x.identityRoles].sort(), ['r1', 'r2']);
  t.equal(x.isAuthEnabled, true);
  t.equal(x.isAutoCaEnrollmentEnabled, true);
  t.equal(x.isOttCaEnrollmentEnabled, false);
  t.equal(x.isVerified, false);
  t.match(x.verificationToken, UUID, 'verificationToken UUID');
  t.equal(x.identityNameFormat, '[caName]-[commonName]-x');
  t.same(x.tags, { src: 'test' });

  // default name format
  const ca2Pem = genCert('Test Root CA 2', true);
  const id2 = created(t, await admin.post('/cas', { name: 'ca-2', certPem: ca2Pem, identityRoles: [], isAuthEnabled: false, isAutoCaEnrollmentEnabled: false, isOttCaEnrollmentEnabled: true }), 'cas');
  t.equal((await get(admin, `/cas/${id2}`)).identityNameFormat, '[caName]-[commonName]', 'default identityNameFormat');

  // validation
  fieldError(t, await admin.post('/cas', { ...body, name: 'ca-dup-cert' }), 'certPem', 'same CA certificate twice');
  const leaf = await admin.post('/cas', { ...body, name: 'ca-leaf', certPem: genCert('leaf.example', false) });
  t.ok(isError(leaf, 400, 'CERTIFICATE_IS_NOT_CA'), `non-CA certificate → 400 CERTIFICATE_IS_NOT_CA (${leaf.status} ${leaf.text.slice(0, 200)})`);
  const garbage = await admin.post('/cas', { ...body, name: 'ca-garbage', certPem: 'not a pem' });
  t.equal(garbage.status, 400, 'garbage PEM → 400');
  const scheme = await admin.post('/cas', { ...body, name: 'ca-scheme', certPem: genCert('scheme', true), externalIdClaim: { location: 'COMMON_NAME', matcher: 'SCHEME', matcherCriteria: 'spiffe', parser: 'NONE', parserCriteria: '', index: 0 } });
  t.equal(scheme.status, 400, `externalIdClaim SCHEME with COMMON_NAME → 400 (${scheme.status})`);
  const noLoc = await admin.post('/cas', { ...body, name: 'ca-noloc', certPem: genCert('noloc', true), externalIdClaim: { matcher: 'ALL', parser: 'NONE', index: 0 } });
  t.equal(noLoc.status, 400, `externalIdClaim without location → 400 (${noLoc.status})`);
  t.equal((await admin.get('/cas?limit=-1')).body.data.length, 2, 'nothing written by invalid creates');

  // externalIdClaim round-trip
  const claim = { location: 'SAN_URI', matcher: 'SCHEME', matcherCriteria: 'spiffe', parser: 'SPLIT', parserCriteria: '/', index: 1 };
  const id3 = created(t, await admin.post('/cas', { ...body, name: 'ca-3', certPem: genCert('Test Root CA 4', true), externalIdClaim: claim }), 'cas');
  t.same((await get(admin, `/cas/${id3}`)).externalIdClaim, claim, 'externalIdClaim verbatim');
  emptyOk(t, await admin.patch(`/cas/${id3}`, { externalIdClaim: { ...claim, location: 'SAN_URI', matcher: 'PREFIX', matcherCriteria: 'id:' } }), 'patch externalIdClaim');
  t.equal((await get(admin, `/cas/${id3}`)).externalIdClaim?.matcher, 'PREFIX');

  // PUT / PATCH; isVerified and certPem not writable
  await sleep(5);
  emptyOk(t, await admin.put(`/cas/${id}`, {
    name: 'ca-1b', identityRoles: ['r3'], isAuthEnabled: false, isAutoCaEnrollmentEnabled: false, isOttCaEnrollmentEnabled: true,
    identityNameFormat: '[commonName]', isVerified: true,
  }), 'put');
  const u = await get(admin, `/cas/${id}`);
  t.equal(u.name, 'ca-1b');
  t.same(u.identityRoles, ['r3']);
  t.equal(u.identityNameFormat, '[commonName]');
  t.equal(u.isOttCaEnrollmentEnabled, true);
  t.equal(u.isVerified, false, 'isVerified not settable');
  t.equal(u.certPem.trim(), caPem.trim(), 'certPem unchanged');
  t.same(u.tags, {}, 'put resets tags');
  t.ok(Date.parse(u.updatedAt) > Date.parse(x.updatedAt), 'updatedAt advances');
  emptyOk(t, await admin.patch(`/cas/${id}`, { name: 'ca-1c', isVerified: true }), 'patch');
  const p = await get(admin, `/cas/${id}`);
  t.equal(p.name, 'ca-1c');
  t.same(p.identityRoles, ['r3'], 'patch keeps identityRoles');
  t.equal(p.identityNameFormat, '[commonName]', 'patch keeps format');
  t.equal(p.isVerified, false, 'isVerified not settable by patch');

  // CA enrollment JWT (flows in test/pki-ca.test.ts)
  const jwt = await admin.get(`/cas/${id}/jwt`);
  t.equal(jwt.status, 200, 'GET /cas/{id}/jwt → 200');
  t.equal(jwt.headers['content-type'], 'application/jwt');

  emptyOk(t, await admin.delete(`/cas/${id}`), 'delete');
  t.ok(isError(await admin.get(`/cas/${id}`), 404, 'NOT_FOUND'), 'gone');
  // the freed certificate can be registered again
  created(t, await admin.post('/cas', { ...body, name: 'ca-again' }), 'cas');
});

const fullPolicy = (name: string, signers: string[] = [], second: string | null = null) => ({
  name,
  primary: {
    cert: { allowed: false, allowExpiredCerts: false },
    extJwt: { allowed: true, allowedSigners: signers },
    updb: { allowed: true, minPasswordLength: 8, maxAttempts: 4, lockoutDurationMinutes: 10, requireMixedCase: true, requireNumberChar: true, requireSpecialChar: false },
  },
  secondary: { requireTotp: false, requireExtJwtSigner: second },
  tags: { p: name },
});

t.test('auth policies', async (t) => {
  const def = await admin.get('/auth-policies/default');
  t.equal(def.status, 200, 'default policy exists');
  t.equal(def.body.data.name, 'Default');
  const check = (x: any, label: string) => {
    hasFields(t, x, { name: 'string', primary: 'object', secondary: 'object' }, label);
    hasFields(t, x.primary, { cert: 'object', extJwt: 'object', updb: 'object' }, `${label}.primary`);
    hasFields(t, x.primary?.cert, { allowed: 'boolean', allowExpiredCerts: 'boolean' }, `${label}.primary.cert`);
    hasFields(t, x.primary?.extJwt, { allowed: 'boolean', allowedSigners: 'array' }, `${label}.primary.extJwt`);
    hasFields(t, x.primary?.updb, {
      allowed: 'boolean', lockoutDurationMinutes: 'number', maxAttempts: 'number', minPasswordLength: 'number',
      requireMixedCase: 'boolean', requireNumberChar: 'boolean', requireSpecialChar: 'boolean',
    }, `${label}.primary.updb`);
    hasFields(t, x.secondary, { requireTotp: 'boolean' }, `${label}.secondary`);
  };
  base(t, def.body.data, 'auth-policies');
  check(def.body.data, 'default');

  const body = fullPolicy('ap-1');
  const id = created(t, await admin.post('/auth-policies', body), 'auth-policies');
  const x = await get(admin, `/auth-policies/${id}`);
  base(t, x, 'auth-policies');
  check(x, 'ap-1');
  t.same(x.primary, body.primary, 'primary echoed');
  t.equal(x.secondary.requireTotp, false);
  t.equal(x.secondary.requireExtJwtSigner ?? null, null);
  t.same(x.tags, { p: 'ap-1' });

  // -1 values normalised
  const neg = fullPolicy('ap-neg');
  Object.assign(neg.primary.updb, { maxAttempts: -1, minPasswordLength: -1, lockoutDurationMinutes: -1 });
  const negId = created(t, await admin.post('/auth-policies', neg), 'auth-policies');
  const nx = await get(admin, `/auth-policies/${negId}`);
  t.equal(nx?.primary?.updb?.maxAttempts, 0, 'maxAttempts -1 → 0');
  t.equal(nx?.primary?.updb?.minPasswordLength, 5, 'minPasswordLength -1 → 5');
  t.equal(nx?.primary?.updb?.lockoutDurationMinutes, 0, 'lockoutDurationMinutes -1 → 0');

  // validation
  const unkSigner = await admin.post('/auth-policies', fullPolicy('ap-unk', ['no-such-signer']));
  t.ok(isError(unkSigner, 404, 'NOT_FOUND'), `unknown allowedSigners id → 404 (${unkSigner.status})`);
  const unkSecond = await admin.post('/auth-policies', fullPolicy('ap-unk2', [], 'no-such-signer'));
  t.ok(isError(unkSecond, 404, 'NOT_FOUND'), `unknown requireExtJwtSigner → 404 (${unkSecond.status})`);
  t.equal((await admin.get('/auth-policies?filter=name contains "ap-unk"')).body.data.length, 0, 'nothing written');

  // PATCH name only / one nested flag only
  await sleep(5);
  emptyOk(t, await admin.patch(`/auth-policies/${id}`, { name: 'ap-1b' }), 'patch name');
  let p = await get(admin, `/auth-policies/${id}`);
  t.equal(p.name, 'ap-1b');
  t.same(p.primary, body.primary, 'patch name keeps primary');
  t.same(p.tags, { p: 'ap-1' }, 'patch keeps tags');
  t.ok(Date.parse(p.updatedAt) > Date.parse(x.updatedAt), 'updatedAt advances');
  emptyOk(t, await admin.patch(`/auth-policies/${id}`, { primary: { updb: { allowed: false } } }), 'patch primary.updb.allowed');
  p = await get(admin, `/auth-policies/${id}`);
  t.equal(p.primary.updb.allowed, false);
  t.same({ ...p.primary.updb, allowed: true }, body.primary.updb, 'other updb fields unchanged');
  t.same(p.primary.cert, body.primary.cert, 'cert unchanged');
  t.same(p.primary.extJwt, body.primary.extJwt, 'extJwt unchanged');
  // PUT
  const put = fullPolicy('ap-1c');
  put.primary.cert.allowed = true;
  delete (put as any).tags;
  emptyOk(t, await admin.put(`/auth-policies/${id}`, put), 'put');
  p = await get(admin, `/auth-policies/${id}`);
  t.equal(p.name, 'ap-1c');
  t.equal(p.primary.cert.allowed, true);
  t.equal(p.primary.updb.allowed, true);
  t.same(p.tags, {}, 'put resets tags');
  // default may be updated
  emptyOk(t, await admin.patch('/auth-policies/default', { tags: { touched: true } }), 'patch default');

  // in use by an identity → 409; after moving → 200
  const ident = created(t, await admin.post('/identities', { name: 'ap-user', type: 'User', isAdmin: false, authPolicyId: id }), 'identities');
  const inUse = await admin.delete(`/auth-policies/${id}`);
  t.ok(isError(inUse, 409, 'CAN_NOT_DELETE_REFERENCED_ENTITY'), `delete used auth policy → 409 (${inUse.status})`);
  emptyOk(t, await admin.patch(`/identities/${ident}`, { authPolicyId: 'default' }), 'move identity');
  emptyOk(t, await admin.delete(`/auth-policies/${id}`), 'delete');
  t.ok(isError(await admin.get(`/auth-policies/${id}`), 404, 'NOT_FOUND'), 'gone');

  const delDefault = await admin.delete('/auth-policies/default');
  t.ok(isError(delDefault, 409, 'CAN_NOT_DELETE_REFERENCED_ENTITY'), `delete default → 409, the system default (${delDefault.status} ${delDefault.body?.error?.code})`);
  t.equal((await admin.get('/auth-policies/default')).status, 200, 'default still there');
});

t.test('external JWT signers', async (t) => {
  const certPem = genCert('signer-1.example', false);
  const body = {
    name: 'ejs-cert', issuer: 'https://issuer-1.example', audience: 'aud-1', enabled: true, certPem, kid: 'kid-1',
    externalAuthUrl: 'https://auth.example/login', clientId: 'client-1', scopes: ['openid', 'email'], tags: { t: 1 === 1 },
  };
  const id = created(t, await admin.post('/external-jwt-signers', body), 'external-jwt-signers');
  const x = await get(admin, `/external-jwt-signers/${id}`);
  base(t, x, 'external-jwt-signers');
  hasFields(t, x, {
    audience: 'string', certPem: 'string|null', claimsProperty: 'string', clientId: 'string', commonName: 'string', enabled: 'boolean',
    externalAuthUrl: 'string', fingerprint: 'string', issuer: 'string', jwksEndpoint: 'string|null', kid: 'string', name: 'string',
    notAfter: 'string', notBefore: 'string', scopes: 'array', targetToken: 'string|null', useExternalId: 'boolean',
  }, 'externalJwtSignerDetail');
  t.equal(x.useExternalId, false, 'useExternalId default false');
  t.equal(x.claimsProperty, 'sub', 'claimsProperty default sub');
  t.equal(x.targetToken, 'ACCESS', 'targetToken default ACCESS');
  t.equal(x.commonName, 'signer-1.example', 'commonName from cert');
  t.equal(String(x.fingerprint).replace(/:/g, '').toLowerCase(), fp(certPem), 'fingerprint from cert');
  const c = new crypto.X509Certificate(certPem);
  t.match(x.notBefore, RFC3339);
  t.match(x.notAfter, RFC3339);
  t.ok(Math.abs(Date.parse(x.notAfter) - Date.parse(c.validTo)) < 1000, 'notAfter from cert');
  t.ok(Math.abs(Date.parse(x.notBefore) - Date.parse(c.validFrom)) < 1000, 'notBefore from cert');
  t.equal(x.jwksEndpoint, null);
  t.same(x.scopes, ['openid', 'email']);
  t.same(x.tags, { t: true });

  const jid = created(t, await admin.post('/external-jwt-signers', {
    name: 'ejs-jwks', issuer: 'https://issuer-2.example', audience: 'aud-2', enabled: false, jwksEndpoint: 'https://issuer-2.example/.well-known/jwks.json',
    claimsProperty: 'email', useExternalId: true, targetToken: 'ID',
  }), 'external-jwt-signers');
  const j = await get(admin, `/external-jwt-signers/${jid}`);
  t.equal(j.jwksEndpoint, 'https://issuer-2.example/.well-known/jwks.json');
  t.equal(j.certPem, null);
  t.equal(j.enabled, false);
  t.equal(j.claimsProperty, 'email');
  t.equal(j.useExternalId, true);
  t.equal(j.targetToken, 'ID');

  // validation
  const ok = { name: 'ejs-v', issuer: 'https://issuer-v.example', audience: 'a', enabled: true, jwksEndpoint: 'https://issuer-v.example/jwks' };
  const bad: [string, any][] = [
    ['neither cert nor jwks', { ...ok, jwksEndpoint: undefined }],
    ['invalid PEM', { ...ok, jwksEndpoint: undefined, certPem: 'garbage', kid: 'kid-g' }],
    ['reused certificate', { ...ok, jwksEndpoint: undefined, certPem, kid: 'kid-other' }],
    ['reused kid', { ...ok, jwksEndpoint: undefined, certPem: genCert('signer-2.example', false), kid: 'kid-1' }],
    ['certificate without kid', { ...ok, jwksEndpoint: undefined, certPem: genCert('signer-3.example', false) }],
  ];
  for (const [label, b] of bad) {
    const r = await admin.post('/external-jwt-signers', b);
    t.ok(isError(r, 400, 'COULD_NOT_VALIDATE'), `${label} → 400 (${r.status} ${r.text.slice(0, 160)})`);
  }
  t.equal((await admin.get('/external-jwt-signers?limit=-1')).body.data.length, 2, 'nothing written');

  // PATCH / PUT
  await sleep(5);
  emptyOk(t, await admin.patch(`/external-jwt-signers/${id}`, { name: 'ejs-cert-2' }), 'patch name');
  let p = await get(admin, `/external-jwt-signers/${id}`);
  t.equal(p.name, 'ejs-cert-2');
  t.equal(p.kid, 'kid-1', 'patch keeps kid');
  t.equal(p.audience, 'aud-1', 'patch keeps audience');
  t.same(p.scopes, ['openid', 'email'], 'patch keeps scopes');
  t.equal(p.certPem?.trim(), certPem.trim(), 'patch keeps certPem');
  t.ok(Date.parse(p.updatedAt) > Date.parse(x.updatedAt), 'updatedAt advances');
  emptyOk(t, await admin.put(`/external-jwt-signers/${jid}`, {
    name: 'ejs-jwks', issuer: 'https://issuer-2.example', audience: 'aud-2b', enabled: true, jwksEndpoint: 'https://issuer-2.example/jwks2', targetToken: null,
  }), 'put with targetToken null');
  p = await get(admin, `/external-jwt-signers/${jid}`);
  t.equal(p.targetToken, 'ACCESS', 'PUT targetToken null → ACCESS');
  t.equal(p.claimsProperty, 'sub', 'PUT resets claimsProperty');
  t.equal(p.useExternalId, false, 'PUT resets useExternalId');
  t.equal(p.audience, 'aud-2b');

  // referenced by an auth policy → 409 until the reference is removed
  const ap = created(t, await admin.post('/auth-policies', fullPolicy('ejs-ap', [id], jid)), 'auth-policies');
  t.same((await get(admin, `/auth-policies/${ap}`)).primary.extJwt.allowedSigners, [id]);
  const d1 = await admin.delete(`/external-jwt-signers/${id}`);
  t.ok(isError(d1, 409, 'CAN_NOT_DELETE_REFERENCED_ENTITY'), `delete signer in allowedSigners → 409 (${d1.status})`);
  const d2 = await admin.delete(`/external-jwt-signers/${jid}`);
  t.ok(isError(d2, 409, 'CAN_NOT_DELETE_REFERENCED_ENTITY'), `delete signer in requireExtJwtSigner → 409 (${d2.status})`);
  emptyOk(t, await admin.patch(`/auth-policies/${ap}`, { primary: { extJwt: { allowedSigners: [] } } }), 'unreference primary');
  emptyOk(t, await admin.delete(`/external-jwt-signers/${id}`), 'delete signer');
  t.ok(isError(await admin.get(`/external-jwt-signers/${id}`), 404, 'NOT_FOUND'), 'gone');
  const put = fullPolicy('ejs-ap');
  emptyOk(t, await admin.put(`/auth-policies/${ap}`, put), 'unreference secondary');
  emptyOk(t, await admin.delete(`/external-jwt-signers/${jid}`), 'delete second signer');
});

t.test('authenticators', async (t) => {
  const ident = created(t, await admin.post('/identities', { name: 'auth-user', type: 'User', isAdmin: false }), 'identities');
  const id = created(t, await admin.post('/authenticators', { identityId: ident, method: 'updb', username: 'auth-user-1', password: 'first-pass-1', tags: { k: 'v' } }), 'authenticators');
  const x = await get(admin, `/authenticators/${id}`);
  base(t, x, 'authenticators');
  hasFields(t, x, { method: 'string', identityId: 'string', identity: 'object', username: 'string' }, 'authenticatorDetail updb');
  t.equal(x.method, 'updb');
  t.equal(x.identityId, ident);
  t.match(x.identity, { id: ident, name: 'auth-user', entity: 'identities' });
  t.equal(x.username, 'auth-user-1');
  t.notOk('password' in x || 'passwordHash' in x || 'salt' in x, 'no secrets');
  t.same(x.tags, { k: 'v' });
  t.same((await get(admin, `/identities/${ident}`)).authenticators.updb, { id, username: 'auth-user-1' }, 'identity authenticators.updb');
  const c1 = await srv.login('auth-user-1', 'first-pass-1', 'client');
  t.equal((await c1.get('/current-identity')).status, 200, 'login with created authenticator');

  // validation
  const dup = await admin.post('/authenticators', { identityId: ident, method: 'updb', username: 'auth-user-2', password: 'second-pass-1' });
  t.ok(isError(dup, 409, 'MAX_AUTHENTICATOR_METHODS_REACHED'), `second updb → 409 MAX_AUTHENTICATOR_METHODS_REACHED (${dup.status} ${dup.body?.error?.code})`);
  const bad: [string, any][] = [
    ['bad method', { identityId: ident, method: 'sms', username: 'x-user', password: 'xxxxxxx' }],
    ['cert without certPem', { identityId: ident, method: 'cert' }],
    ['updb without username', { identityId: ident, method: 'updb', password: 'xxxxxxx' }],
    ['updb without password', { identityId: ident, method: 'updb', username: 'x-user' }],
    ['unknown identity', { identityId: 'nope', method: 'updb', username: 'x-user', password: 'xxxxxxx' }],
    ['short password', { identityId: ident, method: 'updb', username: 'x-user', password: 'abc' }],
  ];
  for (const [label, b] of bad) {
    const r = await admin.post('/authenticators', b);
    t.equal(r.status, 400, `${label} → 400 (${r.status} ${r.text.slice(0, 160)})`);
  }
  const list = await admin.get(`/authenticators?filter=identity="${ident}"`);
  t.equal(list.status, 200);
  t.equal(list.body.data.length, 1, 'filter identity=, nothing extra written');
  const sub = await admin.get(`/identities/${ident}/authenticators`);
  t.same(sub.body.data.map((a: any) => a.id), [id], 'identities/{id}/authenticators');

  // PUT: new username + password
  await sleep(5);
  emptyOk(t, await admin.put(`/authenticators/${id}`, { username: 'auth-user-1b', password: 'second-pass-2' }), 'put');
  const u = await get(admin, `/authenticators/${id}`);
  t.equal(u.username, 'auth-user-1b');
  t.ok(Date.parse(u.updatedAt) > Date.parse(x.updatedAt), 'updatedAt advances');
  await srv.login('auth-user-1b', 'second-pass-2', 'client');
  t.pass('login with PUT credentials');
  const old = await srv.client.post('/authenticate?method=password', { username: 'auth-user-1', password: 'first-pass-1' });
  t.ok(isError(old, 401, 'INVALID_AUTH'), 'old credentials rejected');
  // PATCH username only: old password still valid
  emptyOk(t, await admin.patch(`/authenticators/${id}`, { username: 'auth-user-1c' }), 'patch username');
  await srv.login('auth-user-1c', 'second-pass-2', 'client');
  t.pass('login with patched username and old password');
  // PATCH password only
  emptyOk(t, await admin.patch(`/authenticators/${id}`, { password: 'third-pass-3' }), 'patch password');
  await srv.login('auth-user-1c', 'third-pass-3', 'client');
  t.pass('login with patched password');
  t.equal((await get(admin, `/authenticators/${id}`)).username, 'auth-user-1c', 'patch password keeps username');

  // cert authenticator
  const certPem = genCert('auth-user-cert', false);
  const cid = created(t, await admin.post('/authenticators', { identityId: ident, method: 'cert', certPem }), 'authenticators');
  const cx = await get(admin, `/authenticators/${cid}`);
  hasFields(t, cx, { method: 'string', identityId: 'string', identity: 'object', certPem: 'string', fingerprint: 'string', isIssuedByNetwork: 'boolean' }, 'authenticatorDetail cert');
  t.equal(cx.method, 'cert');
  t.equal(String(cx.fingerprint).replace(/:/g, '').toLowerCase(), fp(certPem), 'cert fingerprint');
  t.equal(cx.isIssuedByNetwork, false);
  t.notOk(cx.username, 'no username on cert authenticator');
  t.same((await get(admin, `/identities/${ident}`)).authenticators.cert, { id: cid, fingerprint: cx.fingerprint }, 'identity authenticators.cert');
  const certDup = await admin.post('/authenticators', { identityId: ident, method: 'cert', certPem: genCert('another', false) });
  t.ok(isError(certDup, 409, 'MAX_AUTHENTICATOR_METHODS_REACHED'), `second cert authenticator → 409 (${certDup.status})`);
  const badPem = await admin.post('/authenticators', { identityId: created(t, await admin.post('/identities', { name: 'auth-user-2', type: 'User', isAdmin: false }), 'identities'), method: 'cert', certPem: 'garbage' });
  t.equal(badPem.status, 400, 'garbage certPem → 400');

  // extension flag (re-enroll and extension flows in test/cert-*.test.ts)
  t.equal((await admin.post(`/authenticators/${id}/request-extend`, { rollKeys: false })).status, 403, 'request-extend of a updb authenticator → 403');
  emptyOk(t, await admin.post(`/authenticators/${cid}/request-extend`, { rollKeys: false }), 'request-extend of a cert authenticator');

  // delete
  emptyOk(t, await admin.delete(`/authenticators/${id}`), 'delete updb');
  t.ok(isError(await admin.get(`/authenticators/${id}`), 404, 'NOT_FOUND'), 'gone');
  const after = await srv.client.post('/authenticate?method=password', { username: 'auth-user-1c', password: 'third-pass-3' });
  t.ok(isError(after, 401, 'INVALID_AUTH'), 'cannot log in after delete');
  t.notOk((await get(admin, `/identities/${ident}`)).authenticators.updb, 'identity no longer lists updb');
  emptyOk(t, await admin.delete(`/authenticators/${cid}`), 'delete cert');
  t.ok(isError(await admin.delete(`/authenticators/${cid}`), 404, 'NOT_FOUND'), 'delete again → 404');
});
