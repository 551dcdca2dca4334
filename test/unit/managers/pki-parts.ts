/**
 * The parts the manager tests build their managers from, all real: the declarations' LMDB store in
 * a temp dir with its sealer, a PKI made there, and the worker pool (the built one, dist/: its
 * threads load dist/workers/tasks.js; run `npx tsc -p tsconfig.json` first, as for every test).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Test } from 'tap';
import { Store, type CollectionName, type Rec } from '../../../src/store/store.js';
import { Sealer } from '../../../src/store/sealed.js';
import { createRegistry } from '../../../src/resources/index.js';
import { loadOrCreatePki, type Pki } from '../../../src/pki/bootstrap.js';
import type { WorkerPool } from '../../../src/pool.js';

export interface Parts {
  store: Store;
  pki: Pki;
  pool: WorkerPool;
}

export async function parts(t: Test): Promise<Parts> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-managers-'));
  const store = new Store(path.join(dir, 'db'), createRegistry().collectionSpecs(), { sealer: Sealer.forPkiDir(path.join(dir, 'pki')) });
  const pki = await loadOrCreatePki(path.join(dir, 'pki'), { advertisedHost: 'localhost' });
  const { WorkerPool: Pool } = (await import(new URL('../../../dist/src/pool.js', import.meta.url).href)) as typeof import('../../../src/pool.js');
  const pool = new Pool({ threads: 1, maxQueue: 64, signingCa: { certPem: pki.signingCertPem, key: pki.signingKey } });
  t.teardown(async () => {
    await pool.close();
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return { store, pki, pool };
}

/** Records written as a test's starting state (what the resource layer would have written). */
export type Seed = [collection: CollectionName, record: Record<string, unknown> & { id: string }];

export async function seed(store: Store, records: Seed[]): Promise<void> {
  const now = Date.now();
  await store.write((tx) => {
    for (const [collection, rec] of records) tx.put(collection, { createdAt: now, updatedAt: now, tags: {}, ...rec } as Rec);
  });
}

/** The ApiError code `p` rejects with (or the error itself if it is not one). */
export async function codeOf(p: Promise<unknown> | (() => unknown)): Promise<string | undefined> {
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (e) {
    const code = (e as { code?: string }).code;
    if (typeof code === 'string') return code;
    throw e;
  }
  return undefined;
}
