/**
 * Work in slices: a long computation written as a generator that yields at points where it may
 * pause (list queries, list rendering). Run to the end at once when it is small; once a slice has
 * taken SLICE_MS, the rest runs in slices with the event loop free in between (all such
 * computations together at most SLICE_MS per turn), so large answers never stall every other
 * request (routers are marked offline after seconds of silence).
 */

/** Longest stretch of main-thread work between two turns of the event loop. */
export const SLICE_MS = 8;

/** Run steps to the end without pausing (callers that must answer synchronously). */
export function runToEnd<T>(g: Generator<void, T>): T {
  for (;;) {
    const r = g.next();
    if (r.done) return r.value;
  }
}

/**
 * Run `g` for up to one slice. Its result when it finished, or `undefined` when it has more to
 * do: then `continueSliced` (optionally behind an admission check) finishes it.
 */
export function firstSlice<T>(g: Generator<void, T>): { done: true; value: T } | { done: false } {
  const start = performance.now();
  for (;;) {
    const r = g.next();
    if (r.done) return { done: true, value: r.value };
    if (performance.now() - start >= SLICE_MS) return { done: false };
  }
}

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Computations being finished in slices now: together they take one SLICE_MS per turn. */
let sliced = 0;

/**
 * Finish `g` in slices, letting the event loop run between them. The computations running at
 * once share one SLICE_MS per turn (each gets its share), so a request arriving meanwhile waits
 * about one slice however many of them run.
 */
export async function continueSliced<T>(g: Generator<void, T>): Promise<T> {
  sliced++;
  try {
    for (;;) {
      await turn();
      const start = performance.now();
      const share = SLICE_MS / sliced;
      for (;;) {
        const r = g.next();
        if (r.done) return r.value;
        if (performance.now() - start >= share) break;
      }
    }
  } finally {
    sliced--;
  }
}
