/**
 * Password hashing, run in the worker pool (src/pool.ts task `hashPassword` / `verifyPassword`)
 * and by the offline CLI. @node-rs/argon2 (argon2id, Rust via N-API): the `argon2` package's
 * prebuilt binary crashes on load on our machines, and the N-API build needs no compiler.
 */
import { hash, verify } from '@node-rs/argon2';

/** @node-rs/argon2's `Algorithm.Argon2id` (a const enum, not importable at run time). */
const ARGON2ID = 2;

export interface HashPasswordInput {
  password: string;
  memoryCost: number;
  timeCost: number;
  parallelism: number;
}

/** argon2id PHC string (salt and parameters embedded). */
export async function hashPassword(input: HashPasswordInput): Promise<string> {
  return hash(input.password, {
    algorithm: ARGON2ID,
    memoryCost: input.memoryCost,
    timeCost: input.timeCost,
    parallelism: input.parallelism,
  });
}

/** Constant-time verification of a password against a PHC string. */
export async function verifyPassword(input: { hash: string; password: string }): Promise<boolean> {
  try {
    return await verify(input.hash, input.password);
  } catch {
    return false;
  }
}
