/** The limiter's admission: `full` says, without side effects, whether a call asking now is refused. */
import t from 'tap';
import { Limiter } from '../../../src/auth/limiter.js';
import { ApiError } from '../../../src/core/errors.js';

t.test('full once every slot is busy and the queue is taken; refuse() is the refusal acquire() gives', async (t) => {
  const l = new Limiter('test', 1, 1);
  t.notOk(l.full, 'a free slot');
  const first = await l.acquire();
  t.notOk(l.full, 'busy, but room to wait');
  const second = l.acquire();
  t.ok(l.full, 'busy and the queue taken');
  t.equal(l.rejected, 0, 'asking whether it is full refuses nothing');
  const early = l.refuse();
  t.ok(early instanceof ApiError && early.status === 429, 'refuse() is 429');
  const late = await l.acquire().then(() => undefined, (e: unknown) => e);
  t.ok(late instanceof ApiError && late.status === 429, 'acquire() refuses the same way');
  t.equal(l.rejected, 2, 'both refusals counted');
  first();
  const release = await second;
  t.notOk(l.full, 'the waiter took the slot; the queue is free again');
  release();
});

t.test('full when the expected wait exceeds the longest wait', async (t) => {
  const l = new Limiter('test', 1, 10, 1);
  const release = await l.acquire();
  // Before any call finished, a call is expected to take as long as the running one has so far.
  await new Promise((r) => setTimeout(r, 5));
  t.ok(l.full, 'a wait of more than 1 ms ahead');
  release();
  t.notOk(l.full);
});
