/**
 * LMDB store: one environment, one database per collection (id → record), one database per
 * unique field (value → id) and per secondary index (value → ids, dupSort), and change events
 * emitted after commit.
 *
 * Writes: `store.write(tx => …)` runs the callback synchronously against the committed data plus
 * an in-memory overlay of writes that are still committing, so checks (unique names, references)
 * and the writes they guard form one atomic step on the event loop. The collected operations are
 * then committed with one `env.batch` (lmdb-js batches concurrent batches into shared durable
 * commits), so nothing is ever half-applied and 16 concurrent creators share disk syncs.
 *
 * Reads outside a write (`get`, `scan`, …) see committed data only: a response is sent after its
 * commit resolved, so a client never reads back less than it was told was written.
 */
import type { Sealer } from './sealed.js';
import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import { open, type Database, type RootDatabase } from 'lmdb';
import type { BaseRecord, CollectionName, Records } from './records.js';

export type * from './records.js';

/**
 * A record of any collection, for code that works over every collection (write.ts, list.ts,
 * integrity): its fields are `unknown` until checked. Code that names its collection gets that
 * collection's record type instead (records.ts).
 */
export type Rec = BaseRecord & { [field: string]: unknown };

/**
 * The record type of a collection: `get('identities', id)` gives an IdentityRecord. Where the
 * collection is not known (any CollectionName: a family's generic code) it is Rec.
 */
export type RecordOf<C extends CollectionName> = RecordIn<Records, C>;

/** A field of a collection's records: a misspelled or renamed field does not compile. */
export type FieldOf<C extends CollectionName> = FieldIn<Records, C>;

/** Collection name → record type: Records for the controller's store, a test's own for a test store. */
export type RecordMap = { [collection: string]: BaseRecord };
export type NameIn<M extends RecordMap> = keyof M & string;
export type RecordIn<M extends RecordMap, C extends NameIn<M>> = [NameIn<M>] extends [C] ? Rec : M[C];
export type FieldIn<M extends RecordMap, C extends NameIn<M>> = Extract<keyof RecordIn<M, C>, string>;

/**
 * Example: `{ name: 'identities', unique: ['name'], indexes: ['roleAttributes', 'authPolicyId'] }`.
 * Array-valued index fields index each element.
 */
export interface CollectionSpec<N extends string = CollectionName> {
  name: N;
  unique?: string[];
  indexes?: string[];
  /**
   * Keep the secondary indexes (`indexes`) in memory instead of in LMDB: built from the records at
   * open, changed as each commit lands. For records written at request rates (sessions), where an
   * LMDB dupSort index costs every write a B-tree update per field in the commit: a session's three
   * made LMDB's writer threads several times slower per create (docs/datastore.md).
   */
  indexesInMemory?: boolean;
}

/** A committed change; `collection` tells the record type (`if (ev.collection === 'identities') ev.after?.name`). */
export type ChangeEvent<M extends RecordMap = Records> = { [C in NameIn<M>]: ChangeOf<C, M> }[NameIn<M>];

export interface ChangeOf<C extends NameIn<M>, M extends RecordMap = Records> {
  collection: C;
  type: 'create' | 'update' | 'delete';
  id: string;
  before?: M[C];
  after?: M[C];
}

export class UniqueViolation extends Error {
  constructor(readonly collection: string, readonly field: string, readonly value: unknown) {
    super(`${collection}.${field} must be unique: ${String(value)}`);
  }
}

export type IndexKey = string | number | boolean;

/**
 * Cluster mode (src/cluster/replica.ts): the replicated log takes every write instead of the local
 * group commit, and the local environment becomes a replica applied from that log.
 */
export interface WriteOptions {
  /**
   * Cluster mode, `false`: the API sessions this write ends are not revoked on the other
   * controllers — they expired here (idle; another controller expires its copy by its own
   * activity), or every controller ends its own for the same reason (an auth-policy change).
   */
  revoke?: boolean;
}

export interface WriteLog<M extends RecordMap = Records> {
  write<T>(fn: (tx: Tx<M>) => T, opts?: WriteOptions): Promise<T>;
  /** Whether the replica is caught up with the log (readiness). */
  status(): { ready: boolean; detail: string };
  /** The log revision the replica has applied. */
  readonly applied: number;
  /**
   * Log transactions sent, writes they carried, writes run again (failed guard, or a write in
   * flight they read), seconds spent waiting for the log's answers, replica transactions applied
   * and the seconds they took.
   */
  readonly stats: { txns: number; writes: number; retries: number; waits: number; txnSeconds: number; applies: number; applySeconds: number };
  close(): Promise<void>;
}

/**
 * What a write read, so the log can guard it (cluster mode only). `pending` says the value came
 * from a write still in flight: the write then waits for that one and runs again. `present` is
 * what the read found committed (a record, a unique value held), so the guard need not read again.
 */
export interface ReadTracker {
  record(coll: Coll, id: string, pending: boolean, present: boolean): void;
  unique(coll: Coll, field: string, key: IndexKey, pending: boolean, present: boolean): void;
  range(coll: Coll, pending: boolean): void;
}

