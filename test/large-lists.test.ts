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
  for (const r of refused) t.ok(isError(r, 429, 'RATE_LIMITED'), '429 RATE_LIMITED in the upstream envelope');
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

