/**
 * A watch on one key prefix over its own gRPC stream, resumed from the revision after the last
 * event it delivered whenever the stream breaks (a member died, etcd restarted). One watch per
 * stream: etcd3's shared watch manager could throw out of a stream callback ("Failed to find
 * watcher") while re-attaching several watchers after a member was killed, which ended the process.
 *
 * Every controller decodes every event of the model, so the stream's responses are decoded here
 * (decodeWatchResponse: the few fields a watch uses, revisions as numbers) rather than by the
 * generic protobuf loader, which built objects for every header and turned each 64-bit field
 * into a string: that was a tenth of a replica's CPU per applied write.
 */
import type { Etcd3, IWatchRequest } from 'etcd3';

/** The key after every key with this prefix (etcd's range_end of a prefix). */
export const prefixEnd = (p: string) => p.slice(0, -1) + String.fromCharCode(p.charCodeAt(p.length - 1) + 1);

/** One event of a watch: a key put (with its value) or deleted, at `mod_revision`. */
export interface WatchEvent {
  type: 'Put' | 'Delete';
  kv: { key: Buffer; value: Buffer; mod_revision: number };
}

export interface WatchResponse {
  created: boolean;
  canceled: boolean;
  compact_revision: number;
  cancel_reason: string;
  events: WatchEvent[];
}

/** Reads the protobuf fields of one message. */
class Reader {
  pos: number;
  constructor(
    readonly buf: Buffer,
    from = 0,
    readonly end = buf.length,
  ) {
    this.pos = from;
  }
  /** A varint as a number (revisions stay far below 2^53). */
  varint(): number {
    let v = 0;
    let scale = 1;
    for (;;) {
      if (this.pos >= this.end) throw new Error('truncated protobuf varint');
      const b = this.buf[this.pos++];
      v += (b & 0x7f) * scale;
      if (b < 0x80) return v;
      scale *= 128;
    }
  }
  /** The bounds of a length-delimited field. */
  bytes(): [number, number] {
    const n = this.varint();
    const from = this.pos;
    this.pos += n;
    if (this.pos > this.end) throw new Error('truncated protobuf field');
    return [from, this.pos];
  }
  skip(wire: number) {
    if (wire === 0) this.varint();
    else if (wire === 2) this.bytes();
    else if (wire === 1) this.pos += 8;
    else if (wire === 5) this.pos += 4;
    else throw new Error(`unexpected protobuf wire type ${wire}`);
  }
}

/** etcd's mvccpb.KeyValue: key 1, mod_revision 3, value 5 (others skipped). */
function decodeKeyValue(r: Reader, [from, to]: [number, number]): WatchEvent['kv'] {
  const m = new Reader(r.buf, from, to);
  const kv: WatchEvent['kv'] = { key: EMPTY, value: EMPTY, mod_revision: 0 };
  while (m.pos < m.end) {
    const tag = m.varint();
    const field = Math.floor(tag / 8);
    const wire = tag & 7;
    if (field === 1 && wire === 2) kv.key = slice(m.buf, m.bytes());
    else if (field === 3 && wire === 0) kv.mod_revision = m.varint();
    else if (field === 5 && wire === 2) kv.value = slice(m.buf, m.bytes());
    else m.skip(wire);
  }
  return kv;
}

const EMPTY = Buffer.alloc(0);
// A copy: the response buffer is the stream's, and values outlive it in the apply queue.
const slice = (buf: Buffer, [from, to]: [number, number]) => Buffer.from(buf.subarray(from, to));

/**
 * etcdserverpb.WatchResponse: created 3, canceled 4, compact_revision 5, cancel_reason 6, events
 * 11 (mvccpb.Event: type 1, PUT = 0 or DELETE = 1; kv 2). Fragments are never asked for.
 */
export function decodeWatchResponse(buf: Buffer): WatchResponse {
  const r = new Reader(buf);
  const res: WatchResponse = { created: false, canceled: false, compact_revision: 0, cancel_reason: '', events: [] };
  while (r.pos < r.end) {
    const tag = r.varint();
    const field = Math.floor(tag / 8);
    const wire = tag & 7;
    if (field === 3 && wire === 0) res.created = r.varint() !== 0;
    else if (field === 4 && wire === 0) res.canceled = r.varint() !== 0;
    else if (field === 5 && wire === 0) res.compact_revision = r.varint();
    else if (field === 6 && wire === 2) res.cancel_reason = r.buf.toString('utf8', ...r.bytes());
    else if (field === 11 && wire === 2) {
      const [from, to] = r.bytes();
      const e = new Reader(buf, from, to);
      let type: WatchEvent['type'] = 'Put';
      let kv: WatchEvent['kv'] | undefined;
      while (e.pos < e.end) {
        const t = e.varint();
        if (t === 8) type = e.varint() === 1 ? 'Delete' : 'Put';
        else if (t === 18) kv = decodeKeyValue(e, e.bytes());
        else e.skip(t & 7);
      }
      if (kv) res.events.push({ type, kv });
    } else r.skip(wire);
  }
  return res;
}