export interface Coll {
  spec: CollectionSpec<string>;
  db: Database<Rec, string>;
  unique: Map<string, Database<string, IndexKey>>;
  indexes: Map<string, Database<string, IndexKey>>;
  /** Secondary indexes kept in memory (CollectionSpec.indexesInMemory). */
  memory: Map<string, MemoryIndex>;
  /** Writes issued but not yet committed: id → record, or null for a delete. */
  pending: Map<string, Rec | null>;
  /**
   * Per unique field, value → id of the latest write still committing that gives a record that
   * value: a unique check asks it, the committed index and its own writes instead of going over
   * every pending write (a bulk import keeps thousands in flight).
   */
  pendingUnique: Map<string, Map<IndexKey, string>>;
  /** Committed names by id (nameOf); an entry goes when its record's write commits. */
  names: Map<string, string | null>;
}

/**
 * A secondary index in memory: index key → ids. It answers as an LMDB dupSort index does: ids of a
 * key in order, keys in order (strings by UTF-16 code unit, which is LMDB's byte order for the
 * ASCII ids and references held here).
 */
export class MemoryIndex {
  private readonly byKey = new Map<IndexKey, Set<string>>();

  add(key: IndexKey, id: string) {
    let ids = this.byKey.get(key);
    if (!ids) this.byKey.set(key, (ids = new Set()));
    ids.add(id);
  }

  remove(key: IndexKey, id: string) {
    const ids = this.byKey.get(key);
    if (!ids) return;
    ids.delete(id);
    if (ids.size === 0) this.byKey.delete(key);
  }

  has(key: IndexKey): boolean {
    return this.byKey.has(key);
  }

  ids(key: IndexKey): string[] {
    const ids = this.byKey.get(key);
    return ids ? [...ids].sort() : [];
  }

  keys(): IndexKey[] {
    return [...this.byKey.keys()].sort(compareKeys);
  }

  *range({ start, end, reverse, offset = 0, limit }: { start?: IndexKey; end?: IndexKey; reverse?: boolean; offset?: number; limit?: number }): Iterable<string> {
    // As LMDB ranges: forward from `start` (inclusive) to `end`; reverse down from `start` to `end`.
    const keys = reverse
      ? this.keys().filter((k) => (start === undefined || compareKeys(k, start) <= 0) && (end === undefined || compareKeys(k, end) > 0)).reverse()
      : this.keys().filter((k) => (start === undefined || compareKeys(k, start) >= 0) && (end === undefined || compareKeys(k, end) < 0));
    let skip = offset;
    let left = limit ?? Infinity;
    for (const k of keys) {
      const ids = this.ids(k);
      if (reverse) ids.reverse();
      for (const id of ids) {
        if (skip > 0) {
          skip--;
          continue;
        }
        if (left-- <= 0) return;
        yield id;
      }
    }
  }
}

/**
 * The entry where a collection's msgpack record shapes live (lmdb-js shared structures): a record
 * then names its shape in a byte instead of carrying its own definition — an identity of
 * bench:policy's model a third of the size and several times faster to decode (docs/datastore.md).
 * Records written before carry their own definition and read as before.
 */
export const STRUCTURES = Symbol.for('mesh.structures');

/** LMDB's order of index keys: booleans, then numbers, then strings. */
const keyRank = (k: IndexKey) => (typeof k === 'boolean' ? 0 : typeof k === 'number' ? 1 : 2);
const compareKeys = (a: IndexKey, b: IndexKey): number => keyRank(a) - keyRank(b) || (a < b ? -1 : a > b ? 1 : 0);

/** Names kept per collection (nameOf); past this the collection's names are dropped and refilled. */
const MAX_NAMES = 100_000;

export interface Op {
  coll: Coll;
  id: string;
  before?: Rec;
  after?: Rec;
}

/** The change event of a committed op; its collection's spec names the record type it carries. */
const changeOf = (op: Op): ChangeEvent =>
  ({ collection: op.coll.spec.name, type: op.before ? (op.after ? 'update' : 'delete') : 'create', id: op.id, before: op.before, after: op.after }) as ChangeEvent;

/**
 * LMDB keys are at most 1978 bytes. A longer string is indexed under its first 400 characters
 * plus a SHA-256 of the whole, so equality and uniqueness stay exact and order stays close.
 */
const LONG_KEY = 480;
/** Index keys at least this long may be digests, not the value itself. */
export const DIGEST_PREFIX = 400;
const keyOf = (k: IndexKey): IndexKey =>
  typeof k === 'string' && k.length > LONG_KEY ? `${k.slice(0, DIGEST_PREFIX)}\u001fsha256:${createHash('sha256').update(k).digest('hex')}` : k;

/** The index keys a field value is stored under (arrays: one per scalar element; long strings digested). */
export const indexKeys = (v: unknown): IndexKey[] => {
  if (v === undefined || v === null) return [];
  if (Array.isArray(v)) return (v.filter((x) => x !== null && x !== undefined && typeof x !== 'object') as IndexKey[]).map(keyOf);
  if (typeof v === 'object') return [];
  return [keyOf(v as IndexKey)];
};

/** Store.stamp: the committed state of a data file. */
export interface StoreStamp {
  lastTxnId: number;
  inode: number;
}

export class Store<M extends RecordMap = Records> extends EventEmitter {
  readonly env: RootDatabase;
  private readonly colls = new Map<string, Coll>();
  private closed = false;
  /** Cluster mode: writes go through the replicated log (src/cluster/replica.ts). */
  readonly cluster?: WriteLog<M>;
  private readonly sealerOrUnset?: Sealer;
  private readonly noSync: boolean;

