/**
 * Cluster mode: the model lives in etcd v3; this controller's LMDB environment is a replica fed by
 * etcd's watch, and every write goes to etcd as a guarded transaction.
 *
 * Keys (P = the cluster prefix, e.g. `/mesh`):
 *   P/c/<collection>/<id>               a record (msgpack, as LMDB stores it)
 *   P/u/<collection>/<field>/<t>:<key>  a unique value → the id holding it (t: s, n or b)
 *   P/c/~sync/<controller id>           a marker this controller writes to learn it has caught up
 *
 * Writes. `write(fn)` runs `fn` against the replica (plus this controller's writes in flight),
 * as on a single node, while a ReadTracker notes what it read: records (present or absent), unique
 * values, and whole collections read through a secondary index or a scan. Each write becomes one
 * etcd sub-transaction whose guards say "nothing I read changed since the revision my replica had
 * when I read it" (present: mod_revision ≤ R and version > 0; absent: version = 0; a collection:
 * every key's mod_revision ≤ R, plus each record read in it, as a range compare misses deletions). Writes issued while a transaction is in flight are sent together
 * as the next one: one etcd transaction holding one guarded sub-transaction per write, so one
 * failed guard fails only its own write. A write whose guard failed waits until the replica has
 * applied the revision that failed it and runs `fn` again: it then meets the state that made it
 * fail and gives the answer a single node gives (a duplicate name, a missing reference…). A write
 * that read another write still in flight waits for that one first and runs again. A write is
 * answered once the replica has applied its revision, so a client reads its own writes here.
 *
 * Replica. The watch on P/c/ applies every revision in one LMDB transaction together with the
 * revision itself; the store then emits the usual change events (role index, caches). A restart
 * resumes the watch from the stored revision; a compacted revision, another etcd cluster or
 * prefix, or an empty data directory means a full load at one pinned revision, during which the
 * replica reports not ready.
 *
 * API sessions, sessions and API-session certificates are kept by the controller that holds them
 * (LOCAL_COLLECTIONS): their writes commit to this controller's environment only. What other
 * controllers must learn goes through etcd as small leased keys in the same transaction as the
 * write that causes it: `P/c/~revoked/<api session id>` when an API session is ended (not when it
 * expires idle here), `P/c/~revoked-identity/<identity id>` when an identity is disabled (every
 * API session made before is over), `P/c/~as/<api session id>` when its MFA state changes
 * (src/cluster/sessions.ts), `P/c/~sessions-removed/<controller id>.<uuid>` when a write deletes
 * sessions (dial/bind), so every controller tells its own routers (the control channel's
 * `session-removed`).
 * An OIDC API session stays a replicated record: its refresh state must be one on every controller.
 */
import fs from 'node:fs';
import { randomUUID } from 'node:crypto';
import { Etcd3, type ICompare, type IRequestOp, type ITxnResponse } from 'etcd3';
import { prefixEnd, watchPrefix, type Watch, type WatchEvent } from './watch.js';
import { noop } from 'cockatiel';
import { Packr } from 'msgpackr';
import type { Logger } from 'pino';
import { Store, Tx, type CollectionSpec, type Coll, type IndexKey, type Op, type ReadTracker, type Rec, type WriteLog, type WriteOptions } from '../store/store.js';
import type { Sealer } from '../store/sealed.js';
import { indexKeys } from '../store/store.js';
import { ClusterUnavailable, WriteContention } from './errors.js';

export { ClusterUnavailable, WriteContention };

export interface ClusterSettings {
  endpoints: string[];
  prefix: string;
  caFile?: string;
  certFile?: string;
  keyFile?: string;
  username?: string;
  password?: string;
}

/** Attempts of one write whose guards fail before it gives up with WriteContention. */
const MAX_ATTEMPTS = 50;
/** etcd's default --max-txn-ops: sub-transactions per transaction, and guards or ops per sub-transaction. */
const MAX_TXN_OPS = 128;
/** Bytes of values per transaction, under etcd's default 1.5 MiB request limit. */
const MAX_TXN_BYTES = 1024 * 1024;
/** Records read in a collection guarded as a whole that also get a guard of their own (deletions). */
const RANGE_RECORD_GUARDS = 16;
/** The longest a transaction waits for more writes (group commit sizing, `send`). */
const LINGER_MAX_MS = 20;
/**
 * The longest a write waits for etcd, from its start: then it is answered 503
 * CLUSTER_HAS_NO_LEADER (docs/cluster.md promises this bound). It covers every wait of the write
 * (a transaction in flight ahead of it, its own, a lease grant, the replica applying it), not each
 * call: with one bound per call a write queued behind a stalled transaction took two of them.
 */
export const WRITE_TIMEOUT_MS = 5000;
/** Other etcd calls (the catch-up marker) that should answer within this. */
const CALL_TIMEOUT_MS = 5000;
/**
 * Readiness probe, every PROBE_INTERVAL_MS, writing nothing (requests add no etcd revision): a
 * linearizable read, which etcd answers only with a leader and a quorum (a member without quorum
 * still serves reads of its own and the watch, so the watch alone never noticed), and a progress
 * request on the watch stream, which a live member answers; each within PROBE_TIMEOUT_MS. And the
 * watch must keep up: what it delivered by the previous probe must be applied by this one.
 */
