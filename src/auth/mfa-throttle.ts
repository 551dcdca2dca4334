/**
 * Brute-force brake for MFA codes. A 6-digit TOTP accepted within ±2 steps gives a guess about a
 * 1-in-200,000 chance; without a brake a partially authenticated caller could simply try them
 * all. After `maxFailures` wrong codes for one identity within `windowMs`, every MFA code check
 * of that identity answers 429 RATE_LIMITED until the window has passed; a good code resets.
 * In memory: a restart forgives, which costs an attacker a controller restart per window.
 */
import { ApiError, errors, retryAfterSeconds } from '../core/errors.js';

export class MfaThrottle {
  private readonly failures = new Map<string, { count: number; since: number }>();

  constructor(
    readonly maxFailures = 10,
    readonly windowMs = 10 * 60_000,
  ) {}

  /** Throws RATE_LIMITED while the identity is braked. */
  check(identityId: string, now = Date.now()): void {
    const f = this.failures.get(identityId);
    if (!f) return;
    if (now - f.since > this.windowMs) this.failures.delete(identityId);
    else if (f.count >= this.maxFailures) throw errors.rateLimited(retryAfterSeconds(f.since + this.windowMs - now));
  }

  fail(identityId: string, now = Date.now()): void {
    const f = this.failures.get(identityId);
    if (!f || now - f.since > this.windowMs) {
      if (this.failures.size > 100_000) this.failures.clear();
      this.failures.set(identityId, { count: 1, since: now });
    } else f.count++;
  }

  succeed(identityId: string): void {
    this.failures.delete(identityId);
  }

  /** Run a code check under the brake: braked → 429; a wrong code counts, a good one clears the count. */
  async guard<T>(identityId: string, fn: () => T | Promise<T>): Promise<T> {
    this.check(identityId);
    try {
      const out = await fn();
      this.succeed(identityId);
      return out;
    } catch (e) {
      if (e instanceof ApiError && e.code === 'MFA_INVALID_TOKEN') this.fail(identityId);
      throw e;
    }
  }
}
