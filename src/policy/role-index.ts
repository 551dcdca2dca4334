/**
 * The role index: which entities every policy selects, kept in memory and updated incrementally.
 *
 * Per entity kind (identities, services, edge routers, posture checks) it holds each entity's role
 * attributes and the reverse attribute → entities map. Per policy and role list ("side") it holds
 * the selected entities, and per entity the sides that select it. A policy change recomputes only
 * that policy's sides (from the attribute map, never by scanning entities); an entity change
 * re-evaluates only that entity against the sides that mention one of its attributes, its `@id`,
 * or `#all`. Each change reports the membership deltas it caused (`Delta`), which drive service
 * update timestamps and session revocation (engine.ts).
 *
 * Memory and build time at a million identities: entities are numbered per kind (ordinals) and
 * every set of entities (a side's members, an attribute's entities) is an `IdSet` of ordinals, a
 * hash set while small and a bitset once that is smaller, so filling a policy's side from the
 * attribute sets is a word-wise OR/AND. Entities loaded with the same attributes share one array.
 *
 * Matching: an entity is selected by a role list when its id is among the `@` ids,
 * or the list holds `#all`, or (AllOf) it carries every `#` attribute of a non-empty attribute
 * part, or (AnyOf) at least one of them. An empty list selects nothing.
 *
 * Example:
 *   const idx = new RoleIndex();
 *   idx.upsertEntity('identities', 'I1', ['sales']);
 *   idx.upsertPolicy('servicePolicies', { id: 'P', type: 'Dial', semantic: 'AnyOf', identityRoles: ['#sales'], serviceRoles: ['#all'] });
 *   idx.isMember(idx.policy('P')!.sides.get('identities')!, 'I1') // → true
 */

import { OrdinalsByBytes, type OrdinalsByBytesState } from './ordinals-by-bytes.js';

export type Kind = 'identities' | 'services' | 'edgeRouters' | 'postureChecks';
export type PolicyColl = 'servicePolicies' | 'edgeRouterPolicies' | 'serviceEdgeRouterPolicies';
export const KINDS: Kind[] = ['identities', 'services', 'edgeRouters', 'postureChecks'];
export const POLICY_COLLS: PolicyColl[] = ['servicePolicies', 'edgeRouterPolicies', 'serviceEdgeRouterPolicies'];

/** Role-list field → the entity kind it selects, per policy collection. */
/** The role lists of policy records, one per side. */
export type RoleField = 'identityRoles' | 'serviceRoles' | 'postureCheckRoles' | 'edgeRouterRoles';
export const POLICY_SIDES: Record<PolicyColl, [field: RoleField, kind: Kind][]> = {
  servicePolicies: [
    ['identityRoles', 'identities'],
    ['serviceRoles', 'services'],
    ['postureCheckRoles', 'postureChecks'],
  ],
  edgeRouterPolicies: [
    ['identityRoles', 'identities'],
    ['edgeRouterRoles', 'edgeRouters'],
  ],
  serviceEdgeRouterPolicies: [
    ['serviceRoles', 'services'],
    ['edgeRouterRoles', 'edgeRouters'],
  ],
};

export interface PolicyState {
  id: string;
  coll: PolicyColl;
  /** Service policies: `Dial` or `Bind`. */
  type?: 'Dial' | 'Bind';
  anyOf: boolean;
  /** One side per selected kind. */
  sides: Map<Kind, Side>;
}

/**
 * The ids of one entity kind as small integers (ordinals). A deleted entity's ordinal is reused
 * only after `settle()` (the end of a change batch): until then, sides detached during the batch
 * (a policy's previous state, kept for comparing) still read their old members right.
 */
class Ordinals {
  /** Ordinal → id (undefined: free). */
  readonly ids: (string | undefined)[] = [];
  /** Id → ordinal, by the id's bytes (ordinals-by-bytes.ts). */
  readonly byId: OrdinalsByBytes;
  private readonly free: number[] = [];
  private released: number[] = [];
  /** The id `get` found last, and its ordinal. */
  private lastId: string | undefined;
  private lastOrd = -1;

