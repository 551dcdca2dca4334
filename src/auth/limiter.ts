/**
 * A bounded queue in front of expensive work (logins, MFA checks, certificate signing): at most
 * `concurrency` calls run at once, at most `queue` more wait their turn, and any call beyond that
 * is refused at once with 429 RATE_LIMITED. Nothing ever waits without bound.
 *
 * Example: `await limiter.run(() => login(ctx))` → the login's result, or throws RATE_LIMITED.
 */
import { errors } from '../core/errors.js';

export class Limiter {
  private active = 0;
  private readonly waiting: Array<() => void> = [];
  /** Calls refused since start (exposed for metrics and tests). */
  rejected = 0;

  constructor(
    readonly name: string,
    readonly concurrency: number,
    readonly queue: number,
  ) {}

  get running(): number {
    return this.active;
  }

  get queued(): number {
    return this.waiting.length;
  }

  async run<T>(fn: () => T | Promise<T>): Promise<T> {
    if (this.active >= this.concurrency) {
      if (this.waiting.length >= this.queue) {
        this.rejected++;
        throw errors.rateLimited();
      }
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else this.active++;
    try {
      return await fn();
    } finally {
      // Hand the slot straight to the next waiter (active stays the same), or free it.
      const next = this.waiting.shift();
      if (next) next();
      else this.active--;
    }
  }
}
