/**
 * Entity ordinals by the UTF-8 bytes of their ids: the role index's id → ordinal table. At start-up
 * the name and attribute indexes give millions of ids as bytes (Store.scanIndexIdBytes), and
 * adding or finding each one here makes no string and touches a slot and the bytes, where a Map
 * needs a string per entry, its hash, and a walk through a million-entry table of heap objects.
 * Lookups by string (requests, change events) encode the id first.
 *
 * Open addressing (linear probing) over a power-of-two table of slots; the ids' bytes are kept end
 * to end in one buffer. A delete leaves a tombstone; a rehash drops them and the deleted bytes.
 *
 * Example:
 *   const t = new OrdinalsByBytes();
 *   t.addString('I1', 7);
 *   t.getString('I1') // → 7; -1 for an id never added or deleted since
 */
export class OrdinalsByBytes {
  /**
   * Slots of four: the hash, where the id's bytes start in `bytes`, their count (0: empty; -1: a
   * tombstone), the ordinal. A lookup reads one slot and, on a hash match, the bytes.
   */
  private slots: Int32Array;
  /** Live ids. */
  size = 0;
  /** Slots live or tombstones. */
  private taken = 0;
  private bytes: Uint8Array;
  private used = 0;
  private scratch = Buffer.allocUnsafe(1024);

  constructor() {
    this.slots = new Int32Array(slotsFor(0) << 2);
    this.bytes = new Uint8Array(4096);
  }

  /** The table as it is, for a snapshot (index-snapshot.ts): views, not copies. */
  toState(): OrdinalsByBytesState {
    return { slots: this.slots, bytes: this.bytes.subarray(0, this.used), size: this.size, taken: this.taken };
  }

  /** A table as `toState` gave it (the arrays are taken over, not copied). */
  static fromState(st: OrdinalsByBytesState): OrdinalsByBytes {
    const t = new OrdinalsByBytes();
    t.slots = st.slots;
    t.bytes = st.bytes;
    t.used = st.bytes.length;
    t.size = st.size;
    t.taken = st.taken;
    return t;
  }

  /** Each live id's ordinal and the bytes of the id, `bytes[start..end)` (the table's own buffer). */
  forEach(visit: (ord: number, bytes: Uint8Array, start: number, end: number) => void): void {
    const slots = this.slots;
    for (let x = 0; x < slots.length; x += 4) if (slots[x + 2] > 0) visit(slots[x + 3], this.bytes, slots[x + 1], slots[x + 1] + slots[x + 2]);
  }

  /** Room for `n` ids without a rehash (a bulk load about to add them). */
  reserve(n: number) {
    if (slotsFor(n) > this.slots.length >> 2) this.rehash(slotsFor(n));
    if (this.bytes.length < n * 16) this.widen(n * 16 - this.used);
  }

  /** Add an id, not present, by its bytes `bytes[start..end)`. */
  add(bytes: Uint8Array, start: number, end: number, ord: number): void {
    const size = end - start;
    if ((this.taken + 1) * 2 > this.slots.length >> 2) this.rehash(slotsFor(this.size + 1));
    if (this.used + size > this.bytes.length) this.widen(size);
    const at = this.used;
    const held = this.bytes;
    for (let i = 0; i < size; i++) held[at + i] = bytes[start + i];
    this.used += size;
    this.size++;
    if (this.place(hash(bytes, start, end), at, size, ord)) this.taken++;
  }

  /** The ordinal of the id with bytes `bytes[start..end)`, or -1. */
  get(bytes: Uint8Array, start: number, end: number): number {
    const x = this.find(bytes, start, end);
    return x < 0 ? -1 : this.slots[x + 3];
  }

  addString(id: string, ord: number): void {
    const n = this.encode(id);
    this.add(this.scratch, 0, n, ord);
  }

  getString(id: string): number {
    const n = this.encode(id);
    return this.get(this.scratch, 0, n);
  }

  /** Remove an id; its ordinal, or -1 when it was not there. */
  deleteString(id: string): number {
    const n = this.encode(id);
    const x = this.find(this.scratch, 0, n);
    if (x < 0) return -1;
    this.slots[x + 2] = -1;
    this.size--;
    return this.slots[x + 3];
  }

  private encode(id: string): number {
    if (id.length * 3 > this.scratch.length) this.scratch = Buffer.allocUnsafe(id.length * 3);
    return this.scratch.write(id, 0, 'utf8');
  }

  /** Index in `slots` of the id's slot, or -1. */
  private find(bytes: Uint8Array, start: number, end: number): number {
    const size = end - start;
    const slots = this.slots;
    const mask = (slots.length >> 2) - 1;
    const held = this.bytes;
    const h = hash(bytes, start, end);
    for (let s = h & mask; ; s = (s + 1) & mask) {
      const x = s << 2;
      const n = slots[x + 2];
      if (n === 0) return -1;
      if (slots[x] !== h || n !== size) continue;
      const at = slots[x + 1] - start;
      let i = start;
      while (i < end && held[at + i] === bytes[i]) i++;
      if (i === end) return x;
    }
  }

  /** Put an entry in the first free slot of its probe; true when that slot was empty (not a tombstone). */
  private place(h: number, at: number, size: number, ord: number): boolean {
    const slots = this.slots;
    const mask = (slots.length >> 2) - 1;
    let s = h & mask;
    while (slots[(s << 2) + 2] > 0) s = (s + 1) & mask;
    const x = s << 2;
    const empty = slots[x + 2] === 0;
    slots[x] = h;
    slots[x + 1] = at;
    slots[x + 2] = size;
    slots[x + 3] = ord;
    return empty;
  }

  /** A new table of `slotCount` slots with the live entries only, their bytes packed anew. */
  private rehash(slotCount: number) {
    const old = this.slots;
    const oldBytes = this.bytes;
    this.slots = new Int32Array(slotCount << 2);
    this.bytes = new Uint8Array(Math.max(4096, this.used * 2));
    this.used = 0;
    this.taken = 0;
    for (let x = 0; x < old.length; x += 4) {
      const size = old[x + 2];
      if (size <= 0) continue;
      const at = this.used;
      const from = old[x + 1];
      for (let i = 0; i < size; i++) this.bytes[at + i] = oldBytes[from + i];
      this.used += size;
      this.place(old[x], at, size, old[x + 3]);
      this.taken++;
    }
  }

  private widen(size: number) {
    const wider = new Uint8Array(Math.max(this.bytes.length * 2, this.used + size));
    wider.set(this.bytes.subarray(0, this.used));
    this.bytes = wider;
  }
}

/** An OrdinalsByBytes as plain arrays. */
export interface OrdinalsByBytesState {
  slots: Int32Array;
  bytes: Uint8Array;
  size: number;
  taken: number;
}

/** Slots for `n` ids: a power of two, at most half full. */
function slotsFor(n: number): number {
  let s = 1024;
  while (s < n * 2) s *= 2;
  return s;
}

/** FNV-1a over bytes[from..to), with murmur3's final mix: ids that differ in one character spread over the table. */
function hash(bytes: Uint8Array, from: number, to: number): number {
  let h = 0x811c9dc5;
  for (let i = from; i < to; i++) h = Math.imul(h ^ bytes[i], 0x01000193);
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return h ^ (h >>> 16);
}