  constructor(byId = new OrdinalsByBytes()) {
    this.byId = byId;
  }

  /** Ordinals as a snapshot holds them (settled: no release pending). */
  toState(): OrdinalsState {
    return { byId: this.byId.toState(), span: this.ids.length, free: Int32Array.from(this.free) };
  }

  static fromState(st: OrdinalsState): Ordinals {
    const o = new Ordinals(OrdinalsByBytes.fromState(st.byId));
    o.ids.length = st.span;
    let text: Buffer | undefined;
    o.byId.forEach((ord, bytes, start, end) => {
      text ??= Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      o.ids[ord] = text.toString('utf8', start, end);
    });
    for (const f of st.free) o.free.push(f);
    return o;
  }

  get(id: string): number | undefined {
    // A page of services asks about one caller per service, several times each: the last id found
    // is answered without encoding and hashing it again.
    if (id === this.lastId) return this.lastOrd;
    const o = this.byId.getString(id);
    if (o < 0) return undefined;
    this.lastId = id;
    this.lastOrd = o;
    return o;
  }

  add(id: string): number {
    const o = this.next(id);
    this.byId.addString(id, o);
    return o;
  }

  /** `add` of an id given also as its UTF-8 bytes `bytes[start..end)` (a bulk load: no encoding). */
  addBytes(id: string, bytes: Uint8Array, start: number, end: number): number {
    const o = this.next(id);
    this.byId.add(bytes, start, end, o);
    return o;
  }

  private next(id: string): number {
    const o = this.free.pop() ?? this.ids.length;
    this.ids[o] = id;
    return o;
  }

  release(id: string) {
    if (id === this.lastId) this.lastId = undefined;
    const o = this.byId.deleteString(id);
    if (o < 0) return;
    this.ids[o] = undefined;
    this.released.push(o);
  }

  settle() {
    for (const o of this.released) this.free.push(o);
    this.released = [];
  }

  /** Ids in use, by ordinal. */
  *[Symbol.iterator](): Iterator<string> {
    for (const id of this.ids) if (id !== undefined) yield id;
  }

  /** One past the highest ordinal in use: the width a bitset of this kind may need. */
  get span(): number {
    return this.ids.length;
  }
}

export interface OrdinalsState {
  byId: OrdinalsByBytesState;
  /** One past the highest ordinal ever used. */
  span: number;
  /** Ordinals free for reuse. */
  free: Int32Array;
}

/** An IdSet as a snapshot holds it: its bitset, or its ordinals while sparse. */
export interface IdSetState {
  size: number;
  bits?: Uint32Array;
  ordinals?: Int32Array;
}

/** One entity kind of the index as a snapshot holds it (index-snapshot.ts). */
export interface EntityKindState {
  ords: OrdinalsState;
  /** The distinct attribute lists entities carry. */
  lists: string[][];
  /** Per ordinal, its list in `lists` (-1: no entity). */
  listOf: Int32Array;
  /** Attribute → its entities. */
  byAttr: [attribute: string, entities: IdSetState][];
}

/**
 * A set of entities of one kind, held as ordinals: a Set of numbers while sparse (about 24 bytes an
 * entry), a bitset (one bit per ordinal of the kind) once that is smaller. Reads take and give ids.
 */
export class IdSet implements Iterable<string> {
  private sparse: Set<number> | undefined = new Set();
  private bits: Uint32Array | undefined;
  size = 0;

  constructor(
    private readonly ords: Ordinals,
    /** Smallest size held as a bitset (tests lower it to exercise both forms on small models). */
    private readonly minDense: number,
  ) {}

  toState(): IdSetState {
    return this.bits ? { size: this.size, bits: this.bits } : { size: this.size, ordinals: Int32Array.from(this.sparse!) };
  }

