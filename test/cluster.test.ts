/**
 * Cluster mode against a real 3-member etcd and three real controllers (port 0, their own LMDB
 * replicas): replication, guarded concurrent writes, logins across controllers, cascades.
 */
import t from 'tap';
import { startEtcd, type EtcdCluster } from './helpers/etcd.js';
import { startServer, isError, type Client, type Server } from './helpers/server.js';

let etcd: EtcdCluster;
const ctrls: Server[] = [];
const admins: Client[] = [];
const PREFIX = '/mesh-test';

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
  // A first (it creates the shared PKI and the default admin), then B and C join.
  ctrls.push(await startServer(t, { env: env() }));
  ctrls.push(...(await Promise.all([startServer(t, { env: env() }), startServer(t, { env: env() })])));
  for (const c of ctrls) admins.push(await c.login());
});

t.test('one PKI: every controller presents a server certificate of the same CA', async (t) => {
  t.equal(ctrls[1].ca, ctrls[0].ca);
  t.equal(ctrls[2].ca, ctrls[0].ca);
  for (const c of ctrls) {
    const r = await c.raw('GET', '/health/ready');
    t.equal(r.status, 200, 'ready');
    t.ok(r.body.checks.some((x: { id: string; healthy: boolean }) => x.id === 'cluster.replica' && x.healthy), 'replica check reported');
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
