/**
 * API sessions across three controllers (real 3-member etcd, three real controllers, an inactivity
 * timeout of one minute): an MFA removal reaches every controller's copy of an API session, and a
 * controller taking on a token it never saw refuses it once it has been idle for the timeout
 * anywhere (docs/cluster.md).
 */
import t from 'tap';
import { startEtcd, type EtcdCluster } from '../bench/lib/etcd.js';
import { startServer, type Client, type Server } from './helpers/server.js';
import { totpCode } from '../src/auth/mfa.js';
import { beatInterval } from '../src/cluster/sessions.js';

t.setTimeout(400_000);

const PREFIX = '/mesh-sessions-test';
const TIMEOUT_MINUTES = 1;
const BEAT_MS = beatInterval(TIMEOUT_MINUTES * 60_000);
let etcd: EtcdCluster;
const ctrls: Server[] = [];
const admins: Client[] = [];

/** Poll `f` until it returns true, or fail after `ms`. */
async function within(ms: number, f: () => Promise<boolean>): Promise<void> {
  const start = Date.now();
  while (!(await f())) {
    if (Date.now() - start > ms) throw new Error(`not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A request with a zt-session token on a controller's Client API. */
const as = (srv: Server, token: string, method: string, p: string, json?: unknown) => srv.client.request(method, p, json, { headers: { 'zt-session': token } });

async function user(name: string): Promise<string> {
  const id = (await admins[0].post('/identities', { name, type: 'User', isAdmin: false })).body.data.id as string;
  t.equal((await admins[0].post('/authenticators', { identityId: id, method: 'updb', username: name, password: `${name}-pw1` })).status, 201, `${name} has a password`);
  for (const a of admins) await within(2000, async () => (await a.get(`/authenticators?filter=identityId="${id}"`)).body?.data?.length === 1);
  return id;
}

const login = async (srv: Server, name: string) => (await srv.login(name, `${name}-pw1`, 'client')).token!;

t.before(async () => {
  etcd = await startEtcd(t, 3);
  const env = { MESH_CLUSTER_ETCD: etcd.endpoints.join(','), MESH_CLUSTER_PREFIX: PREFIX, MESH_SESSION_TIMEOUT_MINUTES: String(TIMEOUT_MINUTES) };
  ctrls.push(...(await Promise.all([startServer(t, { env }), startServer(t, { env }), startServer(t, { env })])));
  for (const c of ctrls) admins.push(await c.login());
});

t.test('an MFA removal on any controller drops the MFA of every copy of the identity\'s API sessions, also of copies taken on later', async (t) => {
  const [A, B, C] = ctrls;
  const iid = await user('mfa-removal');
  // MFA enrolled and verified on A.
  const first = await login(A, 'mfa-removal');
  t.equal((await as(A, first, 'POST', '/current-identity/mfa')).status, 201, 'enrolment started');
  const secret = /secret=([A-Z2-7]+)/.exec((await as(A, first, 'GET', '/current-identity/mfa')).body.data.provisioningUrl)![1];
  const code = () => totpCode(secret);
  t.equal((await as(A, first, 'POST', '/current-identity/mfa/verify', { code: code() })).status, 200, 'verified');

  // passed: logged in on A, MFA passed on A, taken on by B.
  const passed = await login(A, 'mfa-removal');
  t.equal((await as(A, passed, 'POST', '/authenticate/mfa', { code: code() })).status, 200, 'MFA passed on A');
  await within(2000, async () => (await as(B, passed, 'GET', '/current-api-session')).body?.data?.isMfaComplete === true);
  t.pass('B took it on with its MFA passed');
  // pending: logged in on A, MFA not passed, taken on by B: a partial session there.
  const pending = await login(A, 'mfa-removal');
  t.equal((await as(B, pending, 'GET', '/current-api-session')).status, 200, 'B took on the partial session');
  t.equal((await as(B, pending, 'GET', '/current-identity')).status, 401, 'partial on B: MFA required');
  // later: MFA passed on A, never seen by C until after the removal.
  const later = await login(A, 'mfa-removal');
  t.equal((await as(A, later, 'POST', '/authenticate/mfa', { code: code() })).status, 200, 'MFA passed on A');

  // The admin removes it on C, which holds none of these API sessions.
  t.equal((await admins[2].delete(`/identities/${iid}/mfa`)).status, 200, 'MFA removed on C');
  for (const [name, srv] of [['A', A], ['B', B]] as const) {
    await within(2000, async () => (await as(srv, passed, 'GET', '/current-api-session')).body?.data?.isMfaComplete === false);
    t.pass(`${name}'s copy lost its MFA pass`);
  }
  await within(2000, async () => (await as(B, pending, 'GET', '/current-identity')).status === 200);
  t.pass("B's partial copy is fully authenticated: no TOTP is required any more (the auth policy does not ask for it)");
  const taken = await as(C, later, 'GET', '/current-api-session');
  t.equal(taken.status, 200, 'C takes on an API session it never saw');
  t.equal(taken.body.data.isMfaComplete, false, 'without the MFA pass the news told of before the removal');
  t.equal(taken.body.data.isMfaRequired, false, 'and without requiring TOTP');

  // The identity's own removal (DELETE /current-identity/mfa) on A, of an MFA enrolled again on B
  // and passed on C by an API session A never saw.
  t.equal((await as(B, pending, 'POST', '/current-identity/mfa')).status, 201, 'enrolled again on B');
  const secret2 = /secret=([A-Z2-7]+)/.exec((await as(B, pending, 'GET', '/current-identity/mfa')).body.data.provisioningUrl)![1];
  const code2 = () => totpCode(secret2);
  t.equal((await as(B, pending, 'POST', '/current-identity/mfa/verify', { code: code2() })).status, 200, 'verified on B');
  const onC = await login(C, 'mfa-removal');
  t.equal((await as(C, onC, 'POST', '/authenticate/mfa', { code: code2() })).status, 200, 'MFA passed on C');
  t.equal((await as(C, onC, 'GET', '/current-api-session')).body.data.isMfaComplete, true);
  const removed = await A.client.request('DELETE', '/current-identity/mfa', undefined, { headers: { 'zt-session': pending, 'mfa-validation-code': code2() } });
  t.equal(removed.status, 200, `removed by the identity on A (${removed.text.slice(0, 200)})`);
  await within(2000, async () => (await as(C, onC, 'GET', '/current-api-session')).body?.data?.isMfaComplete === false);
  t.pass("C's own API session lost its MFA pass");
});