  /** A set as `toState` gave it (a bitset is taken over, not copied). */
  static fromState(ords: Ordinals, minDense: number, st: IdSetState): IdSet {
    const set = new IdSet(ords, minDense);
    if (st.bits) {
      set.bits = st.bits;
      set.sparse = undefined;
    } else set.sparse = new Set(st.ordinals);
    set.size = st.size;
    return set;
  }

  has(id: string): boolean {
    const o = this.ords.get(id);
    return o !== undefined && this.hasOrd(o);
  }

  hasOrd(o: number): boolean {
    const b = this.bits;
    if (!b) return this.sparse!.has(o);
    const w = o >>> 5;
    return w < b.length && (b[w] & (1 << (o & 31))) !== 0;
  }

  addOrd(o: number): void {
    if (this.bits) {
      const w = o >>> 5;
      if (w >= this.bits.length) this.grow(w + 1);
      if (!this.bits) return this.addOrd(o);
      const m = 1 << (o & 31);
      if (this.bits[w] & m) return;
      this.bits[w] |= m;
      this.size++;
      return;
    }
    const s = this.sparse!;
    if (s.has(o)) return;
    s.add(o);
    this.size++;
    if (this.size >= this.minDense && this.size * 128 >= this.ords.span) this.toDense();
  }

  /** About `more` members are about to be added: a bitset at once when they will make one. */
  expect(more: number) {
    if (this.sparse && this.size + more >= this.minDense && (this.size + more) * 128 >= this.ords.span) this.toDense();
  }

  deleteOrd(o: number) {
    if (!this.hasOrd(o)) return;
    this.size--;
    if (this.bits) {
      this.bits[o >>> 5] &= ~(1 << (o & 31));
      if (this.size * 512 < this.ords.span) this.toSparse();
    } else this.sparse!.delete(o);
  }

  /** Whether the two sets (same kind) share a member. */
  intersects(other: IdSet): boolean {
    const a = this.bits;
    const b = other.bits;
    if (a && b) {
      for (let i = Math.min(a.length, b.length) - 1; i >= 0; i--) if ((a[i] & b[i]) !== 0) return true;
      return false;
    }
    const [small, big] = this.size <= other.size ? [this, other] : [other, this];
    for (const o of small.ordinals()) if (big.hasOrd(o)) return true;
    return false;
  }

  /** Adds every member of `other` (same kind). */
  addAll(other: IdSet) {
    const ob = other.bits;
    if (ob && (this.bits || this.size === 0)) {
      if (!this.bits || this.bits.length < ob.length) {
        const wider = new Uint32Array(ob.length);
        if (this.bits) wider.set(this.bits);
        this.bits = wider;
      }
      const b = this.bits;
      let n = 0;
      for (let i = 0; i < b.length; i++) n += popcount((b[i] |= ob[i] ?? 0));
      this.sparse = undefined;
      this.size = n;
      return;
    }
    for (const o of other.ordinals()) this.addOrd(o);
  }

  /** Keeps only the members also in every one of `others` (this set is the smallest). */
  retainAll(others: IdSet[]) {
    if (this.bits && others.every((x) => x.bits)) {
      const b = this.bits;
      let n = 0;
      for (let i = 0; i < b.length; i++) {
        let w = b[i];
        for (const x of others) w &= x.bits![i] ?? 0;
        n += popcount((b[i] = w));
      }
      this.size = n;
      if (this.size * 512 < this.ords.span) this.toSparse();
      return;
    }
    for (const o of [...this.ordinals()]) if (!others.every((x) => x.hasOrd(o))) this.deleteOrd(o);
  }

  /** Member ordinals. */
  *ordinals(): Iterable<number> {
    if (!this.bits) {
      yield* this.sparse!;
      return;
    }
    const b = this.bits;
    for (let i = 0; i < b.length; i++) {
      let w = b[i];
      while (w !== 0) {
        const low = w & -w;
        yield (i << 5) + 31 - Math.clz32(low);
        w ^= low;
      }
    }
  }

  *[Symbol.iterator](): Iterator<string> {
    // An ordinal released in this batch may linger in a detached side (see Ordinals): skipped.
    const ids = this.ords.ids;
    for (const o of this.ordinals()) {
      const id = ids[o];
      if (id !== undefined) yield id;
    }
  }