  /**
   * `noSync`: a cluster replica (src/cluster/replica-dir.ts), durable in etcd, not here.
   * `sealer`: what seals the secrets kept in records (sealed.ts); a store without one stores and
   * reads none (the offline tools that need none). In a cluster, the cluster's shared key.
   * `writeLog`: cluster mode, the replicated log this store is the replica of (it makes the store).
   */
  constructor(readonly dir: string, specs: CollectionSpec<NoInfer<NameIn<M>>>[], opts: { noSync?: boolean; sealer?: Sealer; writeLog?: WriteLog<M> } = {}) {
    super();
    this.noSync = opts.noSync === true;
    this.sealerOrUnset = opts.sealer;
    this.cluster = opts.writeLog;
    this.setMaxListeners(50);
    fs.mkdirSync(dir, { recursive: true });
    // overlappingSync off: a write resolves only once it is synced to disk, so nothing the API has
    // acknowledged can be lost by a crash. Measured: no throughput cost here (bench/crud, README).
    this.env = open({ path: dir, maxDbs: 256, mapSize: 2 * 1024 ** 3, compression: false, overlappingSync: false, noSync: opts.noSync === true });
    for (const spec of specs) this.addCollection(spec);
    this.dropUndeclaredIndexes();
  }

  /** Seals the secrets kept in records (sealed.ts), as given at construction. */
  get sealer(): Sealer {
    if (!this.sealerOrUnset) throw new Error('no sealer set on the store: secrets cannot be stored or read');
    return this.sealerOrUnset;
  }

  /**
   * Index databases no collection declares any more (an index removed from src/resources, e.g.
   * the token indexes of API sessions and sessions) are dropped at open: they would only take
   * space and be copied into every snapshot. Record databases are never dropped.
   */
  private dropUndeclaredIndexes() {
    const declared = new Set<string>();
    for (const c of this.colls.values()) {
      for (const f of c.unique.keys()) declared.add(`u:${c.spec.name}:${f}`);
      for (const f of c.indexes.keys()) declared.add(`i:${c.spec.name}:${f}`);
    }
    const stale = [...this.env.getKeys({})].filter((k): k is string => typeof k === 'string' && /^[ui]:/.test(k) && !declared.has(k));
    for (const name of stale) (this.env.openDB({ name, dupSort: name.startsWith('i:'), create: false } as { name: string }) as Database | undefined)?.dropSync();
  }

  private addCollection(spec: CollectionSpec<string>) {
    const coll: Coll = {
      spec,
      db: this.env.openDB<Rec, string>({ name: `c:${spec.name}`, sharedStructuresKey: STRUCTURES }),
      unique: new Map(),
      indexes: new Map(),
      memory: new Map(),
      pending: new Map(),
      pendingUnique: new Map(spec.unique?.map((f) => [f, new Map()])),
      names: new Map(),
    };
    for (const f of spec.unique ?? []) coll.unique.set(f, this.env.openDB({ name: `u:${spec.name}:${f}` }));
    if (spec.indexesInMemory) {
      for (const f of spec.indexes ?? []) coll.memory.set(f, new MemoryIndex());
      for (const { key: id, value: rec } of coll.db.getRange({})) this.indexInMemory(coll, id, undefined, rec);
    } else for (const f of spec.indexes ?? []) coll.indexes.set(f, this.openIndex(coll, f));
    this.colls.set(spec.name, coll);
  }

  /**
   * A secondary index added to an existing collection (a new `index` field in src/resources) has
   * no database in a data directory written by an older version: it is created and filled from
   * the collection's records in one transaction, here at open, so it never starts out missing
   * entries, and a crash midway leaves no half-built index (it is built again at the next open).
   * (Not done for unique indexes: adding one to existing data would first need a duplicate check.)
   */
  private openIndex(coll: Coll, field: string): Database<string, IndexKey> {
    const name = `i:${coll.spec.name}:${field}`;
    // `create: false` (an lmdb-js option its types omit): undefined when the database does not exist.
    const existing = this.env.openDB<string, IndexKey>({ name, dupSort: true, create: false } as { name: string; dupSort: boolean }) as Database<string, IndexKey> | undefined;
    if (existing) return existing;
    if ((coll.db.getStats() as { entryCount: number }).entryCount === 0) return this.env.openDB({ name, dupSort: true });
    let db!: Database<string, IndexKey>;
    this.env.transactionSync(() => {
      db = this.env.openDB({ name, dupSort: true });
      for (const { key: id, value: rec } of coll.db.getRange({})) for (const k of indexKeys(rec[field])) db.putSync(k, id);
    });
    return db;
  }

  collections(): CollectionSpec<NameIn<M>>[] {
    return [...this.colls.values()].map((c) => c.spec);
  }

  private coll(name: NameIn<M>): Coll {
    const c = this.colls.get(name);
    if (!c) throw new Error(`unknown collection ${name}`);
    return c;
  }

  isUnique<C extends NameIn<M>>(collection: C, field: FieldIn<M, C>): boolean {
    return this.coll(collection).unique.has(field);
  }

  isIndexed<C extends NameIn<M>>(collection: C, field: FieldIn<M, C>): boolean {
    const c = this.coll(collection);
    return c.unique.has(field) || c.indexes.has(field) || c.memory.has(field);
  }

  // ---- committed reads -------------------------------------------------------------------

  get<C extends NameIn<M>>(collection: C, id: string): RecordIn<M, C> | undefined {
    if (typeof id !== 'string' || id.length === 0 || id.length > 480) return undefined;
    return this.coll(collection).db.get(id) as RecordIn<M, C> | undefined;
  }

