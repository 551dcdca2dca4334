/**
 * HTTP front, envelopes, login/sessions, permissions, PKI trust and the 501 contract, all black-box
 * over real HTTPS against one controller started for this file.
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import tls from 'node:tls';
import { X509Certificate } from 'node:crypto';
import { startServer, isError, ADMIN_PASSWORD, type Client, type Res } from './helpers/server.js';
import { upstreamOperations } from '../src/api/spec/index.js';
import { createUser } from './helpers/users.js';

const pkg = JSON.parse(fs.readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };

const srv = await startServer(t);
const admin = await srv.login();

const GO_TIME = /^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(\.\d{1,9})? \+0000 UTC$/;

function header(r: Res, name: string): string | undefined {
  const v = r.headers[name];
  return Array.isArray(v) ? v.join(', ') : v;
}

/** Parse Go's `time.String()` form (UTC) into epoch ms. */
function parseGoTime(s: string): number {
  const m = GO_TIME.exec(s);
  if (!m) return NaN;
  return Date.parse(`${m[1].replace(' ', 'T')}${m[2] ?? ''}Z`);
}

t.test('version documents on the root and both APIs', async (t) => {
  const expectedBase = `https://127.0.0.1:${srv.port}`;
  for (const p of ['/', '/version', '/edge/client/v1', '/edge/client/v1/', '/edge/client/v1/version', '/edge/management/v1', '/edge/management/v1/version']) {
    const r = await srv.raw('GET', p);
    t.equal(r.status, 200, `${p} status`);
    t.match(header(r, 'content-type'), /^application\/json/, `${p} content-type`);
    t.equal(header(r, 'server'), `mesh-controller/v${pkg.version}`, `${p} server header`);
    const d = r.body?.data;
    t.same(r.body?.meta, {}, `${p} meta`);
    t.type(d?.version, 'string', `${p} version`);
    t.type(d?.revision, 'string', `${p} revision`);
    t.type(d?.buildDate, 'string', `${p} buildDate`);
    t.type(d?.runtimeVersion, 'string', `${p} runtimeVersion`);
    t.same(d?.capabilities, ['OIDC_AUTH'], `${p} capabilities: OIDC login is served`);
    t.same(d?.apiVersions?.['edge-oidc'], { v1: { path: '/oidc', apiBaseUrls: [`${expectedBase}/oidc`] } }, `${p} edge-oidc`);
    t.same(d?.apiVersions?.edge, { v1: { path: '/edge/client/v1', apiBaseUrls: [`${expectedBase}/edge/client/v1`] } }, `${p} edge`);
    t.same(d?.apiVersions?.['edge-client'], { v1: { path: '/edge/client/v1', apiBaseUrls: [`${expectedBase}/edge/client/v1`] } }, `${p} edge-client`);
    t.same(d?.apiVersions?.['edge-management'], { v1: { path: '/edge/management/v1', apiBaseUrls: [`${expectedBase}/edge/management/v1`] } }, `${p} edge-management`);
  }
});

t.test('advertised address drives apiBaseUrls', async (t) => {
  const other = await startServer(t, { env: { MESH_ADVERTISED_ADDRESS: 'mesh.example.test:8443' } });
  const r = await other.raw('GET', '/edge/management/v1/version');
  t.equal(r.status, 200);
  t.same(r.body.data.apiVersions['edge-client'].v1.apiBaseUrls, ['https://mesh.example.test:8443/edge/client/v1']);
  t.same(r.body.data.apiVersions['edge-management'].v1.apiBaseUrls, ['https://mesh.example.test:8443/edge/management/v1']);
  await other.stop();
});