  private toDense() {
    const b = new Uint32Array(Math.max(1, Math.ceil(this.ords.span / 32)));
    for (const o of this.sparse!) b[o >>> 5] |= 1 << (o & 31);
    this.bits = b;
    this.sparse = undefined;
  }

  private toSparse() {
    this.sparse = new Set(this.ordinals());
    this.bits = undefined;
  }

  /** Widen the bitset for a new ordinal, or go back to a Set when the kind outgrew this one. */
  private grow(words: number) {
    if (this.size * 512 < words * 32) return this.toSparse();
    const b = new Uint32Array(Math.max(words, Math.ceil(this.bits!.length * 1.5)));
    b.set(this.bits!);
    this.bits = b;
  }
}

function popcount(x: number): number {
  x -= (x >>> 1) & 0x55555555;
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  return (Math.imul((x + (x >>> 4)) & 0x0f0f0f0f, 0x01010101) >>> 24) & 0xff;
}

/** One role list of one policy, compiled, with the entities it selects. */
export class Side {
  /** `@id` entries (ids, whether or not they exist now). */
  readonly ids = new Set<string>();
  /** `#attr` entries other than `#all`. */
  readonly attrs: string[] = [];
  all = false;
  /** RoleIndex.explicitSidesOf's mark: already taken by the call with this stamp. */
  mark = 0;
  /** Selected entities (not maintained when `all`: then every entity of the kind is selected). */
  readonly members: IdSet;

  constructor(
    readonly policy: PolicyState,
    readonly kind: Kind,
    roles: readonly string[],
    members: IdSet,
  ) {
    this.members = members;
    for (const r of roles) {
      if (r === '#all') this.all = true;
      else if (r.startsWith('#')) this.attrs.push(r.slice(1));
      else if (r.startsWith('@')) this.ids.add(r.slice(1));
    }
  }

  /** Whether this side selects an entity with the given id and attributes (existence is the caller's). */
  matches(id: string, attrs: readonly string[] | undefined): boolean {
    if (this.all || this.ids.has(id)) return true;
    if (this.attrs.length === 0) return false;
    if (!attrs || attrs.length === 0) return false;
    if (this.policy.anyOf) return this.attrs.some((a) => attrs.includes(a));
    return this.attrs.every((a) => attrs.includes(a));
  }
}

/** A membership change of one side: entity ids that joined or left it. */
export interface Delta {
  side: Side;
  added: string[];
  removed: string[];
}

const NONE: readonly string[] = Object.freeze([]);

class EntityKind {
  ords = new Ordinals();
  /** Role attributes by ordinal (deduplicated; undefined: no such entity). */
  readonly attrs: (readonly string[] | undefined)[] = [];
  readonly byAttr = new Map<string, IdSet>();
  /** Attribute → sides whose role list names it (`#attr`). */
  readonly sidesByAttr = new Map<string, Set<Side>>();
  /** Id → sides whose role list names it (`@id`). */
  readonly sidesById = new Map<string, Set<Side>>();
  /** Sides with `#all`. */
  readonly allSides = new Set<Side>();

  constructor(readonly minDense: number) {}

  newSet(): IdSet {
    return new IdSet(this.ords, this.minDense);
  }

  toState(): EntityKindState {
    const lists: string[][] = [];
    const listIndex = new Map<readonly string[], number>();
    const listOf = new Int32Array(this.ords.ids.length).fill(-1);
    for (let o = 0; o < listOf.length; o++) {
      const list = this.attrs[o];
      if (!list) continue;
      let i = listIndex.get(list);
      if (i === undefined) listIndex.set(list, (i = lists.push([...list]) - 1));
      listOf[o] = i;
    }
    return { ords: this.ords.toState(), lists, listOf, byAttr: [...this.byAttr].map(([a, set]) => [a, set.toState()]) };
  }

