/**
 * A bounded queue in front of expensive work (logins, MFA checks, certificate signing, large
 * lists): at most `concurrency` calls run at once, at most `queue` more wait their turn, and any
 * call beyond that is refused at once with 429 RATE_LIMITED. Nothing ever waits without bound:
 * a call is refused at once when the wait it would have, judged from how long recent calls took,
 * exceeds `maxWaitMs`; and a call admitted to wait that has not started `maxWaitMs` after it
 * arrived (the estimate was wrong: calls got slower, or none had finished yet to learn from) leaves
 * the queue with 429 then. So every call starts within `maxWaitMs` or is refused, and a client
 * never waits longer for a refusal than for a start. Every refusal carries Retry-After.
 *
 * Example: `await limiter.run(() => login(ctx))` → the login's result, or throws RATE_LIMITED;
 * `const release = await limiter.acquire()` holds a slot until `release()` (large answers hold it
 * until they are written: src/resources/list.ts).
 */
import { errors, retryAfterSeconds } from '../core/errors.js';

interface Waiter {
  start: () => void;
  refuse: () => void;
  timer?: NodeJS.Timeout;
}

export class Limiter {
  private active = 0;
  private readonly waiting: Waiter[] = [];
  /** Start times of the running calls (performance.now()), oldest first. */
  private readonly runningSince = new Set<{ at: number }>();
  /** Calls refused since start (exposed for metrics and tests). */
  rejected = 0;
  /** Of those, calls that waited `maxWaitMs` without starting. */
  expired = 0;

  /** Moving average of how long a call held its slot (ms); 0 until one finished. */
  private avgMs = 0;
  constructor(
    readonly name: string,
    readonly concurrency: number,
    readonly queue: number,
    readonly maxWaitMs = Infinity,
  ) {}

  /**
   * How long one call holds its slot: the recent average, or, before any call finished, how long
   * the oldest running one has run so far (it takes at least that).
   */
  private get callMs(): number {
    if (this.avgMs > 0) return this.avgMs;
    const oldest = this.runningSince.values().next().value;
    return oldest ? performance.now() - oldest.at : 0;
  }

  /** Expected wait of a call queued now: the calls ahead of it, `concurrency` at a time. */
  get expectedWaitMs(): number {
    return Math.ceil((this.waiting.length + 1) / this.concurrency) * this.callMs;
  }

  get running(): number {
    return this.active;
  }

  get queued(): number {
    return this.waiting.length;
  }

  /** A call asking now would be refused: every slot busy and no room (or time) to wait. */
  get full(): boolean {
    return this.active >= this.concurrency && (this.waiting.length >= this.queue || this.expectedWaitMs > this.maxWaitMs);
  }

  /** The refusal a call gets when the limiter is `full`, for callers that know before asking. */
  refuse() {
    return this.refusal();
  }

  /** Retry-After of a refusal: about one call's time (the queue moves by then), 1 s … maxWaitMs. */
  private refusal() {
    this.rejected++;
    return errors.rateLimited(retryAfterSeconds(Math.min(this.callMs, this.maxWaitMs)));
  }

  async run<T>(fn: () => T | Promise<T>): Promise<T> {
    const release = await this.acquire();
    try {
      return await fn();
    } finally {
      release();
    }
  }

  /** Wait for a slot (or throw RATE_LIMITED); resolves with its release, which may be called more than once. */
  async acquire(): Promise<() => void> {
    if (this.active >= this.concurrency) {
      if (this.full) throw this.refusal();
      await new Promise<void>((resolve, reject) => {
        const w: Waiter = { start: resolve, refuse: () => reject(this.refusal()) };
        if (Number.isFinite(this.maxWaitMs))
          w.timer = setTimeout(() => {
            const i = this.waiting.indexOf(w);
            if (i < 0) return;
            this.waiting.splice(i, 1);
            this.expired++;
            w.refuse();
          }, this.maxWaitMs);
        this.waiting.push(w);
      });
    } else this.active++;
    const mark = { at: performance.now() };
    this.runningSince.add(mark);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.runningSince.delete(mark);
      const ms = performance.now() - mark.at;
      this.avgMs = this.avgMs === 0 ? ms : this.avgMs * 0.9 + ms * 0.1;
      // Hand the slot straight to the next waiter (active stays the same), or free it.
      const next = this.waiting.shift();
      if (next) {
        clearTimeout(next.timer);
        next.start();
      } else this.active--;
    };
  }
}
