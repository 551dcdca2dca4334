/**
 * Moving in and out of a cluster (docs/cluster.md):
 * - `importDataDir`: every record of a single-node data directory (and its root and signing CA)
 *   into an empty cluster prefix, with the unique-value keys the cluster's guards rely on;
 * - `exportDataDir`: every record of a cluster prefix, read at one pinned revision, into a new
 *   data directory a single node can start from (with the shared CA).
 * Neither runs against a directory a controller has open.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Etcd3, IRequestOp } from 'etcd3';
import { indexKeys, type Rec, type Store } from '../store/store.js';
import { PKI_FILES } from '../pki/bootstrap.js';
import { isLocal, packr } from './replica.js';
import { prefixEnd } from './watch.js';

const SHARED_PKI = ['rootCert', 'rootKey', 'intermediateCert', 'intermediateKey'] as const;
/** Operations per etcd transaction (etcd's default limit is 128). */
const OPS_PER_TXN = 100;

const enc = (k: string | number | boolean) => `${typeof k === 'string' ? 's' : typeof k === 'number' ? 'n' : 'b'}:${String(k)}`;

export async function importDataDir(client: Etcd3, prefix: string, store: Store, pkiDir: string): Promise<{ records: number }> {
  const records = `${prefix}/c/`;
  const existing = await client.kv.range({ key: Buffer.from(records), range_end: Buffer.from(prefixEnd(records)), keys_only: true, limit: 50 });
  if (existing.kvs.some((kv) => !kv.key.toString().startsWith(`${records}~`))) throw new Error(`the cluster prefix ${prefix} already holds records: import only into an empty prefix`);
  let ops: IRequestOp[] = [];
  let count = 0;
  const flush = async () => {
    if (ops.length) await client.kv.txn({ compare: [], success: ops, failure: [] });
    ops = [];
  };
  for (const spec of store.collections()) {
    for (const rec of store.scan(spec.name) as Iterable<Rec>) {
      // API sessions and sessions stay with the controller that made them: clients log in again.
      if (isLocal(spec.name, rec)) continue;
      ops.push({ request_put: { key: Buffer.from(`${records}${spec.name}/${rec.id}`), value: packr.pack(rec) } });
      for (const field of spec.unique ?? []) for (const k of indexKeys(rec[field])) ops.push({ request_put: { key: Buffer.from(`${prefix}/u/${spec.name}/${field}/${enc(k)}`), value: Buffer.from(rec.id) } });
      count++;
      if (ops.length >= OPS_PER_TXN) await flush();
    }
  }
  await flush();
  if (SHARED_PKI.every((f) => fs.existsSync(path.join(pkiDir, PKI_FILES[f])))) {
    const key = (f: string) => Buffer.from(`${prefix}/pki/${f}`);
    await client.kv.txn({
      compare: [{ key: key('rootCert'), target: 'Version', result: 'Equal', version: 0 }],
      success: SHARED_PKI.map((f) => ({ request_put: { key: key(f), value: fs.readFileSync(path.join(pkiDir, PKI_FILES[f])) } })),
      failure: [],
    });
  }
  return { records: count };
}

export async function exportDataDir(client: Etcd3, prefix: string, store: Store, pkiDir: string): Promise<{ records: number; revision: number }> {
  const records = `${prefix}/c/`;
  const start = Buffer.from(records);
  const end = Buffer.from(prefixEnd(records));
  const head = await client.kv.range({ key: start, range_end: end, limit: 1, keys_only: true });
  const revision = Number(head.header.revision);
  const changes: { collection: string; id: string; after: Rec }[] = [];
  let from = start;
  for (;;) {
    const page = await client.kv.range({ key: from, range_end: end, revision, limit: 2000 });
    for (const kv of page.kvs) {
      const rest = kv.key.toString().slice(records.length);
      const slash = rest.indexOf('/');
      if (slash <= 0 || rest.startsWith('~')) continue;
      changes.push({ collection: rest.slice(0, slash), id: rest.slice(slash + 1), after: packr.unpack(kv.value) as Rec });
    }
    if (!page.more || page.kvs.length === 0) break;
    from = Buffer.concat([page.kvs[page.kvs.length - 1].key, Buffer.from([0])]);
  }
  await store.applyReplicated(changes, {}, true);
  fs.mkdirSync(pkiDir, { recursive: true, mode: 0o700 });
  for (const f of SHARED_PKI) {
    const v = await client.get(`${prefix}/pki/${f}`).buffer();
    if (v) fs.writeFileSync(path.join(pkiDir, PKI_FILES[f]), v, { mode: f.endsWith('Key') ? 0o600 : 0o644 });
  }
  return { records: changes.length, revision };
}
