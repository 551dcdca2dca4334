/**
 * Entity ordinals by the stored bytes of their ids, for the role index's start-up load only: the
 * attribute index gives millions of ids as bytes (Store.scanIndexIdBytes), and finding each one's
 * ordinal here makes no string and touches a few typed arrays, where a Map would need a new string
 * per entry, its hash, and a walk through a million-entry table of heap objects.
 *
 * Open addressing over a power-of-two table; the ids' bytes are kept end to end in one buffer.
 *
 * Example:
 *   const t = new OrdinalsByBytes();
 *   t.add(bytes, size, 7);
 *   t.get(bytes, size) // → 7; -1 for bytes never added
 */
export class OrdinalsByBytes {
  /**
   * Slots of four: the hash, where the id's bytes start in `bytes`, their
   * count (0: an empty slot), the ordinal. A lookup reads one slot and, on a hash match, the bytes: two cache lines.
   */
  private slots: Int32Array;
  private count = 0;
  private bytes: Uint8Array;
  private used = 0;

  /** `expected`: about how many ids will be added (the table is sized for them at once). */
  constructor(expected = 0) {
    let n = 1024;
    while (n < expected * 2) n *= 2;
    this.slots = new Int32Array(n << 2);
    this.bytes = new Uint8Array(Math.max(4096, expected * 16));
  }

  /** Add an id's bytes with its ordinal (each id once). */
  add(bytes: Uint8Array, size: number, ord: number): void {
    if ((this.count + 1) * 2 > this.slots.length >> 2) this.rehash((this.slots.length >> 2) * 2);
    if (this.used + size > this.bytes.length) {
      const wider = new Uint8Array(Math.max(this.bytes.length * 2, this.used + size));
      wider.set(this.bytes.subarray(0, this.used));
      this.bytes = wider;
    }
    const at = this.used;
    const held = this.bytes;
    for (let i = 0; i < size; i++) held[at + i] = bytes[i];
    this.used += size;
    this.count++;
    this.place(hash(bytes, 0, size), at, size, ord);
  }

  /** The ordinal added with these bytes, or -1. */
  get(bytes: Uint8Array, size: number): number {
    const slots = this.slots;
    const mask = (slots.length >> 2) - 1;
    const held = this.bytes;
    const h = hash(bytes, 0, size);
    for (let s = h & mask; ; s = (s + 1) & mask) {
      const x = s << 2;
      if (slots[x + 2] === 0) return -1;
      if (slots[x] !== h || slots[x + 2] !== size) continue;
      const at = slots[x + 1];
      let i = 0;
      while (i < size && held[at + i] === bytes[i]) i++;
      if (i === size) return slots[x + 3];
    }
  }

  private place(h: number, at: number, size: number, ord: number) {
    const slots = this.slots;
    const mask = (slots.length >> 2) - 1;
    let s = h & mask;
    while (slots[(s << 2) + 2] !== 0) s = (s + 1) & mask;
    const x = s << 2;
    slots[x] = h;
    slots[x + 1] = at;
    slots[x + 2] = size;
    slots[x + 3] = ord;
  }

  private rehash(slotCount: number) {
    const old = this.slots;
    this.slots = new Int32Array(slotCount << 2);
    for (let x = 0; x < old.length; x += 4) if (old[x + 2] !== 0) this.place(old[x], old[x + 1], old[x + 2], old[x + 3]);
  }
}

/** FNV-1a over bytes[from..to), with murmur3's final mix: ids that differ in one character spread over the table. */
function hash(bytes: Uint8Array, from: number, to: number): number {
  let h = 0x811c9dc5;
  for (let i = from; i < to; i++) h = Math.imul(h ^ bytes[i], 0x01000193);
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return h ^ (h >>> 16);
}
