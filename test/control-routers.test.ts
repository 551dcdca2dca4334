/**
 * Router control channel, the paths that must work, with routers enrolled for real (erott / trott
 * with fresh keys and CSRs): connect and show online with what the router reported; state reports;
 * heartbeats (a silent router and a dropped connection go offline); a newer connection supersedes
 * the older; settings and trace specs pushed to connected routers; disable, re-enroll and delete
 * disconnect; transit routers; shutdown closes every router cleanly.
 */
import t, { type Test } from 'tap';
import { startServer, type Server } from './helpers/server.js';
import { RouterClient } from '../bench/lib/router-client.js';
import { createAndEnroll, enrollRouter, routerCsrs, type EnrolledRouter } from '../bench/lib/router-enroll.js';
import { createClient, type HttpClient } from '../bench/lib/http.js';

const srv: Server = await startServer(t, { env: { MESH_ROUTER_HEARTBEAT_MS: '200', MESH_ROUTER_HEARTBEAT_TIMEOUT_MS: '1000' } });
const admin = await srv.login();
const http: HttpClient = await createClient({ origin: srv.origin, ca: srv.ca, connections: 4, kind: 'https' });
t.teardown(() => http.close());
const url = `wss://127.0.0.1:${srv.port}/ctrl/v1`;
const versionInfo = { os: 'linux', arch: 'amd64', version: 'v9.9.9', revision: 'abc123', buildDate: '2026-01-01T00:00:00Z' };

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Poll until `check` holds (state changes are asynchronous); fails the test after 15 s. */
async function until(t: Test, label: string, check: () => Promise<boolean>): Promise<void> {
  const end = Date.now() + 15_000;
  while (Date.now() < end) {
    if (await check()) return;
    await sleep(25);
  }
  t.fail(`timed out waiting: ${label}`);
}
const detail = async (id: string, kind = 'edge-routers') => (await admin.get(`/${kind}/${id}`)).body.data;
const nextMessage = (r: RouterClient, type: string) => new Promise<any>((resolve) => {
  const on = (m: any) => {
    if (m.type === type) {
      r.off('message', on);
      resolve(m);
    }
  };
  r.on('message', on);
});

let seq = 0;
async function enrolledEdge(extra: { roleAttributes?: string[] } = {}): Promise<EnrolledRouter> {
  const n = ++seq;
  return createAndEnroll(http, admin.token!, { name: `rt-er-${n}`, kind: 'edge', hostname: `er${n}.test`, ...extra });
}
function client(r: EnrolledRouter, extra: Partial<ConstructorParameters<typeof RouterClient>[0]> = {}) {
  return new RouterClient({ url, ca: srv.ca, certChain: r.certChain, key: r.keyPem, hostname: `${r.name}.example`, protocols: { tls: `tls:${r.name}.example:3022` }, versionInfo, ...extra });
}

