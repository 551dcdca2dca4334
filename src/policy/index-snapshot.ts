/**
 * The role index's entities kept with the store across a clean stop: at a million identities,
 * building them from the store's name and attribute indexes is most of a start (docs/policy.md);
 * reading them back is a file read and the id strings.
 *
 * A snapshot is written when the controller stops, after the store's last write, and names the
 * store state it was taken at (Store.stamp: LMDB's last transaction id and the data file's inode)
 * and each entity collection's count. It is used only when the store at start has the very same
 * stamp and counts, so any write since (this controller's, `mesh import`'s, a restore's, one cut by
 * a crash) makes it stale, and the index is built from the store as if there were none. Policies
 * are never in it: they are few, and filled again from the restored attribute sets.
 *
 * File: "MESHRIX1", the header's length (u32 LE), the header (JSON: version, stamp, counts, per kind
 * its scalars, attribute lists and where each array lies), then the arrays, each at a multiple of 8.
 * Written to a temporary name and renamed: a crash leaves the old file or the new one, each whole.
 */
import fs from 'node:fs';
import type { StoreStamp } from '../store/store.js';
import { KINDS, type EntityKindState, type IdSetState, type Kind, type RoleIndex } from './role-index.js';

/** The snapshot's file in the data directory. */
export const ROLE_INDEX_SNAPSHOT = 'role-index.snapshot';

const MAGIC = 'MESHRIX1';
const VERSION = 1;

/** What a snapshot must match to be used. */
export interface SnapshotKey {
  stamp: StoreStamp;
  /** Entities per kind in the store. */
  counts: Record<Kind, number>;
  /** The index's bitset threshold (a snapshot of another threshold would hold other set forms). */
  minDense: number;
}

type ArrayRef = [offset: number, length: number];
type TypedArrayName = 'Int32Array' | 'Uint32Array' | 'Uint8Array';

interface KindHeader {
  span: number;
  size: number;
  taken: number;
  lists: string[][];
  slots: ArrayRef;
  bytes: ArrayRef;
  free: ArrayRef;
  listOf: ArrayRef;
  byAttr: [attribute: string, size: number, form: 'bits' | 'ordinals', at: ArrayRef][];
}

interface Header extends SnapshotKey {
  version: number;
  kinds: Record<Kind, KindHeader>;
}

/** Write the index's entities as of `key` to `file` (replacing it). */
export function writeSnapshot(file: string, index: RoleIndex, key: SnapshotKey): void {
  const parts: Uint8Array[] = [];
  let at = 0;
  const put = (a: Int32Array | Uint32Array | Uint8Array): ArrayRef => {
    const ref: ArrayRef = [at, a.length];
    const bytes = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
    parts.push(bytes);
    at += bytes.length;
    const pad = (8 - (at % 8)) % 8;
    if (pad) parts.push(new Uint8Array(pad));
    at += pad;
    return ref;
  };
  const kinds = {} as Record<Kind, KindHeader>;
  for (const kind of KINDS) {
    const st = index.entityState(kind);
    kinds[kind] = {
      span: st.ords.span,
      size: st.ords.byId.size,
      taken: st.ords.byId.taken,
      lists: st.lists,
      slots: put(st.ords.byId.slots),
      bytes: put(st.ords.byId.bytes),
      free: put(st.ords.free),
      listOf: put(st.listOf),
      byAttr: st.byAttr.map(([a, set]) => (set.bits ? [a, set.size, 'bits', put(set.bits)] : [a, set.size, 'ordinals', put(set.ordinals!)])),
    };
  }
  const header: Header = { version: VERSION, ...key, kinds };
  const head = Buffer.from(JSON.stringify(header));
  const prefix = Buffer.alloc(12);
  prefix.write(MAGIC, 0, 'latin1');
  prefix.writeUInt32LE(head.length, 8);
  const pad = Buffer.alloc((8 - ((12 + head.length) % 8)) % 8);
  const tmp = `${file}.tmp`;
  const fd = fs.openSync(tmp, 'w', 0o600);
  try {
    for (const b of [prefix, head, pad, ...parts]) fs.writeSync(fd, b);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(tmp, file);
}

/**
 * The snapshot in `file` restored into `index` (empty) when it was taken at `key`; false (and the
 * index untouched) when there is none, it is stale, or it cannot be read: then build from the store.
 */
export function readSnapshot(file: string, index: RoleIndex, key: SnapshotKey): boolean {
  let buf: Buffer;
  try {
    buf = fs.readFileSync(file);
  } catch {
    return false;
  }
  if (buf.length < 12 || buf.toString('latin1', 0, 8) !== MAGIC) return false;
  const headLength = buf.readUInt32LE(8);
  if (12 + headLength > buf.length) return false;
  let header: Header;
  try {
    header = JSON.parse(buf.toString('utf8', 12, 12 + headLength)) as Header;
  } catch {
    return false;
  }
  if (header.version !== VERSION || !sameKey(header, key)) return false;
  // The arrays start at a multiple of 8 of the file, viewed in place when the buffer allows it.
  const base = 12 + headLength + ((8 - ((12 + headLength) % 8)) % 8);
  const data = buf.byteOffset % 8 === 0 ? buf : Buffer.from(buf);
  const view = <T extends TypedArrayName>(type: T, [offset, length]: ArrayRef) => {
    const Ctor = { Int32Array, Uint32Array, Uint8Array }[type];
    if (!(offset >= 0 && length >= 0 && base + offset + length * Ctor.BYTES_PER_ELEMENT <= data.length)) throw new RangeError('index snapshot: truncated');
    return new Ctor(data.buffer as ArrayBuffer, data.byteOffset + base + offset, length) as InstanceType<(typeof globalThis)[T]>;
  };
  let states: [Kind, EntityKindState][];
  try {
    states = KINDS.map((kind) => {
      const h = header.kinds[kind];
      const byAttr: [string, IdSetState][] = h.byAttr.map(([a, size, form, ref]) => [a, form === 'bits' ? { size, bits: view('Uint32Array', ref) } : { size, ordinals: view('Int32Array', ref) }]);
      return [
        kind,
        {
          ords: { span: h.span, free: view('Int32Array', h.free), byId: { slots: view('Int32Array', h.slots), bytes: view('Uint8Array', h.bytes), size: h.size, taken: h.taken } },
          lists: h.lists,
          listOf: view('Int32Array', h.listOf),
          byAttr,
        },
      ];
    });
  } catch {
    return false;
  }
  for (const [kind, st] of states) index.restoreEntities(kind, st);
  return true;
}

function sameKey(a: SnapshotKey, b: SnapshotKey): boolean {
  return a.stamp?.lastTxnId === b.stamp.lastTxnId && a.stamp?.inode === b.stamp.inode && a.minDense === b.minDense && KINDS.every((k) => a.counts?.[k] === b.counts[k]);
}