  /** Committed records of a collection, from LMDB's page statistics (O(1), unlike getCount()). */
  /** Whether a record exists, without decoding it. */
  has(collection: NameIn<M>, id: string): boolean {
    if (typeof id !== 'string' || id.length === 0 || id.length > 480) return false;
    return this.coll(collection).db.doesExist(id);
  }

  /**
   * The `name` of a record (null without one), for entity references: a page or a session renders
   * the names of what it points at, and decoding a whole service or identity for its name cost more
   * than the rest of the render. Kept per record until a commit changes that record (flush).
   */
  nameOf(collection: NameIn<M>, id: string): string | null | undefined {
    const c = this.coll(collection);
    let name = c.names.get(id);
    if (name !== undefined) return name;
    const rec = this.get(collection, id) as Rec | undefined;
    if (!rec) return undefined;
    name = typeof rec.name === 'string' ? rec.name : null;
    if (c.names.size >= MAX_NAMES) c.names.clear();
    c.names.set(id, name);
    return name;
  }

  count(collection: NameIn<M>): number {
    const { db } = this.coll(collection);
    const n = (db.getStats() as { entryCount: number }).entryCount;
    // The shapes' entry counts in LMDB's statistics (getRange and getKeys skip it).
    return n > 0 && db.doesExist(STRUCTURES as unknown as string) ? n - 1 : n;
  }

  /** Ids in order, optionally starting after `offset` records; no record is decoded. */
  *ids(collection: NameIn<M>, opts: { offset?: number; limit?: number } = {}): Iterable<string> {
    for (const key of this.coll(collection).db.getKeys({ offset: opts.offset, limit: opts.limit })) yield key;
  }

  /** Records in id order, optionally starting after `offset` records. */
  *scan<C extends NameIn<M>>(collection: C, opts: { offset?: number; limit?: number } = {}): Iterable<RecordIn<M, C>> {
    for (const { value } of this.coll(collection).db.getRange({ offset: opts.offset, limit: opts.limit })) yield value as RecordIn<M, C>;
  }

  findUnique<C extends NameIn<M>>(collection: C, field: FieldIn<M, C>, value: unknown): RecordIn<M, C> | undefined {
    const c = this.coll(collection);
    const idx = c.unique.get(field);
    if (!idx) throw new Error(`${collection}.${field} is not unique-indexed`);
    const keys = indexKeys(value);
    if (keys.length !== 1) return undefined;
    const id = idx.get(keys[0]);
    return id === undefined ? undefined : (c.db.get(id) as RecordIn<M, C> | undefined);
  }

  /** Ids whose `field` equals (or, for arrays, contains) `value`, in index order. */
  idsByIndex<C extends NameIn<M>>(collection: C, field: FieldIn<M, C>, value: unknown): string[] {
    const c = this.coll(collection);
    const keys = indexKeys(value);
    if (keys.length !== 1) return [];
    const u = c.unique.get(field);
    if (u) {
      const id = u.get(keys[0]);
      return id === undefined ? [] : [id];
    }
    const mem = c.memory.get(field);
    if (mem) return mem.ids(keys[0]);
    const idx = c.indexes.get(field);
    if (!idx) throw new Error(`${collection}.${field} is not indexed`);
    return [...idx.getValues(keys[0])];
  }

  /** Whether any record has `value` in the indexed `field`, without reading the ids. */
  anyByIndex<C extends NameIn<M>>(collection: C, field: FieldIn<M, C>, value: unknown): boolean {
    const c = this.coll(collection);
    const keys = indexKeys(value);
    if (keys.length !== 1) return false;
    const mem = c.memory.get(field);
    if (mem) return mem.has(keys[0]);
    const db = c.unique.get(field) ?? c.indexes.get(field);
    if (!db) throw new Error(`${collection}.${field} is not indexed`);
    return db.doesExist(keys[0]);
  }

  /** Ids in index-key order between bounds (inclusive start, exclusive end unless noted). */
  *idsByRange<C extends NameIn<M>>(
    collection: C,
    field: FieldIn<M, C>,
    range: { start?: IndexKey; end?: IndexKey; reverse?: boolean; offset?: number; limit?: number } = {},
  ): Iterable<string> {
    const c = this.coll(collection);
    const mem = c.memory.get(field);
    if (mem) {
      yield* mem.range(range);
      return;
    }
    const idx = c.unique.get(field) ?? c.indexes.get(field);
    if (!idx) throw new Error(`${collection}.${field} is not indexed`);
    const { start, end, reverse, offset, limit } = range;
    for (const { value } of idx.getRange({ start, end, reverse, offset, limit })) yield value;
  }

  /** `[value, id]` pairs of a unique index, in value order: a scan that decodes no record. */
  *uniqueEntries<C extends NameIn<M>>(collection: C, field: FieldIn<M, C>): Iterable<[IndexKey, string]> {
    const idx = this.coll(collection).unique.get(field);
    if (!idx) throw new Error(`${collection}.${field} is not unique-indexed`);
    for (const { key, value } of idx.getRange({})) yield [key as IndexKey, value];
  }

  /** Distinct keys of an index (e.g. every role attribute in use), in key order. */
  *indexKeys<C extends NameIn<M>>(collection: C, field: FieldIn<M, C>): Iterable<IndexKey> {
    const c = this.coll(collection);
    const mem = c.memory.get(field);
    if (mem) {
      yield* mem.keys();
      return;
    }
    const idx = c.unique.get(field) ?? c.indexes.get(field);
    if (!idx) throw new Error(`${collection}.${field} is not indexed`);
    for (const key of idx.getKeys()) yield key as IndexKey;
  }

