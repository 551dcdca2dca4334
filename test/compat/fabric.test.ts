/**
 * The fabric API driven by a generic OpenAPI client (swagger-client) by operationId, through a
 * prism proxy that checks every request and response against upstream's fabric spec (fabric.yml,
 * as src/api/spec/fabric.json holds it; patched only as test/compat/lib/upstream-spec.ts lists).
 * One table row per call (test/compat/lib/fabric-table.ts); a violation, a response prism had to
 * make up, or an unexpected status fails the row. At the end every operation of the table must
 * have had at least one clean exchange.
 */
import t from 'tap';
import { startServer } from '../helpers/server.js';
import { startPrism } from './lib/prism.js';
import { exerciser, liveOps, State } from './lib/exerciser.js';
import { fabricRows } from './lib/fabric-table.js';

t.test('fabric API through the checking proxy, by operationId', async (t) => {
  const srv = await startServer(t);
  const proxy = await startPrism(t, srv, 'fabric');
  t.comment(`spec patches: ${proxy.spec.notes.map((n) => n.what).join('; ')}`);
  const state = new State();
  state.srv = srv;
  const ex = await exerciser(proxy, state);
  const rows = fabricRows();
  for (const row of rows) await ex.run(t, row);

  const clean = ex.log.cleanOps();
  const missing = [...liveOps('fabric', rows)].filter((k) => !clean.has(k));
  t.same(missing, [], 'every operation of the table had a clean exchange through the proxy');
  t.comment(`exercised cleanly: ${clean.size} operations`);
});