  /** The state `toState` gave, on a kind with no entity and no side yet. */
  restore(st: EntityKindState) {
    this.ords = Ordinals.fromState(st.ords);
    const lists: readonly string[][] = st.lists.map((l) => (l.length ? l : (NONE as string[])));
    for (let o = 0; o < st.listOf.length; o++) this.attrs[o] = st.listOf[o] < 0 ? undefined : lists[st.listOf[o]];
    for (const [a, set] of st.byAttr) this.byAttr.set(a, IdSet.fromState(this.ords, this.minDense, set));
  }

  addAttr(a: string, o: number) {
    let s = this.byAttr.get(a);
    if (!s) this.byAttr.set(a, (s = this.newSet()));
    s.addOrd(o);
  }

  removeAttr(a: string, o: number) {
    const s = this.byAttr.get(a);
    if (!s) return;
    s.deleteOrd(o);
    if (s.size === 0) this.byAttr.delete(a);
  }
}

const EMPTY: ReadonlySet<never> = new Set();

export class RoleIndex {
  private readonly kinds: Map<Kind, EntityKind>;
  private readonly policies = new Map<string, PolicyState>();
  /** The mark of the latest explicitSidesOf call (Side.mark). */
  private stamp = 0;
  /**
   * Bumped on every policy change and every membership change of a service, edge router or
   * posture check: views derived for many identities compare against it. A change of one
   * identity only concerns that identity's own view; the engine drops that one.
   */
  version = 0;

  /** Smallest set held as a bitset. */
  readonly minDense: number;

  constructor(opts: { minDense?: number } = {}) {
    this.minDense = opts.minDense ?? 64;
    this.kinds = new Map(KINDS.map((k) => [k, new EntityKind(this.minDense)]));
  }

  private kind(k: Kind): EntityKind {
    return this.kinds.get(k)!;
  }

  // ---- reads --------------------------------------------------------------------------------

  policy(id: string): PolicyState | undefined {
    return this.policies.get(id);
  }

  /** The policies of one collection (read-only; the alert checks walk them). */
  *policiesIn(coll: PolicyColl): Iterable<PolicyState> {
    for (const p of this.policies.values()) if (p.coll === coll) yield p;
  }

  policyCount(coll?: PolicyColl): number {
    if (!coll) return this.policies.size;
    let n = 0;
    for (const p of this.policies.values()) if (p.coll === coll) n++;
    return n;
  }

  hasEntity(kind: Kind, id: string): boolean {
    return this.kind(kind).ords.get(id) !== undefined;
  }

  entityCount(kind: Kind): number {
    return this.kind(kind).ords.byId.size;
  }

  entityIds(kind: Kind): Iterable<string> {
    return this.kind(kind).ords;
  }

  attributesOf(kind: Kind, id: string): readonly string[] {
    const k = this.kind(kind);
    const o = k.ords.get(id);
    return (o !== undefined && k.attrs[o]) || NONE;
  }

  /** Every role attribute carried by at least one entity of the kind. */
  attributes(kind: Kind): Iterable<string> {
    return this.kind(kind).byAttr.keys();
  }

  isMember(side: Side, id: string): boolean {
    return side.all ? this.hasEntity(side.kind, id) : side.members.has(id);
  }

  /** The entities a side selects. */
  members(side: Side): Iterable<string> {
    return side.all ? this.entityIds(side.kind) : side.members;
  }

  memberCount(side: Side): number {
    return side.all ? this.entityCount(side.kind) : side.members.size;
  }

  /**
   * The sides of policies in `coll` that select entity `id` of `kind`. Only sides naming one of
   * its attributes or its id can hold it (plus `#all` sides), so no per-entity list is kept.
   */
  sidesOf(kind: Kind, id: string, coll?: PolicyColl): Side[] {
    const k = this.kind(kind);
    const o = k.ords.get(id);
    if (o === undefined) return [];
    const out = this.explicitSidesOf(k, id, o, coll);
    for (const s of k.allSides) if (!coll || s.policy.coll === coll) out.push(s);
    return out;
  }

