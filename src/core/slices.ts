/**
 * Work in slices: large answers (list queries and their rendering, written as generators that
 * yield where they may pause, and the writing of large bodies) run in small steps, all of them
 * together at most TURN_MS of main-thread work per turn of the event loop, so a request arriving
 * meanwhile waits about TURN_MS however many large answers are under way (routers are marked
 * offline after seconds of silence).
 */

/** Main-thread work of all large answers together per turn of the event loop, first slices included. */
export const TURN_MS = 2;
/** A computation that has not ended after FIRST_STEPS steps and this long at once continues in turns (it is a large answer). */
export const FIRST_MS = 1;
/**
 * Steps a first slice takes at least (each is small: 32 records read, 8 rendered), so a small list
 * whose first slice a preemption or a GC pause stretched past FIRST_MS still answers at once: one
 * answered later cuts what a client pipelined behind it (uWS closes the connection on a request
 * parsed while an answer is pending). Counted, not timed, so the outcome does not depend on load.
 */
export const FIRST_STEPS = 16;
/** A computation that has taken this long in all is let go on only when `admit` lets it (see `sliced`). */
export const ADMIT_AFTER_MS = 8;

/** Run steps to the end without pausing (callers that must answer synchronously). */
export function runToEnd<T>(g: Generator<void, T>): T {
  for (;;) {
    const r = g.next();
    if (r.done) return r.value;
  }
}

/** One step of a task; false when the task leaves the queue (it ended, or waits for something else). */
export type Step = () => boolean;

/** Tasks taking turns, one step each, within the turn's budget. */
const queue: Step[] = [];
let scheduled = false;
/** First slices run since the last turn: they count against the next one's budget. */
let spentOutside = 0;

/** Run `step` in turns until it returns false. */
export function enqueue(step: Step) {
  queue.push(step);
  if (!scheduled) {
    scheduled = true;
    setImmediate(runTurn);
  }
}

function runTurn() {
  scheduled = false;
  const start = performance.now();
  const budget = TURN_MS - spentOutside;
  spentOutside = 0;
  // At least one step per turn, so requests that keep starting large answers cannot starve the running ones.
  do {
    const step = queue.shift()!;
    if (step()) queue.push(step);
  } while (queue.length > 0 && performance.now() - start < budget);
  if (queue.length > 0) {
    scheduled = true;
    setImmediate(runTurn);
  }
}

/**
 * Run `g` to its result. A small computation ends at once (its first slice: at least FIRST_STEPS
 * steps and FIRST_MS) and its value is returned. A longer one continues in turns (the shared
 * budget); once it has taken ADMIT_AFTER_MS in all it is a large answer and goes on inside `admit`
 * (a limiter: it may wait for a slot, or refuse by throwing), so ordinary computations that merely
 * did not fit in one turn are never refused.
 */
export function sliced<T>(g: Generator<void, T>, admit: (rest: () => Promise<T>) => Promise<T>): T | Promise<T> {
  const start = performance.now();
  let used: number;
  for (let steps = 1; ; steps++) {
    const r = g.next();
    if (r.done) return r.value;
    used = performance.now() - start;
    if (steps >= FIRST_STEPS && used >= FIRST_MS) break;
  }
  spentOutside += used;
  return inTurns(g, ADMIT_AFTER_MS - used).then((r) => (r.done ? r.value : admit(() => inTurns(g, Infinity).then((end) => end.value as T))));
}

/** Step `g` in turns until it ends or has run `ms` more; its last result. */
function inTurns<T>(g: Generator<void, T>, ms: number): Promise<IteratorResult<void, T>> {
  return new Promise((resolve, reject) => {
    let used = 0;
    enqueue(() => {
      const start = performance.now();
      let r: IteratorResult<void, T>;
      try {
        r = g.next();
      } catch (e) {
        reject(e);
        return false;
      }
      used += performance.now() - start;
      if (!r.done && used < ms) return true;
      resolve(r);
      return false;
    });
  });
}