const PROBE_INTERVAL_MS = 1000;
const PROBE_TIMEOUT_MS = 2000;

/** Collections each controller keeps for itself in cluster mode (docs/cluster.md). */
export const LOCAL_COLLECTIONS = new Set(['apiSessions', 'sessions', 'apiSessionCertificates']);
/** Whether a record stays on this controller: of a local collection, and not an OIDC API session. */
export const isLocal = (collection: string, rec: Rec | undefined) => LOCAL_COLLECTIONS.has(collection) && !(collection === 'apiSessions' && rec?.oidc);

/**
 * How long a revocation (or an MFA state) stays in etcd. A controller that never saw an API
 * session takes it from its token only while the token is younger than this (sessions.ts), so no
 * token outlives the record that revokes it.
 */
export const SESSION_NEWS_RETENTION_MS = 24 * 3600_000;
/** One lease serves the session news of this long (fewer lease grants; each key lives at most this much longer). */
const NEWS_LEASE_SLICE_MS = 3600_000;

/** What this controller learns of API sessions held elsewhere, from the watch. */
export interface SessionNews {
  /** API sessions ended (id → identity id). */
  revoked: { id: string; identityId: string; at: number }[];
  /**
   * Identities whose API sessions made before the disable are all ended: made by a controller
   * whose replica had not applied `revision` (the news key's), or, for a token that does not say,
   * until `at` (ms, the disabling controller's clock).
   */
  identities: { id: string; at: number; revision: number }[];
  /** API sessions whose MFA state changed. */
  states: { id: string; isMfaRequired: boolean; isMfaComplete: boolean; mfaPassedAt?: number }[];
  /** Sessions (dial/bind) another controller deleted: its id, and the `jti` of its token. */
  sessions: { id: string; jti: string }[];
}

/** Sessions named per `~sessions-removed` key (a mass removal takes a few keys, not one per session). */
const REMOVED_SESSIONS_PER_KEY = 1000;

// Records are stored in etcd exactly as msgpack, so what a replica decodes is what was written.
export const packr = new Packr({ useRecords: false, moreTypes: true });

export function connect(s: ClusterSettings): Etcd3 {
  return new Etcd3({
    hosts: s.endpoints,
    dialTimeout: 3000,
    credentials: s.caFile
      ? {
          rootCertificate: fs.readFileSync(s.caFile),
          ...(s.certFile && s.keyFile ? { certChain: fs.readFileSync(s.certFile), privateKey: fs.readFileSync(s.keyFile) } : {}),
        }
      : undefined,
    auth: s.username ? { username: s.username, password: s.password ?? '' } : undefined,
    // No automatic retry of a call on another member: a transaction retried after a timeout may
    // already have been applied. Each write decides itself (guards, then a 503).
    faultHandling: { global: noop },
  });
}

/**
 * Whether a failed etcd call means "no leader / not reachable now" (503, try again) rather than a
 * request etcd will never take (too many operations, too large): everything but the latter, since
 * the requests themselves are built here.
 */
function isUnavailable(e: unknown): boolean {
  return !/too many operations|too large|duplicate key|permission denied|invalid argument/i.test(String((e as Error)?.message ?? e));
}

const enc = (k: IndexKey) => `${typeof k === 'string' ? 's' : typeof k === 'number' ? 'n' : 'b'}:${String(k)}`;

class Reads implements ReadTracker {
  /** etcd key → [collection, present when read]. */
  readonly recs = new Map<string, [Coll, boolean]>();
  readonly ranges = new Set<Coll>();
  /** Collections with a write in flight that this write read: it waits for them and runs again. */
  readonly waits = new Set<Coll>();

  constructor(private readonly keys: Keys) {}

  record(c: Coll, id: string, pending: boolean, present: boolean) {
    // This controller's own records (API sessions, sessions) are read and written here only; an
    // OIDC API session is replicated, and guarded like any record (its refresh token rotates once).
    // Only an API session is read to tell (one more LMDB read of it per such read in a write).
    if (LOCAL_COLLECTIONS.has(c.spec.name) && isLocal(c.spec.name, c.spec.name === 'apiSessions' ? (c.db.get(id) as Rec | undefined) : undefined)) return;
    if (pending) return void this.waits.add(c);
    const k = this.keys.rec(c.spec.name, id);
    if (!this.recs.has(k)) this.recs.set(k, [c, present]);
  }

  unique(c: Coll, field: string, key: IndexKey, pending: boolean, present: boolean) {
    if (LOCAL_COLLECTIONS.has(c.spec.name)) return;
    if (pending) return void this.waits.add(c);
    const k = this.keys.unique(c.spec.name, field, key);
    if (!this.recs.has(k)) this.recs.set(k, [c, present]);
  }

  range(c: Coll, pending: boolean) {
    if (LOCAL_COLLECTIONS.has(c.spec.name)) return;
    if (pending) this.waits.add(c);
    this.ranges.add(c);
  }
}