  /**
   * For bulk loads (the role index at start-up): the ids of every entry of an LMDB index, in key
   * order, each given as its UTF-8 bytes `bytes[start..end)`, valid only during the call (lmdb-js's
   * read buffer), so that a caller matching ids against ones it already holds makes no string per
   * entry; `id()` decodes one. `onKey` (secondary indexes only) is told each key before its ids.
   */
  scanIndexIdBytes<C extends NameIn<M>>(
    collection: C,
    field: FieldIn<M, C>,
    visit: (bytes: Uint8Array, start: number, end: number, id: () => string) => void,
    onKey?: (key: IndexKey) => void,
  ): void {
    const c = this.coll(collection);
    const unique = c.unique.get(field);
    const idx = unique ?? c.indexes.get(field);
    if (!idx) throw new Error(`${collection}.${field} is not indexed in LMDB`);
    const ids = (idx as unknown as { decoder: { decode(bytes: Uint8Array, end: number): string } }).decoder;
    let current: Uint8Array = new Uint8Array(0);
    let currentSize = 0;
    const id = () => ids.decode(current, currentSize);
    // A second handle on the same database whose decoder is the visit: lmdb-js hands a decoder
    // that copies nothing its read buffer as it is. An id is a msgpack string: its header, then its UTF-8.
    const raw = this.env.openDB<number, IndexKey>({
      name: `${unique ? 'u' : 'i'}:${collection}:${field}`,
      dupSort: !unique,
      encoder: {
        encode: () => {
          throw new Error('read-only handle');
        },
        decode: (bytes: Uint8Array, size: number) => {
          current = bytes;
          currentSize = size;
          const b = bytes[0];
          const start = (b & 0xe0) === 0xa0 ? 1 : b === 0xd9 ? 2 : b === 0xda ? 3 : b === 0xdb ? 5 : -1;
          if (start > 0) visit(bytes, start, size, id);
          else {
            const utf8 = Buffer.from(id());
            visit(utf8, 0, utf8.length, id);
          }
          return 0;
        },
      },
    } as { name: string });
    if (unique) {
      for (const _ of raw.getRange({})) void _;
      return;
    }
    for (const key of raw.getKeys()) {
      onKey?.(key as IndexKey);
      for (const _ of raw.getValues(key)) void _;
    }
  }

  // ---- writes ----------------------------------------------------------------------------

  /**
   * Run `fn` synchronously as one atomic write. Throwing inside `fn` applies nothing.
   * Resolves with `fn`'s result once the write is durable; change events fire just before.
   */
  async write<T>(fn: (tx: Tx<M>) => T, opts?: WriteOptions): Promise<T> {
    if (this.closed) throw new Error('store is closed');
    if (this.cluster) return this.cluster.write(fn, opts);
    return this.writeLocal(fn);
  }

  /**
   * A write of this controller's own environment only, never through the cluster's log: records a
   * controller keeps for itself in cluster mode (API sessions and sessions it holds). On a single
   * node it is `write`.
   */
  async writeLocal<T>(fn: (tx: Tx<M>) => T): Promise<T> {
    if (this.closed) throw new Error('store is closed');
    const tx = new Tx<M>(this);
    const result = fn(tx);
    await this.commitLocal(tx.finish());
    return result;
  }