  /**
   * Sides with explicit members that hold the entity (of `coll` when given), each once: a side
   * reached through several attributes is told apart by the mark of this call, set and read before
   * it returns (no Set per call: this runs at every session create).
   */
  private explicitSidesOf(k: EntityKind, id: string, o: number, coll?: PolicyColl): Side[] {
    const out: Side[] = [];
    const stamp = ++this.stamp;
    const take = (sides: Set<Side> | undefined) => {
      if (sides) for (const s of sides) if (s.mark !== stamp && (!coll || s.policy.coll === coll) && s.members.hasOrd(o)) out.push(s), (s.mark = stamp);
    };
    for (const a of k.attrs[o] ?? NONE) take(k.sidesByAttr.get(a));
    take(k.sidesById.get(id));
    return out;
  }

  /** Policies of `coll` selecting the entity. */
  policiesOf(kind: Kind, id: string, coll: PolicyColl): PolicyState[] {
    return this.sidesOf(kind, id, coll).map((s) => s.policy);
  }

  /** The ordinal of an entity (the same for as long as it exists), or -1: for many membership questions about one entity. */
  ordinal(kind: Kind, id: string): number {
    return this.kind(kind).ords.get(id) ?? -1;
  }

  /** `isMember` by the entity's `ordinal` (>= 0). */
  isMemberAt(side: Side, o: number): boolean {
    return side.all || side.members.hasOrd(o);
  }

  /** An empty set of entities of a kind, to collect ordinals in (e.g. the union of several sides). */
  newSet(kind: Kind): IdSet {
    return this.kind(kind).newSet();
  }

  // ---- bulk load (start-up, before any policy exists: no evaluation, no deltas) ---------------

  /** An entity, or its complete attributes when it is already loaded. */
  loadEntity(kind: Kind, id: string, attributes: readonly string[] = NONE) {
    const k = this.kind(kind);
    let o = k.ords.get(id);
    if (o === undefined) o = k.ords.add(id);
    for (const a of k.attrs[o] ?? NONE) k.removeAttr(a, o);
    const list = dedupe(attributes);
    k.attrs[o] = list;
    for (const a of list) k.addAttr(a, o);
  }

  /** Room for `n` more entities of a kind (a bulk load about to add them). */
  reserve(kind: Kind, n: number) {
    const ords = this.kind(kind).ords;
    ords.byId.reserve(ords.byId.size + n);
  }

  /**
   * An entity not loaded yet, without attributes (the name index lists each once), given also as
   * the UTF-8 bytes of its id, `bytes[start..end)`; returns its ordinal.
   */
  loadNewEntity(kind: Kind, id: string, bytes: Uint8Array, start: number, end: number): number {
    const k = this.kind(kind);
    const o = k.ords.addBytes(id, bytes, start, end);
    k.attrs[o] = NONE;
    return o;
  }

  /** The ordinal of a loaded entity by the UTF-8 bytes of its id, `bytes[start..end)`; -1: none. */
  ordinalOf(kind: Kind, bytes: Uint8Array, start: number, end: number): number {
    return this.kind(kind).ords.byId.get(bytes, start, end);
  }

  /** One more attribute of loaded entities (as read from the attribute index), by the ordinals loadNewEntity gave them. */
  loadAttributeAt(kind: Kind, ords: ArrayLike<number>, attribute: string) {
    const k = this.kind(kind);
    let set = k.byAttr.get(attribute);
    if (!set) k.byAttr.set(attribute, (set = k.newSet()));
    set.expect(ords.length);
    // Entities with the same attributes share one list: all entities with this attribute are here,
    // so a list and this attribute lead to the same next list for all of them (a million
    // identities carry a few thousand distinct lists).
    const grown = new Map<readonly string[], readonly string[]>();
    for (let i = 0; i < ords.length; i++) {
      const o = ords[i];
      const list = k.attrs[o] ?? NONE;
      if (list.includes(attribute)) continue;
      let next = grown.get(list);
      if (!next) grown.set(list, (next = [...list, attribute]));
      k.attrs[o] = next;
      set.addOrd(o);
    }
    if (set.size === 0) k.byAttr.delete(attribute);
  }

