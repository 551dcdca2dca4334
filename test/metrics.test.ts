/**
 * Observability against the real server: Prometheus metrics at /metrics (request counts and
 * latencies per operation, pool queue depth, sessions, online routers, store size), the optional
 * metrics bearer token, liveness and readiness, and request logs that name requests but carry no
 * secrets (passwords, session tokens, enrollment tokens in query strings).
 */
import t from 'tap';
import { startServer, ADMIN_PASSWORD } from './helpers/server.js';

/** Value of one sample line (`name{labels} value`), or undefined. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have: Record<string, string> = {};
    for (const [, k, v] of (m[3] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) have[k] = v;
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) return Number(m[4]);
  }
  return undefined;
}

t.test('metrics: request counts and latencies per operation, and the gauges', async (t) => {
  const srv = await startServer(t);
  const admin = await srv.login();
  for (let i = 0; i < 5; i++) t.equal((await admin.get('/identities')).status, 200);
  t.equal((await admin.get('/identities/nope')).status, 404);
  t.equal((await srv.mgmt.get('/identities')).status, 401);
  t.equal((await admin.post('/services', { name: 'm-svc', encryptionRequired: true })).status, 201);

  const r = await srv.raw('GET', '/metrics');
  t.equal(r.status, 200);
  t.match(String(r.headers['content-type']), /^text\/plain/);
  const m = r.text;
  t.equal(sample(m, 'mesh_http_requests_total', { api: 'management', operation: 'listIdentities', method: 'GET', status: '200' }), 5, 'five listIdentities 200');
  t.equal(sample(m, 'mesh_http_requests_total', { api: 'management', operation: 'detailIdentity', status: '404' }), 1, 'a 404 counted under its operation');
  t.equal(sample(m, 'mesh_http_requests_total', { api: 'management', operation: 'listIdentities', status: '401' }), 1, 'a 401 counted under its operation');
  t.equal(sample(m, 'mesh_http_requests_total', { api: 'management', operation: 'createService', method: 'POST', status: '201' }), 1);
  t.equal(sample(m, 'mesh_http_request_duration_seconds_count', { api: 'management', operation: 'listIdentities' }), 6, 'latency observations per operation');
  t.ok(sample(m, 'mesh_http_request_duration_seconds_bucket', { api: 'management', operation: 'listIdentities', le: '+Inf' }) === 6);
  t.ok((sample(m, 'mesh_http_request_duration_seconds_sum', { api: 'management', operation: 'listIdentities' }) ?? -1) > 0, 'latency sum');
  t.equal(sample(m, 'mesh_worker_pool_queue_depth'), 0, 'pool queue depth');
  t.equal(sample(m, 'mesh_worker_pool_queue_limit'), 2048);
  t.ok((sample(m, 'mesh_api_sessions') ?? 0) >= 1, 'API sessions');
  t.equal(sample(m, 'mesh_routers_online', { kind: 'edge' }), 0);
  t.equal(sample(m, 'mesh_routers_online', { kind: 'transit' }), 0);
  t.ok((sample(m, 'mesh_store_size_bytes') ?? 0) > 0, 'store size');
  t.ok((sample(m, 'mesh_store_map_size_bytes') ?? 0) >= (sample(m, 'mesh_store_size_bytes') ?? 0));
  t.equal(sample(m, 'mesh_store_records', { collection: 'services' }), 1, 'records per collection');
  t.ok(sample(m, 'mesh_build_info', { version: 'v0.1.0' }) === 1, 'build info');
  t.ok(sample(m, 'process_cpu_user_seconds_total') !== undefined, 'process metrics');
  t.ok(sample(m, 'nodejs_eventloop_lag_seconds') !== undefined, 'event loop lag');
  t.notMatch(m, /operation="\/edge/, 'no raw paths as labels');

  // Unmatched paths share one label value: cardinality stays bounded whatever clients request.
  for (const p of ['/nope-1', '/nope-2', '/edge/management/v1/no-such-thing']) await srv.raw('GET', p);
  const m2 = (await srv.raw('GET', '/metrics')).text;
  t.equal(sample(m2, 'mesh_http_requests_total', { api: 'none', operation: 'unmatched', status: '404' }), 3);
  t.equal(sample(m2, 'mesh_http_requests_total', { api: 'raw', operation: '/metrics', status: '200' }), 1, 'the first scrape is counted by the second');

  t.equal((await srv.raw('POST', '/metrics')).status, 405, 'POST /metrics: 405');
  t.equal((await srv.raw('HEAD', '/metrics')).status, 200, 'HEAD /metrics');
});

t.test('metrics behind a bearer token when one is configured', async (t) => {
  const token = 'metrics-secret-0123456789';
  const srv = await startServer(t, { env: { MESH_METRICS_TOKEN: token } });
  const none = await srv.raw('GET', '/metrics');
  t.equal(none.status, 401);
  t.equal(none.body?.error?.code, 'UNAUTHORIZED');
  t.equal((await srv.raw('GET', '/metrics', undefined, { authorization: 'Bearer wrong-token-0123456789' })).status, 401);
  const ok = await srv.raw('GET', '/metrics', undefined, { authorization: `Bearer ${token}` });
  t.equal(ok.status, 200);
  t.match(ok.text, /mesh_http_requests_total/);
  t.equal((await srv.raw('GET', '/health/ready')).status, 200, 'health stays open');
});

t.test('liveness and readiness', async (t) => {
  const srv = await startServer(t);
  const live = await srv.raw('GET', '/health/live');
  t.equal(live.status, 200);
  t.same(live.body, { status: 'live' });
  t.equal(live.headers['cache-control'], 'no-store');
  const ready = await srv.raw('GET', '/health/ready');
  t.equal(ready.status, 200);
  t.equal(ready.body.status, 'ready');
  const ids = ready.body.checks.map((c: any) => c.id);
  t.same(ids, ['controller.shutdown', 'store.read', 'store.space', 'pool.queue', 'tls.server-certificate']);
  t.ok(ready.body.checks.every((c: any) => c.healthy === true && typeof c.detail === 'string'));
  const hc = await srv.raw('GET', '/health-checks');
  t.equal(hc.status, 200);
  t.equal(hc.body.data.controller.healthy, true, 'upstream-shaped health checks');
  t.equal(hc.body.data.controller.checks.length, 5);
  t.equal((await srv.raw('HEAD', '/health/ready')).status, 200);
  const v = await srv.raw('GET', '/version');
  t.same(v.body.data.apiVersions['health-checks'], { v1: { path: '/health-checks', apiBaseUrls: [`https://127.0.0.1:${srv.port}/health-checks`] } }, 'the version document lists the health-check API');
  t.equal((await srv.raw('DELETE', '/health/live')).status, 405);
});

t.test('readiness fails when the worker queue is full', async (t) => {
  // A queue of one: any password hashing in flight fills it.
  const srv = await startServer(t, { env: { MESH_WORKER_QUEUE: '1', MESH_WORKERS: '1', MESH_ARGON2_MEMORY_KIB: '65536', MESH_ARGON2_ITERATIONS: '20' } });
  const logins = Array.from({ length: 6 }, () => srv.mgmt.post('/authenticate?method=password', { username: 'admin', password: ADMIN_PASSWORD }));
  let sawBusy = false;
  for (let i = 0; i < 20 && !sawBusy; i++) {
    const r = await srv.raw('GET', '/health/ready');
    if (r.status === 503) {
      sawBusy = true;
      t.equal(r.body.status, 'not-ready');
      t.equal(r.body.checks.find((c: any) => c.id === 'pool.queue').healthy, false, 'the pool check names the cause');
    }
  }
  await Promise.all(logins);
  t.ok(sawBusy, 'readiness reported 503 while the queue was full');
  t.equal((await srv.raw('GET', '/health/ready')).status, 200, 'ready again once drained');
});

t.test('request logs name every request and carry no secrets', async (t) => {
  const srv = await startServer(t, { env: { MESH_LOG_LEVEL: 'info' } });
  const admin = await srv.login();
  const token = admin.token!;
  await admin.post('/identities', { name: 'log-user', type: 'User', isAdmin: false, enrollment: { updb: 'log-user' } });
  await srv.client.post('/authenticate?method=password', { username: 'admin', password: 'wrong-password-secret' });
  await srv.raw('POST', '/edge/client/v1/enroll?token=5ecret-enrollment-token&method=ott', Buffer.from('{}'), { 'content-type': 'application/json' });
  await admin.get('/identities?filter=' + encodeURIComponent('name="secret-filter-value"'));
  await new Promise((r) => setTimeout(r, 300));
  const lines = srv.output.split('\n').filter((l) => l.includes('"msg":"request"')).map((l) => JSON.parse(l));
  t.ok(lines.length >= 5, `request lines logged (${lines.length})`);
  const auth = lines.find((l) => l.operationId === 'authenticate' && l.status === 200);
  t.ok(auth, 'the login is logged');
  t.match(auth, { method: 'POST', path: '/edge/management/v1/authenticate', status: 200, component: 'http' });
  t.type(auth.requestId, 'string');
  t.type(auth.ms, 'number');
  const list = lines.find((l) => l.operationId === 'createIdentity');
  t.equal(list?.identityId !== undefined, true, 'the caller identity id is logged');
  t.notOk(srv.output.includes(ADMIN_PASSWORD), 'no admin password in logs');
  t.notOk(srv.output.includes('wrong-password-secret'), 'no failed password in logs');
  t.notOk(srv.output.includes(token), 'no session token in logs');
  t.notOk(srv.output.includes('5ecret-enrollment-token'), 'no enrollment token (query) in logs');
  t.notOk(srv.output.includes('secret-filter-value'), 'no query strings in logs');
});

t.test('the access log can be turned off; 5xx would still be logged', async (t) => {
  const srv = await startServer(t, { env: { MESH_LOG_LEVEL: 'info', MESH_REQUEST_LOG: 'false' } });
  await srv.login();
  await new Promise((r) => setTimeout(r, 200));
  t.notOk(srv.output.includes('"msg":"request"'), 'no request lines');
});
