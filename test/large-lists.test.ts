/**
 * Large answers share the controller: an unbounded list or an unindexed filter over thousands of
 * identities runs in slices; only a bounded number run at once (here one, none waiting), the others
 * are refused with 429 RATE_LIMITED in the upstream envelope; and every answer that is given is
 * whole and correct. How long a small request waits meanwhile is a timing question, measured by
 * bench/list-stall.ts (its answers are read in a worker, so the client's own parsing of the large
 * answers does not count), not asserted here.
 */
import t from 'tap';
import { startServer, isError, type Client, type Server } from './helpers/server.js';

const N = 3000;
let srv: Server;
let admin: Client;

t.before(async () => {
  srv = await startServer(t, { env: { MESH_LARGE_ANSWER_CONCURRENCY: '1', MESH_LARGE_ANSWER_QUEUE: '0' } });
  admin = await srv.login();
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < N) {
        const i = next++;
        const r = await admin.post('/identities', { name: `large-${String(i).padStart(5, '0')}`, type: 'User', isAdmin: false });
        if (r.status !== 201) throw new Error(`seed ${i}: ${r.status} ${r.text}`);
      }
    }),
  );
});

const scan = `/identities?limit=-1&filter=${encodeURIComponent('isAdmin = false and name contains "large-"')}`;

t.test('concurrent large lists: whole answers or 429, never more than allowed at once', async (t) => {
  const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => admin.get(i % 2 ? scan : '/identities?limit=-1')));
  const ok = answers.filter((r) => r.status === 200);
  const refused = answers.filter((r) => r.status !== 200);
  t.ok(ok.length >= 1, `${ok.length} answered`);
  t.ok(refused.length >= 1, `${refused.length} refused`);
  for (const r of refused) t.ok(isError(r, 429, 'RATE_LIMITED') && Number(r.headers['retry-after']) >= 1, '429 RATE_LIMITED in the upstream envelope, with Retry-After');
  for (const r of ok) {
    const names = r.body.data.map((x: { name: string }) => x.name).filter((n: string) => n.startsWith('large-'));
    t.equal(names.length, N, 'every identity is in the answer');
    t.equal(new Set(names).size, N, 'each once');
  }
  // The limit frees again: one at a time is always served.
  const again = await admin.get(scan);
  t.equal(again.status, 200);
  t.equal(again.body.meta.pagination.totalCount, N, 'filter total');
});


t.test('a large answer is sent in pieces: whole, the same on both listeners, and the same as read page by page', async (t) => {
  // A reader with identity.read only lists without the credentials and from fresh renders, not the kept JSON.
  const reader = `reader-${Date.now()}`;
  const readerId = (await admin.post('/identities', { name: reader, type: 'User', isAdmin: false, permissions: ['identity.read'] })).body.data.id;
  await admin.post('/authenticators', { method: 'updb', identityId: readerId, username: reader, password: 'reader-password-1' });
  const readOnly = await srv.login(reader, 'reader-password-1');
  // Pages of 500 through the API listener: the reference.
  const paged: unknown[] = [];
  for (let offset = 0; ; offset += 500) {
    const r = await admin.get(`/identities?limit=500&offset=${offset}`);
    t.equal(r.status, 200);
    paged.push(...r.body.data);
    if (r.body.data.length < 500) break;
  }
  const certAdmin = srv.tlsClient('management');
  certAdmin.token = admin.token;
  for (const [label, c] of [['API listener', admin], ['certificate listener', certAdmin], ['read-only caller', readOnly]] as const) {
    const r = await c.get('/identities?limit=-1');
    t.equal(r.status, 200, `${label}: 200`);
    t.ok(Buffer.byteLength(r.text) > 1024 * 1024, `${label}: over 1 MiB, so sent in pieces (${Buffer.byteLength(r.text)} bytes)`);
    t.equal(r.headers['content-length'], String(Buffer.byteLength(r.text)), `${label}: content-length is the body's length`);
    t.same(r.body.meta.pagination, { limit: -1, offset: 0, totalCount: paged.length }, `${label}: pagination`);
    const ids = r.body.data.map((x: { id: string }) => x.id);
    t.same(ids, paged.map((x: any) => x.id), `${label}: every identity, in order`);
    if (label !== 'read-only caller') t.same(r.body.data, paged, `${label}: each entry as read page by page`);
  }
});
