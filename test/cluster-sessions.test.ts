/**
 * API sessions across three controllers (real 3-member etcd, three real controllers, an inactivity
 * timeout of one minute, a minute made 30 s long with `MESH_MINUTE_MS`): an MFA removal reaches
 * every controller's copy of an API session, OIDC API sessions keep their request activity off etcd while their refresh tokens rotate once for the
 * whole cluster, a controller taking on a token it never saw refuses it once it has been idle
 * for the timeout anywhere (counting a controller's final beat at a graceful stop) or was made
 * before a disable of its identity (docs/cluster.md).
 */
import t from 'tap';
import { startEtcd, type EtcdCluster } from '../bench/lib/etcd.js';
import { startServer, type Client, type Server } from './helpers/server.js';
import { codeFlow, exchange, finish, pkce } from './helpers/oidc.js';
import { totpCode } from '../src/auth/mfa.js';
import { beatInterval } from '../src/cluster/sessions.js';
import { unpack } from 'msgpackr';

t.setTimeout(400_000);

const PREFIX = '/mesh-sessions-test';
const TIMEOUT_MINUTES = 1;
/** The controllers' minute (`MESH_MINUTE_MS`): the idle test below waits out the timeout. */
const MINUTE_MS = 30_000;
const BEAT_MS = beatInterval(TIMEOUT_MINUTES * MINUTE_MS);
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

/** etcd's current revision. */
async function revision(): Promise<number> {
  return Number(JSON.parse(await etcd.ctl(['get', `${PREFIX}/`, '--prefix', '--limit=1', '-w', 'json'])).header.revision);
}

/** Activity beats (keys under P/activity/) created after revision `from` and up to `to`: the API session ids each names. */
async function beatsIn(from: number, to: number): Promise<string[][]> {
  const out = JSON.parse(await etcd.ctl(['get', `${PREFIX}/activity/`, '--prefix', '-w', 'json'])) as { kvs?: { create_revision: number; value: string }[] };
  return (out.kvs ?? []).filter((kv) => kv.create_revision > from && kv.create_revision <= to).map((kv) => (unpack(Buffer.from(kv.value, 'base64')) as { ids: string[] }).ids);
}
const beatsBetween = async (from: number, to: number) => (await beatsIn(from, to)).length;

/** A request with a zt-session token on a controller's Client API. */
const as = (srv: Server, token: string, method: string, p: string, json?: unknown) => srv.client.request(method, p, json, { headers: { 'zt-session': token } });
const bearer = (srv: Server, token: string, p: string) => srv.client.request('GET', p, undefined, { headers: { authorization: `Bearer ${token}` } });

async function user(name: string): Promise<string> {
  const id = (await admins[0].post('/identities', { name, type: 'User', isAdmin: false })).body.data.id as string;
  t.equal((await admins[0].post('/authenticators', { identityId: id, method: 'updb', username: name, password: `${name}-pw1` })).status, 201, `${name} has a password`);
  for (const a of admins) await within(2000, async () => (await a.get(`/authenticators?filter=identityId="${id}"`)).body?.data?.length === 1);
  return id;
}

const login = async (srv: Server, name: string) => (await srv.login(name, `${name}-pw1`, 'client')).token!;

