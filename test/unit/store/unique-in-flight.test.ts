/**
 * Unique values while writes are still committing (src/store/store.ts `uniqueHolder`): a write
 * sees the values that writes in flight take and free, and its own, whatever order they come in —
 * what a bulk import with several large writes in flight relies on.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { Store, UniqueViolation, type Rec } from '../../../src/store/store.js';

/** The collection these tests declare: records of any shape. */
type TestRecords = { things: Rec };

function open(t: { teardown(fn: () => unknown): void }) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-store-unique-'));
  const store = new Store<TestRecords>(dir, [{ name: 'things', unique: ['name'] }]);
  t.teardown(async () => {
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return store;
}
const rec = (id: string, name: string) => ({ id, createdAt: 1, updatedAt: 1, name });
/** Issue a write without waiting for it; whether its callback threw comes back at once. */
const issue = (s: Store<TestRecords>, fn: Parameters<Store<TestRecords>['write']>[0]) => {
  const p = s.write(fn);
  return { p, refused: p.then(() => undefined, (e: unknown) => e) };
};

t.test('values taken and freed by writes in flight', async (t) => {
  const s = open(t);
  await s.write((tx) => tx.put('things', rec('a', 'alpha')));
  const inFlight = [
    issue(s, (tx) => tx.put('things', rec('b', 'beta'))),
    issue(s, (tx) => tx.put('things', rec('a', 'alpha-2'))), // frees alpha
  ];
  const takeBeta = issue(s, (tx) => tx.put('things', rec('c', 'beta')));
  const takeAlpha = issue(s, (tx) => tx.put('things', rec('d', 'alpha')));
  t.type(await takeBeta.refused, UniqueViolation, 'a value a write in flight takes is taken');
  t.equal(await takeAlpha.refused, undefined, 'a value a write in flight frees is free');
  await Promise.all(inFlight.map((w) => w.p));
  await takeAlpha.p;
  t.equal(s.findUnique('things', 'name', 'alpha')?.id, 'd');
  t.equal(s.findUnique('things', 'name', 'beta')?.id, 'b');
  t.equal(s.findUnique('things', 'name', 'alpha-2')?.id, 'a');

  // Taken, freed and taken again by writes all in flight: the last one holds it.
  const chain = [
    issue(s, (tx) => tx.put('things', rec('e', 'gamma'))),
    issue(s, (tx) => tx.put('things', rec('e', 'gamma-2'))),
    issue(s, (tx) => tx.put('things', rec('f', 'gamma'))),
    issue(s, (tx) => tx.put('things', rec('f', 'gamma-3'))),
  ];
  t.equal(await issue(s, (tx) => tx.put('things', rec('g', 'gamma'))).refused, undefined, 'freed twice over: free');
  t.type(await issue(s, (tx) => tx.put('things', rec('h', 'gamma-3'))).refused, UniqueViolation, 'the latest holder in flight holds it');
  await Promise.all(chain.map((w) => w.p));
  await new Promise((r) => setImmediate(r));
  t.equal(s.findUnique('things', 'name', 'gamma')?.id, 'g');
});

t.test('a write sees its own values, taken and freed', async (t) => {
  const s = open(t);
  await s.write((tx) => tx.put('things', rec('a', 'alpha')));
  const err = await s
    .write((tx) => {
      tx.put('things', rec('b', 'beta'));
      tx.put('things', rec('c', 'beta'));
    })
    .catch((e) => e);
  t.type(err, UniqueViolation, 'two records of one write with one value');
  t.equal(s.findUnique('things', 'name', 'beta'), undefined, 'nothing of it applied');
  await s.write((tx) => {
    tx.put('things', rec('a', 'alpha-2'));
    tx.put('things', rec('b', 'alpha'));
    tx.delete('things', 'b');
    tx.put('things', rec('c', 'alpha'));
  });
  t.equal(s.findUnique('things', 'name', 'alpha')?.id, 'c', 'freed and taken again within one write');
  // A thousand creates in one write, one repeating the first.
  const many = await s
    .write((tx) => {
      for (let i = 0; i < 1000; i++) tx.put('things', rec(`m${i}`, `many-${i}`));
      tx.put('things', rec('m-dup', 'many-0'));
    })
    .catch((e) => e);
  t.type(many, UniqueViolation);
  t.equal(s.count('things'), 2, 'a and c only');
});
