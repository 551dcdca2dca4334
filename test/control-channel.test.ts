/**
 * Router control channel, the paths that must refuse: certificates we did not issue, certificates
 * no router holds, expired or not-yet-valid or CA or server-only certificates, forged proofs,
 * malformed frames, a wrong protocol version, a stalled handshake. And what routers that never
 * connected look like: offline everywhere. Real server, real TLS, real WebSocket, real signatures.
 */
import t, { type Test } from 'tap';
import WebSocket from 'ws';
import { startServer, type Server } from './helpers/server.js';
import { issueRouterCert } from './helpers/router-certs.js';
import { RouterClient, type ClosedInfo } from '../bench/lib/router-client.js';

const srv: Server = await startServer(t, { env: { MESH_ROUTER_HANDSHAKE_TIMEOUT_MS: '800' } });
const admin = await srv.login();
const url = `wss://127.0.0.1:${srv.port}/ctrl/v1`;

async function refused(t: Test, cert: { certPem: string; keyPem: string }, extra: Partial<ConstructorParameters<typeof RouterClient>[0]> = {}): Promise<ClosedInfo> {
  const r = new RouterClient({ url, ca: srv.ca, certChain: cert.certPem, key: cert.keyPem, hostname: 'h1', ...extra });
  try {
    await r.connect();
  } catch (e) {
    return e as ClosedInfo;
  }
  t.fail('the router was accepted');
  await r.close();
  return { code: 0, reason: '' };
}

/** Open a raw socket, send frames, collect what comes back until the server closes. */
function rawSession(frames: (string | Buffer)[]): Promise<{ code: number; messages: any[] }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { ca: srv.ca });
    const messages: any[] = [];
    ws.on('open', () => {
      for (const f of frames) ws.send(f, { binary: Buffer.isBuffer(f) });
    });
    ws.on('message', (d) => messages.push(JSON.parse(d.toString())));
    ws.on('close', (code) => resolve({ code, messages }));
    ws.on('error', reject);
  });
}

t.test('certificates the controller did not issue, or that no router holds, are refused', async (t) => {
  const selfSigned = await issueRouterCert(undefined, { cn: 'stranger' });
  let c = await refused(t, selfSigned);
  t.equal(c.code, 4001, 'self-signed: 4001');
  t.equal(c.error?.code, 'UNKNOWN_CERTIFICATE');

  const orphan = await issueRouterCert(srv.dataDir, { cn: 'orphan' });
  c = await refused(t, orphan);
  t.equal(c.code, 4001, 'issued by us but enrolled by no router: 4001');
  t.equal(c.error?.code, 'UNKNOWN_ROUTER');

  const expired = await issueRouterCert(srv.dataDir, { cn: 'old', expired: true });
  c = await refused(t, expired);
  t.equal(c.error?.code, 'CERTIFICATE_EXPIRED', 'expired certificate');

  const early = await issueRouterCert(srv.dataDir, { cn: 'early', notYetValid: true });
  c = await refused(t, early);
  t.equal(c.error?.code, 'CERTIFICATE_NOT_YET_VALID', 'not yet valid certificate');

  const ca = await issueRouterCert(srv.dataDir, { cn: 'sub-ca', ca: true });
  c = await refused(t, ca);
  t.equal(c.error?.code, 'INVALID_CERTIFICATE', 'a CA certificate');

  const server = await issueRouterCert(srv.dataDir, { cn: 'server-only', serverOnly: true });
  c = await refused(t, server);
  t.equal(c.error?.code, 'INVALID_CERTIFICATE', 'a certificate without client authentication');

  c = await refused(t, { certPem: 'not a certificate', keyPem: orphan.keyPem });
  t.equal(c.error?.code, 'INVALID_CERTIFICATE', 'no PEM at all');
  c = await refused(t, { certPem: '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----', keyPem: orphan.keyPem });
  t.equal(c.error?.code, 'INVALID_CERTIFICATE', 'a PEM block that is not a certificate');
});

t.test('a proof that does not verify is refused', async (t) => {
  const cert = await issueRouterCert(srv.dataDir, { cn: 'forger' });
  let c = await refused(t, cert, { tamperProof: true });
  t.equal(c.code, 4001);
  t.equal(c.error?.code, 'INVALID_PROOF', 'signature over something else');

  // The right certificate, someone else's key.
  const other = await issueRouterCert(srv.dataDir, { cn: 'other' });
  c = await refused(t, { certPem: cert.certPem, keyPem: other.keyPem });
  t.equal(c.error?.code, 'INVALID_PROOF', 'signed with a key that is not the certificate\'s');
});