  /** Commit finished ops into this environment (the group commit); resolves once durable. */
  commitLocal(ops: Op[]): Promise<void> {
    if (ops.length === 0) return Promise.resolve();
    for (const op of ops) {
      op.coll.pending.set(op.id, op.after ?? null);
      for (const [field, held] of op.coll.pendingUnique) for (const k of indexKeys(op.after?.[field])) held.set(k, op.id);
    }
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ ops, resolve, reject });
      this.scheduleFlush();
    });
  }

  /**
   * Group commit: one LMDB transaction at a time; every write issued while it commits waits for
   * the next one, which takes them all. Each write stays atomic and they apply in issue order; one
   * commit (and its two syncs) serves them all. Flushing every event-loop turn instead split 16
   * closed-loop clients into ~3 transactions queued behind each other (5 writes per commit, each
   * waiting ~6 ms): commits, not CPU, bounded the write rate.
   */
  private queue: { ops: Op[]; raw?: () => void; resolve: () => void; reject: (e: unknown) => void }[] = [];
  private flushScheduled = false;
  private committing = false;
  /** Group-commit statistics (metrics): transactions, writes they carried, time from start to durable. */
  readonly commitStats = { commits: 0, writes: 0, seconds: 0 };

  private scheduleFlush() {
    if (this.flushScheduled || this.committing) return;
    this.flushScheduled = true;
    setImmediate(() => this.flush());
  }

  private flush() {
    this.flushScheduled = false;
    const items = this.queue.splice(0);
    if (items.length === 0) return;
    this.committing = true;
    const started = performance.now();
    const next = () => {
      this.commitStats.commits++;
      this.commitStats.writes += items.length;
      this.commitStats.seconds += (performance.now() - started) / 1000;
      this.committing = false;
      // The writes that queued meanwhile start committing now, before the answers of this commit
      // (its writers' continuations run as microtasks after this callback) are rendered and sent:
      // LMDB's writer thread then works while the main thread answers.
      if (this.queue.length > 0) this.flush();
    };
    const clearPending = () => {
      for (const { ops } of items) {
        for (const op of ops) {
          // Only clear what this write put there; a later write of the same id keeps its entry.
          if (op.coll.pending.get(op.id) === (op.after ?? null)) op.coll.pending.delete(op.id);
          // Kept while a later write still committing gives the record the same value.
          const later = op.coll.pending.get(op.id);
          for (const [field, held] of op.coll.pendingUnique)
            for (const k of indexKeys(op.after?.[field])) if (held.get(k) === op.id && !indexKeys(later?.[field]).includes(k)) held.delete(k);
        }
      }
    };
    let committed: Promise<unknown>;
    try {
      committed = this.env.batch(() => {
        for (const { ops, raw } of items) {
          for (const op of ops) this.applyOp(op);
          raw?.();
        }
      });
    } catch (err) {
      committed = Promise.reject(err);
    }
    // LMDB's writer thread has the commit: work its writers will need once it lands (session
    // tokens) is done meanwhile.
    this.emit('committing');
    committed.then(
      () => {
        // In-memory indexes change as the records do, before the pending overlay goes.
        for (const { ops } of items) for (const op of ops) this.indexInMemory(op.coll, op.id, op.before, op.after);
        clearPending();
        for (const { ops } of items) for (const op of ops) op.coll.names.delete(op.id);
        try {
          for (const { ops, resolve } of items) {
            const events = ops.map(changeOf);
            if (events.length) this.emit('change', events);
            resolve();
          }
        } finally {
          next();
        }
      },
      (err) => {
        clearPending();
        for (const { reject } of items) reject(err);
        next();
      },
    );
  }

  /**
   * Cluster mode: apply changes that came from the log, and the log revision they bring the replica
   * to, in one LMDB transaction; `before` of each change is read from the replica. Change events
   * fire after the commit, as for local writes. With `replaceAll` every record not listed (and not
   * kept: records this controller keeps for itself) is
   * deleted (a full load), so the events describe exactly the difference.
   */
  async applyReplicated(changes: { collection: string; id: string; after?: Rec }[], meta: Record<string, unknown>, replaceAll = false, keep?: (collection: NameIn<M>, id: string) => boolean): Promise<ChangeEvent[]> {
    const ops: Op[] = [];
    const listed = replaceAll ? new Set<string>() : undefined;
    for (const ch of changes) {
      const coll = this.colls.get(ch.collection);
      if (!coll) continue;
      listed?.add(`${ch.collection}\u0000${ch.id}`);
      ops.push({ coll, id: ch.id, after: ch.after });
    }
    if (listed) {
      for (const coll of this.colls.values())
        for (const id of coll.db.getKeys({}) as Iterable<string>) if (!listed.has(`${coll.spec.name}\u0000${id}`) && !keep?.(coll.spec.name, id)) ops.push({ coll, id });
    }
    const metaDb = this.metaDb();
    const apply = () => {
      for (const op of ops) {
        op.before = op.coll.db.get(op.id);
        if (op.before || op.after) this.applyOp(op);
      }
      for (const [k, v] of Object.entries(meta)) metaDb.put(k, v);
    };
    // A replica without sync commits in memory: applied on this thread at once, it costs a third
    // to a half of the CPU per record of an async transaction, whose callback is handed between
    // LMDB's writer thread and this one (docs/cluster.md). A synced replica keeps its fsync off
    // the event loop, and so does a full load (it may hold the whole model).
    if (this.noSync && !replaceAll) this.env.transactionSync(apply);
    else await this.env.transaction(apply);
    for (const op of ops) if (op.before || op.after) this.indexInMemory(op.coll, op.id, op.before, op.after);
    const events: ChangeEvent[] = [];
    for (const op of ops) {
      if (!op.before && !op.after) continue;
      op.coll.names.delete(op.id);
      events.push(changeOf(op));
    }
    if (events.length) this.emit('change', events);
    return events;
  }

  private meta?: Database<unknown, string>;
  /** Replica bookkeeping (cluster mode): the applied log revision and which log it follows. */
  metaDb(): Database<unknown, string> {
    return (this.meta ??= this.env.openDB<unknown, string>({ name: 'm:cluster' }));
  }

  /** Move a record's entries in its collection's in-memory indexes from `before` to `after`. */
  private indexInMemory(coll: Coll, id: string, before: Rec | undefined, after: Rec | undefined) {
    for (const [field, idx] of coll.memory) {
      const oldK = indexKeys(before?.[field]);
      const newK = indexKeys(after?.[field]);
      for (const k of oldK) if (!newK.includes(k)) idx.remove(k, id);
      for (const k of newK) if (!oldK.includes(k)) idx.add(k, id);
    }
  }

  private applyOp({ coll, id, before, after }: Op) {
    for (const [field, db] of coll.unique) {
      const oldK = indexKeys(before?.[field]);
      const newK = indexKeys(after?.[field]);
      for (const k of oldK) if (!newK.includes(k) && db.get(k) === id) db.remove(k);
      for (const k of newK) db.put(k, id);
    }
    for (const [field, db] of coll.indexes) {
      const oldK = indexKeys(before?.[field]);
      const newK = indexKeys(after?.[field]);
      for (const k of oldK) if (!newK.includes(k)) db.remove(k, id);
      for (const k of newK) if (!oldK.includes(k)) db.put(k, id);
    }
    if (after) coll.db.put(id, after);
    else coll.db.remove(id);
  }


  /**
   * Integrity repairs (src/store/integrity.ts): `fn` runs inside the next group commit, in order
   * with the record writes around it, and may put or remove index entries directly through
   * `_coll(name)`. It must re-check what it repairs against `pending` (writes still committing).
   * No change events: records are not changed.
   */
  async repairRaw(fn: () => void): Promise<void> {
    if (this.closed) throw new Error('store is closed');
    await new Promise<void>((resolve, reject) => {
      this.queue.push({ ops: [], raw: fn, resolve, reject });
      this.scheduleFlush();
    });
    // Index entries changed without record events: whatever was derived from them is stale.
    this.emit('repaired');
  }

  private marks?: Database<unknown, string>;
  /**
   * A durable commit that changes no record (it stamps a bookkeeping key): for a path that must
   * take as long as a write it does not make (a login for an unknown username, timed against a
   * wrong password whose count is written). An empty batch would not do: LMDB does not sync it.
   */
  async commitMark(): Promise<void> {
    if (this.closed) throw new Error('store is closed');
    if (this.cluster) {
      await this.cluster.write(() => undefined);
      return;
    }
    const marks = (this.marks ??= this.env.openDB<unknown, string>({ name: 'm:marks' }));
    const at = Date.now();
    await new Promise<void>((resolve, reject) => {
      this.queue.push({ ops: [], raw: () => marks.put('lastMark', at), resolve, reject });
      this.scheduleFlush();
    });
  }

  /**
   * Close, leaving the data file compacted: each B-tree rewritten on contiguous pages, no free
   * pages. For a store just filled by large bulk transactions (src/cli/import.ts): their freed
   * pages made a freelist that every later commit paid for on LMDB's writer thread (session
   * creates at half the rate, docs/datastore.md), and their index pages lay between record pages,
   * so reading the indexes at start-up mapped most of the file.
   */
  async closeCompacted(): Promise<void> {
    const tmp = `${this.dir}.compacting`;
    fs.rmSync(tmp, { recursive: true, force: true });
    fs.mkdirSync(tmp);
    try {
      await this.env.backup(tmp, true);
    } finally {
      await this.close();
    }
    // One rename over the data file: a crash leaves the old file or the new one, each whole.
    fs.renameSync(`${tmp}/data.mdb`, `${this.dir}/data.mdb`);
    fs.rmSync(tmp, { recursive: true, force: true });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.cluster?.close();
    await this.settled();
    await this.env.close();
  }

  /** Once every write already queued for the group commit is on disk. */
  async settled(): Promise<void> {
    while (this.queue.length > 0 || this.flushScheduled || this.committing) await new Promise((r) => setImmediate(r));
    await this.env.flushed;
  }

  /**
   * What tells this data file's committed state from any other: LMDB's last transaction id (every
   * write transaction, of this process or any other, moves it) and the file's inode (a restore
   * or a compaction replaces the file). Equal stamps: nothing was written in between.
   */
  stamp(): StoreStamp {
    const { lastTxnId } = this.env.getStats() as { lastTxnId: number };
    return { lastTxnId, inode: fs.statSync(path.join(this.dir, 'data.mdb')).ino };
  }

  /** Internal, for Tx. */
  _coll(name: NameIn<M>): Coll {
    return this.coll(name);
  }
}

