/**
 * Identifiers: upstream-style short random ids (request ids, MFA ids) and the time-ordered ids of
 * every stored entity. Random bytes come from a pool refilled 4 KiB at a time.
 */
import crypto from 'node:crypto';

const ID_ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-';

/** Random bytes drawn from a pre-filled pool: one getrandom call per 4 KiB instead of one per id. */
const pool = Buffer.allocUnsafe(4096);
let poolAt = pool.length;
export function randomBytes(n: number): Buffer {
  if (poolAt + n > pool.length) {
    crypto.randomFillSync(pool);
    poolAt = 0;
  }
  poolAt += n;
  return pool.subarray(poolAt - n, poolAt);
}

/** Short random id in upstream's shortid alphabet (`len` chars, 6 bits each). */
export function shortId(len = 9): string {
  const bytes = randomBytes(len);
  let s = '';
  for (let i = 0; i < len; i++) s += ID_ALPHABET[bytes[i] & 63];
  return s;
}

/** The same 64 characters in byte order, so that the ids below sort like the numbers they encode. */
const SORTED_ALPHABET = '-.0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
let lastMs = 0;
let counter = 0;

/**
 * Entity ids that sort in creation order: 7 characters of milliseconds, 2 of a per-process counter
 * (strictly increasing within a process, even if the clock steps back), 3 random (72 bits, 12
 * characters). LMDB keeps records and index entries in key order, so random ids scatter every
 * commit over as many B-tree pages as it has records (each page copied and synced); ids that grow
 * land on the last page, and a commit of the same creates took about half as long
 * (docs/benchmarks.md, "Measurements behind the code").
 */
export function timeOrderedId(): string {
  const now = Date.now();
  if (now > lastMs) {
    lastMs = now;
    counter = 0;
  } else if (++counter >= 4096) {
    lastMs++;
    counter = 0;
  }
  let s = '';
  let t = lastMs;
  for (let i = 0; i < 7; i++) {
    s = SORTED_ALPHABET[t % 64] + s;
    t = Math.floor(t / 64);
  }
  s += SORTED_ALPHABET[counter >> 6] + SORTED_ALPHABET[counter & 63];
  const bytes = randomBytes(3);
  for (let i = 0; i < 3; i++) s += SORTED_ALPHABET[bytes[i] & 63];
  return s;
}
