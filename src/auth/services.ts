/**
 * The authentication services the API needs beyond the store: the external JWT verifier (key
 * caches) and the bounded queues that rate-limit expensive operations. One instance per
 * controller, at `app.auth`.
 */
import type { Config } from '../config.js';
import type { Store } from '../store/store.js';
import { ExtJwtVerifier } from './ext-jwt.js';
import { Limiter } from './limiter.js';
import { MfaThrottle } from './mfa-throttle.js';
import type { RateLimit } from '../core/operation.js';


export class AuthServices {
  readonly extJwt: ExtJwtVerifier;
  readonly limits: Record<RateLimit, Limiter>;
  /**
   * Lists that have taken 8 ms of main-thread work (large answers: core/slices.ts): each holds
   * its page and its answer in memory while it runs, so only this many go on at once and a few wait.
   */
  readonly largeAnswers: Limiter;
  /** Wrong MFA codes per identity (src/auth/mfa-throttle.ts). */
  readonly mfaThrottle = new MfaThrottle();

  constructor(store: Store, config: Config) {
    this.extJwt = new ExtJwtVerifier(store, {
      jwksCooldownMs: config.extJwtJwksCooldownMs,
      jwksTimeoutMs: 5000,
      jwksMaxAgeMs: 10 * 60_000,
      clockToleranceS: config.extJwtClockSkewSeconds,
    });
    this.limits = {
      auth: new Limiter('auth', config.authConcurrency, config.authQueue, config.queueMaxWaitMs),
      heavy: new Limiter('heavy', config.heavyConcurrency, config.heavyQueue, config.queueMaxWaitMs),
    };
    this.largeAnswers = new Limiter('large-answers', config.largeAnswerConcurrency, config.largeAnswerQueue, config.queueMaxWaitMs);
  }
}