t.test('server header and error envelopes', async (t) => {
  const nf = await admin.get('/i-do-not-exist');
  t.ok(isError(nf, 404, 'NOT_FOUND'), `unknown path 404 NOT_FOUND: ${nf.status} ${nf.text}`);
  t.equal(nf.body?.error?.message, 'The resource requested was not found or is no longer available');
  t.notOk('data' in (nf.body ?? {}), 'no data key in error');
  t.equal(header(nf, 'server'), `mesh-controller/v${pkg.version}`);
  t.match(header(nf, 'content-type'), /^application\/json/);

  const nfc = await srv.client.get('/no/such/thing');
  t.ok(isError(nfc, 404, 'NOT_FOUND'), `client unknown path: ${nfc.status}`);
  const nfr = await srv.raw('GET', '/totally-unknown');
  t.equal(nfr.status, 404, 'root unknown path');
  t.equal(nfr.body?.error?.code, 'NOT_FOUND');

  const m = await admin.post('/version', {});
  t.ok(isError(m, 405, 'METHOD_NOT_ALLOWED'), `POST /version → 405: ${m.status} ${m.text}`);
  const m2 = await admin.request('PUT', '/identities', {});
  t.ok(isError(m2, 405, 'METHOD_NOT_ALLOWED'), `PUT /identities → 405: ${m2.status}`);
  const m3 = await srv.client.request('DELETE', '/current-identity/authenticators/abc');
  t.ok(isError(m3, 405, 'METHOD_NOT_ALLOWED'), `DELETE current-identity authenticator → 405: ${m3.status}`);
});

t.test('CORS preflight', async (t) => {
  const r = await srv.raw('OPTIONS', '/edge/management/v1/identities', undefined, {
    origin: 'https://console.example',
    'access-control-request-method': 'POST',
    'access-control-request-headers': 'content-type, zt-session',
  });
  t.equal(r.status, 200);
  t.equal(header(r, 'access-control-allow-origin'), '*');
  const methods = (header(r, 'access-control-allow-methods') ?? '').split(/,\s*/);
  for (const m of ['GET', 'POST', 'PUT', 'PATCH', 'DELETE']) t.ok(methods.includes(m), `allows ${m}`);
  const hdrs = (header(r, 'access-control-allow-headers') ?? '').toLowerCase().split(/,\s*/);
  for (const h of ['content-type', 'accept', 'authorization', 'zt-session']) t.ok(hdrs.includes(h), `allows header ${h}`);
  t.equal(header(r, 'access-control-allow-credentials'), 'true');
  const get = await srv.raw('GET', '/edge/client/v1/version', undefined, { origin: 'https://console.example' });
  t.equal(header(get, 'access-control-allow-origin'), '*', 'simple request carries allow-origin');
});

t.test('doubled slashes in a path', async (t) => {
  const v = await srv.raw('GET', '/edge/management/v1//version');
  t.equal(v.status, 200);
  t.equal(v.body?.data?.apiVersions?.['edge-management']?.v1?.path, '/edge/management/v1');
  const l = await admin.get('//identities?limit=1');
  t.equal(l.status, 200, '//identities');
  t.equal(l.body?.data?.length, 1);
  const tm = await admin.get('//terminators');
  t.equal(tm.status, 200, '//terminators');
  t.same(tm.body?.data, []);
  const d = await srv.raw('GET', '//edge//client//v1//version');
  t.equal(d.status, 200, 'several doubled slashes');
});

t.test('body limits and parse errors', async (t) => {
  const big = Buffer.alloc(513 * 1024, 'a');
  const r = await admin.post('/identities', undefined, { raw: big, headers: { 'content-type': 'application/json' } });
  t.ok(isError(r, 413, 'REQUEST_TOO_LARGE'), `413 REQUEST_TOO_LARGE: ${r.status} ${r.text.slice(0, 200)}`);
  const bigJson = Buffer.from(JSON.stringify({ name: 'x'.repeat(600 * 1024), type: 'User', isAdmin: false }));
  const r2 = await admin.post('/identities', undefined, { raw: bigJson, headers: { 'content-type': 'application/json' } });
  t.ok(isError(r2, 413, 'REQUEST_TOO_LARGE'), `large valid JSON → 413: ${r2.status}`);
  const justUnder = Buffer.from(JSON.stringify({ name: 'big-tags', type: 'User', isAdmin: false, tags: { k: 'y'.repeat(60000) } }));
  const r3 = await admin.post('/identities', undefined, { raw: justUnder, headers: { 'content-type': 'application/json' } });
  t.equal(r3.status, 201, `body under the limit is accepted: ${r3.text.slice(0, 200)}`);

  for (const raw of ['{bad', 'i will not parse', '{"name": "x",}', '[1,2', '{"name":"a"} trailing']) {
    const p = await admin.post('/identities', undefined, { raw, headers: { 'content-type': 'application/json' } });
    t.ok(isError(p, 400, 'COULD_NOT_PARSE_BODY'), `malformed ${JSON.stringify(raw)} → 400 COULD_NOT_PARSE_BODY: ${p.status} ${p.text.slice(0, 200)}`);
  }
  const auth = await srv.client.post('/authenticate?method=password', undefined, { raw: 'i will not parse', headers: { 'content-type': 'application/json' } });
  t.ok(isError(auth, 400, 'COULD_NOT_PARSE_BODY'), `authenticate with junk → COULD_NOT_PARSE_BODY: ${auth.status}`);
  t.equal(header(auth, 'zt-session'), undefined, 'no zt-session on a failed parse');
  // The server is still healthy afterwards.
  const after = await admin.get('/identities?limit=1');
  t.equal(after.status, 200);
});

