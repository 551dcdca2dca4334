/**
 * A watch on one key prefix over its own gRPC stream, resumed from the revision after the last
 * event it delivered whenever the stream breaks (a member died, etcd restarted). One watch per
 * stream: etcd3's shared watch manager could throw out of a stream callback ("Failed to find
 * watcher") while re-attaching several watchers after a member was killed, which ended the process.
 */
import type { Etcd3, IEvent, IWatchResponse, IWatchRequest } from 'etcd3';

/** The key after every key with this prefix (etcd's range_end of a prefix). */
export const prefixEnd = (p: string) => p.slice(0, -1) + String.fromCharCode(p.charCodeAt(p.length - 1) + 1);

export interface WatchHandlers {
  /** Events of one response, in revision order. */
  events(events: IEvent[]): void;
  /** etcd no longer has the revision to resume from: list again and start a new watch. */
  compacted(): void;
  connected?(): void;
  disconnected?(reason: string): void;
}

interface Stream {
  on(ev: 'data', f: (r: IWatchResponse) => void): Stream;
  on(ev: 'error' | 'end', f: (e?: Error) => void): Stream;
  write(req: IWatchRequest): void;
  cancel(): void;
}

export function watchPrefix(client: Etcd3, prefix: string, fromRevision: number, h: WatchHandlers): { close(): void } {
  let next = fromRevision;
  let closed = false;
  let current: Stream | undefined;
  const open = async () => {
    if (closed) return;
    let stream: Stream;
    try {
      stream = (await client.watchClient.watch()) as unknown as Stream;
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
      if (closed) return;
      h.disconnected?.(reason);
      setTimeout(() => void open(), 200).unref();
    };
    stream.on('data', (res) => {
      if (done) return;
      if (res.canceled) {
        if (Number(res.compact_revision) > 0) {
          done = true;
          closed = true;
          stream.cancel();
          h.compacted();
        } else broken(`watch cancelled: ${res.cancel_reason}`);
        return;
      }
      if (res.created) h.connected?.();
      if (res.events?.length) {
        next = Number(res.events[res.events.length - 1].kv.mod_revision) + 1;
        h.events(res.events);
      }
    });
    stream.on('error', (e) => broken(String(e?.message ?? e)));
    stream.on('end', () => broken('watch stream ended'));
    stream.write({ create_request: { key: Buffer.from(prefix), range_end: Buffer.from(prefixEnd(prefix)), start_revision: next } });
  };
  void open();
  return {
    close() {
      closed = true;
      try {
        current?.cancel();
      } catch {
        // Already gone.
      }
    },
  };
}
