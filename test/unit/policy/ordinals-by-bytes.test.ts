/**
 * src/policy/ordinals-by-bytes.ts against a Map under random adds and deletes: lookups by string
 * and by bytes agree with it through growth, tombstones and the rehashes that drop them.
 */
import t from 'tap';
import { OrdinalsByBytes } from '../../../src/policy/ordinals-by-bytes.js';

t.test('agrees with a Map through adds, deletes and rehashes', async (t) => {
  const table = new OrdinalsByBytes();
  const map = new Map<string, number>();
  let seed = 7;
  const rand = (n: number) => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) % n);
  const idOf = (n: number) => (n % 3 === 0 ? `id-${n}` : n % 3 === 1 ? `ü${n}é` : 'x'.repeat(40) + n);
  let mismatches = 0;
  for (let step = 0; step < 60_000; step++) {
    const id = idOf(rand(5000));
    if (map.has(id) && rand(2) === 0) {
      if (table.deleteString(id) !== map.get(id)) mismatches++;
      map.delete(id);
    } else if (!map.has(id)) {
      table.addString(id, step);
      map.set(id, step);
    }
    const probe = idOf(rand(5000));
    if (table.getString(probe) !== (map.get(probe) ?? -1)) mismatches++;
  }
  t.equal(mismatches, 0);
  t.equal(table.size, map.size);
  for (const [id, o] of map) {
    const bytes = Buffer.concat([Buffer.from([1, 2]), Buffer.from(id), Buffer.from([3])]);
    if (table.get(bytes, 2, bytes.length - 1) !== o) mismatches++;
  }
  t.equal(mismatches, 0, 'by bytes within a larger buffer');
  t.equal(table.deleteString('never'), -1);
  table.reserve(100_000);
  t.equal(table.getString([...map.keys()][0]), [...map.values()][0], 'reserve keeps the entries');
});
