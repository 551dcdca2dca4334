/**
 * Session-token signing off the event loop (src/auth/tokens.ts, SigningKeys): one task per batch.
 * The private key crosses as PEM text and is parsed into a KeyObject once per worker thread.
 */
import { createPrivateKey, type KeyObject } from 'node:crypto';
import { signSessionsTask, type SessionBatchTask } from '../src/auth/tokens.js';

const keys = new Map<string, KeyObject>();

export function signSessions(task: SessionBatchTask): string {
  let key = keys.get(task.keyPem);
  if (!key) {
    // A controller signs with one key at a time, two across a rotation.
    if (keys.size >= 4) keys.clear();
    keys.set(task.keyPem, (key = createPrivateKey(task.keyPem)));
  }
  return signSessionsTask(task, key);
}
