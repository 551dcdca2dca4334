/**
 * What the manager unit tests build on: a real LMDB store (with its sealer) in a temporary
 * directory, started signing keys and the API sessions over them, gone at the test's end.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';
import { Store, type Rec } from '../../../src/store/store.js';
import { Sealer } from '../../../src/store/sealed.js';
import { createRegistry } from '../../../src/resources/index.js';
import { SigningKeys } from '../../../src/auth/tokens.js';
import { ApiSessions } from '../../../src/auth/api-sessions.js';
import { hashPassword } from '../../../src/auth/argon2.js';

export async function managerStore(t: Test) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-managers-'));
  const store = new Store(path.join(dir, 'db'), createRegistry().collectionSpecs(), { sealer: Sealer.forPkiDir(path.join(dir, 'pki')) });
  const keys = new SigningKeys(store, dir, { controllerId: 'c1', rotationMs: 3_600_000 });
  await keys.start();
  const sessions = new ApiSessions(store, keys, { timeoutMinutes: 30, flushMs: 60_000, issuer: () => 'https://ctrl.test' });
  t.teardown(async () => {
    await sessions.close();
    keys.close();
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return { dir, store, keys, sessions };
}

/** The cheapest argon2id the library takes: these tests check rules, not cost. */
export const quickHash = (password: string) => hashPassword({ password, memoryCost: 1024, timeCost: 1, parallelism: 1 });

const base = (id: string) => ({ id, createdAt: Date.now(), updatedAt: Date.now(), tags: {} });

/** An identity (optionally under an auth policy) with a password authenticator. */
export async function userWithPassword(store: Store, name: string, password: string, extra: Record<string, unknown> = {}): Promise<Rec> {
  const identity = { ...base(`id-${name}`), name, type: 'User', isAdmin: false, roleAttributes: [], ...extra } as Rec;
  const passwordHash = await quickHash(password);
  await store.write((tx) => {
    tx.put('identities', identity);
    tx.put('authenticators', { ...base(`auth-${name}`), method: 'updb', identityId: identity.id, username: name, passwordHash } as Rec);
  });
  return identity;
}

export const authPolicy = (id: string, fields: Record<string, unknown>) => ({ ...base(id), name: id, primary: {}, secondary: {}, ...fields }) as Rec;