t.before(async () => {
  etcd = await startEtcd(t, 3);
  const env = { MESH_CLUSTER_ETCD: etcd.endpoints.join(','), MESH_CLUSTER_PREFIX: PREFIX, MESH_SESSION_TIMEOUT_MINUTES: String(TIMEOUT_MINUTES), MESH_MINUTE_MS: String(MINUTE_MS) };
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

t.test('OIDC: logged in on A, used on B, refreshed on C; the old refresh token is refused on A; requests add no etcd revision of their own; a refresh token rotates once cluster-wide', async (t) => {
  const [A, B, C] = ctrls;
  await user('oidc-cluster');
  const { verifier, challenge } = pkce();
  const { login: step } = await codeFlow(t, A, 'oidc-cluster', 'oidc-cluster-pw1', challenge);
  const code = await finish(t, A, step);
  const tok = await exchange(A, { grant_type: 'authorization_code', code, redirect_uri: 'http://127.0.0.1:20314/auth/callback', code_verifier: verifier });
  t.equal(tok.status, 200, 'tokens issued on A');
  await within(2000, async () => (await bearer(B, tok.body.access_token, '/current-identity')).status === 200);
  t.pass('the access token works on B');

  const before = await revision();
  const started = Date.now();
  const N = 40;
  for (let i = 0; i < N; i++) t.equal((await bearer(B, tok.body.access_token, '/current-identity')).status, 200);
  await sleep(BEAT_MS + 1000);
  const after = await revision();
  const beats = await beatsIn(before, after);
  t.equal(after - before, beats.length, `${N} requests on B: ${after - before} etcd revisions, every one an activity beat (${beats.length}), none per request`);
  // The beats naming this API session are B's: one per interval at most (with the requests made
  // just before the window), whatever the request count.
  const asid = JSON.parse(Buffer.from(tok.body.access_token.split('.')[1], 'base64url').toString()).z_asid as string;
  const naming = beats.filter((ids) => ids.includes(asid)).length;
  const intervals = Math.ceil((Date.now() - started) / BEAT_MS) + 1;
  t.ok(naming >= 1 && naming <= intervals, `${naming} beats name the API session in ${intervals} beat intervals`);

  const r1 = await exchange(C, { grant_type: 'refresh_token', refresh_token: tok.body.refresh_token });
  t.equal(r1.status, 200, 'refreshed on C');
  t.equal((await bearer(C, r1.body.access_token, '/current-identity')).status, 200, 'the new access token works on C');
  const reuse = await exchange(A, { grant_type: 'refresh_token', refresh_token: tok.body.refresh_token });
  t.equal(reuse.status, 400, 'the rotated refresh token is refused on A');
  t.equal(reuse.body.error, 'invalid_grant');
  for (const [name, srv] of [['A', A], ['B', B], ['C', C]] as const) {
    await within(2000, async () => (await bearer(srv, r1.body.access_token, '/current-identity')).status === 401);
    t.pass(`the reuse ended the family: its access token is refused on ${name}`);
  }
  t.equal((await exchange(B, { grant_type: 'refresh_token', refresh_token: r1.body.refresh_token })).status, 400, 'and its latest refresh token, on B');

  // One refresh token presented to the three controllers at once: one new pair, and the family
  // ends (the two others are reuses of a token that was rotated).
  for (let round = 0; round < 3; round++) {
    const p = pkce();
    const s2 = await codeFlow(t, A, 'oidc-cluster', 'oidc-cluster-pw1', p.challenge);
    const c2 = await finish(t, A, s2.login);
    const t2 = await exchange(A, { grant_type: 'authorization_code', code: c2, redirect_uri: 'http://127.0.0.1:20314/auth/callback', code_verifier: p.verifier });
    t.equal(t2.status, 200);
    await within(2000, async () => (await bearer(C, t2.body.access_token, '/current-identity')).status === 200);
    const rs = await Promise.all(ctrls.map((srv) => exchange(srv, { grant_type: 'refresh_token', refresh_token: t2.body.refresh_token })));
    t.equal(rs.filter((r) => r.status === 200).length, 1, `round ${round}: exactly one refresh succeeds (${rs.map((r) => r.status).join(', ')})`);
    t.ok(rs.every((r) => r.status === 200 || r.body?.error === 'invalid_grant'), 'the others are invalid_grant');
  }
});

/** etcd revisions a request adds (with what follows it on the other controllers), activity beats left out. */
async function revisionsOf(f: () => Promise<unknown>): Promise<number> {
  const before = await revision();
  await f();
  // Let what the request sets off elsewhere (news applied by the other controllers) land.
  let after = await revision();
  for (;;) {
    await sleep(300);
    const now = await revision();
    if (now === after) break;
    after = now;
  }
  return after - before - (await beatsBetween(before, after));
}

t.test('etcd revisions per request kind', async (t) => {
  const [A, B] = ctrls;
  const [admin] = admins;
  const iid = await user('cost-user');
  await admin.patch(`/identities/${iid}`, { roleAttributes: ['cost-dialer'] });
  const svc = (await admin.post('/services', { name: 'cost-svc', encryptionRequired: true, roleAttributes: ['cost-svc'] })).body.data.id;
  t.equal((await admin.post('/service-policies', { name: 'cost-dial', type: 'Dial', semantic: 'AnyOf', identityRoles: ['#cost-dialer'], serviceRoles: ['#cost-svc'] })).status, 201);
  t.equal((await admin.post('/edge-router-policies', { name: 'cost-erp', semantic: 'AnyOf', identityRoles: ['#cost-dialer'], edgeRouterRoles: ['#all'] })).status, 201);
  t.equal((await admin.post('/service-edge-router-policies', { name: 'cost-serp', semantic: 'AnyOf', serviceRoles: ['#cost-svc'], edgeRouterRoles: ['#all'] })).status, 201);
  t.equal((await admin.post('/edge-routers', { name: 'cost-er', roleAttributes: [] })).status, 201);
  for (const a of admins) await within(2000, async () => (await a.get('/edge-routers?filter=name="cost-er"')).body.data.length === 1);

  const table: [string, number, number][] = [];
  const row = async (kind: string, expected: number, f: () => Promise<unknown>) => {
    const n = await revisionsOf(f);
    table.push([kind, n, expected]);
    t.equal(n, expected, `${kind}: ${n}`);
  };
  let token = '';
  let sessionId = '';
  await row('password login (A)', 0, async () => (token = await login(A, 'cost-user')));
  await row('20 requests with the token (A)', 0, async () => {
    for (let i = 0; i < 20; i++) await as(A, token, 'GET', '/current-identity');
  });
  await row("first request with A's token on B (taken on)", 0, () => as(B, token, 'GET', '/current-identity'));
  await row('session create, dial (B)', 0, async () => {
    const r = await as(B, token, 'POST', '/sessions', { serviceId: svc, type: 'Dial' });
    t.equal(r.status, 201);
    sessionId = r.body.data.id;
  });
  await row('session delete (B): ~sessions-removed', 1, async () => t.equal((await as(B, token, 'DELETE', `/sessions/${sessionId}`)).status, 200));
  await row('logout (A): ~revoked; B drops its copy', 1, async () => t.equal((await as(A, token, 'DELETE', '/current-api-session')).status, 200));
  token = await login(A, 'cost-user');
  t.equal((await as(A, token, 'POST', '/current-identity/mfa')).status, 201);
  const secret = /secret=([A-Z2-7]+)/.exec((await as(A, token, 'GET', '/current-identity/mfa')).body.data.provisioningUrl)![1];
  await row('MFA enrolment verified (A): the identity and ~as', 1, () => as(A, token, 'POST', '/current-identity/mfa/verify', { code: totpCode(secret) }));
  const second = await login(A, 'cost-user');
  await row('MFA step passed (A): ~as', 1, () => as(A, second, 'POST', '/authenticate/mfa', { code: totpCode(secret) }));
  await row('admin removes MFA (B): the identity; each controller drops its copies', 1, () => admins[1].delete(`/identities/${iid}/mfa`));

  const { verifier, challenge } = pkce();
  let tok: { access_token: string; refresh_token: string } = { access_token: '', refresh_token: '' };
  // The login step's API session stays on A until the code exchange makes it an OIDC API session.
  await row('OIDC login (A): the code exchange puts the API session into etcd', 1, async () => {
    const { login: step } = await codeFlow(t, A, 'cost-user', 'cost-user-pw1', challenge);
    const code = await finish(t, A, step);
    tok = (await exchange(A, { grant_type: 'authorization_code', code, redirect_uri: 'http://127.0.0.1:20314/auth/callback', code_verifier: verifier })).body;
  });
  await within(2000, async () => (await bearer(B, tok.access_token, '/current-identity')).status === 200);
  await row('20 requests with the access token (B)', 0, async () => {
    for (let i = 0; i < 20; i++) await bearer(B, tok.access_token, '/current-identity');
  });
  await row('OIDC refresh (B): the rotation', 1, async () => {
    tok = (await exchange(B, { grant_type: 'refresh_token', refresh_token: tok.refresh_token })).body;
  });
  await row('OIDC access-token exchange (A)', 1, () => exchange(A, { grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange', subject_token: tok.access_token, subject_token_type: 'urn:ietf:params:oauth:token-type:access_token', requested_token_type: 'urn:ietf:params:oauth:token-type:access_token' }));
  // At the name upstream's admin console logs out with; its access token is then refused on B too.
  await row('OIDC revoke (A)', 1, () => A.raw('POST', '/oidc/oauth/revoke', Buffer.from(new URLSearchParams({ token: tok.refresh_token, client_id: 'openziti' }).toString()), { 'content-type': 'application/x-www-form-urlencoded' }));
  await within(2000, async () => (await bearer(B, tok.access_token, '/current-identity')).status === 401);
  t.pass('B refuses the access token of the login revoked on A');
  t.comment(`etcd revisions per request kind (activity beats aside: at most one per controller per ${BEAT_MS} ms):\n${table.map(([k, n]) => `  ${k}: ${n}`).join('\n')}`);
});

t.test('a controller started after a logout and after an identity was disabled and enabled again refuses the tokens they ended', async (t) => {
  const [A, B, C] = ctrls;
  const iid = await user('disable-user');
  const before = await login(A, 'disable-user');
  t.equal((await as(A, before, 'GET', '/current-identity')).status, 200, 'made and used on A');
  t.equal((await admins[2].post(`/identities/${iid}/disable`, { durationMinutes: 0 })).status, 200, 'disabled on C');
  t.equal((await admins[2].post(`/identities/${iid}/enable`, {})).status, 200, 'enabled again on C');
  const after = await login(A, 'disable-user');
  const loggedOut = await login(A, 'disable-user');
  t.equal((await as(A, loggedOut, 'DELETE', '/current-api-session')).status, 200, 'another one made after the enable is logged out on A');
  for (const [name, srv] of [['A', A], ['B', B]] as const) {
    await within(2000, async () => (await as(srv, before, 'GET', '/current-identity')).status === 401);
    t.pass(`${name} refuses the token made before the disable`);
  }
  // D heard none of it as news: it learns of the logout and the disable from etcd at start.
  const D = await startServer(t, { env: { MESH_CLUSTER_ETCD: etcd.endpoints.join(','), MESH_CLUSTER_PREFIX: PREFIX, MESH_SESSION_TIMEOUT_MINUTES: String(TIMEOUT_MINUTES), MESH_MINUTE_MS: String(MINUTE_MS) } });
  await within(2000, async () => (await as(D, after, 'GET', '/current-identity')).status === 200);
  t.pass('D takes on a token made after the identity was enabled again');
  t.equal((await as(D, before, 'GET', '/current-identity')).status, 401, 'D refuses the token made before the disable');
  t.equal((await as(D, loggedOut, 'GET', '/current-identity')).status, 401, 'D refuses the token logged out before it started');
  t.equal((await as(C, after, 'GET', '/current-identity')).status, 200, 'C takes on the token made after the enable');
});

// Last: every API session idles here, the admins' too.
t.test('the inactivity timeout holds on a controller that never saw the token, and activity anywhere keeps it alive everywhere, also activity just before a graceful stop', async (t) => {
  const [A, B, C] = ctrls;
  await user('idle-user');
  // D stops gracefully during the test: its final beat names what was used on it since its last.
  const D = await startServer(t, { env: { MESH_CLUSTER_ETCD: etcd.endpoints.join(','), MESH_CLUSTER_PREFIX: PREFIX, MESH_SESSION_TIMEOUT_MINUTES: String(TIMEOUT_MINUTES), MESH_MINUTE_MS: String(MINUTE_MS) } });
  const idle = await login(A, 'idle-user');
  const busyOnA = await login(A, 'idle-user');
  const busyOnB = await login(A, 'idle-user');
  const usedBeforeStop = await login(D, 'idle-user');
  const usedEarlierOnD = await login(D, 'idle-user');
  t.equal((await as(B, busyOnB, 'GET', '/current-identity')).status, 200, 'B takes on busyOnB');
  t.equal((await as(A, idle, 'GET', '/current-identity')).status, 200, 'idle is used once, on A');
  for (const tok of [usedBeforeStop, usedEarlierOnD]) t.equal((await as(D, tok, 'GET', '/current-identity')).status, 200, 'used on D');
  const idleSince = Date.now();
  // Used on D again well after its regular beats named the first use, then D stops; B, which never
  // saw the token, is asked just before the timeout has passed since that last use. Without the
  // final beat B would know only of the first use, over the timeout ago by then (as for
  // usedEarlierOnD, refused).
  const STOP_AFTER_MS = 2 * BEAT_MS + 3000;
  const MARGIN_MS = 5000;
  const stopping = (async () => {
    await sleep(STOP_AFTER_MS);
    const lastUse = Date.now();
    t.equal((await as(D, usedBeforeStop, 'GET', '/current-identity')).status, 200, 'used on D once more');
    t.equal(await D.stop(), 0, 'D stopped gracefully (SIGTERM)');
    t.notOk(/could not write the final activity beat/.test(D.output), 'D put its final beat');
    await sleep(lastUse + TIMEOUT_MINUTES * MINUTE_MS - MARGIN_MS - Date.now());
    t.equal((await as(B, usedBeforeStop, 'GET', '/current-identity')).status, 200, 'B takes on the token used on D just before D stopped, once the timeout less a little has passed since');
    t.equal((await as(B, usedEarlierOnD, 'GET', '/current-identity')).status, 401, "B refuses D's token named only by D's regular beats (idle for longer than the timeout)");
  })();
  // Past the timeout plus a beat and a sweep, with the two busy tokens used meanwhile (busyOnB on B only).
  while (Date.now() - idleSince < TIMEOUT_MINUTES * MINUTE_MS + BEAT_MS + 5000) {
    t.equal((await as(A, busyOnA, 'GET', '/current-identity')).status, 200);
    t.equal((await as(B, busyOnB, 'GET', '/current-identity')).status, 200);
    await sleep(BEAT_MS / 2);
  }
  await stopping;
  t.equal((await as(C, idle, 'GET', '/current-identity')).status, 401, 'C, which never saw it, refuses the idle token');
  t.equal((await as(B, idle, 'GET', '/current-identity')).status, 401, 'so does B');
  t.equal((await as(A, idle, 'GET', '/current-identity')).status, 401, 'and A, which made it');
  t.equal((await as(C, busyOnA, 'GET', '/current-identity')).status, 200, 'C takes on a token older than the timeout that A keeps busy');
  t.equal((await as(A, busyOnB, 'GET', '/current-identity')).status, 200, 'A keeps its copy of a token busy only on B');
});

// Last of all: etcd is gone afterwards.
t.test('a graceful stop with every etcd member down does not wait for its final beat past its bound', async (t) => {
  const C = ctrls[2];
  // The admins' API sessions idled away in the test before.
  for (let i = 0; i < ctrls.length; i++) admins[i] = await ctrls[i].login();
  await user('stop-user');
  const tok = await login(C, 'stop-user');
  t.equal((await as(C, tok, 'GET', '/current-identity')).status, 200, 'used on C: its final beat has something to say');
  for (let i = 0; i < 3; i++) await etcd.kill(i);
  t.equal(await C.stop(), 0, 'C stopped with exit code 0 (a stop that hangs ends with 1 after 15 s)');
  t.match(C.output, /could not write the final activity beat/, 'and said that the final beat was not written');
});