t.test('password login and API sessions', async (t) => {
  for (const api of ['management', 'client'] as const) {
    const c = api === 'management' ? srv.mgmt : srv.client;
    const wrong = await c.post('/authenticate?method=password', { username: 'admin', password: 'not-the-password' });
    t.ok(isError(wrong, 401, 'INVALID_AUTH'), `${api}: wrong password → 401 INVALID_AUTH: ${wrong.status}`);
    t.equal(header(wrong, 'zt-session'), undefined, `${api}: no token on failure`);
    const unknown = await c.post('/authenticate?method=password', { username: 'nobody-here', password: 'whatever1' });
    t.ok(isError(unknown, 401, 'INVALID_AUTH'), `${api}: unknown user → 401 INVALID_AUTH`);
    const missing = await c.post('/authenticate?method=password', { username: 'admin' });
    t.ok(isError(missing, 400, 'COULD_NOT_VALIDATE'), `${api}: missing password → 400 COULD_NOT_VALIDATE: ${missing.status}`);
    const noUser = await c.post('/authenticate?method=password', { password: 'some-password' });
    t.ok(isError(noUser, 400, 'COULD_NOT_VALIDATE'), `${api}: missing username → 400 COULD_NOT_VALIDATE: ${noUser.status}`);
    const short = await c.post('/authenticate?method=password', { username: 'admin', password: 'x' });
    t.ok(isError(short, 400, 'COULD_NOT_VALIDATE'), `${api}: password shorter than 5 → 400: ${short.status}`);
    t.equal(short.body?.error?.cause?.field, 'password');
    const badMethod = await c.post('/authenticate?method=carrier-pigeon', { username: 'admin', password: ADMIN_PASSWORD });
    t.equal(badMethod.status, 400, `${api}: unknown auth method → 400: ${badMethod.status}`);

    const ok = await c.post('/authenticate?method=password', { username: 'admin', password: ADMIN_PASSWORD });
    t.equal(ok.status, 200, `${api}: login`);
    const token = ok.body?.data?.token;
    t.match(token, /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/, `${api}: token is a compact JWS`);
    t.equal(header(ok, 'zt-session'), token, `${api}: zt-session header equals data.token`);
    t.equal(header(ok, 'expiration-seconds'), '1800', `${api}: expiration-seconds on login`);
    t.match(header(ok, 'expires-at'), GO_TIME, `${api}: expires-at on login in Go time format`);
    t.equal(ok.body?.data?.identity?.name, 'Default Admin');
    t.equal(ok.body?.data?.isMfaRequired, false);
  }

  const nt = await srv.mgmt.get('/identities');
  t.ok(isError(nt, 401, 'UNAUTHORIZED'), `missing token → 401 UNAUTHORIZED: ${nt.status}`);
  t.match(header(nt, 'www-authenticate'), /zt-session realm="zt-session" error="missing"/, 'www-authenticate on missing token');
  const bt = await srv.mgmt.get('/identities', { headers: { 'zt-session': 'ffffffff-ffff-4fff-bfff-ffffffffffff' } });
  t.ok(isError(bt, 401, 'UNAUTHORIZED'), `bad token → 401 UNAUTHORIZED: ${bt.status}`);
  t.match(header(bt, 'www-authenticate'), /error="invalid"/, 'www-authenticate on invalid token');
  const ct = await srv.client.get('/current-identity', { headers: { 'zt-session': 'garbage' } });
  t.ok(isError(ct, 401, 'UNAUTHORIZED'), `client API bad token → 401: ${ct.status}`);

  const s = await srv.login();
  const before = Date.now();
  const cur = await s.get('/current-api-session');
  t.equal(cur.status, 200, 'GET current-api-session');
  t.equal(cur.body?.data?.token, s.token);
  t.type(cur.body?.data?.id, 'string');
  t.type(cur.body?.data?.identityId, 'string');
  t.equal(cur.body?.data?.expirationSeconds, 1800);
  t.equal(header(cur, 'expiration-seconds'), '1800');
  const exp = parseGoTime(header(cur, 'expires-at') ?? '');
  t.ok(exp >= before + 1795_000 && exp <= Date.now() + 1805_000, `expires-at ≈ now + 30 min (${header(cur, 'expires-at')})`);

  const ci = await s.get('/current-identity');
  t.equal(ci.status, 200, 'GET current-identity');
  t.equal(ci.body?.data?.name, 'Default Admin');
  t.equal(ci.body?.data?.isAdmin, true);
  t.equal(ci.body?.data?.isDefaultAdmin, true);
  t.equal(ci.body?.data?.id, cur.body?.data?.identityId);
  t.match(header(ci, 'expires-at'), GO_TIME, 'expires-at on authenticated responses');
  t.equal(header(ci, 'expiration-seconds'), '1800');

  const list = await s.get('/identities');
  t.match(header(list, 'expires-at'), GO_TIME, 'expires-at on a list');

  const cc = await srv.login(undefined, undefined, 'client');
  const cci = await cc.get('/current-identity');
  t.equal(cci.status, 200, 'client current-identity');
  t.equal(cci.body?.data?.name, 'Default Admin');

  const del = await s.delete('/current-api-session');
  t.equal(del.status, 200, 'DELETE current-api-session');
  t.same(del.body, { data: {}, meta: {} });
  const after = await s.get('/current-api-session');
  t.ok(isError(after, 401, 'UNAUTHORIZED'), `token rejected after logout: ${after.status}`);
  const after2 = await s.get('/identities');
  t.ok(isError(after2, 401, 'UNAUTHORIZED'), 'management rejected after logout');
  const again = await s.delete('/current-api-session');
  t.ok(isError(again, 401, 'UNAUTHORIZED'), 'second logout is 401');

  const cdel = await cc.delete('/current-api-session');
  t.equal(cdel.status, 200, 'client logout');
  const cafter = await cc.get('/current-identity');
  t.ok(isError(cafter, 401, 'UNAUTHORIZED'), 'client token rejected after logout');
});