class Keys {
  readonly records: string;
  constructor(readonly prefix: string) {
    this.records = `${prefix}/c/`;
  }
  rec(coll: string, id: string) {
    return `${this.records}${coll}/${id}`;
  }
  unique(coll: string, field: string, key: IndexKey) {
    return `${this.prefix}/u/${coll}/${field}/${enc(key)}`;
  }
  collection(coll: string) {
    return `${this.records}${coll}/`;
  }
}

interface Queued {
  txn: { compare: ICompare[]; success: IRequestOp[] };
  keys: string[];
  bytes: number;
  /** Resolves with the revision: the write's own when it succeeded, else the one that failed its guards. */
  done: (r: { ok: boolean; revision: number }) => void;
  /** When the write is answered 503 (Date.now() ms): not sent after it, and etcd told to give up by then. */
  deadline: number;
  fail: (e: unknown) => void;
  /** Times this write was sent again because the first attempt never reached etcd. */
  resent?: number;
}

/**
 * Local ops as they stand now: between the write and its etcd round trip the same record may have
 * changed here (another controller's revocation ended it): `before` is read again, and an op that
 * changes nothing any more is dropped, so change events stay exact.
 */
function current(ops: Op[]): Op[] {
  const out: Op[] = [];
  for (const op of ops) {
    const before = op.coll.pending.has(op.id) ? (op.coll.pending.get(op.id) ?? undefined) : op.coll.db.get(op.id);
    if (!before && !op.after) continue;
    out.push({ ...op, before });
  }
  return out;
}

export class Cluster implements WriteLog {
  readonly keys: Keys;
  /** The replica: this controller's LMDB environment, made here, whose every write goes through this log. */
  readonly store: Store;
  /** The last log revision applied to the replica. */
  applied = 0;
  private watch?: Watch;
  /** The newest revision the watch delivered, and what it was at the previous probe. */
  private received = 0;
  private receivedAtProbe = 0;
  private ready = false;
  private detail = 'starting';
  /** Whether the watch stream is up (its last event was `connected`, not `disconnected`). */
  private watching = false;
  /** A catch-up (sync) is under way: the probe does not declare the replica ready meanwhile. */
  private syncing = false;
  private probeTimer?: NodeJS.Timeout;
  private closed = false;
  private applying: Promise<void> = Promise.resolve();
  /** Watch events received and not yet handed to an LMDB transaction. */
  private arrived: WatchEvent[] = [];
  private waiters: { revision: number; resolve: () => void }[] = [];
  /** Writes sent to etcd or waiting to be, per collection they write: a write that read one waits. */
  private readonly inFlight = new Map<Coll, Set<Promise<unknown>>>();
  private queue: Queued[] = [];
  private sending = false;
  private logId = '';
  /** Statistics: etcd transactions, the writes they carried, writes run again after a failed guard or after waiting for a write in flight. */
  readonly stats = { txns: 0, writes: 0, retries: 0, waits: 0, txnSeconds: 0, applies: 0, applySeconds: 0 };

  /** `client`: connected to etcd already (the shared sealing key is read before the replica opens). */
  constructor(
    readonly client: Etcd3,
    readonly settings: ClusterSettings,
    private readonly controllerId: string,
    private readonly log: Logger,
    replica: { dir: string; specs: CollectionSpec[]; noSync: boolean; sealer: Sealer },
  ) {
    this.keys = new Keys(settings.prefix.replace(/\/+$/, ''));
    this.store = new Store(replica.dir, replica.specs, { noSync: replica.noSync, sealer: replica.sealer, writeLog: this });
  }

  status() {
    return { ready: this.ready && !this.closed, detail: this.detail };
  }

  // ---- writes ----------------------------------------------------------------------------

