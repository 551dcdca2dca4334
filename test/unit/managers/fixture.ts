/**
 * What the manager tests share: a real LMDB store with every family's declaration in a temp
 * directory (closed and removed at teardown), records put as they are stored, and the code and
 * field of a refusal.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';
import { Store } from '../../../src/store/store.js';
import { createRegistry } from '../../../src/resources/index.js';
import { ApiError } from '../../../src/core/errors.js';

export function openStore(t: Test, name: string) {
  const reg = createRegistry();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `mesh-${name}-`));
  const store = new Store(path.join(dir, 'db'), reg.collectionSpecs());
  t.teardown(async () => {
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return { reg, store, dir };
}

/** Put records as stored (with their times), in one write. */
export async function put(store: Store, collection: string, ...recs: ({ id: string } & Record<string, unknown>)[]): Promise<void> {
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