t.test('an enrolled edge router connects and shows online with what it reported', async (t) => {
  const r = await enrolledEdge({ roleAttributes: ['eu'] });
  t.equal((await detail(r.id)).fingerprint, r.fingerprint, 'the record holds the certificate fingerprint');
  const c = client(r);
  const welcome = await c.connect();
  const controllerId = (await admin.get('/controllers')).body.data[0].id;
  t.match(welcome, { type: 'welcome', protocolVersion: 1, routerId: r.id, kind: 'edge', controllerId, heartbeatIntervalMs: 200, heartbeatTimeoutMs: 1000 });
  t.same(welcome.router, { name: r.name, cost: 0, noTraversal: false, disabled: false, ctrlChanListeners: {}, roleAttributes: ['eu'], isTunnelerEnabled: false });
  t.same(welcome.traces, []);
  await until(t, 'SYNC_DONE', async () => (await detail(r.id)).syncStatus === 'SYNC_DONE');
  const d = await detail(r.id);
  t.equal(d.isOnline, true);
  t.equal(d.hostname, `${r.name}.example`);
  t.same(d.supportedProtocols, { tls: `tls:${r.name}.example:3022` });
  t.same(d.versionInfo, versionInfo);
  const online = await admin.get('/edge-routers?filter=' + encodeURIComponent('isOnline = true'));
  t.ok(online.body.data.some((x: any) => x.id === r.id), 'filter isOnline=true lists it');
  t.ok((await admin.get('/edge-routers')).body.data.find((x: any) => x.id === r.id)?.isOnline, 'the list shows it online');
  const m = (await srv.raw('GET', '/metrics')).text;
  t.match(m, /mesh_routers_online\{kind="edge"\} 1/);
  t.match(m, /mesh_control_connects_total [1-9]/);

  // Heartbeats keep it online well past the timeout.
  await sleep(1500);
  t.equal((await detail(r.id)).isOnline, true, 'still online after several heartbeat periods');
  t.ok(c.received.some((x) => x.type === 'ping'), 'the controller pings');

  // A state report replaces what it names.
  c.report({ hostname: 'renamed.example', protocols: { tls: 'tls:renamed.example:3022', wss: 'wss:renamed.example:443' } });
  await until(t, 'hostname updated', async () => (await detail(r.id)).hostname === 'renamed.example');
  t.same((await detail(r.id)).supportedProtocols, { tls: 'tls:renamed.example:3022', wss: 'wss:renamed.example:443' });

  // Settings changes are pushed.
  const update = nextMessage(c, 'router-update');
  t.equal((await admin.patch(`/edge-routers/${r.id}`, { cost: 42, noTraversal: true })).status, 200);
  const u = await update;
  t.equal(u.router.cost, 42);
  t.equal(u.router.noTraversal, true);
  t.equal((await detail(r.id)).isOnline, true, 'a settings change does not disconnect');

  // A clean stop: offline at once, live fields cleared.
  const closed = await c.close();
  t.equal(closed.code, 1000);
  await until(t, 'offline after bye', async () => (await detail(r.id)).isOnline === false);
  const off = await detail(r.id);
  t.equal(off.hostname, '');
  t.same(off.supportedProtocols, {});
  t.equal(off.syncStatus, 'SYNC_DISCONNECTED');
  t.notOk('versionInfo' in off && off.versionInfo !== null && off.versionInfo?.version === 'v9.9.9', 'reported versionInfo gone');
});

t.test('silent and dropped routers go offline; reconnecting brings them back', async (t) => {
  const r = await enrolledEdge();
  const c = client(r);
  await c.connect();
  await until(t, 'online', async () => (await detail(r.id)).isOnline);
  c.silence();
  const closed = await c.closed();
  t.equal(closed.code, 4008, 'heartbeat timeout closes with 4008');
  t.equal(closed.error?.code, 'HEARTBEAT_TIMEOUT');
  t.equal((await detail(r.id)).isOnline, false, 'offline once the controller gave up');

  const c2 = client(r);
  await c2.connect();
  await until(t, 'online again', async () => (await detail(r.id)).isOnline);
  c2.kill();
  await until(t, 'offline after a dropped connection', async () => (await detail(r.id)).isOnline === false);

  // A second connection supersedes the first; the router stays online.
  const a = client(r);
  await a.connect();
  const b = client(r, { hostname: 'second.example' });
  await b.connect();
  const ac = await a.closed();
  t.equal(ac.code, 4004, 'the older connection is closed as superseded');
  await until(t, 'the newer connection reports', async () => (await detail(r.id)).hostname === 'second.example');
  t.equal((await detail(r.id)).isOnline, true);
  const m = (await srv.raw('GET', '/metrics')).text;
  t.match(m, /mesh_control_dropped_total\{reason="heartbeat-timeout"\} [1-9]/);
  t.match(m, /mesh_control_dropped_total\{reason="superseded"\} [1-9]/);
  await b.close();
});

t.test('a hello naming another router is refused', async (t) => {
  const r1 = await enrolledEdge();
  const r2 = await enrolledEdge();
  const c = client(r1, { routerId: r2.id });
  const e = await c.connect().then(() => undefined, (x) => x);
  t.equal(e?.code, 4001);
  t.equal(e?.error?.code, 'UNKNOWN_ROUTER');
  const ok = client(r1, { routerId: r1.id });
  await ok.connect();
  t.pass('naming its own id is fine');
  await ok.close();
});

