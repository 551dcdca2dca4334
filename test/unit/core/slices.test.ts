/**
 * src/core/slices.ts: how large answers share the event loop. The orders asserted here follow from
 * the queue alone (steps that busy-wait guarantee a least duration, never a most), so nothing here
 * depends on how fast the machine is.
 */
import t from 'tap';
import { ADMIT_AFTER_MS, FIRST_MS, FIRST_STEPS, TURN_MS, enqueue, sliced } from '../../../src/core/slices.js';

/** Hold the thread for at least `ms`. */
const busy = (ms: number) => {
  const start = performance.now();
  while (performance.now() - start < ms);
};
/** Steps that take a computation past its first slice (FIRST_STEPS of them, FIRST_MS in all). */
function* pastFirstSlice(ms = FIRST_MS) {
  busy(ms);
  for (let i = 0; i < FIRST_STEPS; i++) yield;
}
const nextTurn = () => new Promise<void>((r) => setImmediate(r));
/** An admission that always lets the computation go on, counting its calls. */
const letThrough = () => {
  const admit = <T>(rest: () => Promise<T>) => {
    admit.calls++;
    return rest();
  };
  admit.calls = 0;
  return admit;
};

t.test('a computation that ends within its first slice answers at once', async (t) => {
  const admit = letThrough();
  const out = sliced(
    (function* () {
      yield;
      yield;
      return 42;
    })(),
    admit,
  );
  t.equal(out, 42, 'the value itself, not a promise');
  t.equal(admit.calls, 0, 'never asked for admission');
});

t.test('fewer than FIRST_STEPS steps answer at once however long they take (a preemption, a GC pause)', async (t) => {
  const admit = letThrough();
  const out = sliced(
    (function* () {
      for (let i = 0; i < FIRST_STEPS - 1; i++) {
        if (i === 0) busy(FIRST_MS * 3);
        yield;
      }
      return 'small';
    })(),
    admit,
  );
  t.equal(out, 'small', 'the value itself, not a promise');
  t.equal(admit.calls, 0, 'never asked for admission');
});

t.test('many steps past FIRST_MS continue in turns', async (t) => {
  const out = sliced(
    (function* () {
      yield* pastFirstSlice();
      for (let i = 0; i < FIRST_STEPS; i++) yield;
      return 'many';
    })(),
    letThrough(),
  );
  t.ok(out instanceof Promise, 'a promise: the rest runs later');
  t.equal(await out, 'many');
});

t.test('a longer one continues in turns, and the event loop runs between them', async (t) => {
  const log: string[] = [];
  const out = sliced(
    (function* () {
      yield* pastFirstSlice();
      for (let i = 0; i < 3; i++) {
        log.push('step');
        setImmediate(() => log.push('other'));
        busy(TURN_MS);
        yield;
      }
      return 'done';
    })(),
    letThrough(),
  );
  t.ok(out instanceof Promise, 'a promise: the rest runs later');
  t.equal(await out, 'done');
  // Each step takes the whole turn's budget: what was scheduled meanwhile runs before the next one.
  t.same(log, ['step', 'other', 'step', 'other', 'step', 'other']);
});

t.test('tasks take turns one step at a time', async (t) => {
  const log: string[] = [];
  let left = 0;
  const finished = new Promise<void>((resolve) => {
    const task = (name: string, steps: number) => {
      left++;
      let n = 0;
      enqueue(() => {
        log.push(name);
        if (++n < steps) return true;
        if (--left === 0) resolve();
        return false;
      });
    };
    task('a', 4);
    task('b', 2);
    task('c', 3);
  });
  await finished;
  t.same(log.join(''), 'abcabcaca');
});

t.test('a first slice counts against the budget of the next turn', async (t) => {
  const log: string[] = [];
  let stop = false;
  enqueue(() => {
    log.push('queued');
    return !stop;
  });
  const out = sliced(
    (function* () {
      yield* pastFirstSlice(Math.max(FIRST_MS, TURN_MS));
      return 'ok';
    })(),
    letThrough(),
  );
  setImmediate(() => log.push('other'));
  await nextTurn();
  stop = true;
  t.equal(await out, 'ok');
  // The first slice used the whole budget: the next turn runs one step (at least one always runs) and lets go.
  t.same(log.slice(0, 2), ['queued', 'other']);
});

t.test('admission is asked once a computation has taken ADMIT_AFTER_MS in all', async (t) => {
  // Steps of at least STEP_MS: the first slice's FIRST_STEPS take half of ADMIT_AFTER_MS or more.
  const STEP_MS = ADMIT_AFTER_MS / (2 * FIRST_STEPS);
  const most = Math.ceil(ADMIT_AFTER_MS / STEP_MS);
  const steps = () =>
    (function* () {
      for (let i = 0; i < most + 8; i++) {
        busy(STEP_MS);
        yield;
      }
      return 'whole';
    })();
  const admit = letThrough();
  t.equal(await sliced(steps(), admit), 'whole', 'admitted: it runs to the end');
  t.equal(admit.calls, 1, 'asked once');

  let stepped = 0;
  const refused = new Error('refused');
  const g = (function* () {
    for (;;) {
      stepped++;
      busy(STEP_MS);
      yield;
    }
  })();
  await t.rejects(
    Promise.resolve(
      sliced(g, () => {
        throw refused;
      }),
    ),
    refused,
    'refused: the caller gets the refusal',
  );
  const at = stepped;
  await nextTurn();
  await nextTurn();
  t.equal(stepped, at, 'and the computation is not stepped any more');
  // Past the first slice (at least one step in turns), and refused by the time the steps add up to ADMIT_AFTER_MS.
  t.ok(at > FIRST_STEPS && at <= most + 1, `refused after ${at} steps`);
});

t.test('an error thrown in a later turn rejects the answer', async (t) => {
  const boom = new Error('boom');
  const out = sliced(
    (function* (): Generator<void, string> {
      yield* pastFirstSlice();
      throw boom;
    })(),
    letThrough(),
  );
  await t.rejects(Promise.resolve(out), boom);
});