t.test('malformed frames and protocol misuse close the connection with a reason', async (t) => {
  const cases: Array<[string, (string | Buffer)[], number, string]> = [
    ['not JSON', ['{nope'], 4000, 'INVALID_MESSAGE'],
    ['a JSON array', ['[1,2]'], 4000, 'INVALID_MESSAGE'],
    ['unknown type', ['{"type":"launch"}'], 4000, 'INVALID_MESSAGE'],
    ['a binary frame', [Buffer.from([0xff, 0x00, 0x01])], 4000, 'INVALID_MESSAGE'],
    ['state before authenticating', ['{"type":"state","hostname":"x"}'], 4000, 'INVALID_MESSAGE'],
    ['proof before hello', ['{"type":"proof","signature":"AAAA"}'], 4000, 'INVALID_MESSAGE'],
    ['synced before authenticating', ['{"type":"synced"}'], 4000, 'INVALID_MESSAGE'],
    ['hello without certChain', ['{"type":"hello","protocolVersion":1}'], 4000, 'INVALID_MESSAGE'],
    ['hello with a future version', ['{"type":"hello","protocolVersion":2,"certChain":"x"}'], 4002, 'UNSUPPORTED_VERSION'],
    ['hello with a string version', ['{"type":"hello","protocolVersion":"1","certChain":"x"}'], 4000, 'INVALID_MESSAGE'],
    ['hello with a bad hostname', ['{"type":"hello","protocolVersion":1,"certChain":"x","hostname":"a b"}'], 4000, 'INVALID_MESSAGE'],
    ['hello with protocols not an object', ['{"type":"hello","protocolVersion":1,"certChain":"x","protocols":["tls"]}'], 4000, 'INVALID_MESSAGE'],
    ['hello with a huge certChain', [JSON.stringify({ type: 'hello', protocolVersion: 1, certChain: 'x'.repeat(40_000) })], 4000, 'INVALID_MESSAGE'],
    ['ping with a negative seq', ['{"type":"ping","seq":-1}'], 4000, 'INVALID_MESSAGE'],
  ];
  for (const [label, frames, code, error] of cases) {
    const r = await rawSession(frames);
    t.equal(r.code, code, `${label}: close code ${code}`);
    t.equal(r.messages.at(-1)?.type, 'error', `${label}: an error message first`);
    t.equal(r.messages.at(-1)?.code, error, `${label}: ${error}`);
  }
  // A frame over the size limit: the transport closes the connection (1009 message too big, or 1006).
  const big = await rawSession([JSON.stringify({ type: 'hello', pad: 'x'.repeat(70_000) })]);
  t.not(big.code, 1000, 'an oversized frame closes the connection');
});

t.test('a ping before authenticating is answered; silence after connecting times the handshake out', async (t) => {
  const r = await rawSession(['{"type":"ping","seq":7}']);
  t.same(r.messages[0], { type: 'pong', seq: 7 }, 'pong with the same seq');
  t.equal(r.code, 4008, 'handshake timeout closes with 4008');
  t.equal(r.messages.at(-1)?.code, 'HANDSHAKE_TIMEOUT');
});

t.test('a peer flooding frames is cut off', async (t) => {
  const r = await rawSession(Array.from({ length: 1200 }, (_, i) => `{"type":"ping","seq":${i}}`));
  t.equal(r.code, 4000);
  t.equal(r.messages.at(-1)?.code, 'RATE_LIMITED');
});

t.test('a plain GET of the channel path is not a WebSocket', async (t) => {
  const r = await srv.raw('GET', '/ctrl/v1');
  t.equal(r.status, 404);
});

t.test('routers that never connected are offline everywhere', async (t) => {
  const er = await admin.post('/edge-routers', { name: 'never-connected', isTunnelerEnabled: false });
  t.equal(er.status, 201);
  const tr = await admin.post('/transit-routers', { name: 'never-connected-transit' });
  t.equal(tr.status, 201);
  const d = (await admin.get(`/edge-routers/${er.body.data.id}`)).body.data;
  t.equal(d.isOnline, false);
  t.equal(d.hostname, '');
  t.same(d.supportedProtocols, {});
  t.equal(d.syncStatus, 'SYNC_DISCONNECTED');
  t.equal((await admin.get(`/transit-routers/${tr.body.data.id}`)).body.data.isOnline, false);
  const on = await admin.get('/edge-routers?filter=isOnline=true');
  t.equal(on.status, 200);
  t.equal(on.body.meta.pagination.totalCount, 0, 'filter isOnline=true: none');
  const off = await admin.get('/edge-routers?filter=isOnline=false');
  t.ok(off.body.data.some((x: any) => x.id === er.body.data.id), 'filter isOnline=false lists it');
  t.ok(off.body.meta.filterableFields.includes('isOnline'), 'isOnline is filterable');
  const trOff = await admin.get('/transit-routers?filter=isOnline=false');
  t.ok(trOff.body.data.some((x: any) => x.id === tr.body.data.id), 'transit routers: filter isOnline=false');
});

t.test('refusals are counted in the metrics', async (t) => {
  const m = await srv.raw('GET', '/metrics');
  t.equal(m.status, 200);
  t.match(m.text, /mesh_control_refused_total\{reason="UNKNOWN_CERTIFICATE"\} [1-9]/);
  t.match(m.text, /mesh_control_refused_total\{reason="INVALID_PROOF"\} [1-9]/);
  t.match(m.text, /mesh_control_refused_total\{reason="HANDSHAKE_TIMEOUT"\} [1-9]/);
  t.match(m.text, /mesh_routers_online\{kind="edge"\} 0/);
});