/** A write in progress: reads see committed data, then writes still committing, then this tx's own writes. */
const MAX_RECORD_DEPTH = 64;

function tooDeep(value: unknown, limit: number): boolean {
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length) {
    const [v, d] = stack.pop()!;
    if (d > limit) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v as object)) if (child !== null && typeof child === 'object') stack.push([child, d + 1]);
  }
  return false;
}

export class Tx<M extends RecordMap = Records> {
  private readonly ops = new Map<string, Op>();
  /** `collection \0 field \0 key` → id of this tx's latest write giving a record that unique value. */
  private readonly ownUnique = new Map<string, string>();

  constructor(
    private readonly store: Store<M>,
    /** Cluster mode: told about every read, so the write can be guarded in the log. */
    private readonly track?: ReadTracker,
  ) {}

  private key(coll: NameIn<M>, id: string) {
    return `${coll}\u0000${id}`;
  }

  get<C extends NameIn<M>>(collection: C, id: string): RecordIn<M, C> | undefined {
    if (typeof id !== 'string' || id.length === 0 || id.length > 480) return undefined;
    return this.getRec(collection, id) as RecordIn<M, C> | undefined;
  }

  private getRec(collection: NameIn<M>, id: string): Rec | undefined {
    const own = this.ops.get(this.key(collection, id));
    if (own) return own.after;
    const c = this.store._coll(collection);
    if (c.pending.has(id)) {
      this.track?.record(c, id, true, false);
      return c.pending.get(id) ?? undefined;
    }
    const rec = c.db.get(id);
    this.track?.record(c, id, false, rec !== undefined);
    return rec;
  }

  exists(collection: NameIn<M>, id: string): boolean {
    if (typeof id !== 'string' || id.length === 0 || id.length > 480) return false;
    const own = this.ops.get(this.key(collection, id));
    if (own) return own.after !== undefined;
    const c = this.store._coll(collection);
    if (c.pending.has(id)) {
      this.track?.record(c, id, true, false);
      return c.pending.get(id) != null;
    }
    const present = this.store.has(collection, id);
    this.track?.record(c, id, false, present);
    return present;
  }

