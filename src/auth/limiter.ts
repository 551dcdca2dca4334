/**
 * A bounded queue in front of expensive work (logins, MFA checks, certificate signing): at most
 * `concurrency` calls run at once, at most `queue` more wait their turn, and any call beyond that
 * is refused at once with 429 RATE_LIMITED. Nothing ever waits without bound: a call is also
 * refused when the wait it would have, judged from how long recent calls took, exceeds
 * `maxWaitMs` (a client gives up sooner than a long queue drains, and its slot would be wasted).
 *
 * Example: `await limiter.run(() => login(ctx))` → the login's result, or throws RATE_LIMITED.
 */
import { errors } from '../core/errors.js';

export class Limiter {
  private active = 0;
  private readonly waiting: Array<() => void> = [];
  /** Calls refused since start (exposed for metrics and tests). */
  rejected = 0;

  /** Moving average of how long a call held its slot (ms); 0 until one finished. */
  private avgMs = 0;
  constructor(
    readonly name: string,
    readonly concurrency: number,
    readonly queue: number,
    readonly maxWaitMs = Infinity,
  ) {}
  /** Expected wait of a call queued now: the calls ahead of it, `concurrency` at a time. */
  get expectedWaitMs(): number {
    return Math.ceil((this.waiting.length + 1) / this.concurrency) * this.avgMs;
  }

  get running(): number {
    return this.active;
  }

  get queued(): number {
    return this.waiting.length;
  }

  async run<T>(fn: () => T | Promise<T>): Promise<T> {
    if (this.active >= this.concurrency) {
      if (this.waiting.length >= this.queue || this.expectedWaitMs > this.maxWaitMs) {
        this.rejected++;
        throw errors.rateLimited();
      }
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else this.active++;
    const started = performance.now();
    try {
      return await fn();
    } finally {
      const ms = performance.now() - started;
      this.avgMs = this.avgMs === 0 ? ms : this.avgMs * 0.9 + ms * 0.1;
      // Hand the slot straight to the next waiter (active stays the same), or free it.
      const next = this.waiting.shift();
      if (next) next();
      else this.active--;
    }
  }
}
