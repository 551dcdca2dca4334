/** src/store/ids.ts: entity ids sort in creation order and never repeat; short ids use upstream's alphabet. */
import t from 'tap';
import { shortId, timeOrderedId } from '../../../src/store/ids.js';

t.test('time-ordered ids: 12 characters, strictly increasing, unique', async (t) => {
  const ids = Array.from({ length: 20_000 }, () => timeOrderedId());
  t.ok(ids.every((id) => /^[-.0-9A-Za-z]{12}$/.test(id)), 'all 12 characters of the sorted alphabet');
  // More ids than the 4096 a millisecond's counter holds, so the counter's rollover is crossed.
  let ordered = true;
  for (let i = 1; i < ids.length; i++) if (!(ids[i - 1] < ids[i])) ordered = false;
  t.ok(ordered, 'each id sorts after the one before (byte order, as LMDB keys)');
  t.equal(new Set(ids).size, ids.length, 'no id repeats');
  const later = await new Promise<string>((r) => setTimeout(() => r(timeOrderedId()), 5));
  t.ok(later > ids.at(-1)!, 'an id made later sorts later');
});

t.test('short ids', async (t) => {
  t.match(shortId(), /^[0-9a-zA-Z.-]{9}$/);
  t.equal(shortId(20).length, 20);
  t.equal(new Set(Array.from({ length: 5000 }, () => shortId())).size, 5000, '5000 short ids, no repeat');
});
