/**
 * The fabric API's cluster operations in cluster mode, against a real etcd and two real
 * controllers: the members listed are the live controllers, and membership and leadership are not
 * changed through the API (docs/fabric.md says why), each refusal naming its field and reason.
 */
import t from 'tap';
import { startEtcd } from '../bench/lib/etcd.js';
import { startServer, isError, Client } from './helpers/server.js';

t.setTimeout(300_000);

const etcd = await startEtcd(t, 1);
const env = { MESH_CLUSTER_ETCD: etcd.endpoints.join(','), MESH_CLUSTER_PREFIX: '/mesh-fabric-test' };
const [a, b] = await Promise.all([startServer(t, { env }), startServer(t, { env })]);
const fabricA = new Client(a, '/fabric/v1', (await a.login()).token);
const idOf = async (srv: typeof a) => (await (await srv.login()).get('/controllers')).body.data.find((c: any) => c.apiAddresses['edge-management'][0].url.includes(`:${srv.port}/`))?.id as string;

t.test('list-members: the live controllers', async (t) => {
  // Membership is read from etcd every second: wait until both controllers see each other.
  let members: any[] = [];
  for (;;) {
    const r = await fabricA.get('/cluster/list-members');
    t.equal(r.status, 200);
    members = r.body.data;
    if (members.length === 2) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const [idA, idB] = [await idOf(a), await idOf(b)];
  t.same(members.map((m) => m.id).sort(), [idA, idB].sort(), 'both controllers');
  t.equal(members[0].id, idA, 'this controller first');
  for (const m of members) {
    t.match(m, { voter: true, leader: false, connected: true, readOnly: false });
    t.match(m.address, /^wss:\/\/.+\/ctrl\/v1$/, 'the control channel address');
    t.ok(typeof m.version === 'string' && m.version !== '', 'version');
  }
  const inspected = await fabricA.post('/inspections', { appRegex: idA, requestedValues: ['cluster-config'] });
  t.equal(inspected.body.values[0].value.clustered, true);
  t.equal(inspected.body.values[0].value.members.length, 2, 'inspect sees the same members');
});

t.test('add, remove and transfer are refused with the reason', async (t) => {
  const idB = await idOf(b);
  const add = await fabricA.post('/cluster/add-member', { address: 'tls:ctrl3.example:6262', isVoter: true });
  t.ok(isError(add, 400, 'INVALID_FIELD'), 'add-member → 400');
  t.equal(add.body.error.cause.field, 'address');
  t.match(add.body.error.cause.reason, /etcd/);
  t.ok(isError(await fabricA.post('/cluster/remove-member', { id: 'no-such-controller' }), 404, 'NOT_FOUND'), 'remove an unknown member → 404');
  const remove = await fabricA.post('/cluster/remove-member', { id: idB });
  t.ok(isError(remove, 400, 'INVALID_FIELD'), 'remove a live member → 400');
  t.equal(remove.body.error.cause.field, 'id');
  t.ok(isError(await fabricA.post('/cluster/transfer-leadership', { newLeaderId: 'no-such-controller' }), 404, 'NOT_FOUND'), 'transfer to an unknown member → 404');
  const transfer = await fabricA.post('/cluster/transfer-leadership', { newLeaderId: idB });
  t.ok(isError(transfer, 400, 'INVALID_FIELD'), 'transfer → 400');
  t.equal(transfer.body.error.cause.field, 'newLeaderId');
  t.ok(isError(await fabricA.post('/cluster/transfer-leadership', {}), 400, 'INVALID_FIELD'), 'transfer to no one in particular → 400');
  const routers = await new Client(b, '/fabric/v1', (await b.login()).token).get('/routers');
  t.equal(routers.status, 200, 'the fabric API is served by every controller');
});
