/**
 * What the manager tests share: a real LMDB store (with its sealer) holding every family's
 * declaration in a temporary directory, closed and removed at teardown; signing keys and API
 * sessions over it; records put as they are stored; and the code and field of a refusal.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';
import { Store, type CollectionName, type Rec } from '../../../src/store/store.js';
import { Sealer } from '../../../src/store/sealed.js';
import { createRegistry } from '../../../src/resources/index.js';
import { ApiError } from '../../../src/core/errors.js';
import { SigningKeys } from '../../../src/auth/tokens.js';
import { ApiSessions } from '../../../src/auth/api-sessions.js';
import { hashPassword } from '../../../src/auth/argon2.js';

function makeStore(name: string) {
  const reg = createRegistry();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `mesh-${name}-`));
  const store = new Store(path.join(dir, 'db'), reg.collectionSpecs(), { sealer: Sealer.forPkiDir(path.join(dir, 'pki')) });
  const close = async () => {
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  };
  return { reg, store, dir, close };
}

export function openStore(t: Test, name = 'managers') {
  const { reg, store, dir, close } = makeStore(name);
  t.teardown(close);
  return { reg, store, dir };
}

/** A store with started signing keys and the API sessions over them. */
export async function managerStore(t: Test) {
  const { store, dir, close } = makeStore('managers');
  const keys = new SigningKeys(store, dir, { controllerId: 'c1', rotationMs: 3_600_000 });
  await keys.start();
  const sessions = new ApiSessions(store, keys, { timeoutMinutes: 30, flushMs: 60_000, issuer: () => 'https://ctrl.test' });
  t.teardown(async () => {
    await sessions.close();
    keys.close();
    await close();
  });
  return { dir, store, keys, sessions };
}

/** Put records as stored (with their times), in one write. */
export async function put(store: Store, collection: CollectionName, ...recs: ({ id: string } & Record<string, unknown>)[]): Promise<void> {
  const now = Date.now();
  await store.write((tx) => {
    for (const r of recs) tx.put(collection, { tags: {}, ...r, createdAt: (r.createdAt as number) ?? now, updatedAt: (r.updatedAt as number) ?? now });
  });
}

/** The ApiError `fn` throws (code, HTTP status, cause field), or `{}` when it does not throw. */
export async function refusal(fn: () => unknown): Promise<{ code?: string; status?: number; field?: string }> {
  try {
    await fn();
  } catch (e) {
    if (e instanceof ApiError) {
      const field = (e.errorCause as { field?: string } | undefined)?.field;
      return field === undefined ? { code: e.code, status: e.status } : { code: e.code, status: e.status, field };
    }
    throw e;
  }
  return {};
}

/** The cheapest argon2id the library takes: these tests check rules, not cost. */
export const quickHash = (password: string) => hashPassword({ password, memoryCost: 1024, timeCost: 1, parallelism: 1 });

const base = (id: string) => ({ id, createdAt: Date.now(), updatedAt: Date.now(), tags: {} });

/** An identity (optionally under an auth policy) with a password authenticator. */
export async function userWithPassword(store: Store, name: string, password: string, extra: Record<string, unknown> = {}): Promise<Rec> {
  const identity = { ...base(`id-${name}`), name, type: 'User', isAdmin: false, roleAttributes: [], ...extra } as Rec;
  const passwordHash = await quickHash(password);
  await store.write((tx) => {
    tx.put<CollectionName>('identities', identity);
    tx.put<CollectionName>('authenticators', { ...base(`auth-${name}`), method: 'updb', identityId: identity.id, username: name, passwordHash } as Rec);
  });
  return identity;
}

export const authPolicy = (id: string, fields: Record<string, unknown>) => ({ ...base(id), name: id, primary: {}, secondary: {}, ...fields }) as Rec;
