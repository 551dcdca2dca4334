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

export type Kind = 'identities' | 'services' | 'edgeRouters' | 'postureChecks';
export type PolicyColl = 'servicePolicies' | 'edgeRouterPolicies' | 'serviceEdgeRouterPolicies';
export const KINDS: Kind[] = ['identities', 'services', 'edgeRouters', 'postureChecks'];
export const POLICY_COLLS: PolicyColl[] = ['servicePolicies', 'edgeRouterPolicies', 'serviceEdgeRouterPolicies'];

/** Role-list field → the entity kind it selects, per policy collection. */
export const POLICY_SIDES: Record<PolicyColl, [field: string, kind: Kind][]> = {
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

/** One role list of one policy, compiled, with the entities it selects. */
export class Side {
  /** `@id` entries (ids, whether or not they exist now). */
  readonly ids = new Set<string>();
  /** `#attr` entries other than `#all`. */
  readonly attrs: string[] = [];
  all = false;
  /** Selected entities (not maintained when `all`: then every entity of the kind is selected). */
  readonly members = new Set<string>();

  constructor(
    readonly policy: PolicyState,
    readonly kind: Kind,
    roles: readonly string[],
  ) {
    for (const r of roles) {
      if (r === '#all') this.all = true;
      else if (r.startsWith('#')) this.attrs.push(r.slice(1));
      else if (r.startsWith('@')) this.ids.add(r.slice(1));
    }
  }

  /** Whether this side selects an entity with the given id and attributes (existence is the caller's). */
  matches(id: string, attrs: ReadonlySet<string> | undefined): boolean {
    if (this.all || this.ids.has(id)) return true;
    if (this.attrs.length === 0) return false;
    if (!attrs || attrs.size === 0) return false;
    if (this.policy.anyOf) return this.attrs.some((a) => attrs.has(a));
    return this.attrs.every((a) => attrs.has(a));
  }
}

/** A membership change of one side: entity ids that joined or left it. */
export interface Delta {
  side: Side;
  added: string[];
  removed: string[];
}

class EntityKind {
  /** Existing entities → their role attributes. */
  readonly attrs = new Map<string, Set<string>>();
  readonly byAttr = new Map<string, Set<string>>();
  /** `#attr` / `@id` → sides that mention it. */
  readonly sidesByRole = new Map<string, Set<Side>>();
  /** Sides with `#all`. */
  readonly allSides = new Set<Side>();
}

const EMPTY: ReadonlySet<never> = new Set();

export class RoleIndex {
  private readonly kinds = new Map<Kind, EntityKind>(KINDS.map((k) => [k, new EntityKind()]));
  private readonly policies = new Map<string, PolicyState>();
  /**
   * Bumped on every policy change and every membership change of a service, edge router or
   * posture check: views derived for many identities compare against it. A change of one
   * identity only concerns that identity's own view; the engine drops that one.
   */
  version = 0;

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
    return this.kind(kind).attrs.has(id);
  }

  entityCount(kind: Kind): number {
    return this.kind(kind).attrs.size;
  }

  entityIds(kind: Kind): Iterable<string> {
    return this.kind(kind).attrs.keys();
  }

  attributesOf(kind: Kind, id: string): ReadonlySet<string> {
    return this.kind(kind).attrs.get(id) ?? EMPTY;
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
  *sidesOf(kind: Kind, id: string, coll?: PolicyColl): Iterable<Side> {
    const k = this.kind(kind);
    const attrs = k.attrs.get(id);
    if (!attrs) return;
    for (const s of this.explicitSidesOf(k, id, attrs)) if (!coll || s.policy.coll === coll) yield s;
    for (const s of k.allSides) if (!coll || s.policy.coll === coll) yield s;
  }

  /** Sides with explicit members that hold the entity. */
  private explicitSidesOf(k: EntityKind, id: string, attrs: ReadonlySet<string>): Set<Side> {
    const out = new Set<Side>();
    for (const a of attrs) for (const s of k.sidesByRole.get('#' + a) ?? EMPTY) if (s.members.has(id)) out.add(s);
    for (const s of k.sidesByRole.get('@' + id) ?? EMPTY) if (s.members.has(id)) out.add(s);
    return out;
  }

  /** Bulk load (start-up, before any policy exists): attributes only, no evaluation, no deltas. */
  loadEntity(kind: Kind, id: string, attributes: readonly string[]) {
    const k = this.kind(kind);
    const set = new Set(attributes);
    k.attrs.set(id, set);
    for (const a of set) addTo(k.byAttr, a, id);
  }

  /** Policies of `coll` selecting the entity. */
  *policiesOf(kind: Kind, id: string, coll: PolicyColl): Iterable<PolicyState> {
    for (const s of this.sidesOf(kind, id, coll)) yield s.policy;
  }

  // ---- entity changes -----------------------------------------------------------------------

  /** Create or update an entity; returns the memberships it gained or lost. */
  upsertEntity(kind: Kind, id: string, attributes: readonly string[] | undefined, deltas: Delta[] = []): Delta[] {
    const k = this.kind(kind);
    const before = k.attrs.get(id);
    const after = new Set(attributes ?? []);
    if (before && sameSet(before, after)) return deltas;
    for (const a of before ?? EMPTY) if (!after.has(a)) removeFrom(k.byAttr, a, id);
    for (const a of after) if (!before?.has(a)) addTo(k.byAttr, a, id);
    k.attrs.set(id, after);
    // Sides that could change their mind about this entity: those naming one of its old or new attributes or its id.
    const candidates = new Set<Side>();
    for (const a of before ?? EMPTY) for (const s of k.sidesByRole.get('#' + a) ?? EMPTY) candidates.add(s);
    for (const a of after) for (const s of k.sidesByRole.get('#' + a) ?? EMPTY) candidates.add(s);
    for (const s of k.sidesByRole.get('@' + id) ?? EMPTY) candidates.add(s);
    for (const s of candidates) {
      if (s.all) continue;
      const was = s.members.has(id);
      const is = s.matches(id, after);
      if (was === is) continue;
      if (is) s.members.add(id);
      else s.members.delete(id);
      deltas.push({ side: s, added: is ? [id] : [], removed: is ? [] : [id] });
    }
    // A new entity joins every `#all` side.
    if (!before) for (const s of k.allSides) deltas.push({ side: s, added: [id], removed: [] });
    if (kind !== 'identities' && (deltas.length || !before)) this.version++;
    return deltas;
  }

  deleteEntity(kind: Kind, id: string, deltas: Delta[] = []): Delta[] {
    const k = this.kind(kind);
    const before = k.attrs.get(id);
    if (!before) return deltas;
    for (const s of this.explicitSidesOf(k, id, before)) {
      s.members.delete(id);
      deltas.push({ side: s, added: [], removed: [id] });
    }
    for (const a of before) removeFrom(k.byAttr, a, id);
    for (const s of k.allSides) deltas.push({ side: s, added: [], removed: [id] });
    k.attrs.delete(id);
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
      const side = new Side(after, kind, roles);
      after.sides.set(kind, side);
      const old = before?.sides.get(kind);
      const k = this.kind(kind);
      if (old) this.unregister(k, old);
      this.register(k, side);
      // Members from the attribute map (never a scan of the kind; `#all` keeps none).
      if (!side.all) this.fill(side);
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
      deltas.push({ side, added: [], removed: [...this.membersOfDetached(side)] });
    }
    this.policies.delete(id);
    this.version++;
    return { before, deltas };
  }

  /** Members a side held (after it was unregistered, `all` sides answer with the current kind). */
  private membersOfDetached(side: Side): Iterable<string> {
    return side.all ? this.entityIds(side.kind) : side.members;
  }

  private register(k: EntityKind, side: Side) {
    if (side.all) k.allSides.add(side);
    for (const a of side.attrs) addTo(k.sidesByRole, '#' + a, side);
    for (const id of side.ids) addTo(k.sidesByRole, '@' + id, side);
  }

  /** Detach a side from the kind's maps; its `members` set stays intact for diffing. */
  private unregister(k: EntityKind, side: Side) {
    k.allSides.delete(side);
    for (const a of side.attrs) removeFrom(k.sidesByRole, '#' + a, side);
    for (const id of side.ids) removeFrom(k.sidesByRole, '@' + id, side);
  }

  /** Fill a (non-`#all`) side's members from the attribute map. */
  private fill(side: Side) {
    const k = this.kind(side.kind);
    const out = side.members;
    for (const id of side.ids) if (k.attrs.has(id)) out.add(id);
    if (side.attrs.length === 0) return;
    if (side.policy.anyOf) {
      for (const a of side.attrs) {
        const set = k.byAttr.get(a);
        if (set) for (const id of set) out.add(id);
      }
      return;
    }
    const sets: ReadonlySet<string>[] = [];
    for (const a of side.attrs) {
      const set = k.byAttr.get(a);
      if (!set) return;
      sets.push(set);
    }
    sets.sort((x, y) => x.size - y.size);
    const [first, ...rest] = sets;
    outer: for (const id of first) {
      for (const s of rest) if (!s.has(id)) continue outer;
      out.add(id);
    }
  }

  /** The entities a (non-`#all`) side selects, computed from the attribute map. */
  evaluate(side: Side): Set<string> {
    const k = this.kind(side.kind);
    const out = new Set<string>();
    if (side.all) {
      for (const id of k.attrs.keys()) out.add(id);
      return out;
    }
    for (const id of side.ids) if (k.attrs.has(id)) out.add(id);
    if (side.attrs.length === 0) return out;
    if (side.policy.anyOf) {
      for (const a of side.attrs) for (const id of k.byAttr.get(a) ?? EMPTY) out.add(id);
    } else {
      const sets: ReadonlySet<string>[] = side.attrs.map((a) => k.byAttr.get(a) ?? (EMPTY as ReadonlySet<string>)).sort((x, y) => x.size - y.size);
      for (const id of sets[0]) if (sets.every((s) => s.has(id))) out.add(id);
    }
    return out;
  }

  private diff(old: Side | undefined, side: Side): Delta {
    const oldAll = old?.all ?? false;
    const before: ReadonlySet<string> = old ? (oldAll ? new Set(this.entityIds(side.kind)) : old.members) : EMPTY;
    const after: ReadonlySet<string> = side.all ? new Set(this.entityIds(side.kind)) : side.members;
    const added: string[] = [];
    const removed: string[] = [];
    for (const id of after) if (!before.has(id)) added.push(id);
    for (const id of before) if (!after.has(id)) removed.push(id);
    return { side, added, removed };
  }
}

function sameSet(a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  if (a.size !== b.size) return false;
  for (const x of a) if (!b.has(x)) return false;
  return true;
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
