/**
 * The Management API driven by a generic OpenAPI client (swagger-client) by operationId, through a
 * prism proxy that checks every request and response against the upstream v0.28.0
 * management.yml (patched only as test/compat/lib/upstream-spec.ts lists). One table row per call
 * (test/compat/lib/management-table.ts); a violation, a response prism had to make up, or an
 * unexpected status fails the row. At the end every non-pending operation of the table must have
 * had at least one clean exchange.
 */
import t from 'tap';
import { startServer } from '../helpers/server.js';
import { startPrism } from './lib/prism.js';
import { exerciser, liveOps, State } from './lib/exerciser.js';
import { managementRows } from './lib/management-table.js';

t.test('management API through the checking proxy, by operationId', async (t) => {
  const srv = await startServer(t);
  const proxy = await startPrism(t, srv, 'management', { clientCerts: true });
  t.comment(`spec patches: ${proxy.spec.notes.map((n) => n.what).join('; ')}`);
  const state = new State();
  state.srv = srv;
  const ex = await exerciser(proxy, state);
  const rows = managementRows();
  for (const row of rows) await ex.run(t, row);

  const clean = ex.log.cleanOps();
  const missing = [...liveOps('management', rows)].filter((k) => !clean.has(k));
  t.same(missing, [], 'every operation of the table had a clean exchange through the proxy');
  t.comment(`exercised cleanly: ${clean.size} operations`);
});