  /** The entities of a kind (attributes and attribute sets; policies are not part of it), settled. */
  entityState(kind: Kind): EntityKindState {
    return this.kind(kind).toState();
  }

  /** Entities of a kind as `entityState` gave them, into an index that holds no entity or policy yet. */
  restoreEntities(kind: Kind, st: EntityKindState) {
    const k = this.kind(kind);
    if (k.ords.byId.size > 0 || this.policies.size > 0) throw new Error('restoreEntities: the index is not empty');
    k.restore(st);
  }

  /** End of a change batch: ordinals of entities deleted in it may be reused from now on. */
  settle() {
    for (const k of this.kinds.values()) k.ords.settle();
  }

  // ---- entity changes -----------------------------------------------------------------------

  /** Create or update an entity; returns the memberships it gained or lost. */
  upsertEntity(kind: Kind, id: string, attributes: readonly string[] | undefined, deltas: Delta[] = []): Delta[] {
    const k = this.kind(kind);
    let o = k.ords.get(id);
    const isNew = o === undefined;
    if (o === undefined) o = k.ords.add(id);
    const before = isNew ? undefined : (k.attrs[o] ?? NONE);
    const after = dedupe(attributes ?? NONE);
    if (before && sameList(before, after)) return deltas;
    for (const a of before ?? NONE) if (!after.includes(a)) k.removeAttr(a, o);
    for (const a of after) if (!before?.includes(a)) k.addAttr(a, o);
    k.attrs[o] = after;
    // Sides that could change their mind about this entity: those naming one of its old or new attributes or its id.
    const candidates = new Set<Side>();
    for (const a of before ?? NONE) for (const s of k.sidesByAttr.get(a) ?? EMPTY) candidates.add(s);
    for (const a of after) for (const s of k.sidesByAttr.get(a) ?? EMPTY) candidates.add(s);
    for (const s of k.sidesById.get(id) ?? EMPTY) candidates.add(s);
    for (const s of candidates) {
      if (s.all) continue;
      const was = s.members.hasOrd(o);
      const is = s.matches(id, after);
      if (was === is) continue;
      if (is) s.members.addOrd(o);
      else s.members.deleteOrd(o);
      deltas.push({ side: s, added: is ? [id] : [], removed: is ? [] : [id] });
    }
    // A new entity joins every `#all` side.
    if (isNew) for (const s of k.allSides) deltas.push({ side: s, added: [id], removed: [] });
    if (kind !== 'identities' && (deltas.length || isNew)) this.version++;
    return deltas;
  }

  deleteEntity(kind: Kind, id: string, deltas: Delta[] = []): Delta[] {
    const k = this.kind(kind);
    const o = k.ords.get(id);
    if (o === undefined) return deltas;
    for (const s of this.explicitSidesOf(k, id, o)) {
      s.members.deleteOrd(o);
      deltas.push({ side: s, added: [], removed: [id] });
    }
    for (const a of k.attrs[o] ?? NONE) k.removeAttr(a, o);
    for (const s of k.allSides) deltas.push({ side: s, added: [], removed: [id] });
    k.attrs[o] = undefined;
    k.ords.release(id);
    if (kind !== 'identities') this.version++;
    return deltas;
  }

  // ---- policy changes -----------------------------------------------------------------------