t.test('trace specs reach connected routers, and routers that connect later', async (t) => {
  const r = await enrolledEdge();
  const c = client(r);
  await c.connect();
  const ident = (await admin.post('/identities', { name: 'rt-traced', type: 'User', isAdmin: false })).body.data.id;
  let pushed = nextMessage(c, 'trace');
  const put = await admin.put(`/identities/${ident}/trace`, { enabled: true, duration: '5m', traceId: 'rt-trace', channels: ['edge'] });
  t.equal(put.status, 200);
  let m = await pushed;
  t.same(m.trace, { identityId: ident, enabled: true, traceId: 'rt-trace', until: put.body.data.until, channels: ['edge'] });

  const late = client(await enrolledEdge());
  const w = await late.connect();
  t.same(w.traces.find((x: any) => x.identityId === ident), { identityId: ident, enabled: true, traceId: 'rt-trace', until: put.body.data.until, channels: ['edge'] }, 'in welcome');

  pushed = nextMessage(c, 'trace');
  await admin.put(`/identities/${ident}/trace`, { enabled: false });
  m = await pushed;
  t.equal(m.trace.identityId, ident);
  t.equal(m.trace.enabled, false, 'disabling is pushed');

  // Expiry is pushed too.
  pushed = nextMessage(c, 'trace');
  await admin.put(`/identities/${ident}/trace`, { enabled: true, duration: '300ms' });
  t.equal((await pushed).trace.enabled, true);
  pushed = nextMessage(c, 'trace');
  m = await pushed;
  t.equal(m.trace.enabled, false, 'expiry is pushed');
  await c.close();
  await late.close();
});

t.test('disable, re-enroll and delete disconnect the router', async (t) => {
  const r = await enrolledEdge();
  let c = client(r);
  await c.connect();
  t.equal((await admin.patch(`/edge-routers/${r.id}`, { disabled: true })).status, 200);
  let closed = await c.closed();
  t.equal(closed.code, 4003, 'disabled: 4003');
  let e = await client(r).connect().then(() => undefined, (x) => x);
  t.equal(e?.error?.code, 'ROUTER_DISABLED', 'a disabled router cannot reconnect');
  t.equal((await admin.patch(`/edge-routers/${r.id}`, { disabled: false })).status, 200);
  c = client(r);
  await c.connect();
  await until(t, 'online after enabling', async () => (await detail(r.id)).isOnline);

  // Re-enroll: disconnected at once, the old certificate no longer works, the new enrollment does.
  const re = await admin.post(`/edge-routers/${r.id}/re-enroll`);
  t.equal(re.status, 200);
  closed = await c.closed();
  t.equal(closed.code, 4005, 're-enroll: 4005');
  t.equal(closed.error?.code, 'RE_ENROLLED');
  t.equal((await detail(r.id)).isOnline, false);
  e = await client(r).connect().then(() => undefined, (x) => x);
  t.equal(e?.code, 4001, 'the old certificate is refused');
  t.equal(e?.error?.code, 'UNKNOWN_ROUTER');
  const token = (await detail(r.id)).enrollmentToken;
  t.type(token, 'string', 'a new enrollment token');
  const keys = await routerCsrs(r.name, 'again.test');
  const { certChain } = await enrollRouter(http, 'edge', token, keys);
  c = new RouterClient({ url, ca: srv.ca, certChain, key: keys.keyPem, hostname: 'again.test' });
  await c.connect();
  await until(t, 'online with the new certificate', async () => (await detail(r.id)).hostname === 'again.test');

  t.equal((await admin.delete(`/edge-routers/${r.id}`)).status, 200);
  closed = await c.closed();
  t.equal(closed.code, 4005, 'deleted: 4005');
  t.equal(closed.error?.code, 'DELETED');
});

