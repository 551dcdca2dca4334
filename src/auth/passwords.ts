/** Password rules of an identity's auth policy, applied wherever a password is set. */
import crypto from 'node:crypto';
import { errors } from '../core/errors.js';
import type { CoreApp } from '../core/context.js';
import type { HashPasswordInput } from './argon2.js';
import type { IdentityRecord } from '../store/store.js';

/**
 * The worker pool's password tasks (src/pool.ts, a layer above: the composition passes the pool
 * in as this): argon2id hashing and verifying off the event loop.
 */
export interface PasswordHashing {
  run(task: 'hashPassword', input: HashPasswordInput): Promise<string>;
  run(task: 'verifyPassword', input: { hash: string; password: string }): Promise<boolean>;
}

/** What password handling needs of the application. */
export interface PasswordApp extends CoreApp {
  pool: PasswordHashing;
}

export function checkPassword(app: Pick<CoreApp, 'store'>, identity: IdentityRecord, password: unknown, field = 'password'): string {
  if (typeof password !== 'string' || password.length === 0) throw errors.field(field, 'is required', password);
  const policy = app.store.get('authPolicies', identity.authPolicyId ?? 'default');
  const rules = policy?.primary?.updb;
  const min = Math.max(5, rules?.minPasswordLength ?? 5);
  if (password.length < min) throw errors.field(field, `must be at least ${min} characters`, undefined);
  if (password.length > 100) throw errors.field(field, 'must be at most 100 characters', undefined);
  if (rules?.requireMixedCase && !(/[a-z]/.test(password) && /[A-Z]/.test(password)))
    throw errors.field(field, 'must contain upper and lower case letters', undefined);
  if (rules?.requireNumberChar && !/[0-9]/.test(password)) throw errors.field(field, 'must contain a number', undefined);
  if (rules?.requireSpecialChar && !/[^A-Za-z0-9]/.test(password)) throw errors.field(field, 'must contain a special character', undefined);
  return password;
}

/** UPDB usernames: 4 to 100 characters (the upstream `username` schema). */
export function checkUsername(username: unknown, field = 'username'): string {
  if (typeof username !== 'string' || username.length === 0) throw errors.field(field, `${field} is required`, username ?? null);
  if (username.length < 4) throw errors.field(field, `${field} must be at least 4 characters long`, username);
  if (username.length > 100) throw errors.field(field, `${field} must be at most 100 characters long`, username);
  return username;
}

export function hashPassword(app: Pick<PasswordApp, 'config' | 'pool'>, password: string): Promise<string> {
  const c = app.config;
  return app.pool.run('hashPassword', { password, memoryCost: c.argon2MemoryKiB, timeCost: c.argon2Iterations, parallelism: c.argon2Parallelism });
}

const dummyHashes = new WeakMap<PasswordApp, Promise<string>>();

/**
 * A hash made with this controller's configured cost, of a password nobody knows: what a login
 * for an unknown username verifies against, so it costs what a wrong password for a known one
 * does (a fixed hash of another cost would tell the two apart by time). Made once per controller.
 */
export function dummyPasswordHash(app: PasswordApp): Promise<string> {
  let h = dummyHashes.get(app);
  if (!h) dummyHashes.set(app, (h = hashPassword(app, crypto.randomBytes(24).toString('base64url'))));
  return h;
}