  /**
   * Create or replace a policy. Returns the previous state (its sides keep their old members, for
   * comparing) and, when `deltas` is given, the membership changes per side.
   */
  upsertPolicy(coll: PolicyColl, rec: { id: string; type?: unknown; semantic?: unknown; [f: string]: unknown }, deltas?: Delta[]): { before?: PolicyState; after: PolicyState; deltas?: Delta[] } {
    const before = this.policies.get(rec.id);
    const after: PolicyState = {
      id: rec.id,
      coll,
      type: rec.type === 'Bind' ? 'Bind' : rec.type === 'Dial' ? 'Dial' : undefined,
      anyOf: String(rec.semantic ?? 'AllOf').toLowerCase() === 'anyof',
      sides: new Map(),
    };
    for (const [field, kind] of POLICY_SIDES[coll]) {
      const roles = Array.isArray(rec[field]) ? (rec[field] as string[]) : [];
      const k = this.kind(kind);
      const side = new Side(after, kind, roles, k.newSet());
      after.sides.set(kind, side);
      const old = before?.sides.get(kind);
      if (old) this.unregister(k, old);
      this.register(k, side);
      // Members from the attribute sets (never a scan of the kind; `#all` keeps none).
      if (!side.all) this.fill(k, side);
      deltas?.push(this.diff(old, side));
    }
    this.policies.set(rec.id, after);
    this.version++;
    return { before, after, deltas };
  }

  deletePolicy(id: string, deltas: Delta[] = []): { before?: PolicyState; deltas: Delta[] } {
    const before = this.policies.get(id);
    if (!before) return { deltas };
    for (const side of before.sides.values()) {
      this.unregister(this.kind(side.kind), side);
      deltas.push({ side, added: [], removed: [...this.members(side)] });
    }
    this.policies.delete(id);
    this.version++;
    return { before, deltas };
  }

  private register(k: EntityKind, side: Side) {
    if (side.all) k.allSides.add(side);
    for (const a of side.attrs) addTo(k.sidesByAttr, a, side);
    for (const id of side.ids) addTo(k.sidesById, id, side);
  }

  /** Detach a side from the kind's maps; its `members` set stays intact for diffing. */
  private unregister(k: EntityKind, side: Side) {
    k.allSides.delete(side);
    for (const a of side.attrs) removeFrom(k.sidesByAttr, a, side);
    for (const id of side.ids) removeFrom(k.sidesById, id, side);
  }

  /** Fill a (non-`#all`) side's members from the attribute sets. */
  private fill(k: EntityKind, side: Side) {
    const out = side.members;
    if (side.policy.anyOf) {
      for (const a of side.attrs) {
        const set = k.byAttr.get(a);
        if (set) out.addAll(set);
      }
    } else if (side.attrs.length > 0) {
      const sets = side.attrs.map((a) => k.byAttr.get(a));
      if (sets.every((s) => s !== undefined)) {
        sets.sort((x, y) => x.size - y.size);
        out.addAll(sets[0]);
        out.retainAll(sets.slice(1));
      }
    }
    for (const id of side.ids) {
      const o = k.ords.get(id);
      if (o !== undefined) out.addOrd(o);
    }
  }

  private diff(old: Side | undefined, side: Side): Delta {
    const oldAll = old?.all ?? false;
    const before: { has(id: string): boolean } & Iterable<string> = old ? (oldAll ? new Set(this.entityIds(side.kind)) : old.members) : EMPTY;
    const after: { has(id: string): boolean } & Iterable<string> = side.all ? new Set(this.entityIds(side.kind)) : side.members;
    const added: string[] = [];
    const removed: string[] = [];
    for (const id of after) if (!before.has(id)) added.push(id);
    for (const id of before) if (!after.has(id)) removed.push(id);
    return { side, added, removed };
  }
}

/** The list without repeats (the same array when it has none: the common case). */
function dedupe(list: readonly string[]): readonly string[] {
  if (list.length < 2) return list.length === 0 ? NONE : list;
  for (let i = 1; i < list.length; i++) if (list.indexOf(list[i]) < i) return [...new Set(list)];
  return list;
}

/** Same members (both without repeats). */
function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x) => b.includes(x));
}

function addTo<K, V>(m: Map<K, Set<V>>, k: K, v: V) {
  let s = m.get(k);
  if (!s) m.set(k, (s = new Set()));
  s.add(v);
}

function removeFrom<K, V>(m: Map<K, Set<V>>, k: K, v: V) {
  const s = m.get(k);
  if (!s) return;
  s.delete(v);
  if (s.size === 0) m.delete(k);
}