t.test('certificate extension replaces the certificate the router connects with', async (t) => {
  const r = await enrolledEdge();
  const c = client(r);
  await c.connect();
  const keys = await routerCsrs(r.name, 'extended.test');
  const ext = await srv.tlsClient('client', r.certChain, r.keyPem).post('/enroll/extend/router', { certCsr: keys.clientCsr, serverCertCsr: keys.serverCsr });
  t.equal(ext.status, 200, 'extended over the mutual-TLS listener');
  const closed = await c.closed();
  t.equal(closed.code, 4005, 'the session of the old certificate is closed');
  t.equal(closed.error?.code, 'RE_ENROLLED');
  const old = await client(r).connect().then(() => undefined, (x) => x);
  t.equal(old?.error?.code, 'UNKNOWN_ROUTER', 'the old certificate no longer authenticates');
  const fresh = new RouterClient({ url, ca: srv.ca, certChain: ext.body.data.cert, key: keys.keyPem, hostname: 'extended.test' });
  await fresh.connect();
  await until(t, 'online with the extended certificate', async () => (await detail(r.id)).hostname === 'extended.test');
  await fresh.close();
});

t.test('transit routers connect too', async (t) => {
  const r = await createAndEnroll(http, admin.token!, { name: 'rt-tr-1', kind: 'transit', hostname: 'tr1.test' });
  t.equal((await detail(r.id, 'transit-routers')).isOnline, false);
  const c = client(r);
  const w = await c.connect();
  t.equal(w.kind, 'transit');
  t.notOk('roleAttributes' in w.router);
  await until(t, 'transit online', async () => (await detail(r.id, 'transit-routers')).isOnline === true);
  t.equal((await detail(r.id, 'routers')).isOnline, true, 'the same record under /routers');
  const m = (await srv.raw('GET', '/metrics')).text;
  t.match(m, /mesh_routers_online\{kind="transit"\} 1/);
  c.kill();
  await until(t, 'transit offline', async () => (await detail(r.id, 'transit-routers')).isOnline === false);
});

t.test('lists stay consistent while routers connect, drop and reconnect', async (t) => {
  const fleet = await Promise.all([enrolledEdge(), enrolledEdge(), enrolledEdge(), enrolledEdge()]);
  let flapping = true;
  const flapper = (async () => {
    for (let round = 0; round < 6; round++) {
      const cs = fleet.map((r) => client(r));
      await Promise.all(cs.map((c) => c.connect()));
      for (const [i, c] of cs.entries()) (i % 2 ? c.kill() : void c.close());
      await Promise.all(cs.map((c) => c.closed()));
    }
    flapping = false;
  })();
  let lists = 0;
  const problems: string[] = [];
  await Promise.all(
    Array.from({ length: 3 }, async () => {
      while (flapping) {
        const r = await admin.get('/edge-routers?limit=100');
        lists++;
        if (r.status !== 200) problems.push(`status ${r.status}`);
        for (const x of r.body?.data ?? []) {
          if (typeof x.isOnline !== 'boolean') problems.push(`${x.id}: isOnline ${x.isOnline}`);
          if (!x.isOnline && (x.hostname !== '' || Object.keys(x.supportedProtocols).length || x.syncStatus !== 'SYNC_DISCONNECTED')) problems.push(`${x.id}: offline with live fields`);
          if (x.isOnline && !['SYNC_IN_PROGRESS', 'SYNC_DONE'].includes(x.syncStatus)) problems.push(`${x.id}: online with ${x.syncStatus}`);
        }
      }
    }),
  );
  await flapper;
  t.ok(lists > 0, `${lists} lists during the flapping`);
  t.same(problems, [], 'every list answered 200 with consistent live fields');
  await until(t, 'all offline at the end', async () => (await admin.get('/edge-routers?limit=1&filter=' + encodeURIComponent('isOnline = true'))).body.meta.pagination.totalCount === 0);
});

t.test('shutdown closes every router with 1001', async (t) => {
  const routers = await Promise.all([enrolledEdge(), enrolledEdge(), enrolledEdge()]);
  const clients = routers.map((r) => client(r));
  await Promise.all(clients.map((c) => c.connect()));
  const code = await srv.stop();
  t.equal(code, 0, 'clean exit');
  for (const c of clients) t.equal((await c.closed()).code, 1001);
});
