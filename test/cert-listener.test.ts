/**
 * The mutual-TLS listener serves the same operation table as the API listener: informational
 * documents, password login, management CRUD, error envelopes, body limits, HEAD, and requests
 * without any client certificate.
 */
import t from 'tap';
import { startServer, isError } from './helpers/server.js';
import { created } from './helpers/assert.js';

t.test('every operation on the certificate listener', async (t) => {
  const srv = await startServer(t, { env: { MESH_MAX_BODY_BYTES: '4096' } });
  const c = srv.tlsClient('client');
  const m = srv.tlsClient('management');
  const v = await c.get('/version');
  t.equal(v.status, 200);
  t.equal(v.headers['content-type'], 'application/json');
  t.match(String(v.headers.server), /^mesh-controller\//);
  t.type(v.headers['mesh-instance-id'], 'string');
  t.equal((await c.get('/.well-known/est/cacerts')).headers['content-type'], 'application/pkcs7-mime');
  const login = await m.post('/authenticate?method=password', { username: 'admin', password: 'admin-test-password' });
  t.equal(login.status, 200, 'password login on the certificate listener');
  m.token = login.body.data.token;
  const id = created(t, await m.post('/identities', { name: 'via-mtls', type: 'User', isAdmin: false }), 'identities');
  t.equal((await srv.mgmt.get(`/identities/${id}`, { headers: { 'zt-session': m.token! } })).body.data.name, 'via-mtls', 'same store, same sessions');
  t.ok(isError(await m.get('/nope'), 404, 'NOT_FOUND'), 'unknown path → 404');
  t.ok(isError(await m.post('/version'), 405, 'METHOD_NOT_ALLOWED'), 'wrong verb → 405');
  t.ok(isError(await m.post('/identities', { name: 'x'.repeat(5000), type: 'User', isAdmin: false }), 413, 'REQUEST_TOO_LARGE'), 'body over the limit → 413');
  t.ok(isError(await m.post('/identities', undefined, { raw: '{bad json', headers: { 'content-type': 'application/json' } }), 400, 'COULD_NOT_PARSE_BODY'), 'bad JSON → 400');
  const head = await m.request('HEAD', `/identities/${id}`);
  t.equal(head.status, 200, 'HEAD');
  t.equal(head.text, '', 'HEAD has no body');
  t.ok(isError(await c.get('/current-identity'), 401, 'UNAUTHORIZED'), 'no session → 401');
});

t.test('large answers on the certificate listener arrive whole (written in pieces)', async (t) => {
  const srv = await startServer(t);
  const m = srv.tlsClient('management');
  const login = await m.post('/authenticate?method=password', { username: 'admin', password: 'admin-test-password' });
  m.token = login.body.data.token;
  // Well over the 16 KiB piece size: the served spec, and a page of identities.
  for (let i = 0; i < 60; i++) created(t, await m.post('/identities', { name: `big-answer-${String(i).padStart(2, '0')}`, type: 'User', isAdmin: false, roleAttributes: ['x'.repeat(200)] }), 'identities');
  for (const path of ['/specs/edge-management/spec', '/identities?limit=-1&sort=name']) {
    const viaTls = await m.get(path);
    const viaUws = await srv.mgmt.get(path, { headers: { 'zt-session': m.token! } });
    t.equal(viaTls.status, 200, `${path}: 200`);
    t.ok(viaTls.text.length > 2 * 16 * 1024, `${path}: ${viaTls.text.length} bytes, several pieces`);
    t.equal(Number(viaTls.headers['content-length']), Buffer.byteLength(viaTls.text), `${path}: content-length matches the bytes received`);
    t.equal(viaTls.text.replace(/"requestId":"[^"]*"/g, ''), viaUws.text.replace(/"requestId":"[^"]*"/g, ''), `${path}: same bytes as the API listener`);
  }
  const head = await m.request('HEAD', '/specs/edge-management/spec');
  t.equal(head.status, 200, 'HEAD of a large document');
  t.equal(head.text, '', 'HEAD has no body');
  // The connection stays usable after large answers.
  t.equal((await m.get('/version')).status, 200, 'kept-alive connection still serves');
});
