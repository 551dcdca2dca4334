/**
 * Search queries of the embedded search store, run in the worker pool (src/pool.ts task
 * `searchDocs`), off the event loop: the worker opens the same LMDB environment (lmdb-js shares it
 * between threads) and reads only the time slice the query's `@timestamp` range selects.
 */
import { openSearchEnv, readDocs } from './search-store.js';
import { compileSearch, executeSearch, SearchError } from './query.js';

const envs = new Map<string, ReturnType<typeof openSearchEnv>>();

export interface SearchInput {
  dir: string;
  indices: string[];
  body: unknown;
  now: number;
}

export type SearchOutput = { ok: true; body: Record<string, unknown> } | { ok: false; status: number; type: string; reason: string };

export function searchDocs(input: SearchInput): SearchOutput {
  const started = performance.now();
  let opened = envs.get(input.dir);
  if (!opened) envs.set(input.dir, (opened = openSearchEnv(input.dir)));
  // Always read the latest commit, whatever this thread read before.
  opened.docs.resetReadTxn();
  try {
    const c = compileSearch(input.body, input.now);
    const docs = readDocs(opened.docs, input.indices, c.bounds.from, c.bounds.to);
    return { ok: true, body: executeSearch(c, docs, () => Math.round(performance.now() - started)) };
  } catch (e) {
    if (e instanceof SearchError) return { ok: false, status: e.status, type: e.type, reason: e.message };
    throw e;
  }
}
