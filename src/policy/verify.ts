/**
 * A from-scratch check of the role index: for sampled identities (and every service), the
 * policies that select them and the services and edge routers they reach, evaluated again from the
 * store's records with the plain rule, compared with what the index and the access queries answer.
 * It shares no code with the index, so a fault in the index's sets, ordinals or incremental
 * updates shows as a mismatch. Used by the unit tests and by `npm run bench:scale -- --verify N`
 * on a model of any size (it decodes the sampled identities, every service, router and policy).
 *
 * Example:
 *   const r = checkIndex(store, engine, sampleIds(store, 1000));
 *   r.mismatches // → [] when the index is right
 */
import type { BaseRecord, CollectionName, Store } from '../store/store.js';
import type { AccessQueries } from './access.js';
import { POLICY_COLLS, POLICY_SIDES, type Kind, type PolicyColl, type RoleField } from './role-index.js';

/** A policy record as the check reads it: its semantic and the role lists of its sides (each collection has some of them). */
type PolicyRoles = BaseRecord & { semantic?: string } & Partial<Record<RoleField, string[]>>;

/** The rule, as docs/policy.md states it: `@id` or `#all`, else AllOf/AnyOf over `#attr`; an empty list selects nothing. */
export function selects(roles: readonly string[] | undefined, anyOf: boolean, id: string, attrs: readonly string[] | undefined): boolean {
  if (!roles) return false;
  if (roles.includes('#all') || roles.includes('@' + id)) return true;
  const want = roles.filter((r) => r.startsWith('#')).map((r) => r.slice(1));
  if (want.length === 0) return false;
  const has = new Set(attrs ?? []);
  return anyOf ? want.some((a) => has.has(a)) : want.every((a) => has.has(a));
}

export interface IndexCheck {
  identities: number;
  services: number;
  policies: number;
  /** What differed (at most `maxReported` lines); empty when the index agrees with the records. */
  mismatches: string[];
  ms: number;
}

/** Up to `n` identity ids spread evenly over the collection (first and last included). */
export function sampleIds(store: Store, n: number, collection: CollectionName = 'identities'): string[] {
  const total = store.count(collection);
  if (total === 0 || n <= 0) return [];
  const step = Math.max(1, (total - 1) / Math.max(1, n - 1));
  const want = new Set<number>();
  for (let i = 0; i < Math.min(n, total); i++) want.add(Math.round(i * step));
  const out: string[] = [];
  let i = 0;
  for (const id of store.ids(collection)) if (want.has(i++)) out.push(id);
  return out;
}

export function checkIndex(store: Store, access: AccessQueries, identityIds: Iterable<string>, maxReported = 20): IndexCheck {
  const t0 = performance.now();
  const mismatches: string[] = [];
  const report = (line: string) => {
    if (mismatches.length < maxReported) mismatches.push(line);
  };
  const entities = (coll: Kind) => [...store.scan(coll)].map((r) => ({ id: r.id, attrs: r.roleAttributes }));
  const byKind: Partial<Record<Kind, { id: string; attrs?: string[] }[]>> = { services: entities('services'), edgeRouters: entities('edgeRouters') };
  const policies = POLICY_COLLS.flatMap((coll) => [...store.scan(coll)].map((rec: PolicyRoles) => ({ coll, rec, anyOf: String(rec.semantic ?? 'AllOf').toLowerCase() === 'anyof' })));
  // Per policy, the services and routers it selects, from the records.
  const selected = new Map<string, Partial<Record<Kind, Set<string>>>>();
  for (const p of policies) {
    const sel: Partial<Record<Kind, Set<string>>> = {};
    for (const [field, kind] of POLICY_SIDES[p.coll]) {
      const all = byKind[kind];
      if (all) sel[kind] = new Set(all.filter((e) => selects(p.rec[field], p.anyOf, e.id, e.attrs)).map((e) => e.id));
    }
    selected.set(p.rec.id, sel);
  }
  const { index } = access;
  const same = (what: string, got: Iterable<string>, want: Iterable<string>) => {
    const g = [...new Set(got)].sort();
    const w = [...new Set(want)].sort();
    if (g.length !== w.length || g.some((x, i) => x !== w[i])) report(`${what}: index ${brief(g)}, records ${brief(w)}`);
  };

  let identities = 0;
  for (const id of identityIds) {
    identities++;
    const rec = store.get('identities', id);
    if (!rec) {
      if (index.hasEntity('identities', id)) report(`identity ${id}: in the index, not in the store`);
      continue;
    }
    const mine = policies.filter((p) => p.coll !== 'serviceEdgeRouterPolicies' && selects(p.rec.identityRoles, p.anyOf, id, rec.roleAttributes));
    for (const coll of ['servicePolicies', 'edgeRouterPolicies'] as PolicyColl[]) {
      same(`identity ${id} ${coll}`, [...index.policiesOf('identities', id, coll)].map((p) => p.id), mine.filter((p) => p.coll === coll).map((p) => p.rec.id));
    }
    same(`identity ${id} services`, access.accessibleServices(id), mine.filter((p) => p.coll === 'servicePolicies').flatMap((p) => [...selected.get(p.rec.id)!.services!]));
    same(`identity ${id} edge routers`, access.identityRouters(id), mine.filter((p) => p.coll === 'edgeRouterPolicies').flatMap((p) => [...selected.get(p.rec.id)!.edgeRouters!]));
  }
  for (const s of byKind.services!) {
    const mine = policies.filter((p) => p.coll !== 'edgeRouterPolicies' && selected.get(p.rec.id)!.services!.has(s.id));
    for (const coll of ['servicePolicies', 'serviceEdgeRouterPolicies'] as PolicyColl[]) {
      same(`service ${s.id} ${coll}`, [...index.policiesOf('services', s.id, coll)].map((p) => p.id), mine.filter((p) => p.coll === coll).map((p) => p.rec.id));
    }
    same(`service ${s.id} edge routers`, access.serviceRoutersOf(s.id), mine.filter((p) => p.coll === 'serviceEdgeRouterPolicies').flatMap((p) => [...selected.get(p.rec.id)!.edgeRouters!]));
  }
  same('identity count', [String(index.entityCount('identities'))], [String(store.count('identities'))]);
  return { identities, services: byKind.services!.length, policies: policies.length, mismatches, ms: performance.now() - t0 };
}

const brief = (ids: string[]) => (ids.length > 6 ? `[${ids.slice(0, 6).join(', ')}, … ${ids.length} in all]` : `[${ids.join(', ')}]`);
