/**
 * Session removals reach the routers: a real edge router, enrolled and connected over the control
 * channel, receives `session-removed` (the ids, each its token's jti) for every way a
 * session ends — its owner's delete, an admin's delete, its API session ending, its identity
 * disabled or deleted, access lost — and a transit router receives none.
 */
import t, { type Test } from 'tap';
import { startServer, type Server } from './helpers/server.js';
import { RouterClient } from '../bench/lib/router-client.js';
import { createAndEnroll, type EnrolledRouter } from '../bench/lib/router-enroll.js';
import { createClient, type HttpClient } from '../bench/lib/http.js';
import { Fixture } from './helpers/policy-fixture.js';

const srv: Server = await startServer(t);
const admin = await srv.login();
const f = new Fixture(srv, admin);
const http: HttpClient = await createClient({ origin: srv.origin, ca: srv.ca, connections: 4, kind: 'https' });
t.teardown(() => http.close());
const url = `wss://127.0.0.1:${srv.port}/ctrl/v1`;

const connect = async (r: EnrolledRouter) => {
  const c = new RouterClient({ url, ca: srv.ca, certChain: r.certChain, key: r.keyPem, hostname: `${r.name}.example` });
  await c.connect();
  t.teardown(() => c.close());
  return c;
};
const edge = await connect(await createAndEnroll(http, admin.token!, { name: 'sr-edge', kind: 'edge', hostname: 'sr-edge.test', roleAttributes: ['sr-r'] }));
const transit = await connect(await createAndEnroll(http, admin.token!, { name: 'sr-transit', kind: 'transit', hostname: 'sr-transit.test' }));

const removedIds = (c: RouterClient) => c.received.filter((m: any) => m.type === 'session-removed').flatMap((m: any) => m.ids as string[]);
const jtiOf = (token: string) => JSON.parse(Buffer.from(token.split('~')[1], 'base64url').toString()).jti;
/** Wait until the edge router was told of every session in `ids`; the removal is announced at its commit. */
async function told(t: Test, what: string, sessions: { id: string; token: string }[]) {
  const end = Date.now() + 10_000;
  while (Date.now() < end && !sessions.every((s) => removedIds(edge).includes(s.id))) await new Promise((r) => setTimeout(r, 20));
  t.ok(sessions.every((s) => removedIds(edge).includes(s.id)), `${what}: the edge router was told (ids)`);
  t.ok(sessions.every((s) => jtiOf(s.token) === s.id), `${what}: each id the jti of its token`);
}

await f.svc('sr-s', ['sr-svc']);
const S = (await admin.get('/services?filter=name="sr-s"')).body.data[0].id as string;
await f.sp('sr-dial', 'Dial', ['#sr-id'], ['#sr-svc']);
await f.sp('sr-bind', 'Bind', ['#sr-id'], ['#sr-svc']);
await f.erp('sr-erp', ['#sr-id'], ['#sr-r']);
await f.serp('sr-serp', ['#sr-svc'], ['#sr-r']);

async function session(c: Awaited<ReturnType<typeof f.user>>['client'], type = 'Dial') {
  const r = await c.post('/sessions', { serviceId: S, type });
  if (r.status !== 201) throw new Error(`session create: ${r.status} ${r.text}`);
  return { id: r.body.data.id as string, token: r.body.data.token as string };
}

t.test('every way a session ends is announced to the edge routers', async (t) => {
  const u = await f.user('sr-user', ['sr-id']);
  const own = await session(u.client);
  t.equal((await u.client.delete(`/sessions/${own.id}`)).status, 200, 'owner deletes');
  await told(t, "the owner's delete", [own]);

  const byAdmin = await session(u.client);
  t.equal((await admin.delete(`/sessions/${byAdmin.id}`)).status, 200, 'admin deletes');
  await told(t, "an admin's delete", [byAdmin]);

  const other = await u.login();
  const [d, b] = [await session(other), await session(other, 'Bind')];
  t.equal((await other.delete('/current-api-session')).status, 200, 'logout');
  await told(t, 'its API session ended (logout), both sessions in one message', [d, b]);
  const both = edge.received.find((m: any) => m.type === 'session-removed' && m.ids.includes(d.id));
  t.ok(both.ids.includes(b.id), 'one message for the one write');

  const lost = await session(u.client);
  t.equal((await admin.patch(`/identities/${u.id}`, { roleAttributes: [] })).status, 200, 'access removed');
  await told(t, 'access lost', [lost]);
  t.equal((await admin.patch(`/identities/${u.id}`, { roleAttributes: ['sr-id'] })).status, 200, 'access back');

  const again = await u.login();
  const disabled = await session(again);
  t.equal((await admin.post(`/identities/${u.id}/disable`, { durationMinutes: 0 })).status, 200, 'identity disabled');
  await told(t, 'identity disabled', [disabled]);

  const v = await f.user('sr-user-2', ['sr-id']);
  const gone = await session(v.client);
  t.equal((await admin.delete(`/identities/${v.id}`)).status, 200, 'identity deleted');
  await told(t, 'identity deleted', [gone]);

  t.same(transit.received.filter((m: any) => m.type === 'session-removed'), [], 'a transit router is told nothing');
  const msgs = edge.received.filter((m: any) => m.type === 'session-removed');
  t.ok(msgs.every((m: any) => Array.isArray(m.ids) && m.ids.length > 0), 'each message: an ids array');
});

t.test('a router that connects later is told of the removals after it connected, and only those', async (t) => {
  const u = await f.user('sr-late', ['sr-id']);
  const s = await session(u.client);
  const late = await connect(await createAndEnroll(http, admin.token!, { name: 'sr-edge-2', kind: 'edge', hostname: 'sr-edge-2.test' }));
  t.equal((await u.client.delete(`/sessions/${s.id}`)).status, 200);
  const end = Date.now() + 10_000;
  while (Date.now() < end && !removedIds(late).includes(s.id)) await new Promise((r) => setTimeout(r, 20));
  t.same(removedIds(late), [s.id], 'the late router got exactly this removal');
});