  /** Run a write; answered (ClusterUnavailable) by WRITE_TIMEOUT_MS whatever etcd does. */
  write<T>(fn: (tx: Tx) => T, opts?: WriteOptions): Promise<T> {
    const deadline = Date.now() + WRITE_TIMEOUT_MS;
    const work = this.attempts(fn, opts, deadline);
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new ClusterUnavailable(`etcd did not take the write within ${WRITE_TIMEOUT_MS} ms (no leader, or unreachable)`)), WRITE_TIMEOUT_MS);
    });
    // What goes on after the answer (an etcd call ending) must not surface as an unhandled rejection.
    work.catch(() => undefined);
    return Promise.race([work, late]).finally(() => clearTimeout(timer));
  }

  private async attempts<T>(fn: (tx: Tx) => T, opts: WriteOptions | undefined, deadline: number): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      if (this.closed) throw new Error('store is closed');
      // Answered 503 already: not run again (a write the client was told may not have been made).
      if (Date.now() >= deadline) throw new ClusterUnavailable('the write ran out of time');
      const reads = new Reads(this.keys);
      const snapshot = this.applied;
      const tx = new Tx(this.store, reads);
      const result = fn(tx);
      const writes = tx.finish();
      if (reads.waits.size > 0) {
        this.stats.waits++;
        await this.settled(reads.waits);
        continue;
      }
      const local: Op[] = [];
      const shared: Op[] = [];
      for (const op of writes) (isLocal(op.coll.spec.name, op.after ?? op.before) ? local : shared).push(op);
      const news = this.sessionNews(local, shared, opts);
      if (shared.length === 0 && news.length === 0) {
        await this.store.commitLocal(local);
        return result;
      }
      // The local part is held as pending while etcd decides, so writes issued meanwhile see it.
      for (const op of local) op.coll.pending.set(op.id, op.after ?? null);
      const release = () => {
        for (const op of local) if (op.coll.pending.get(op.id) === (op.after ?? null)) op.coll.pending.delete(op.id);
      };
      let outcome: { ok: boolean; revision: number };
      try {
        outcome = await this.commit(shared, reads, snapshot, news.length ? await this.withNewsLease(news, deadline) : [], deadline);
      } catch (e) {
        release();
        throw e;
      }
      release();
      if (outcome.ok) {
        await this.store.commitLocal(current(local));
        return result;
      }
      this.stats.retries++;
      if (attempt >= MAX_ATTEMPTS) throw new WriteContention('the write kept conflicting with concurrent writes');
      await this.waitApplied(outcome.revision);
    }
  }

  /**
   * What other controllers must learn of this write's local part: API sessions it ends (unless it
   * only expires them here, or every controller ends them on its own) and MFA state changes.
   */
  private sessionNews(local: Op[], shared: Op[], opts?: WriteOptions): IRequestOp[] {
    const out: IRequestOp[] = [];
    const now = Date.now();
    // An identity disabled: every API session made before now is over on every controller, also
    // one a controller never saw (enabling the identity again does not bring them back).
    for (const { coll, id, before, after } of shared) {
      if (coll.spec.name === 'identities' && after?.disabledAt && after.disabledAt !== before?.disabledAt)
        out.push({ request_put: { key: Buffer.from(`${this.keys.records}~revoked-identity/${id}`), value: packr.pack({ at: now }) } });
    }
    for (const { coll, id, before, after } of local) {
      if (coll.spec.name !== 'apiSessions' || !before) continue;
      if (!after) {
        if (opts?.revoke !== false) out.push({ request_put: { key: Buffer.from(`${this.keys.records}~revoked/${id}`), value: packr.pack({ identityId: before.identityId, at: now }) } });
      } else if (before.isMfaRequired !== after.isMfaRequired || before.isMfaComplete !== after.isMfaComplete || before.mfaPassedAt !== after.mfaPassedAt) {
        out.push({ request_put: { key: Buffer.from(`${this.keys.records}~as/${id}`), value: packr.pack({ isMfaRequired: after.isMfaRequired === true, isMfaComplete: after.isMfaComplete === true, mfaPassedAt: after.mfaPassedAt }) } });
      }
    }
    // Sessions deleted (by whatever write: their owner, an admin, access lost, their API session
    // ended or expired here, also with `revoke: false`): routers connected elsewhere may hold
    // their tokens. A session's token has its id as `jti`.
    const removed: [id: string, jti: string][] = [];
    for (const { coll, id, before, after } of local) if (coll.spec.name === 'sessions' && before && !after) removed.push([id, id]);
    for (let i = 0; i < removed.length; i += REMOVED_SESSIONS_PER_KEY) {
      const key = `${this.keys.records}~sessions-removed/${this.controllerId}.${randomUUID()}`;
      out.push({ request_put: { key: Buffer.from(key), value: packr.pack({ from: this.controllerId, at: now, sessions: removed.slice(i, i + REMOVED_SESSIONS_PER_KEY) }) } });
    }
    return out;
  }

  private newsLease?: { id: string; until: number };

  /** Attach the current news lease (a new one each slice; it expires SESSION_NEWS_RETENTION_MS after its slice). */
  private async withNewsLease(ops: IRequestOp[], deadline: number): Promise<IRequestOp[]> {
    const now = Date.now();
    if (!this.newsLease || this.newsLease.until <= now) {
      const lease = this.client.lease(Math.ceil((SESSION_NEWS_RETENTION_MS + NEWS_LEASE_SLICE_MS) / 1000), { autoKeepAlive: false, deadline });
      try {
        this.newsLease = { id: await lease.grant(), until: now + NEWS_LEASE_SLICE_MS };
      } catch (e) {
        throw isUnavailable(e) ? new ClusterUnavailable(`etcd did not grant a lease: ${(e as Error)?.message ?? e}`) : e;
      }
    }
    const lease = this.newsLease.id;
    return ops.map((op) => ({ request_put: { ...op.request_put!, lease } }));
  }

  private async settled(colls: Set<Coll>) {
    const all: Promise<unknown>[] = [];
    for (const c of colls) for (const p of this.inFlight.get(c) ?? []) all.push(p);
    await Promise.allSettled(all);
  }

  /** Send one write's sub-transaction; resolves once the replica applied it, or with the revision that failed it. */
  private commit(ops: Op[], reads: Reads, snapshot: number, extra: IRequestOp[], deadline: number): Promise<{ ok: boolean; revision: number }> {
    const compare: ICompare[] = [];
    const guard = (key: string, present: boolean) => {
      const k = Buffer.from(key);
      if (present) {
        compare.push({ key: k, target: 'Mod', result: 'Less', mod_revision: snapshot + 1 });
        compare.push({ key: k, target: 'Version', result: 'Greater', version: 0 });
      } else compare.push({ key: k, target: 'Version', result: 'Equal', version: 0 });
    };
    for (const c of reads.ranges) {
      const k = this.keys.collection(c.spec.name);
      compare.push({ key: Buffer.from(k), range_end: Buffer.from(prefixEnd(k)), target: 'Mod', result: 'Less', mod_revision: snapshot + 1 });
    }
    // Every record read is guarded on its own, also in a collection guarded as a whole: a range
    // compare only sees the keys that still exist, so it misses a record deleted since the read.
    // (Past RANGE_RECORD_GUARDS records of one such collection, to stay within etcd's operation
    // limit, the collection guard alone stands for them.)
    const perColl = new Map<Coll, number>();
    for (const [key, [c, present]] of reads.recs) {
      if (reads.ranges.has(c) && !key.startsWith(`${this.keys.prefix}/u/`)) {
        const n = (perColl.get(c) ?? 0) + 1;
        perColl.set(c, n);
        if (n > RANGE_RECORD_GUARDS) continue;
      }
      guard(key, present);
    }
    const success: IRequestOp[] = [];
    const keys: string[] = [];
    let bytes = 0;
    for (const { coll, id, before, after } of ops) {
      const name = coll.spec.name;
      const key = this.keys.rec(name, id);
      keys.push(key);
      if (after) {
        const value = packr.pack(after);
        bytes += value.length + key.length;
        success.push({ request_put: { key: Buffer.from(key), value } });
      } else success.push({ request_delete_range: { key: Buffer.from(key) } });
      for (const field of coll.unique.keys()) {
        const oldK = indexKeys(before?.[field]);
        const newK = indexKeys(after?.[field]);
        for (const k of oldK) {
          if (newK.includes(k)) continue;
          const uk = this.keys.unique(name, field, k);
          keys.push(uk);
          success.push({ request_delete_range: { key: Buffer.from(uk) } });
        }
        for (const k of newK) {
          if (oldK.includes(k)) continue;
          const uk = this.keys.unique(name, field, k);
          keys.push(uk);
          bytes += uk.length + id.length;
          success.push({ request_put: { key: Buffer.from(uk), value: Buffer.from(id) } });
        }
      }
    }
    for (const op of extra) {
      const put = op.request_put!;
      keys.push(put.key!.toString());
      bytes += put.key!.length + (put.value as Buffer).length;
      success.push(op);
    }
    for (const op of ops) op.coll.pending.set(op.id, op.after ?? null);
    const clearPending = () => {
      for (const op of ops) if (op.coll.pending.get(op.id) === (op.after ?? null)) op.coll.pending.delete(op.id);
    };
    const flight = new Promise<{ ok: boolean; revision: number }>((done, fail) => {
      this.queue.push({ txn: { compare, success }, keys, bytes, done, fail, deadline });
      this.send();
    }).then(
      async (r) => {
        if (r.ok) await this.waitApplied(r.revision);
        clearPending();
        return r;
      },
      (e) => {
        clearPending();
        throw e;
      },
    );
    const colls = new Set(ops.map((o) => o.coll));
    for (const c of colls) {
      let set = this.inFlight.get(c);
      if (!set) this.inFlight.set(c, (set = new Set()));
      set.add(flight);
    }
    const forget = () => {
      for (const c of colls) this.inFlight.get(c)?.delete(flight);
    };
    flight.then(forget, forget);
    return flight;
  }

  /** Writes the last etcd transaction carried and its round trip (group commit sizing). */
  private lastTxn = { writes: 0, ms: 0 };
  private lingering?: NodeJS.Timeout;

  /**
   * Group commit: one etcd transaction in flight; everything queued meanwhile goes into the next.
   * Sizing: etcd's work and this controller's (a gRPC call costs about a millisecond of CPU) are
   * largely per transaction, not per write. So after a transaction that carried several writes,
   * the next one waits until twice as many are queued, at most a quarter of the last round trip
   * (and LINGER_MAX_MS): more writes per transaction and less CPU per write, all processes
   * together (measured: docs/cluster.md). Writes that come one
   * at a time (the last transaction carried one) never wait, and the wait shrinks with the round
   * trip.
   */
  private send() {
    if (this.sending || this.queue.length === 0) return;
    if (this.lastTxn.writes > 1 && this.queue.length < Math.min(2 * this.lastTxn.writes, MAX_TXN_OPS)) {
      this.lingering ??= setTimeout(() => {
        this.lingering = undefined;
        this.sendQueued();
      }, Math.min(this.lastTxn.ms / 4, LINGER_MAX_MS));
      return;
    }
    clearTimeout(this.lingering);
    this.lingering = undefined;
    this.sendQueued();
  }

  private sendQueued() {
    if (this.sending || this.queue.length === 0) return;
    const batch: Queued[] = [];
    const rest: Queued[] = [];
    const written = new Set<string>();
    let bytes = 0;
    const now = Date.now();
    for (const q of this.queue) {
      // Already answered 503 (it waited out its bound behind a stalled transaction): not sent.
      if (q.deadline <= now) {
        q.fail(new ClusterUnavailable('the write waited out its time for etcd'));
        continue;
      }
      // etcd refuses a transaction that writes one key twice: such a write waits for the next one.
      const clash = q.keys.some((k) => written.has(k));
      if (clash || batch.length >= MAX_TXN_OPS || (batch.length > 0 && bytes + q.bytes > MAX_TXN_BYTES)) {
        rest.push(q);
        continue;
      }
      for (const k of q.keys) written.add(k);
      bytes += q.bytes;
      batch.push(q);
    }
    this.queue = rest;
    if (batch.length === 0) return;
    this.sending = true;
    this.stats.txns++;
    this.stats.writes += batch.length;
    const sent = performance.now();
    this.client.kv
      // etcd gives up when the batch's first write is answered 503: nothing outlives its answer for long.
      .txn({ compare: [], success: batch.map((q) => ({ request_txn: q.txn })), failure: [] }, { deadline: Math.min(...batch.map((q) => q.deadline)) })
      .then(
        (res: ITxnResponse) => {
          this.lastTxn = { writes: batch.length, ms: performance.now() - sent };
          const revision = Number(res.header.revision);
          batch.forEach((q, i) => q.done({ ok: res.responses[i]?.response_txn?.succeeded === true, revision }));
        },
        (err: unknown) => {
          // Never sent (no connection to that member): safe to send again, to another member.
          if (/No connection established|ECONNREFUSED/i.test(String((err as Error)?.message)) && (batch[0].resent ?? 0) < 3 && Date.now() < Math.min(...batch.map((q) => q.deadline))) {
            for (const q of batch) q.resent = (q.resent ?? 0) + 1;
            this.queue.unshift(...batch);
            return new Promise((r) => setTimeout(r, 100));
          }
          this.log.warn({ err: String((err as Error)?.message ?? err), writes: batch.length }, 'cluster write failed');
          const e = isUnavailable(err) ? new ClusterUnavailable(`etcd did not take the write: ${(err as Error)?.message ?? err}`) : err;
          for (const q of batch) q.fail(e);
        },
      )
      .finally(() => {
        this.stats.txnSeconds += (performance.now() - sent) / 1000;
        this.sending = false;
        this.send();
      });
  }

  /** Resolves once the replica has applied `revision`. */
  waitApplied(revision: number): Promise<void> {
    if (this.applied >= revision) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ revision, resolve }));
  }

  // ---- replica ---------------------------------------------------------------------------

  /** Catch up (resume or full load), then follow the watch. Resolves when the replica is current. */
  async start(): Promise<void> {
    const head = await this.retry(() => this.client.kv.range({ key: Buffer.from(this.keys.records), range_end: Buffer.from(prefixEnd(this.keys.records)), limit: 1, count_only: true }));
    this.logId = `${head.header.cluster_id}:${this.keys.prefix}`;
    const meta = this.store.metaDb();
    const stored = Number(meta.get('revision') ?? 0);
    if (stored > 0 && meta.get('log') === this.logId && (await this.readableAt(stored))) {
      this.applied = stored;
      this.log.info({ revision: stored }, 'cluster: resuming the replica');
    } else await this.fullLoad();
    await this.follow();
  }

  /** Whether etcd still has `revision` (not compacted away, not beyond its own history). */
  private async readableAt(revision: number): Promise<boolean> {
    try {
      await this.client.kv.range({ key: Buffer.from(this.keys.records), range_end: Buffer.from(prefixEnd(this.keys.records)), limit: 1, count_only: true, revision });
      return true;
    } catch (e) {
      if (/compacted|future revision/i.test(String((e as Error).message))) {
        this.log.info({ revision, reason: (e as Error).message }, 'cluster: the stored revision is gone from etcd');
        return false;
      }
      throw e;
    }
  }

  private async retry<T>(f: () => Promise<T>, tries = 20): Promise<T> {
    for (let i = 1; ; i++) {
      try {
        return await f();
      } catch (e) {
        if (i >= tries || this.closed) throw e;
        await new Promise((r) => setTimeout(r, Math.min(2000, 100 * i)));
      }
    }
  }

  /** Replace the replica with every record at one pinned revision. */
  private async fullLoad(): Promise<void> {
    this.ready = false;
    this.detail = 'loading the model from etcd';
    const started = Date.now();
    for (;;) {
      try {
        const start = Buffer.from(this.keys.records);
        const end = Buffer.from(prefixEnd(this.keys.records));
        const first = await this.client.kv.range({ key: start, range_end: end, limit: 1, keys_only: true });
        const revision = Number(first.header.revision);
        const changes: { collection: string; id: string; after?: Rec }[] = [];
        const news: SessionNews = { revoked: [], states: [], identities: [], sessions: [] };
        let from = start;
        for (;;) {
          const page = await this.client.kv.range({ key: from, range_end: end, revision, limit: 2000 }, { deadline: Date.now() + 30_000 });
          for (const kv of page.kvs) {
            const ch = this.parse(kv, true);
            if (ch) changes.push(ch);
            // Session removals up to the revision applied before this load were announced then.
            else this.parseNews(kv, news, Number(kv.mod_revision) > this.applied);
          }
          if (!page.more || page.kvs.length === 0) break;
          from = Buffer.concat([page.kvs[page.kvs.length - 1].key, Buffer.from([0])]);
        }
        // The records this controller keeps for itself are not in etcd: they stay.
        await this.store.applyReplicated(changes, { revision, log: this.logId }, true, (coll, id) => LOCAL_COLLECTIONS.has(coll) && isLocal(coll, this.store.get(coll, id)));
        this.deliver(news);
        this.setApplied(revision);
        this.log.info({ revision, records: changes.length, ms: Date.now() - started }, 'cluster: replica loaded');
        return;
      } catch (e) {
        if (this.closed) throw e;
        this.log.warn({ err: String((e as Error).message ?? e) }, 'cluster: full load failed; retrying');
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }

  private parse(kv: { key: Buffer; value: Buffer }, put: boolean): { collection: string; id: string; after?: Rec } | undefined {
    const key = kv.key.toString();
    const rest = key.slice(this.keys.records.length);
    const slash = rest.indexOf('/');
    if (slash <= 0) return undefined;
    const collection = rest.slice(0, slash);
    if (collection.startsWith('~')) return undefined;
    return { collection, id: rest.slice(slash + 1), after: put ? (packr.unpack(kv.value) as Rec) : undefined };
  }

  private setApplied(revision: number) {
    this.applied = Math.max(this.applied, revision);
    if (this.waiters.length === 0) return;
    const still: typeof this.waiters = [];
    for (const w of this.waiters) (w.revision <= this.applied ? w.resolve() : still.push(w));
    this.waiters = still;
  }

  /** Watch from the applied revision; mark ready once a marker written now has come back. */
  private async follow(): Promise<void> {
    let first = true;
    this.watch = watchPrefix(this.client, this.keys.records, this.applied + 1, {
      events: (events) => {
        // Events that arrive while the replica commits are applied together in its next LMDB
        // transaction (one sync for all of them), as local writes share a group commit.
        if (this.arrived.length === 0) this.applying = this.applying.then(() => this.apply(this.arrived.splice(0)));
        for (const ev of events) this.arrived.push(ev);
        this.received = Math.max(this.received, events[events.length - 1].kv.mod_revision);
      },
      disconnected: (reason) => {
        this.watching = false;
        this.ready = false;
        this.detail = `disconnected from etcd: ${reason}`;
      },
      // Back after a break: ready again once a marker written now has come through.
      connected: () => {
        this.watching = true;
        if (!first && !this.closed) void this.sync();
        first = false;
      },
      compacted: () => {
        if (this.closed) return;
        this.log.warn({ from: this.applied + 1 }, 'cluster: the watch revision was compacted; loading the model again');
        this.ready = false;
        this.applying = this.applying.then(async () => {
          await this.fullLoad();
          await this.follow();
        });
      },
    });
    await this.sync();
    this.probeSoon();
  }

  private probeSoon() {
    if (this.closed || this.probeTimer) return;
    this.probeTimer = setTimeout(() => {
      void this.probe().finally(() => {
        this.probeTimer = undefined;
        this.probeSoon();
      });
    }, PROBE_INTERVAL_MS);
    this.probeTimer.unref();
  }

  /**
   * The readiness probe (PROBE_INTERVAL_MS, see there). Not ready while etcd has no leader or can
   * not be reached, while the watch's member does not answer, or while revisions the watch
   * delivered a probe ago are not applied; ready again once all three hold (and the watch is up).
   */
  private async probe(): Promise<void> {
    const started = Date.now();
    const deadline = started + PROBE_TIMEOUT_MS;
    const due = this.receivedAtProbe;
    const behind = this.applied < due;
    this.receivedAtProbe = this.received;
    const answered = this.watch ? this.watch.answers(PROBE_TIMEOUT_MS) : Promise.resolve(false);
    let problem: string | undefined;
    for (let attempt = 1; ; attempt++) {
      try {
        // One key (this controller's catch-up marker): a range over the prefix would make etcd walk every key.
        await this.client.kv.range({ key: Buffer.from(`${this.keys.records}~sync/${this.controllerId}`) }, { deadline });
        break;
      } catch (e) {
        // A member that is down refuses the connection at once: ask another (the pool moves on).
        if (/No connection established|ECONNREFUSED/i.test(String((e as Error)?.message)) && attempt < 3 && Date.now() < deadline) continue;
        problem = `etcd did not answer a linearizable read within ${PROBE_TIMEOUT_MS} ms (no leader, or unreachable): ${(e as Error)?.message ?? e}`;
        break;
      }
    }
    const watchAnswered = await answered;
    if (this.closed) return;
    if (!problem && !watchAnswered && this.watching) problem = `the watch's etcd member did not answer within ${PROBE_TIMEOUT_MS} ms`;
    if (!problem && behind) problem = `the replica has fallen behind: at revision ${this.applied}, revision ${due} arrived over ${PROBE_INTERVAL_MS} ms ago`;
    if (problem) {
      this.ready = false;
      this.detail = problem;
    } else if (this.watching && !this.syncing) {
      this.ready = true;
      this.detail = `replica at revision ${this.applied}`;
    }
  }

  /** Write a marker into the watched prefix and wait for the replica to apply it: caught up. */
  private async sync(): Promise<void> {
    this.detail = 'catching up with etcd';
    this.syncing = true;
    for (;;) {
      try {
        const res = await this.client.kv.put({ key: Buffer.from(`${this.keys.records}~sync/${this.controllerId}`), value: Buffer.from(String(Date.now())) }, { deadline: Date.now() + CALL_TIMEOUT_MS });
        await this.waitApplied(Number(res.header.revision));
        this.syncing = false;
        this.ready = true;
        this.detail = `replica at revision ${this.applied}`;
        return;
      } catch (e) {
        if (this.closed) {
          this.syncing = false;
          return;
        }
        this.ready = false;
        this.detail = `etcd unreachable: ${(e as Error).message}`;
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
  }

  private async apply(events: WatchEvent[]): Promise<void> {
    const changes: { collection: string; id: string; after?: Rec }[] = [];
    const news: SessionNews = { revoked: [], states: [], identities: [], sessions: [] };
    let revision = this.applied;
    for (const ev of events) {
      revision = Math.max(revision, ev.kv.mod_revision);
      const ch = this.parse(ev.kv, ev.type === 'Put');
      if (ch) changes.push(ch);
      else if (ev.type === 'Put') this.parseNews(ev.kv, news, true);
    }
    if (revision <= this.applied) return;
    const started = performance.now();
    try {
      await this.store.applyReplicated(changes, { revision });
      this.stats.applies++;
      this.stats.applySeconds += (performance.now() - started) / 1000;
    } catch (e) {
      // The replica can not go on from a revision it failed to apply: load everything again.
      this.log.error({ err: e }, 'cluster: applying a revision failed; loading the model again');
      await this.fullLoad();
      return;
    }
    this.deliver(news);
    if (this.detail.startsWith('replica at')) this.detail = `replica at revision ${revision}`;
    this.setApplied(revision);
  }

  /** Told what this controller learns of API sessions held elsewhere (src/cluster/sessions.ts subscribes). */
  readonly sessionNewsListeners = new Set<(news: SessionNews) => void>();

  private deliver(news: SessionNews) {
    if (news.revoked.length + news.states.length + news.identities.length + news.sessions.length === 0) return;
    for (const listener of this.sessionNewsListeners) {
      try {
        listener(news);
      } catch (e) {
        this.log.error({ err: e }, 'cluster: handling session news failed');
      }
    }
  }

  /** `unseen`: the key is newer than what this controller applied before (a full load reads all). */
  parseNews(kv: { key: Buffer; value: Buffer; mod_revision: number | string }, news: SessionNews, unseen: boolean) {
    const rest = kv.key.toString().slice(this.keys.records.length);
    try {
      if (rest.startsWith('~revoked/')) {
        const v = packr.unpack(kv.value) as { identityId?: unknown; at?: unknown };
        news.revoked.push({ id: rest.slice('~revoked/'.length), identityId: String(v?.identityId ?? ''), at: Number(v?.at ?? 0) });
      } else if (rest.startsWith('~revoked-identity/')) {
        const v = packr.unpack(kv.value) as { at?: unknown };
        news.identities.push({ id: rest.slice('~revoked-identity/'.length), at: Number(v?.at ?? 0), revision: Number(kv.mod_revision) });
      } else if (rest.startsWith('~as/')) {
        const v = packr.unpack(kv.value) as SessionNews['states'][number];
        news.states.push({ id: rest.slice('~as/'.length), isMfaRequired: v?.isMfaRequired === true, isMfaComplete: v?.isMfaComplete === true, mfaPassedAt: typeof v?.mfaPassedAt === 'number' ? v.mfaPassedAt : undefined });
      } else if (rest.startsWith('~sessions-removed/') && unseen) {
        const v = packr.unpack(kv.value) as { from?: unknown; sessions?: unknown };
        // This controller announced its own deletions as they committed: not twice.
        if (v?.from === this.controllerId || !Array.isArray(v?.sessions)) return;
        for (const e of v.sessions) if (Array.isArray(e) && typeof e[0] === 'string' && typeof e[1] === 'string') news.sessions.push({ id: e[0], jti: e[1] });
      }
    } catch {
      // Not ours: ignored.
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.ready = false;
    clearTimeout(this.probeTimer);
    this.watch?.close();
    await this.applying.catch(() => undefined);
    this.client.close();
  }
}
