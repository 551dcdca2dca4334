/**
 * Cluster mode against a real 3-member etcd and three real controllers (port 0, their own LMDB
 * replicas): replication, guarded concurrent writes, logins across controllers, cascades.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { startEtcd, type EtcdCluster } from '../bench/lib/etcd.js';
import { startServer, isError, type Client, type Server } from './helpers/server.js';
import { RouterClient } from '../bench/lib/router-client.js';
import { createAndEnroll } from '../bench/lib/router-enroll.js';
import { createClient } from '../bench/lib/http.js';
import { totpCode } from '../src/auth/mfa.js';
import { STRUCTURES } from '../src/store/store.js';

// Real etcd members and controllers start, die and restart here: more than the default file timeout
// on a loaded machine (about a minute alone on a busy 2-core one).
t.setTimeout(300_000);

/** Controllers that outlive the subtest starting them are torn down with the whole file. */
const root = t;
let etcd: EtcdCluster;
const ctrls: Server[] = [];
const admins: Client[] = [];
const PREFIX = '/mesh-test';
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

const env = () => ({ MESH_CLUSTER_ETCD: etcd.endpoints.join(','), MESH_CLUSTER_PREFIX: PREFIX });

/** Poll `f` until it returns true; resolves with the ms it took, or fails after `ms`. */
async function within(ms: number, f: () => Promise<boolean>): Promise<number> {
  const start = Date.now();
  for (;;) {
    if (await f()) return Date.now() - start;
    if (Date.now() - start > ms) throw new Error(`not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

t.before(async () => {
  etcd = await startEtcd(t, 3);
  // All three at once on an empty prefix: one creates the shared PKI and the default admin, the
  // others take them.
  ctrls.push(...(await Promise.all([startServer(t, { env: env() }), startServer(t, { env: env() }), startServer(t, { env: env() })])));
  for (const c of ctrls) admins.push(await c.login());
  // A controller that dies on its own shows why (its last log lines, requests left out).
  for (const c of ctrls) {
    c.proc.on('exit', (code, sig) => {
      if (sig !== 'SIGKILL' && sig !== 'SIGTERM' && code !== 0) console.error(`controller exited (${code ?? sig}):`, c.output.split('\n').filter((l) => !l.includes('"component":"http"')).slice(-40).join('\n'));
    });
  }
});

t.test('one PKI: every controller presents a server certificate of the same CA', async (t) => {
  t.equal(ctrls[1].ca, ctrls[0].ca);
  t.equal(ctrls[2].ca, ctrls[0].ca);
  for (const c of ctrls) {
    const r = await c.raw('GET', '/health/ready');
    t.equal(r.status, 200, 'ready');
    t.ok(r.body.checks.some((x: { id: string; healthy: boolean }) => x.id === 'cluster.replica' && x.healthy), 'replica check reported');
    const m = (await c.raw('GET', '/metrics')).text;
    t.match(m, /mesh_cluster_replica_ready 1/);
    t.match(m, /mesh_cluster_applied_revision [1-9]/);
  }
});

t.test('a create on A is visible on B and C within a second', async (t) => {
  const [a, b, c] = admins;
  const r = await a.post('/identities', { name: 'replicated-1', type: 'User', isAdmin: false, roleAttributes: ['r1'] });
  t.equal(r.status, 201);
  const id = r.body.data.id;
  t.equal((await a.get(`/identities/${id}`)).status, 200, 'A reads its own write at once');
  for (const other of [b, c]) {
    const ms = await within(1000, async () => (await other.get(`/identities/${id}`)).status === 200);
    t.ok(ms <= 1000, `visible in ${ms} ms`);
    const d = await other.get(`/identities/${id}`);
    t.equal(d.body.data.name, 'replicated-1');
    t.same(d.body.data.roleAttributes, ['r1']);
  }
});

t.test('the same name created on A and B at once gives exactly one 201', async (t) => {
  for (let round = 0; round < 5; round++) {
    const name = `race-${round}`;
    const rs = await Promise.all(admins.map((x) => x.post('/identities', { name, type: 'User', isAdmin: false })));
    t.equal(rs.filter((r) => r.status === 201).length, 1, `round ${round}: one 201`);
    for (const r of rs.filter((r) => r.status !== 201)) t.ok(isError(r, 400, 'COULD_NOT_VALIDATE') && r.body.error.cause.field === 'name', `the others get the single-node 400: ${r.status} ${r.body?.error?.code}`);
    for (const x of admins) {
      await within(1000, async () => (await x.get(`/identities?filter=name="${name}"`)).body.data.length === 1);
    }
  }
});

t.test('a login on A works on B and C', async (t) => {
  const [a] = admins;
  const id = (await a.post('/identities', { name: 'user-login', type: 'User', isAdmin: false })).body.data.id;
  const auth = await a.post('/authenticators', { identityId: id, method: 'updb', username: 'user-login', password: 'user-login-pw1' });
  t.equal(auth.status, 201);
  const user = await ctrls[0].login('user-login', 'user-login-pw1', 'client');
  for (const srv of ctrls.slice(1)) {
    const ms = await within(1000, async () => (await srv.client.request('GET', '/current-api-session', undefined, { headers: { 'zt-session': user.token! } })).status === 200);
    t.ok(ms <= 1000, `session known in ${ms} ms`);
    const me = await srv.client.request('GET', '/current-identity', undefined, { headers: { 'zt-session': user.token! } });
    t.equal(me.status, 200);
    t.equal(me.body.data.name, 'user-login');
  }
});

t.test('signed tokens: every controller publishes every key; a token of A works as Bearer on C; a logout on B ends it on A and C within a second', async (t) => {
  const jwks = await Promise.all(ctrls.map(async (c) => ((await c.raw('GET', '/oidc/keys')).body.keys as { kid: string }[]).map((k) => k.kid).sort()));
  t.ok(jwks[0].length >= 3, `at least one key per controller (${jwks[0].length})`);
  t.same(jwks[1], jwks[0], 'B publishes the same keys as A');
  t.same(jwks[2], jwks[0], 'C publishes the same keys as A');
  const user = await ctrls[0].login('user-login', 'user-login-pw1', 'client');
  const bearer = { headers: { authorization: `Bearer ${user.token}` } };
  await within(1000, async () => (await ctrls[2].client.request('GET', '/current-identity', undefined, bearer)).status === 200);
  t.equal((await ctrls[2].client.request('GET', '/current-identity', undefined, bearer)).status, 200, "A's token as Bearer on C");
  t.equal((await ctrls[1].client.request('DELETE', '/current-api-session', undefined, { headers: { 'zt-session': user.token! } })).status, 200, 'logout on B');
  for (const [i, srv] of [[0, ctrls[0]], [2, ctrls[2]]] as const) {
    const ms = await within(1000, async () => (await srv.client.request('GET', '/current-identity', undefined, { headers: { 'zt-session': user.token! } })).status === 401);
    t.ok(ms <= 1000, `refused on controller ${i} in ${ms} ms`);
  }
});

/** etcd keys under the prefix that start with `sub`. */
async function etcdKeys(sub: string): Promise<string[]> {
  return (await etcd.ctl(['get', `${PREFIX}/${sub}`, '--prefix', '--keys-only'])).split('\n').filter(Boolean);
}

t.test('API sessions and sessions stay on their controller: no etcd write per login, session or request; ends cross within a second', async (t) => {
  const [a, b, c] = admins;
  const iid = (await a.post('/identities', { name: 'local-sessions', type: 'User', isAdmin: false, roleAttributes: ['local-dialer'] })).body.data.id;
  t.equal((await a.post('/authenticators', { identityId: iid, method: 'updb', username: 'local-sessions', password: 'local-sessions-pw1' })).status, 201);
  const sid = (await a.post('/services', { name: 'local-svc', encryptionRequired: true, roleAttributes: ['local-svc'] })).body.data.id;
  t.equal((await a.post('/service-policies', { name: 'local-dial', type: 'Dial', semantic: 'AnyOf', identityRoles: ['#local-dialer'], serviceRoles: ['#local-svc'] })).status, 201);
  t.equal((await a.post('/edge-router-policies', { name: 'local-erp', semantic: 'AnyOf', identityRoles: ['#local-dialer'], edgeRouterRoles: ['#all'] })).status, 201);
  t.equal((await a.post('/service-edge-router-policies', { name: 'local-serp', semantic: 'AnyOf', serviceRoles: ['#local-svc'], edgeRouterRoles: ['#all'] })).status, 201);
  t.equal((await a.post('/edge-routers', { name: 'local-er', roleAttributes: [] })).status, 201);
  for (const x of [b, c]) await within(1000, async () => (await x.get('/edge-routers?filter=name="local-er"')).body.data.length === 1);

  const before = Number(JSON.parse(await etcd.ctl(['get', `${PREFIX}/`, '--prefix', '--limit=1', '-w', 'json'])).header.revision);
  const user = await ctrls[0].login('local-sessions', 'local-sessions-pw1', 'client');
  const hdr = { headers: { 'zt-session': user.token! } };
  const asid = (await user.get('/current-api-session')).body.data.id as string;
  // Used on B (taken on from its token there), a session made on B, requests on all three.
  t.equal((await ctrls[1].client.request('GET', '/current-identity', undefined, hdr)).status, 200, "A's token works on B at once");
  const s = await ctrls[1].client.request('POST', '/sessions', { serviceId: sid, type: 'Dial' }, hdr);
  t.equal(s.status, 201, `a session made on B with A's token (${s.text.slice(0, 200)})`);
  for (const srv of ctrls.slice(0, 2)) for (let i = 0; i < 8; i++) t.equal((await srv.client.request('GET', '/current-identity', undefined, hdr)).status, 200);
  const after = Number(JSON.parse(await etcd.ctl(['get', `${PREFIX}/`, '--prefix', '--limit=1', '-w', 'json'])).header.revision);
  t.same(await etcdKeys(`c/apiSessions/${asid}`), [], 'the API session is not in etcd');
  t.same(await etcdKeys('c/sessions/'), [], 'no session is in etcd');
  // The only etcd writes meanwhile may be activity beats (one per controller per beat interval,
  // whatever the request count), when the window happened to span one.
  const beats = (JSON.parse(await etcd.ctl(['get', `${PREFIX}/activity/`, '--prefix', '-w', 'json'])).kvs ?? []).filter((kv: { create_revision: number }) => kv.create_revision > before && kv.create_revision <= after).length;
  t.equal(after - before, beats, `no etcd revision for a login, a session and 16 requests but activity beats (${before} → ${after}, ${beats} beats)`);
  const listed = async (x: Client) => ((await x.get('/api-sessions?limit=500')).body.data as { id: string }[]).some((r) => r.id === asid);
  t.ok(await listed(a), 'A lists the API session it made');
  await within(1000, () => listed(b));
  t.ok(await listed(b), 'B lists it once it took it on');
  t.notOk(await listed(c), 'C, which never saw it, does not list it');

  // An admin on B ends it: refused on A and C within a second, and the session made on B is gone.
  t.equal((await b.delete(`/api-sessions/${asid}`)).status, 200, 'deleted on B');
  for (const srv of [ctrls[0], ctrls[2]]) {
    const ms = await within(1000, async () => (await srv.client.request('GET', '/current-identity', undefined, hdr)).status === 401);
    t.ok(ms <= 1000, `refused on ${srv === ctrls[0] ? 'A' : 'C'} in ${ms} ms`);
  }
  t.equal((await b.get(`/sessions/${s.body.data.id}`)).status, 404, 'its session on B ended with it');
  await within(1000, async () => !(await listed(a)));
  t.pass('A no longer lists it');
  t.ok((await etcdKeys(`c/~revoked/${asid}`)).length === 1, 'the revocation is a small key in etcd');
  const lease = (await etcd.ctl(['get', `${PREFIX}/c/~revoked/${asid}`, '-w', 'json'])).match(/"lease":(\d+)/);
  t.ok(lease && Number(lease[1]) !== 0, 'held by a lease, so it expires');

  // An identity disabled on C, which never saw the token: refused on A and B within a second.
  const user2 = await ctrls[0].login('local-sessions', 'local-sessions-pw1', 'client');
  const hdr2 = { headers: { 'zt-session': user2.token! } };
  t.equal((await ctrls[1].client.request('GET', '/current-identity', undefined, hdr2)).status, 200, 'second login works on B');
  t.equal((await c.post(`/identities/${iid}/disable`, { durationMinutes: 0 })).status, 200, 'disabled on C');
  for (const srv of [ctrls[0], ctrls[1]]) {
    const ms = await within(1000, async () => (await srv.client.request('GET', '/current-identity', undefined, hdr2)).status === 401);
    t.ok(ms <= 1000, `refused on ${srv === ctrls[0] ? 'A' : 'B'} in ${ms} ms`);
  }
  t.equal((await ctrls[2].client.request('GET', '/current-identity', undefined, hdr2)).status, 401, 'and C does not take it on');
  t.equal((await c.post(`/identities/${iid}/enable`, {})).status, 200);
  await within(1000, async () => (await ctrls[2].client.request('GET', '/current-identity', undefined, hdr2)).status === 401);
  t.pass('a token of a session ended by the disable stays refused after the identity is enabled again');

  // A logout on A: C never saw the token and refuses it.
  const user3 = await ctrls[0].login('local-sessions', 'local-sessions-pw1', 'client');
  t.equal((await user3.delete('/current-api-session')).status, 200, 'logout on A');
  t.equal((await ctrls[2].client.request('GET', '/current-identity', undefined, { headers: { 'zt-session': user3.token! } })).status, 401, 'C refuses the logged-out token');
});

t.test('an MFA step passed on A reaches the copy B took on from the token', async (t) => {
  const [a] = admins;
  const iid = (await a.post('/identities', { name: 'mfa-cluster', type: 'User', isAdmin: false })).body.data.id;
  t.equal((await a.post('/authenticators', { identityId: iid, method: 'updb', username: 'mfa-cluster', password: 'mfa-cluster-pw1' })).status, 201);
  const u = await ctrls[0].login('mfa-cluster', 'mfa-cluster-pw1', 'client');
  t.equal((await u.post('/current-identity/mfa')).status, 201, 'MFA enrolment started on A');
  const secret = /secret=([A-Z2-7]+)/.exec((await u.get('/current-identity/mfa')).body.data.provisioningUrl)![1];
  const now = Math.floor(Date.now() / 1000);
  t.equal((await u.post('/current-identity/mfa/verify', { code: totpCode(secret, now) })).status, 200, 'verified');
  const u2 = await ctrls[0].login('mfa-cluster', 'mfa-cluster-pw1', 'client');
  const hdr = { headers: { 'zt-session': u2.token! } };
  t.not((await ctrls[1].client.request('GET', '/current-identity/authenticators', undefined, hdr)).status, 200, 'on B, before the MFA step: not fully authenticated');
  const step = await u2.post('/authenticate/mfa', { code: totpCode(secret, now + 30) });
  t.equal(step.status, 200, `MFA step passed on A (${step.text.slice(0, 200)})`);
  const ms = await within(1000, async () => (await ctrls[1].client.request('GET', '/current-identity/authenticators', undefined, hdr)).status === 200);
  t.ok(ms <= 1000, `fully authenticated on B in ${ms} ms`);
});

t.test('a session deleted on A is announced to the routers on B and C, once each, and not again by A', async (t) => {
  const [a, b, c] = ctrls;
  const [admin] = admins;
  const http = await createClient({ origin: a.origin, ca: a.ca, connections: 2, kind: 'https' });
  t.teardown(() => http.close());
  const iid = (await admin.post('/identities', { name: 'removed-user', type: 'User', isAdmin: false, roleAttributes: ['removed-dialer'] })).body.data.id;
  t.equal((await admin.post('/authenticators', { identityId: iid, method: 'updb', username: 'removed-user', password: 'removed-user-pw1' })).status, 201);
  const svc = (await admin.post('/services', { name: 'removed-svc', encryptionRequired: true, roleAttributes: ['removed-svc'] })).body.data.id;
  t.equal((await admin.post('/service-policies', { name: 'removed-dial', type: 'Dial', semantic: 'AnyOf', identityRoles: ['#removed-dialer'], serviceRoles: ['#removed-svc'] })).status, 201);
  t.equal((await admin.post('/edge-router-policies', { name: 'removed-erp', semantic: 'AnyOf', identityRoles: ['#removed-dialer'], edgeRouterRoles: ['#all'] })).status, 201);
  t.equal((await admin.post('/service-edge-router-policies', { name: 'removed-serp', semantic: 'AnyOf', serviceRoles: ['#removed-svc'], edgeRouterRoles: ['#all'] })).status, 201);
  // One edge router on each controller.
  const routers = [];
  for (const [i, srv] of [a, b, c].entries()) {
    const r = await createAndEnroll(http, admin.token!, { name: `removed-er-${i}`, kind: 'edge', hostname: `removed-er-${i}.test` });
    await within(5000, async () => (await admins[i].get(`/edge-routers/${r.id}`)).status === 200);
    const client = new RouterClient({ url: `wss://127.0.0.1:${srv.port}/ctrl/v1`, ca: srv.ca, certChain: r.certChain, key: r.keyPem, hostname: `${r.name}.example` });
    await client.connect();
    t.teardown(() => client.close().catch(() => undefined));
    routers.push(client);
  }
  const [onA, onB, onC] = routers;
  const told = (r: RouterClient, id: string) => r.received.filter((m: any) => m.type === 'session-removed' && m.ids.includes(id)).length;
  const user = await a.login('removed-user', 'removed-user-pw1', 'client');
  const session = async () => {
    const r = await user.post('/sessions', { serviceId: svc, type: 'Dial' });
    t.equal(r.status, 201, `a session made on A (${r.text.slice(0, 200)})`);
    return { id: r.body.data.id as string, token: r.body.data.token as string };
  };

  // An admin's delete on A, then the owner's.
  // (One session per API session, service and type: the second is made once the first is gone.)
  const byAdmin = await session();
  t.equal((await admin.delete(`/sessions/${byAdmin.id}`)).status, 200, 'deleted by an admin on A');
  const byOwner = await session();
  t.not(byOwner.id, byAdmin.id, 'a new session');
  t.equal((await user.delete(`/sessions/${byOwner.id}`)).status, 200, 'deleted by its owner on A');
  for (const s of [byAdmin, byOwner]) {
    const ms = await within(2000, async () => told(onB, s.id) > 0 && told(onC, s.id) > 0);
    t.ok(ms <= 2000, `the routers on B and C were told in ${ms} ms`);
    const jti = JSON.parse(Buffer.from(s.token.split('~')[1], 'base64url').toString()).jti;
    t.equal(jti, s.id, "the id they were told is the token's jti");
  }
  const removed = await etcdKeys('c/~sessions-removed/');
  t.ok(removed.length >= 2, 'each delete wrote its news key into etcd');
  const lease = (await etcd.ctl(['get', removed[0], '-w', 'json'])).match(/"lease":(\d+)/);
  t.ok(lease && Number(lease[1]) !== 0, 'held by a lease, so it expires');
  // Whatever else was going to arrive has arrived by now (a later write has come back everywhere).
  t.equal((await admin.post('/identities', { name: 'removed-marker', type: 'User', isAdmin: false })).status, 201);
  for (const x of admins) await within(2000, async () => (await x.get('/identities?filter=name="removed-marker"')).body.data.length === 1);
  await new Promise((r) => setTimeout(r, 300));
  for (const s of [byAdmin, byOwner]) {
    t.equal(told(onA, s.id), 1, 'the router on A was told once (at the commit), not again from the news');
    t.equal(told(onB, s.id), 1, 'the router on B was told once');
    t.equal(told(onC, s.id), 1, 'the router on C was told once');
  }

  // Its API session ended on A (logout): the session made under it reaches B's router too.
  const underLogout = await session();
  t.equal((await user.delete('/current-api-session')).status, 200, 'logout on A');
  await within(2000, async () => told(onB, underLogout.id) === 1);
  t.pass("a session ended with its API session on A: B's router was told");

  // An API session of A taken on by B, a session made on B under it, the API session deleted on
  // A: B ends its session on the revocation, and the routers on A and C hear of it.
  const again = await a.login('removed-user', 'removed-user-pw1', 'client');
  const asid = (await again.get('/current-api-session')).body.data.id as string;
  const onBSession = await b.client.request('POST', '/sessions', { serviceId: svc, type: 'Dial' }, { headers: { 'zt-session': again.token! } });
  t.equal(onBSession.status, 201, "a session made on B with A's token");
  t.equal((await admin.delete(`/api-sessions/${asid}`)).status, 200, 'its API session deleted on A');
  await within(2000, async () => told(onA, onBSession.body.data.id) === 1 && told(onC, onBSession.body.data.id) === 1);
  t.pass("B's session, ended by a revocation from A: the routers on A and C were told");

  // The identity disabled on C: A ends the session it holds, and the router on B hears of it.
  const last = await a.login('removed-user', 'removed-user-pw1', 'client');
  const r = await last.post('/sessions', { serviceId: svc, type: 'Dial' });
  t.equal(r.status, 201);
  t.equal((await admins[2].post(`/identities/${iid}/disable`, { durationMinutes: 0 })).status, 200, 'identity disabled on C');
  await within(2000, async () => told(onB, r.body.data.id) === 1);
  t.pass("A's session, ended by a disable on C: the router on B was told");
});

t.test('GET /controllers lists every live controller; enrollment JWTs name all of them', async (t) => {
  for (const x of admins) await within(3000, async () => ((await x.get('/controllers')).body.data as { id: string }[]).length === 3);
  const selves = ((await admins[0].get('/controllers')).body.data as { id: string }[]).map((c) => c.id);
  t.equal(new Set(selves).size, 3, 'three distinct controllers');
  for (const x of admins) {
    const list = (await x.get('/controllers')).body.data as { id: string; isOnline: boolean; apiAddresses: Record<string, { url: string }[]> }[];
    t.same(list.map((c) => c.id).sort(), [...selves].sort());
    t.ok(list.every((c) => c.isOnline && c.apiAddresses['edge-client'][0].url.startsWith('https://')));
  }
  // /version: HA_CONTROLLER, and every API's base URLs name every live controller, this one first.
  for (const [i, srv] of ctrls.entries()) {
    const v = (await srv.raw('GET', '/edge/client/v1/version')).body.data;
    t.ok(v.capabilities.includes('HA_CONTROLLER'), `controller ${i} announces HA_CONTROLLER`);
    const urls = v.apiVersions['edge-client'].v1.apiBaseUrls as string[];
    t.equal(urls.length, 3, 'three base URLs');
    t.equal(urls[0], `${srv.origin}/edge/client/v1`, 'its own first');
    t.same(new Set(urls), new Set(ctrls.map((c) => `${c.origin}/edge/client/v1`)), 'and the two others');
  }
  const iid = (await admins[1].post('/identities', { name: 'jwt-ctrls', type: 'Device', isAdmin: false, enrollment: { ott: true } })).body.data.id;
  const jwt = (await admins[1].get(`/identities/${iid}`)).body.data.enrollment.ott.jwt as string;
  const claims = JSON.parse(Buffer.from(jwt.split('.')[1], 'base64url').toString());
  t.equal(claims.ctrls.length, 3, 'ctrls names the three controllers');
  t.ok(claims.ctrls.includes(`https://127.0.0.1:${ctrls[2].certPort}`), 'including C');
});

t.test('a delete on B cascades everywhere', async (t) => {
  const [a, b, c] = admins;
  const id = (await a.post('/identities', { name: 'doomed', type: 'User', isAdmin: false })).body.data.id;
  const authId = (await a.post('/authenticators', { identityId: id, method: 'updb', username: 'doomed-user', password: 'doomed-pass-1' })).body.data.id;
  await within(1000, async () => (await b.get(`/authenticators/${authId}`)).status === 200);
  t.equal((await b.delete(`/identities/${id}`)).status, 200);
  for (const x of [a, b, c]) {
    await within(1000, async () => (await x.get(`/authenticators/${authId}`)).status === 404);
    t.ok(isError(await x.get(`/identities/${id}`), 404, 'NOT_FOUND'));
    t.ok(isError(await x.get(`/authenticators/${authId}`), 404, 'NOT_FOUND'));
  }
});

/**
 * Every record of every collection in a controller's LMDB replica, read-only, as JSON by collection
 * then id. Read in a child process: the controller has the environment open, and one process
 * should not hold the same LMDB environment twice.
 */
function replicaOf(dataDir: string): Promise<Record<string, Record<string, unknown>>> {
  const script = `
    import { open } from 'lmdb';
    const env = open({ path: process.argv[1], readOnly: true, maxDbs: 256 });
    const out = {};
    for (const name of [...env.getKeys({})]) {
      if (typeof name !== 'string' || !name.startsWith('c:')) continue;
      const db = env.openDB({ name, sharedStructuresKey: Symbol.for(${JSON.stringify(STRUCTURES.description)}) });
      out[name.slice(2)] = Object.fromEntries([...db.getRange({})].map(({ key, value }) => [key, value]));
    }
    process.stdout.write(JSON.stringify(out));`;
  return new Promise((resolve, reject) =>
    execFile(process.execPath, ['--input-type=module', '-e', script, path.join(dataDir, 'db')], { cwd: ROOT, maxBuffer: 256 * 1024 * 1024 }, (err, stdout, stderr) =>
      err ? reject(new Error(stderr || err.message)) : resolve(JSON.parse(stdout)),
    ),
  );
}

async function currentRevision(): Promise<number> {
  const out = JSON.parse(await etcd.ctl(['get', `${PREFIX}/`, '--prefix', '--limit=1', '-w', 'json']));
  return Number(out.header.revision);
}

/** Service ids each identity may dial, as a controller's role index answers. */
async function access(admin: Client, ids: string[]): Promise<string[][]> {
  const out: string[][] = [];
  for (const id of ids) out.push(((await admin.get(`/identities/${id}/services?limit=500`)).body.data as { id: string }[]).map((s) => s.id).sort());
  return out;
}

t.test('stop A, write, compact, start A: A equals the others record for record, and so do its policy answers', async (t) => {
  const a = ctrls[0];
  const dataDir = a.dataDir;
  t.equal(await a.stop(), 0, 'A stopped cleanly');
  const [, b, c] = admins;
  const ids: string[] = [];
  for (let i = 0; i < 6; i++) ids.push((await b.post('/identities', { name: `offline-${i}`, type: 'User', isAdmin: false, roleAttributes: [i % 2 ? 'odd' : 'even'] })).body.data.id);
  const svc: string[] = [];
  for (let i = 0; i < 3; i++) svc.push((await c.post('/services', { name: `offline-svc-${i}`, encryptionRequired: true, roleAttributes: [`s${i}`] })).body.data.id);
  t.equal((await b.post('/service-policies', { name: 'odd-dial', type: 'Dial', semantic: 'AnyOf', identityRoles: ['#odd'], serviceRoles: ['#s0', '#s1'] })).status, 201);
  t.equal((await c.post('/service-policies', { name: 'even-dial', type: 'Dial', semantic: 'AnyOf', identityRoles: ['#even', `@${ids[1]}`], serviceRoles: ['#s2'] })).status, 201);
  t.equal((await b.patch(`/identities/${ids[0]}`, { roleAttributes: ['odd', 'even'] })).status, 200);
  t.equal((await c.delete(`/services/${svc[1]}`)).status, 200);
  const rev = await currentRevision();
  await etcd.ctl(['compact', String(rev)]);
  t.ok(rev > 0, `compacted at ${rev}`);

  const a2 = await startServer(root, { dataDir, env: { ...env(), MESH_LOG_LEVEL: 'info' } });
  ctrls[0] = a2;
  admins[0] = await a2.login();
  t.match(a2.output, /stored revision is gone from etcd[^]*replica loaded/, 'A found its revision compacted and loaded the model');
  const expect = await access(b, ids);
  t.same(await access(admins[0], ids), expect, 'A answers policy queries as B does');
  t.same(await access(c, ids), expect, 'C too');
  t.same(expect[1], [svc[0], svc[2]].sort(), 'identity 1 (odd, and @id in even-dial) dials s0 and s2, not the deleted s1');

  // Record for record (the replicated collections). A read of the three replicas may fall between a
  // write and its arrival elsewhere: read again then.
  let [ra, rb, rc] = await Promise.all(ctrls.map((x) => replicaOf(x.dataDir)));
  for (let i = 0; i < 20 && !(JSON.stringify(ra) === JSON.stringify(rb) && JSON.stringify(rc) === JSON.stringify(rb)); i++) {
    await new Promise((r) => setTimeout(r, 100));
    [ra, rb, rc] = await Promise.all(ctrls.map((x) => replicaOf(x.dataDir)));
  }
  t.same(Object.keys(ra).sort(), Object.keys(rb).sort(), 'same collections');
  t.ok(Object.keys(rb.identities).length >= 10, 'the replicas hold the identities');
  for (const [name, recs] of Object.entries(rb)) {
    // Each controller keeps its own API sessions, sessions and their certificates.
    if (['apiSessions', 'sessions', 'apiSessionCertificates'].includes(name)) continue;
    t.same(ra[name], recs, `A's ${name} equal B's (${Object.keys(recs).length})`);
    t.same(rc[name], recs, `C's ${name} equal B's`);
  }
});

t.test('a restart without compaction resumes from the stored revision', async (t) => {
  const b = ctrls[1];
  t.equal(await b.stop(), 0);
  const id = (await admins[0].post('/identities', { name: 'while-b-was-down', type: 'User', isAdmin: false })).body.data.id;
  const b2 = await startServer(root, { dataDir: b.dataDir, env: { ...env(), MESH_LOG_LEVEL: 'info' } });
  ctrls[1] = b2;
  admins[1] = await b2.login();
  t.match(b2.output, /resuming the replica/);
  t.notMatch(b2.output, /replica loaded/, 'no full load');
  t.equal((await admins[1].get(`/identities/${id}`)).status, 200, 'the write made while B was down is there');
});

t.test('a replica written without sync is loaded again from etcd after the machine restarted (another boot id)', async (t) => {
  const marker = path.join(ctrls[1].dataDir, 'replica-boot-id');
  t.equal(fs.readFileSync(marker, 'utf8').trim(), fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim(), "the replica names this machine's boot");
  t.equal(await ctrls[1].stop(), 0);
  fs.writeFileSync(marker, '00000000-0000-0000-0000-000000000000\n');
  const id = (await admins[0].post('/identities', { name: 'while-b-rebooted', type: 'User', isAdmin: false })).body.data.id;
  const b2 = await startServer(root, { dataDir: ctrls[1].dataDir, env: { ...env(), MESH_LOG_LEVEL: 'info' } });
  ctrls[1] = b2;
  admins[1] = await b2.login();
  t.match(b2.output, /machine restarted since the replica was last written[^]*replica loaded/, 'removed and loaded again');
  t.equal((await admins[1].get(`/identities/${id}`)).status, 200, 'with the write made meanwhile');
  const names = async (x: Client) => ((await x.get('/identities?limit=500')).body.data as { name: string }[]).map((i) => i.name).sort();
  t.same(await names(admins[1]), await names(admins[2]), 'the same identities as C');
});

t.test('a wiped data directory is rebuilt from etcd', async (t) => {
  const fresh = await startServer(t, { env: env() });
  const admin = await fresh.login();
  const names = async (x: Client) => ((await x.get('/identities?limit=500')).body.data as { name: string }[]).map((i) => i.name).sort();
  t.same(await names(admin), await names(admins[2]));
  t.equal(fresh.ca, ctrls[2].ca, 'it took the shared CA');
  await fresh.stop();
});

t.test('kill -9 of the etcd leader during writes: no acknowledged write lost, writes resume', async (t) => {
  const leader = await etcd.leader();
  t.ok(leader >= 0, `leader is m${leader}`);
  const acked: string[] = [];
  const statuses = new Map<number, number>();
  let killedAt = 0;
  let firstAfter = 0;
  let stop = false;
  const writer = async (admin: Client, w: number) => {
    for (let i = 0; !stop; i++) {
      const issued = Date.now();
      const r = await admin.post('/identities', { name: `failover-${w}-${i}`, type: 'User', isAdmin: false });
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      if (r.status === 201) {
        acked.push(r.body.data.id);
        // The first write issued after the kill that succeeded.
        if (killedAt && issued > killedAt && !firstAfter) firstAfter = Date.now();
      } else {
        t.ok(isError(r, 503, 'CLUSTER_HAS_NO_LEADER') && r.headers['retry-after'], `a failed write is a 503 with Retry-After, not ${r.status} ${r.text.slice(0, 200)}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  };
  const writers = admins.flatMap((a, i) => [writer(a, i * 2), writer(a, i * 2 + 1)]);
  await new Promise((r) => setTimeout(r, 500));
  const before = acked.length;
  killedAt = Date.now();
  await etcd.kill(leader);
  const deadline = Date.now() + 15_000;
  while (!firstAfter && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  await new Promise((r) => setTimeout(r, 500));
  stop = true;
  await Promise.all(writers);
  t.ok(before > 0, `${before} writes before the kill`);
  t.ok(firstAfter > 0 && firstAfter - killedAt <= 10_000, `writes back ${firstAfter - killedAt} ms after the leader died`);
  t.ok(!statuses.has(500), `no 500 (${JSON.stringify([...statuses])})`);
  // Reads keep working, and every acknowledged write is on every controller.
  for (const x of admins) {
    await within(5000, async () => {
      const r = await x.get(`/identities?filter=name contains "failover-"&limit=-1`);
      return r.status === 200 && acked.every((id) => (r.body.data as { id: string }[]).some((d) => d.id === id));
    });
  }
  t.pass(`${acked.length} acknowledged writes on every controller`);
  etcd.start(leader);
  await etcd.waitHealthy();
});

t.test('etcd without a leader: reads work, writes answer 503 CLUSTER_HAS_NO_LEADER with Retry-After, and succeed again afterwards', async (t) => {
  const [a] = admins;
  await Promise.all([etcd.kill(1), etcd.kill(2)]);
  const read = await a.get('/identities?limit=5');
  t.equal(read.status, 200, 'reads come from the replica');
  const started = Date.now();
  const w = await a.post('/identities', { name: 'no-quorum', type: 'User', isAdmin: false });
  t.ok(isError(w, 503, 'CLUSTER_HAS_NO_LEADER'), `503 CLUSTER_HAS_NO_LEADER (${w.status} ${w.text.slice(0, 200)})`);
  t.ok(Number(w.headers['retry-after']) > 0, 'Retry-After');
  t.ok(Date.now() - started < 8000, `answered in ${Date.now() - started} ms`);
  t.equal((await admins[1].get('/identities?limit=5')).status, 200, 'B reads too');
  etcd.start(1);
  etcd.start(2);
  await etcd.waitHealthy();
  let ok = 0;
  await within(15_000, async () => {
    const r = await a.post('/identities', { name: 'no-quorum', type: 'User', isAdmin: false });
    ok = r.status;
    return r.status === 201 || r.status === 400;
  });
  t.ok(ok === 201 || ok === 400, 'writes go through again (400: the 503 write had in fact been made)');
  await within(3000, async () => (await admins[2].get('/identities?filter=name="no-quorum"')).body.data.length === 1);
  for (const x of ctrls) {
    await within(10_000, async () => (await x.raw('GET', '/health/ready')).status === 200);
  }
  t.pass('every controller ready again');
});

t.test('controllers cut off from etcd go not ready, keep serving reads, and catch up when it returns', async (t) => {
  await Promise.all([0, 1, 2].map((i) => etcd.kill(i)));
  for (const x of ctrls) {
    await within(10_000, async () => (await x.raw('GET', '/health/ready')).status === 503);
    const r = await x.raw('GET', '/health/ready');
    t.ok(r.body.checks.some((c: { id: string; healthy: boolean }) => c.id === 'cluster.replica' && !c.healthy), `not ready: ${JSON.stringify(r.body.checks.find((c: { id: string }) => c.id === 'cluster.replica'))}`);
  }
  for (const x of admins) t.equal((await x.get('/identities?limit=1')).status, 200, 'reads still answered');
  for (let i = 0; i < 3; i++) etcd.start(i);
  await etcd.waitHealthy();
  for (const x of ctrls) await within(20_000, async () => (await x.raw('GET', '/health/ready')).status === 200);
  t.pass('ready again');
  let r;
  await within(15_000, async () => (r = await admins[1].post('/identities', { name: 'after-outage', type: 'User', isAdmin: false })).status === 201);
  const id = r!.body.data.id;
  for (const x of [admins[0], admins[2]]) await within(1000, async () => (await x.get(`/identities/${id}`)).status === 200);
  t.pass('a write after the outage reaches the others');
});

t.test('kill -9 of a controller: its router reconnects to another and is online on every controller; the dead one leaves GET /controllers and the routers are told', async (t) => {
  const [a, b, c] = ctrls;
  const http = await createClient({ origin: a.origin, ca: a.ca, connections: 2, kind: 'https' });
  t.teardown(() => http.close());
  const token = (await a.login()).token!;
  const r1 = await createAndEnroll(http, token, { name: 'failover-er-1', kind: 'edge', hostname: 'er1.test' });
  const r2 = await createAndEnroll(http, token, { name: 'failover-er-2', kind: 'edge', hostname: 'er2.test' });
  const versionInfo = { os: 'linux', arch: 'amd64', version: 'v1.0.0', revision: 'x', buildDate: '2026-01-01T00:00:00Z' };
  const router = (r: typeof r1, srv: Server) =>
    new RouterClient({ url: `wss://127.0.0.1:${srv.port}/ctrl/v1`, ca: srv.ca, certChain: r.certChain, key: r.keyPem, hostname: `${r.name}.example`, protocols: { tls: `tls:${r.name}.example:3022` }, versionInfo });
  const online = async (admin: Client, id: string) => (await admin.get(`/edge-routers/${id}`)).body?.data?.isOnline === true;
  const [adminB, adminC] = [admins[1], admins[2]];
  await within(5000, async () => (await adminB.get(`/edge-routers/${r2.id}`)).status === 200);
  const c1 = router(r1, a);
  const welcome = await c1.connect();
  t.equal(welcome.controllers?.length, 3, 'welcome names every live controller');
  t.ok(welcome.controllers.some((x: { ctrlAddress: string }) => x.ctrlAddress === `wss://127.0.0.1:${c.port}/ctrl/v1`), 'with where to reach each');
  const c2 = router(r2, b);
  await c2.connect();
  t.teardown(async () => {
    await c2.close().catch(() => undefined);
  });
  for (const x of admins) {
    await within(3000, async () => (await online(x, r1.id)) && (await online(x, r2.id)));
  }
  t.pass('both routers online on all three controllers');
  const closed = new Promise((r) => c1.once('closed', r));
  const killed = Date.now();
  await a.stop('SIGKILL');
  await closed;
  // The router picks another controller of its list and connects there.
  const c1b = router(r1, c);
  const told: { id: string; ctrlAddress: string }[][] = [];
  c1b.on('message', (m: { type: string; controllers?: { id: string; ctrlAddress: string }[] }) => {
    if (m.type === 'controllers') told.push(m.controllers!);
  });
  await c1b.connect();
  t.teardown(async () => {
    await c1b.close().catch(() => undefined);
  });
  const ms = await within(10_000, async () => (await online(adminB, r1.id)) && (await online(adminC, r1.id)));
  t.ok(true, `router 1 online on B and C ${Date.now() - killed} ms after A was killed (${ms} ms after reconnecting)`);
  t.ok(await online(adminB, r2.id), 'router 2, on B all along, still online');
  const list = await within(10_000, async () => ((await adminB.get('/controllers')).body.data as unknown[]).length === 2);
  t.ok(list >= 0, 'A dropped out of GET /controllers once its lease expired');
  // C reads the list on its own second: within one more of B's.
  await within(3000, async () => told.at(-1)?.length === 2);
  t.equal(told.at(-1)?.length, 2, 'the router on C was told over the control channel that A left');
  t.notOk(told.at(-1)?.some((x) => x.ctrlAddress === `wss://127.0.0.1:${a.port}/ctrl/v1`), 'A is not in it');

  // A controller joining is told too, and so is its leaving.
  const d = await startServer(t, { env: env() });
  await within(10_000, async () => told.at(-1)?.length === 3);
  t.ok(told.at(-1)!.some((x) => x.ctrlAddress === `wss://127.0.0.1:${d.port}/ctrl/v1`), 'the router heard of D joining');
  await d.stop();
  await within(10_000, async () => told.at(-1)?.length === 2);
  t.pass('and of D leaving');
});