// Last: every API session idles here, the admins' too.
t.test('the inactivity timeout holds on a controller that never saw the token, and activity anywhere keeps it alive everywhere', async (t) => {
  const [A, B, C] = ctrls;
  await user('idle-user');
  const idle = await login(A, 'idle-user');
  const busyOnA = await login(A, 'idle-user');
  const busyOnB = await login(A, 'idle-user');
  t.equal((await as(B, busyOnB, 'GET', '/current-identity')).status, 200, 'B takes on busyOnB');
  t.equal((await as(A, idle, 'GET', '/current-identity')).status, 200, 'idle is used once, on A');
  const idleSince = Date.now();
  // Past the timeout plus a beat and a sweep, with the two busy tokens used meanwhile (busyOnB on B only).
  while (Date.now() - idleSince < TIMEOUT_MINUTES * 60_000 + BEAT_MS + 5000) {
    t.equal((await as(A, busyOnA, 'GET', '/current-identity')).status, 200);
    t.equal((await as(B, busyOnB, 'GET', '/current-identity')).status, 200);
    await sleep(BEAT_MS / 2);
  }
  t.equal((await as(C, idle, 'GET', '/current-identity')).status, 401, 'C, which never saw it, refuses the idle token');
  t.equal((await as(B, idle, 'GET', '/current-identity')).status, 401, 'so does B');
  t.equal((await as(A, idle, 'GET', '/current-identity')).status, 401, 'and A, which made it');
  t.equal((await as(C, busyOnA, 'GET', '/current-identity')).status, 200, 'C takes on a token older than the timeout that A keeps busy');
  t.equal((await as(A, busyOnB, 'GET', '/current-identity')).status, 200, 'A keeps its copy of a token busy only on B');
});