t.test('non-admin permissions on the Management API', async (t) => {
  await createUser(admin, 'plain-user', 'plain-password-1');
  await createUser(admin, 'reader-user', 'reader-password-1', { permissions: ['admin_readonly'] });
  await createUser(admin, 'creator-user', 'creator-password-1', { permissions: ['identity.create'] });

  const plain = await srv.login('plain-user', 'plain-password-1');
  const cur = await plain.get('/current-identity');
  t.equal(cur.status, 200, 'non-admin can read current-identity');
  t.equal(cur.body?.data?.isAdmin, false);
  const target = (await admin.post('/identities', { name: 'perm-target', type: 'User', isAdmin: false })).body.data.id as string;
  const calls: Array<[string, string, unknown]> = [
    ['GET', '/identities', undefined],
    ['GET', `/identities/${target}`, undefined],
    ['GET', '/identities/made-up-id', undefined],
    ['POST', '/identities', { name: 'by-plain', type: 'User', isAdmin: false }],
    ['PATCH', `/identities/${target}`, { name: 'renamed' }],
    ['PUT', `/identities/${target}`, { name: 'renamed', type: 'User', isAdmin: false }],
    ['DELETE', `/identities/${target}`, undefined],
    ['GET', '/services', undefined],
    ['POST', '/services', { name: 'svc-by-plain', encryptionRequired: true }],
    ['GET', '/config-types', undefined],
    ['GET', '/configs', undefined],
    ['GET', '/authenticators', undefined],
    ['GET', '/edge-routers', undefined],
    ['GET', '/api-sessions', undefined],
  ];
  for (const [m, p, b] of calls) {
    const r = await plain.request(m, p, b);
    t.ok(isError(r, 401, 'UNAUTHORIZED'), `plain ${m} ${p} → 401 UNAUTHORIZED: ${r.status}`);
  }
  t.equal((await admin.get(`/identities/${target}`)).body?.data?.name, 'perm-target', 'nothing changed by the refused calls');

  const reader = await srv.login('reader-user', 'reader-password-1');
  for (const p of ['/identities', `/identities/${target}`, '/services', '/configs', '/config-types', '/edge-routers', '/service-policies', '/auth-policies', '/authenticators']) {
    const r = await reader.get(p);
    t.equal(r.status, 200, `admin_readonly GET ${p}`);
  }
  const rd = await reader.get('/identities/made-up-id');
  t.ok(isError(rd, 404, 'NOT_FOUND'), 'admin_readonly sees 404 for unknown ids');
  for (const [m, p, b] of [
    ['POST', '/identities', { name: 'by-reader', type: 'User', isAdmin: false }],
    ['PATCH', `/identities/${target}`, { name: 'x' }],
    ['DELETE', `/identities/${target}`, undefined],
    ['POST', '/services', { name: 'svc-by-reader', encryptionRequired: true }],
  ] as Array<[string, string, unknown]>) {
    const r = await reader.request(m, p, b);
    t.ok(isError(r, 401, 'UNAUTHORIZED'), `admin_readonly ${m} ${p} → 401: ${r.status}`);
  }

  const creator = await srv.login('creator-user', 'creator-password-1');
  const c1 = await creator.post('/identities', { name: 'by-creator', type: 'User', isAdmin: false });
  t.equal(c1.status, 201, `identity.create can create identities: ${c1.text}`);
  t.match(c1.body?.data?._links?.self?.href, /^\.\/identities\//);
  for (const [m, p, b] of [
    ['GET', '/identities', undefined],
    ['GET', `/identities/${target}`, undefined],
    ['PATCH', `/identities/${target}`, { name: 'x' }],
    ['DELETE', `/identities/${target}`, undefined],
    ['POST', '/services', { name: 'svc-by-creator', encryptionRequired: true }],
    ['POST', '/identities', { name: 'admin-by-creator', type: 'User', isAdmin: true }],
  ] as Array<[string, string, unknown]>) {
    const r = await creator.request(m, p, b);
    t.ok(isError(r, 401, 'UNAUTHORIZED'), `identity.create ${m} ${p} → 401: ${r.status}`);
  }
  const byName = await admin.get('/identities?filter=name = "admin-by-creator"');
  t.equal(byName.body?.meta?.pagination?.totalCount, 0, 'refused admin creation wrote nothing');

  const badPerm = await admin.post('/identities', { name: 'bad-perm', type: 'User', isAdmin: false, permissions: ['no-such-permission'] });
  t.ok(isError(badPerm, 400, 'COULD_NOT_VALIDATE'), `unknown permission → 400: ${badPerm.status}`);
  t.match(badPerm.body?.error?.cause?.field, /^permissions(\.0)?$/, 'cause names the permissions field');
});

t.test('server certificate trusted through the CA bundle', async (t) => {
  const bundle = fs.readFileSync(path.join(srv.dataDir, 'pki', 'ca-bundle.pem'), 'utf8');
  for (const servername of [undefined, 'localhost']) {
    const sock = tls.connect({ host: '127.0.0.1', port: srv.port, ca: bundle, ...(servername ? { servername } : {}) });
    const result = await new Promise<{ ok: boolean; err?: string; cert?: tls.PeerCertificate }>((resolve) => {
      sock.once('secureConnect', () => resolve({ ok: sock.authorized, cert: sock.getPeerCertificate() }));
      sock.once('error', (e) => resolve({ ok: false, err: e.message }));
    });
    sock.destroy();
    t.ok(result.ok, `certificate verifies for ${servername ?? '127.0.0.1'} ${result.err ?? ''}`);
    const alt = result.cert?.subjectaltname ?? '';
    t.match(alt, /DNS:localhost/, 'SAN has localhost');
    t.match(alt, /IP Address:127\.0\.0\.1/, 'SAN has 127.0.0.1');
  }
  // A wrong host name must not verify.
  const bad = tls.connect({ host: '127.0.0.1', port: srv.port, ca: bundle, servername: 'not-this-host.example' });
  const badResult = await new Promise<boolean>((resolve) => {
    bad.once('secureConnect', () => resolve(true));
    bad.once('error', () => resolve(false));
  });
  bad.destroy();
  t.equal(badResult, false, 'other host names are rejected');
});

t.test('well-known CA store is base64 PKCS#7', async (t) => {
  const bundle = fs.readFileSync(path.join(srv.dataDir, 'pki', 'ca-bundle.pem'), 'utf8');
  const ders = [...bundle.matchAll(/-----BEGIN CERTIFICATE-----([\s\S]*?)-----END CERTIFICATE-----/g)].map((m) => Buffer.from(m[1].replace(/\s+/g, ''), 'base64'));
  t.ok(ders.length >= 1, 'bundle has certificates');
  for (const der of ders) t.ok(new X509Certificate(der).ca, 'bundle entries are CAs');
  for (const p of ['/.well-known/est/cacerts', '/edge/client/v1/.well-known/est/cacerts', '/edge/management/v1/.well-known/est/cacerts']) {
    const r = await srv.raw('GET', p);
    t.equal(r.status, 200, `${p}`);
    t.equal(header(r, 'content-type'), 'application/pkcs7-mime', `${p} content-type`);
    t.equal(header(r, 'content-transfer-encoding'), 'base64');
    const lines = r.text.split('\n');
    t.ok(lines.every((l) => /^[A-Za-z0-9+/=]{1,64}$/.test(l)), 'base64 in lines of at most 64 chars');
    t.notOk(r.text.endsWith('\n'), 'no trailing newline');
    const der = Buffer.from(r.text.replace(/\n/g, ''), 'base64');
    t.equal(der[0], 0x30, 'DER SEQUENCE');
    t.ok(der.includes(Buffer.from('06092a864886f70d010702', 'hex')), 'contentType signedData');
    for (const c of ders) t.ok(der.includes(c), 'every bundle certificate is inside the PKCS#7');
  }
});

t.test('specs endpoints', async (t) => {
  for (const [name, c] of [['client', srv.client], ['management', srv.mgmt]] as const) {
    const l = await c.get('/specs');
    t.equal(l.status, 200, `${name} /specs`);
    t.ok(Array.isArray(l.body?.data));
    const ids = (l.body?.data ?? []).map((s: any) => s.id);
    t.ok(ids.includes(name === 'client' ? 'edge-client' : 'edge-management'), `${name} lists its spec`);
    for (const id of ['edge-client', 'edge-management']) {
      const d = await c.get(`/specs/${id}`);
      t.equal(d.status, 200, `${name} /specs/${id}`);
      t.equal(d.body?.data?.id, id);
      t.equal(d.body?.data?.name, id);
      t.equal(d.body?.data?._links?.self?.href, `./specs/${id}`);
      t.equal(d.body?.data?._links?.spec?.href, `./specs/${id}/spec`);
      const s = await c.get(`/specs/${id}/spec`);
      t.equal(s.status, 200, `${name} /specs/${id}/spec`);
      t.match(header(s, 'content-type'), /^application\/json/);
      t.equal(s.body?.swagger, '2.0', 'raw swagger document, not an envelope');
      t.equal(s.body?.info?.version, '0.28.0');
      t.equal(s.body?.basePath, id === 'edge-client' ? '/edge/client/v1' : '/edge/management/v1');
      t.notOk('data' in (s.body ?? {}), 'spec body is not wrapped');
    }
    const nf = await c.get('/specs/no-such-spec');
    t.ok(isError(nf, 404, 'NOT_FOUND'), `${name} unknown spec id → 404`);
    const nf2 = await c.get('/specs/no-such-spec/spec');
    t.ok(isError(nf2, 404, 'NOT_FOUND'), `${name} unknown spec body → 404`);
  }
});

t.test('every operation of both specs is implemented: no 501, no 5xx', async (t) => {
  const FIXED = 'made-up-id-0001';
  for (const api of ['client', 'management'] as const) {
    const c: Client = await srv.login(undefined, undefined, api);
    for (const op of upstreamOperations(api)) {
      if (op.operationId === 'deleteCurrentAPISession') continue; // would end the session used here
      const p = op.path.replace(/\{[^}]+\}/g, FIXED);
      const body = ['POST', 'PUT', 'PATCH'].includes(op.method) ? {} : undefined;
      const r = await c.request(op.method, p, body);
      const label = `${api} ${op.method} ${op.path} (${op.operationId})`;
      t.not(r.status, 501, `${label} is implemented (${r.status})`);
      t.ok(r.status < 500, `${label} no 5xx (${r.status} ${r.body?.error?.code ?? ''})`);
    }
  }
  t.equal((await admin.get('/summary')).status, 200, 'GET /summary implemented');
});