export interface WatchHandlers {
  /** Events of one response, in revision order. */
  events(events: WatchEvent[]): void;
  /** etcd no longer has the revision to resume from: list again and start a new watch. */
  compacted(): void;
  connected?(): void;
  disconnected?(reason: string): void;
}

interface Stream {
  on(ev: 'data', f: (r: WatchResponse) => void): Stream;
  on(ev: 'error' | 'end', f: (e?: Error) => void): Stream;
  write(req: IWatchRequest): void;
  cancel(): void;
  readonly writable: boolean;
}

/** The parts of etcd3's connection pool a watch stream of our own needs (it picks a member, as etcd3's calls do). */
interface Pool {
  withConnection<T>(service: 'Watch', fn: (c: { resource: unknown; client: ServiceClient; metadata: unknown }) => T): Promise<T>;
  markFailed(resource: unknown, error: Error): void;
}
interface ServiceClient {
  constructor: { service: { Watch: { path: string; requestSerialize: (req: IWatchRequest) => Buffer } } };
  makeBidiStreamRequest(path: string, serialize: (req: IWatchRequest) => Buffer, deserialize: (buf: Buffer) => WatchResponse, metadata: unknown, options: object): Stream;
}

/** What of grpc's Metadata a stream of our own uses. */
interface Metadata {
  clone(): Metadata;
  set(key: string, value: string): void;
}

/**
 * A Watch stream whose responses decodeWatchResponse reads (the requests keep etcd3's encoder).
 * It requires a leader (etcd's `hasleader` metadata, as clientv3's WithRequireLeader): a member
 * that has lost its leader (no quorum) refuses it and ends it within a few election timeouts,
 * where it would otherwise go on serving a watch on which nothing more can happen.
 */
function openStream(client: Etcd3): Promise<Stream> {
  const pool = (client.watchClient as unknown as { client: Pool }).client;
  return pool.withConnection('Watch', ({ resource, client: svc, metadata }) => {
    const method = svc.constructor.service.Watch;
    const md = (metadata as Metadata).clone();
    md.set('hasleader', 'true');
    const stream = svc.makeBidiStreamRequest(method.path, method.requestSerialize, decodeWatchResponse, md, {});
    // As etcd3's own watch does: a member whose stream fails is tried last next time.
    stream.on('error', (err) => stream.writable && pool.markFailed(resource, err as Error));
    return stream;
  });
}

/** A running watch. */
export interface Watch {
  close(): void;
  /**
   * Ask the stream for a progress response: true once it answers anything, false when it does not
   * within `timeoutMs` (or there is no stream now): a stream that stalled, or a member that hangs.
   */
  answers(timeoutMs: number): Promise<boolean>;
}

export function watchPrefix(client: Etcd3, prefix: string, fromRevision: number, h: WatchHandlers): Watch {
  let next = fromRevision;
  let closed = false;
  let current: Stream | undefined;
  /** Waiting for the stream's next response (answers). */
  let listeners: ((heard: boolean) => void)[] = [];
  const heard = (v: boolean) => {
    const l = listeners;
    listeners = [];
    for (const f of l) f(v);
  };
  const open = async () => {
    if (closed) return;
    let stream: Stream;
    try {
      stream = await openStream(client);
    } catch (e) {
      h.disconnected?.(String((e as Error).message));
      setTimeout(() => void open(), 200).unref();
      return;
    }
    if (closed) return stream.cancel();
    current = stream;
    let done = false;
    const broken = (reason: string) => {
      if (done) return;
      done = true;
      try {
        stream.cancel();
      } catch {
        // Already gone.
      }
      if (current === stream) current = undefined;
      heard(false);
      if (closed) return;
      h.disconnected?.(reason);
      setTimeout(() => void open(), 200).unref();
    };
    stream.on('data', (res) => {
      if (done) return;
      heard(true);
      if (res.canceled) {
        if (res.compact_revision > 0) {
          done = true;
          closed = true;
          stream.cancel();
          h.compacted();
        } else broken(`watch cancelled: ${res.cancel_reason}`);
        return;
      }
      if (res.created) h.connected?.();
      if (res.events?.length) {
        next = res.events[res.events.length - 1].kv.mod_revision + 1;
        h.events(res.events);
      }
    });
    stream.on('error', (e) => broken(String(e?.message ?? e)));
    stream.on('end', () => broken('watch stream ended'));
    stream.write({ create_request: { key: Buffer.from(prefix), range_end: Buffer.from(prefixEnd(prefix)), start_revision: next } });
  };
  void open();
  return {
    answers(timeoutMs: number): Promise<boolean> {
      const stream = current;
      if (!stream || closed) return Promise.resolve(false);
      return new Promise((resolve) => {
        const timer = setTimeout(() => {
          listeners = listeners.filter((f) => f !== done);
          resolve(false);
        }, timeoutMs);
        const done = (v: boolean) => {
          clearTimeout(timer);
          resolve(v);
        };
        listeners.push(done);
        try {
          stream.write({ progress_request: {} });
        } catch {
          done(false);
          listeners = listeners.filter((f) => f !== done);
        }
      });
    },
    close() {
      closed = true;
      heard(false);
      try {
        current?.cancel();
      } catch {
        // Already gone.
      }
    },
  };
}