  /** Store.nameOf as this tx sees the record. */
  nameOf(collection: NameIn<M>, id: string): string | null | undefined {
    const c = this.store._coll(collection);
    if (!this.ops.has(this.key(collection, id)) && !c.pending.has(id)) {
      const name = this.store.nameOf(collection, id);
      this.track?.record(c, id, false, name !== undefined);
      return name;
    }
    const rec = this.getRec(collection, id);
    return rec ? (typeof rec.name === 'string' ? rec.name : null) : undefined;
  }

  /** Ids with `field` = value (arrays: containing it), including uncommitted writes. */
  idsByIndex<C extends NameIn<M>>(collection: C, field: FieldIn<M, C>, value: unknown): string[] {
    const committed = this.store.idsByIndex(collection, field, value);
    const out = new Set(committed);
    const c = this.store._coll(collection);
    let fromPending = false;
    const overlay = (id: string, rec: Rec | null | undefined) => {
      const has = rec != null && (Array.isArray(rec[field]) ? rec[field].includes(value) : rec[field] === value);
      if (has) out.add(id);
      else out.delete(id);
    };
    for (const [id, rec] of c.pending) {
      if (this.track && !fromPending) fromPending = out.has(id) || (rec != null && (Array.isArray(rec[field]) ? rec[field].includes(value) : rec[field] === value));
      overlay(id, rec);
    }
    if (this.track) {
      const keys = indexKeys(value);
      if (c.unique.has(field) && keys.length === 1) this.track.unique(c, field, keys[0], fromPending, committed.length > 0);
      else this.track.range(c, fromPending);
    }
    for (const op of this.ops.values()) if (op.coll === c) overlay(op.id, op.after);
    return [...out];
  }

  findUnique<C extends NameIn<M>>(collection: C, field: FieldIn<M, C>, value: unknown): RecordIn<M, C> | undefined {
    for (const id of this.idsByIndex(collection, field, value)) {
      const rec = this.get(collection, id);
      if (rec && rec[field] === value) return rec;
    }
    return undefined;
  }

  /**
   * findUnique in O(1) (no read tracking: single node): the only records that can hold `value` are
   * its committed holder and the latest pending and own writes giving it; each is read as this tx
   * sees it now, since a later write may have changed it.
   */
  private uniqueHolder(c: Coll, field: string, value: unknown): Rec | undefined {
    const keys = indexKeys(value);
    if (keys.length !== 1) return undefined;
    const collection = c.spec.name;
    const candidates = [c.unique.get(field)!.get(keys[0]), c.pendingUnique.get(field)!.get(keys[0]), this.ownUnique.get(`${collection}\u0000${field}\u0000${keys[0]}`)];
    for (const id of candidates) {
      if (id === undefined) continue;
      const rec: Rec | undefined = this.get(collection, id);
      if (rec && rec[field] === value) return rec;
    }
    return undefined;
  }

  /** Insert or replace a record; unique fields are checked against everything else. */
  put<C extends NameIn<M>>(collection: C, rec: RecordIn<M, C>): void {
    // The encoder recurses: refuse here what would overflow its stack inside the commit.
    if (tooDeep(rec, MAX_RECORD_DEPTH)) throw new Error(`${collection}/${rec.id}: record nested more than ${MAX_RECORD_DEPTH} levels deep`);
    const c = this.store._coll(collection);
    const r: Rec = rec;
    for (const field of c.unique.keys()) {
      const v = r[field];
      if (v === undefined || v === null) continue;
      const holder = this.track ? this.findUnique(collection, field as FieldIn<M, C>, v) : this.uniqueHolder(c, field, v);
      if (holder && holder.id !== rec.id) throw new UniqueViolation(collection, field, v);
    }
    for (const field of c.unique.keys()) for (const key of indexKeys(r[field])) this.ownUnique.set(`${collection}\u0000${field}\u0000${key}`, rec.id);
    const k = this.key(collection, rec.id);
    const existing = this.ops.get(k);
    if (existing) existing.after = r;
    else this.ops.set(k, { coll: c, id: rec.id, before: this.getRec(collection, rec.id), after: r });
  }

  delete(collection: NameIn<M>, id: string): boolean {
    const before = this.getRec(collection, id);
    if (!before) return false;
    const k = this.key(collection, id);
    const existing = this.ops.get(k);
    if (existing) existing.after = undefined;
    else this.ops.set(k, { coll: this.store._coll(collection), id, before, after: undefined });
    return true;
  }

  /** Every record of a collection as this tx sees it (committed ∪ pending ∪ own). Scans; use sparingly. */
  *scan<C extends NameIn<M>>(collection: C): Iterable<RecordIn<M, C>> {
    const c = this.store._coll(collection);
    this.track?.range(c, c.pending.size > 0);
    const seen = new Set<string>();
    for (const rec of this.store.scan(collection)) {
      seen.add(rec.id);
      const cur = this.get(collection, rec.id);
      if (cur) yield cur;
    }
    for (const id of c.pending.keys()) {
      if (seen.has(id)) continue;
      seen.add(id);
      const cur = this.get(collection, id);
      if (cur) yield cur;
    }
    for (const op of this.ops.values()) if (op.coll === c && !seen.has(op.id) && op.after) yield op.after as RecordIn<M, C>;
  }

  finish(): Op[] {
    // A create followed by a delete in the same tx is no write at all.
    return [...this.ops.values()].filter((op) => op.before || op.after);
  }
}
