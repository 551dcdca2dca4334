/**
 * The operation table: the generated operationId unions match the embedded specs, and the join of
 * entries and spec operations refuses, naming each, a spec operation without an entry, an entry
 * without a spec operation and two entries for one operation; the controller's own table joins
 * cleanly with one operation per spec operation.
 */
import t from 'tap';
import fs from 'node:fs';
import { buildOperations, joinOperations, operationEntries, OperationTableError } from '../src/api/operations.js';
import { upstreamOperations } from '../src/api/spec/index.js';
import { createRegistry } from '../src/resources/index.js';
import type { Entry } from '../src/api/context.js';
import { operationIdsPath, operationIdsSource } from '../scripts/generate-operation-ids.js';

const specs = { client: upstreamOperations('client'), management: upstreamOperations('management'), fabric: upstreamOperations('fabric') };
const entries = () => operationEntries(createRegistry(), () => []);

function problemsOf(fn: () => unknown): string[] {
  try {
    fn();
  } catch (e) {
    if (e instanceof OperationTableError) return e.problems;
    throw e;
  }
  return [];
}

t.test('the generated operationId unions are those of the embedded specs', async (t) => {
  t.equal(fs.readFileSync(operationIdsPath(), 'utf8'), operationIdsSource(), 'run scripts/generate-operation-ids.ts after changing the specs');
});

t.test('the controller table has one operation per spec operation, in spec order', async (t) => {
  const ops = buildOperations(createRegistry());
  const want = [...specs.client, ...specs.management, ...specs.fabric].map((u) => `${u.api} ${u.method.toLowerCase()} ${u.path} ${u.operationId}`);
  t.same(ops.map((o) => `${o.api} ${o.method} ${o.path} ${o.operationId}`), want);
  t.ok(ops.every((o) => o.auth === 'admin' || o.permission === undefined), 'permissions only at the admin level');
  t.ok(ops.every((o) => o.auth !== 'admin' || o.api !== 'client'), 'the admin level only on the Management and fabric APIs');
  t.ok(ops.filter((o) => o.api === 'fabric').every((o) => o.auth === 'admin'), 'every fabric operation is for admins or holders of its permission');
});

t.test('a spec operation without an entry fails the join', async (t) => {
  const all = entries();
  const without = all.filter((e) => !(e.api === 'management' && e.operationId === 'createIdentity'));
  t.equal(without.length, all.length - 1);
  t.same(problemsOf(() => joinOperations(without, specs)), ['management:createIdentity: no entry']);
});

t.test('an entry for an operation the spec does not have fails the join', async (t) => {
  // The union type refuses this at compile time; the join refuses it at run time too.
  const stray = { ...entries()[0], api: 'client', operationId: 'createIdentity' } as unknown as Entry;
  t.same(problemsOf(() => joinOperations([...entries(), stray], specs)), ['client:createIdentity: no such operation in the client spec']);
});

t.test('two entries for one operation fail the join, also through a shared entry', async (t) => {
  const all = entries();
  const detail = all.find((e) => e.api === 'management' && e.operationId === 'detailIdentity')!;
  t.same(problemsOf(() => joinOperations([...all, { ...detail }], specs)), ['management:detailIdentity: two entries']);
  const shared = all.find((e) => e.api === 'both' && e.operationId === 'listVersion')!;
  const again = { ...shared, api: 'client' } as Entry;
  t.same(problemsOf(() => joinOperations([...all, again], specs)), ['client:listVersion: two entries']);
});

t.test('every problem is reported at once', async (t) => {
  const all = entries().filter((e) => e.operationId !== 'listRoot');
  const problems = problemsOf(() => joinOperations(all, specs));
  t.same(problems.sort(), ['client:listRoot: no entry', 'management:listRoot: no entry']);
});
