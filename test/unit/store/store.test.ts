/** The LMDB store on its own: indexes, uniqueness, atomic group commits, change events. */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { open as openLmdb } from 'lmdb';
import { Store, UniqueViolation, type ChangeEvent, type CollectionSpec, type Rec, type Tx } from '../../../src/store/store.js';

/** The collections these tests declare: records of any shape. */
type TestRecords = { things: Rec; disk: Rec; mem: Rec };

function open(t: { teardown(fn: () => unknown): void }) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-store-'));
  const store = new Store<TestRecords>(dir, [{ name: 'things', unique: ['name'], indexes: ['tags'] }]);
  t.teardown(async () => {
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return store;
}
const rec = (id: string, name: string, tags: string[] = []) => ({ id, createdAt: 1, updatedAt: 1, name, tags });

t.test('unique and secondary indexes follow every write', async (t) => {
  const s = open(t);
  await s.write((tx) => {
    tx.put('things', rec('a', 'alpha', ['x', 'y']));
    tx.put('things', rec('b', 'beta', ['y']));
  });
  t.equal(s.count('things'), 2);
  t.equal(s.findUnique('things', 'name', 'beta')?.id, 'b');
  t.same(s.idsByIndex('things', 'tags', 'y').sort(), ['a', 'b']);
  await s.write((tx) => tx.put('things', rec('a', 'alpha2', ['z'])));
  t.equal(s.findUnique('things', 'name', 'alpha'), undefined, 'old unique key removed');
  t.same(s.idsByIndex('things', 'tags', 'x'), [], 'old index entries removed');
  t.same(s.idsByIndex('things', 'tags', 'z'), ['a']);
  t.same([...s.uniqueEntries('things', 'name')], [['alpha2', 'a'], ['beta', 'b']], 'unique entries in value order');
  await s.write((tx) => tx.delete('things', 'b'));
  t.equal(s.count('things'), 1);
  t.same(s.idsByIndex('things', 'tags', 'y'), []);
});

t.test('a write that throws applies nothing; duplicates are refused, also among concurrent writes', async (t) => {
  const s = open(t);
  await t.rejects(
    s.write((tx) => {
      tx.put('things', rec('a', 'one'));
      throw new Error('boom');
    }),
  );
  t.equal(s.count('things'), 0);
  // Two writes issued in the same turn share one commit; the second sees the first's pending name.
  const first = s.write((tx) => tx.put('things', rec('a', 'same')));
  const second = s.write((tx) => tx.put('things', rec('b', 'same'))).catch((e) => e);
  await first;
  t.type(await second, UniqueViolation);
  t.equal(s.count('things'), 1);
});

t.test('names longer than an LMDB key stay unique and findable', async (t) => {
  const s = open(t);
  const long = 'n'.repeat(1000);
  await s.write((tx) => tx.put('things', rec('a', long)));
  t.equal(s.findUnique('things', 'name', long)?.id, 'a');
  t.type(await s.write((tx) => tx.put('things', rec('b', long))).catch((e) => e), UniqueViolation, 'duplicate long name refused');
  await s.write((tx) => tx.put('things', rec('c', long + 'x')));
  t.equal(s.findUnique('things', 'name', long + 'x')?.id, 'c', 'same 400-character prefix, different name');
});

t.test('change events carry before and after, once per write, after the commit', async (t) => {
  const s = open(t);
  const seen: ChangeEvent<TestRecords>[][] = [];
  s.on('change', (evs: ChangeEvent<TestRecords>[]) => seen.push(evs));
  await Promise.all([s.write((tx) => tx.put('things', rec('a', 'a'))), s.write((tx) => tx.put('things', rec('b', 'b')))]);
  await s.write((tx) => tx.put('things', rec('a', 'a2')));
  t.equal(seen.length, 3);
  t.equal(seen[0][0].type, 'create');
  t.equal(seen[2][0].type, 'update');
  t.equal(seen[2][0].before?.name, 'a');
  t.equal(seen[2][0].after?.name, 'a2');
  t.equal(s.get('things', 'a')?.name, 'a2', 'committed when the event fires');
});

t.test('writes issued in later turns, while earlier ones still commit, resolve and announce in issue order', async (t) => {
  const s = open(t);
  const events: string[] = [];
  const resolved: string[] = [];
  s.on('change', (evs: ChangeEvent<TestRecords>[]) => events.push(...evs.map((e) => `${e.type}:${e.id}:${e.after?.name ?? ''}`)));
  const writes: Promise<unknown>[] = [];
  const issue = (label: string, fn: Parameters<Store<TestRecords>['write']>[0]) => writes.push(s.write(fn).then(() => resolved.push(label), (e) => resolved.push(`${label}:${e.constructor.name}`)));
  // Each write in its own event-loop turn, none waiting for the one before: they overlap in LMDB.
  for (let i = 0; i < 6; i++) {
    issue(`put${i}`, (tx) => tx.put('things', rec(`r${i}`, `n${i}`, ['t'])));
    await new Promise((r) => setImmediate(r));
  }
  // Sees the still-committing name n0 and is refused at once; renaming r1 frees n1 for r9 in a later turn.
  t.type(await s.write((tx) => tx.put('things', rec('x', 'n0'))).catch((e) => e), UniqueViolation, 'a name still committing is taken');
  issue('rename', (tx) => tx.put('things', rec('r1', 'm1', ['t'])));
  await new Promise((r) => setImmediate(r));
  issue('reuse', (tx) => tx.put('things', rec('r9', 'n1')));
  await new Promise((r) => setImmediate(r));
  issue('delete', (tx) => tx.delete('things', 'r2'));
  await Promise.all(writes);
  t.same(resolved, ['put0', 'put1', 'put2', 'put3', 'put4', 'put5', 'rename', 'reuse', 'delete'], 'resolved in issue order');
  t.same(events, ['create:r0:n0', 'create:r1:n1', 'create:r2:n2', 'create:r3:n3', 'create:r4:n4', 'create:r5:n5', 'update:r1:m1', 'create:r9:n1', 'delete:r2:'], 'change events in issue order');
  t.equal(s.findUnique('things', 'name', 'n1')?.id, 'r9');
  t.equal(s.findUnique('things', 'name', 'm1')?.id, 'r1');
  t.same(s.idsByIndex('things', 'tags', 't').sort(), ['r0', 'r1', 'r3', 'r4', 'r5']);
  t.ok(s.commitStats.commits >= 1 && s.commitStats.commits <= s.commitStats.writes, 'transactions counted, each with one write or more');
  t.equal(s.commitStats.writes, 9, 'every write counted once (the refused one made none)');
});

t.test('an index added to an existing collection is built when the store opens', async (t) => {
  // An older data directory (src/resources/enrollments.ts added the expiresAt index): the new
  // index database does not exist yet, and must not start out empty.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-store-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const before = new Store<TestRecords>(dir, [{ name: 'things', unique: ['name'], indexes: ['tags'] }]);
  await before.write((tx) => {
    tx.put('things', { ...rec('a', 'alpha', ['x']), expiresAt: 30 });
    tx.put('things', { ...rec('b', 'beta'), expiresAt: 10 });
    tx.put('things', rec('c', 'gamma'));
  });
  await before.close();
  const after = new Store<TestRecords>(dir, [{ name: 'things', unique: ['name'], indexes: ['tags', 'expiresAt'] }]);
  t.same([...after.idsByRange('things', 'expiresAt', { end: 31 })], ['b', 'a'], 'existing records are in the new index, in key order');
  t.same(after.idsByIndex('things', 'tags', 'x'), ['a'], 'the other indexes are untouched');
  await after.write((tx) => tx.put('things', { ...rec('d', 'delta'), expiresAt: 20 }));
  t.same([...after.idsByRange('things', 'expiresAt', {})], ['b', 'd', 'a'], 'and it follows writes');
  await after.close();
  const again = new Store<TestRecords>(dir, [{ name: 'things', unique: ['name'], indexes: ['tags', 'expiresAt'] }]);
  t.same([...again.idsByRange('things', 'expiresAt', {})], ['b', 'd', 'a'], 'reopened: the index is kept, not rebuilt');
  await again.close();
});

t.test('records name a shape shared by the collection; records that carry their own still read', async (t) => {
  // A data directory written before shared shapes: every record carries its own msgpack record
  // definition. Opened now, those records read as before, new ones are smaller, counts stay exact.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-store-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const old = openLmdb({ path: dir, maxDbs: 256 });
  const oldDb = old.openDB<Record<string, unknown>, string>({ name: 'c:things' });
  oldDb.transactionSync(() => {
    for (const id of ['a', 'b']) oldDb.put(id, { ...rec(id, `old-${id}`, ['x']), nested: { k: id } });
  });
  await old.close();
  let s = new Store<TestRecords>(dir, [{ name: 'things', unique: ['name'], indexes: ['tags'] }]);
  t.equal(s.count('things'), 2, 'old records counted');
  await s.write((tx) => {
    for (const id of ['c', 'd']) tx.put('things', { ...rec(id, `new-${id}`, ['x']), nested: { k: id } });
  });
  const size = (id: string) => s.env.openDB({ name: 'c:things' }).getBinary(id)!.length;
  t.ok(size('c') < size('a') / 2, `a new record is smaller: ${size('c')} against ${size('a')} bytes`);
  t.equal(s.count('things'), 4, 'the shapes are not counted as a record');
  t.same([...s.scan('things')].map((r) => [r.id, (r.nested as { k: string }).k]), ['a', 'b', 'c', 'd'].map((id) => [id, id]), 'old and new records read back whole, in order');
  await s.write((tx) => {
    for (const id of ['a', 'b', 'c', 'd']) tx.delete('things', id);
  });
  t.equal(s.count('things'), 0, 'an emptied collection counts none');
  await s.write((tx) => tx.put('things', rec('e', 'e')));
  await s.close();
  s = new Store<TestRecords>(dir, [{ name: 'things', unique: ['name'], indexes: ['tags'] }]);
  t.same([...s.scan('things')].map((r) => r.name), ['e'], 'reopened: shapes are kept');
  t.equal(s.count('things'), 1);
  await s.close();
});

t.test('index databases no collection declares any more are dropped when the store opens', async (t) => {
  // An older data directory (API-session and session tokens were LMDB-indexed before they were
  // looked up in memory): its index databases go; records and the declared indexes stay.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-store-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const before = new Store<TestRecords>(dir, [{ name: 'things', unique: ['name', 'token'], indexes: ['tags', 'color'] }]);
  await before.write((tx) => tx.put('things', { ...rec('a', 'alpha', ['x']), token: 't1', color: 'red' }));
  await before.close();
  const after = new Store<TestRecords>(dir, [{ name: 'things', unique: ['name'], indexes: ['tags'] }]);
  const names = [...after.env.getKeys({})];
  t.notOk(names.includes('u:things:token'), 'undeclared unique index dropped');
  t.notOk(names.includes('i:things:color'), 'undeclared secondary index dropped');
  t.ok(names.includes('c:things') && names.includes('u:things:name') && names.includes('i:things:tags'), 'declared databases kept');
  t.equal(after.get('things', 'a')?.token, 't1', 'records untouched');
  t.same(after.idsByIndex('things', 'tags', 'x'), ['a']);
  await after.close();
});

t.test('indexes kept in memory answer as LMDB indexes do, and are rebuilt from the records at open', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-store-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const specs: CollectionSpec<'disk' | 'mem'>[] = [
    { name: 'disk', indexes: ['tags', 'owner', 'size'] },
    { name: 'mem', indexes: ['tags', 'owner', 'size'], indexesInMemory: true },
  ];
  // The same writes into a collection indexed in LMDB and one indexed in memory.
  const both = (tx: Tx<TestRecords>, fn: (coll: 'disk' | 'mem') => void) => {
    fn('disk');
    fn('mem');
  };
  const thing = (id: string, owner: string, tags: string[], size: number) => ({ id, createdAt: 1, updatedAt: 1, owner, tags, size });
  const same = (s: Store<TestRecords>, what: string) => {
    for (const [field, value] of [['tags', 'x'], ['tags', 'y'], ['tags', 'none'], ['owner', 'o1'], ['owner', 'o2'], ['size', 3]] as const) {
      t.same(s.idsByIndex('mem', field, value), s.idsByIndex('disk', field, value), `${what}: ids of ${field} = ${value}`);
      t.equal(s.anyByIndex('mem', field, value), s.anyByIndex('disk', field, value), `${what}: any ${field} = ${value}`);
    }
    for (const field of ['tags', 'owner', 'size']) t.same([...s.indexKeys('mem', field)], [...s.indexKeys('disk', field)], `${what}: keys of ${field}`);
    for (const range of [{}, { start: 'o1', end: 'o2' }, { reverse: true }, { offset: 1, limit: 2 }, { start: 'o2', reverse: true, limit: 1 }, { start: 'o3', end: 'o1', reverse: true }]) {
      t.same([...s.idsByRange('mem', 'owner', range)], [...s.idsByRange('disk', 'owner', range)], `${what}: range ${JSON.stringify(range)}`);
    }
    t.same([...s.idsByRange('mem', 'size', { start: 2, end: 10 })], [...s.idsByRange('disk', 'size', { start: 2, end: 10 })], `${what}: numeric range`);
  };
  let s = new Store<TestRecords>(dir, specs);
  t.ok(s.isIndexed('mem', 'owner'));
  await s.write((tx) =>
    both(tx, (c) => {
      tx.put(c, thing('c', 'o2', ['x'], 3));
      tx.put(c, thing('a', 'o1', ['x', 'y'], 1));
      tx.put(c, thing('b', 'o1', ['y'], 12));
      tx.put(c, thing('d', 'o3', [], 3));
    }),
  );
  same(s, 'after creates');
  // A write still committing is seen by a later write (the pending overlay), not by committed reads.
  const moving = s.write((tx) => both(tx, (c) => tx.put(c, thing('a', 'o2', ['y'], 3))));
  await s.write((tx) => t.same(tx.idsByIndex('mem', 'owner', 'o2').sort(), ['a', 'c'], 'a later write sees the move in flight'));
  await moving;
  same(s, 'after an update');
  await s.write((tx) => both(tx, (c) => tx.delete(c, 'c')));
  same(s, 'after a delete');
  t.same(s.idsByIndex('mem', 'owner', 'o2'), ['a']);
  await s.close();
  s = new Store<TestRecords>(dir, specs);
  same(s, 'after reopening');
  t.notOk([...s.env.getKeys({})].some((k) => String(k).startsWith('i:mem:')), 'no LMDB index database for the in-memory ones');
  await s.close();
  // Indexed in LMDB before, in memory now: the old databases go, the answers stay.
  s = new Store<TestRecords>(dir, [{ name: 'disk', indexes: ['tags', 'owner', 'size'], indexesInMemory: true }, specs[1]]);
  t.same(s.idsByIndex('disk', 'owner', 'o1'), ['b']);
  t.notOk([...s.env.getKeys({})].some((k) => String(k).startsWith('i:disk:')), 'the LMDB index databases are dropped');
  await s.close();
});

t.test('names of records are served from memory until a commit changes the record', async (t) => {
  const s = open(t);
  await s.write((tx) => tx.put('things', rec('a', 'alpha')));
  t.equal(s.nameOf('things', 'a'), 'alpha');
  t.equal(s.nameOf('things', 'missing'), undefined, 'no record, no name');
  const renamed = s.write((tx) => {
    tx.put('things', rec('a', 'alpha-2'));
    t.equal(tx.nameOf('things', 'a'), 'alpha-2', 'a write sees its own rename');
  });
  await s.write((tx) => t.equal(tx.nameOf('things', 'a'), 'alpha-2', 'a later write sees the rename still committing'));
  await renamed;
  t.equal(s.nameOf('things', 'a'), 'alpha-2', 'the committed rename replaces the kept name');
  await s.write((tx) => tx.put('things', { id: 'b', createdAt: 1, updatedAt: 1 }));
  t.equal(s.nameOf('things', 'b'), null, 'a record without a name has null');
  await s.write((tx) => tx.delete('things', 'a'));
  t.equal(s.nameOf('things', 'a'), undefined, 'a deleted record has no name');
});
