/**
 * Access queries over the role index: which services an identity may Dial or Bind (and the
 * granting policies: the reference count of each identity→service link), which edge routers it may
 * use, which routers serve a service, and whether posture lets a session through. Per-identity and
 * per-service views are cached against `index.version`, so any index change invalidates them.
 *
 * The policy engine (engine.ts) extends this with what keeps the index current.
 */
import type { Store, IdentityRecord, PostureCheckRecord } from '../store/store.js';
import { RoleIndex, type IdSet, type PolicyState } from './role-index.js';
import { PostureStore, type CheckResult } from './posture.js';

export type PolicyType = 'Dial' | 'Bind';

/** A granting policy whose posture checks fail, with each failing check's actual and expected value. */
export interface PolicyFailure {
  policyId: string;
  policyName: string;
  checks: { postureCheckId: string; postureCheckName: string; postureCheckType: string; actualValue: unknown; expectedValue: unknown }[];
}

/**
 * What is kept per identity (until the index changes): the services it may Dial or Bind, sorted,
 * and the edge routers it may use — each built on first use. Whether a given service is granted,
 * and by which policies, is answered from the service's own (short, shared) policy list instead:
 * a per-identity map of every visible service to its granting policies was hundreds of KB for an
 * identity that sees 2,000 services, and a fleet of devices rebuilt all of them after every policy change.
 */
interface IdentityView {
  sortedServices?: string[];
  routers?: Set<string>;
  /** The same routers as ordinals (hasCommonRouter: a word-wise AND with each service policy's routers). */
  routerSet?: IdSet;
}

const MAX_VIEWS = 20_000;

export class AccessQueries {
  readonly index = new RoleIndex();
  readonly posture = new PostureStore();
  private readonly views = new Versioned<IdentityView>(this.index);
  private readonly serviceRouters = new Versioned<Set<string>>(this.index);
  private readonly servicePolicies = new Versioned<PolicyState[]>(this.index);
  private readonly serviceRouterPolicies = new Versioned<PolicyState[]>(this.index);

  constructor(readonly store: Store) {}

  /** An identity's attributes changed: its view is rebuilt on next use. */
  protected forgetView(identityId: string) {
    this.views.delete(identityId);
  }

  /** The identity's access view (cached until the index changes). */
  private view(identityId: string): IdentityView {
    return this.views.get(identityId, () => ({}));
  }

  /** Sorted ids of the services the identity may Dial or Bind. */
  accessibleServices(identityId: string): string[] {
    const v = this.view(identityId);
    if (!v.sortedServices) {
      const ids = new Set<string>();
      for (const p of this.index.policiesOf('identities', identityId, 'servicePolicies')) for (const sid of this.index.members(p.sides.get('services')!)) ids.add(sid);
      v.sortedServices = [...ids].sort();
    }
    return v.sortedServices;
  }

  /** The service policies whose service side holds the service (cached until the index changes). */
  private servicePoliciesOf(serviceId: string): PolicyState[] {
    return this.servicePolicies.get(serviceId, () => [...this.index.policiesOf('services', serviceId, 'servicePolicies')]);
  }

  // permissions, grantingPolicies and hasAccess walk the service's policies with plain loops:
  // one generator behind all three cost markedly more CPU for a page of services (docs/benchmarks.md, "Measurements behind the code").

  /** `["Bind", "Dial"]`, `["Dial"]`, … or `["Invalid"]`. */
  permissions(identityId: string, serviceId: string): string[] {
    let dial = false;
    let bind = false;
    const o = this.index.ordinal('identities', identityId);
    if (o >= 0) for (const p of this.servicePoliciesOf(serviceId)) {
      if ((p.type === 'Bind' ? bind : dial) || !this.index.isMemberAt(p.sides.get('identities')!, o)) continue;
      if (p.type === 'Bind') bind = true;
      else dial = true;
    }
    const out: string[] = [];
    if (bind) out.push('Bind');
    if (dial) out.push('Dial');
    return out.length ? out : ['Invalid'];
  }

  /** The policies granting the identity `type` access to the service. */
  grantingPolicies(identityId: string, serviceId: string, type: PolicyType): PolicyState[] {
    const out: PolicyState[] = [];
    const o = this.index.ordinal('identities', identityId);
    if (o >= 0) for (const p of this.servicePoliciesOf(serviceId)) if ((p.type === 'Bind') === (type === 'Bind') && this.index.isMemberAt(p.sides.get('identities')!, o)) out.push(p);
    return out;
  }

  hasAccess(identityId: string, serviceId: string, type?: PolicyType): boolean {
    const o = this.index.ordinal('identities', identityId);
    if (o < 0) return false;
    for (const p of this.servicePoliciesOf(serviceId)) {
      if (type && (p.type === 'Bind') !== (type === 'Bind')) continue;
      if (this.index.isMemberAt(p.sides.get('identities')!, o)) return true;
    }
    return false;
  }

  /** Edge routers an identity may use (edge router policies). */
  identityRouters(identityId: string): Set<string> {
    const v = this.view(identityId);
    if (!v.routers) {
      v.routers = new Set();
      for (const p of this.index.policiesOf('identities', identityId, 'edgeRouterPolicies')) for (const rid of this.index.members(p.sides.get('edgeRouters')!)) v.routers.add(rid);
    }
    return v.routers;
  }

  /** Edge routers a service may be reached through (service edge router policies). */
  serviceRoutersOf(serviceId: string): Set<string> {
    return this.serviceRouters.get(serviceId, () => {
      const routers = new Set<string>();
      for (const p of this.index.policiesOf('services', serviceId, 'serviceEdgeRouterPolicies')) for (const rid of this.index.members(p.sides.get('edgeRouters')!)) routers.add(rid);
      return routers;
    });
  }

  /** Whether a service may be reached through a router, without building the service's router set. */
  serviceReaches(serviceId: string, routerId: string): boolean {
    const cached = this.serviceRouters.fresh(serviceId);
    if (cached) return cached.has(routerId);
    for (const p of this.index.policiesOf('services', serviceId, 'serviceEdgeRouterPolicies')) if (this.index.isMember(p.sides.get('edgeRouters')!, routerId)) return true;
    return false;
  }

  /** Routers both the identity's and the service's policies allow (optionally only those passing `keep`), sorted. */
  commonRouters(identityId: string, serviceId: string, keep?: (routerId: string) => boolean): string[] {
    const a = this.identityRouters(identityId);
    const b = this.serviceRoutersOf(serviceId);
    const [small, big] = a.size <= b.size ? [a, b] : [b, a];
    const out: string[] = [];
    for (const r of small) if (big.has(r) && (!keep || keep(r))) out.push(r);
    return out.sort();
  }

  /**
   * Whether the identity's and the service's router policies share at least one router. Asked at
   * every session create, all in ordinals: the identity's routers as one set (kept in its view),
   * and-ed with each of the service's policies' router sides in turn, which usually answers at the
   * first policy instead of building the union of every policy's routers (docs/benchmarks.md,
   * "Measurements behind the code").
   */
  hasCommonRouter(identityId: string, serviceId: string): boolean {
    const v = this.view(identityId);
    if (!v.routerSet) {
      const set = this.index.newSet('edgeRouters');
      for (const p of this.index.policiesOf('identities', identityId, 'edgeRouterPolicies')) {
        const side = p.sides.get('edgeRouters')!;
        if (side.all) for (const r of this.index.members(side)) set.addOrd(this.index.ordinal('edgeRouters', r));
        else set.addAll(side.members);
      }
      v.routerSet = set;
    }
    const mine = v.routerSet;
    if (mine.size === 0) return false;
    const policies = this.serviceRouterPolicies.get(serviceId, () => this.index.policiesOf('services', serviceId, 'serviceEdgeRouterPolicies'));
    for (const p of policies) {
      const side = p.sides.get('edgeRouters')!;
      if (side.all ? this.index.memberCount(side) > 0 : mine.intersects(side.members)) return true;
    }
    return false;
  }

  /** Identities that may use a router (edge router policies). */
  routerIdentities(routerId: string): Set<string> {
    const out = new Set<string>();
    for (const p of this.index.policiesOf('edgeRouters', routerId, 'edgeRouterPolicies')) for (const iid of this.index.members(p.sides.get('identities')!)) out.add(iid);
    return out;
  }

  /** Services reachable through a router (service edge router policies). */
  routerServices(routerId: string): Set<string> {
    const out = new Set<string>();
    for (const p of this.index.policiesOf('edgeRouters', routerId, 'serviceEdgeRouterPolicies')) for (const sid of this.index.members(p.sides.get('services')!)) out.add(sid);
    return out;
  }

  /** Identities with the given access to a service (management view). */
  serviceIdentities(serviceId: string, type?: PolicyType): Set<string> {
    const out = new Set<string>();
    for (const p of this.index.policiesOf('services', serviceId, 'servicePolicies')) {
      if (type && p.type !== type) continue;
      for (const iid of this.index.members(p.sides.get('identities')!)) out.add(iid);
    }
    return out;
  }

  /** The posture checks a policy attaches. */
  policyChecks(p: PolicyState): string[] {
    const side = p.sides.get('postureChecks');
    return side ? [...this.index.members(side)].sort() : [];
  }

  evaluateCheck(checkId: string, identityId: string, apiSessionId: string, identity?: IdentityRecord): { check: PostureCheckRecord; result: CheckResult } | undefined {
    const check = this.store.get('postureChecks', checkId);
    if (!check) return undefined;
    return { check, result: this.posture.evaluate(check, identityId, apiSessionId, identity) };
  }

  /** Failing checks per granting policy; `passing` when at least one policy has all checks passing. */
  postureDecision(identityId: string, apiSessionId: string, serviceId: string, type: PolicyType): { passing: boolean; failures: PolicyFailure[]; policies: PolicyState[] } {
    const policies = this.grantingPolicies(identityId, serviceId, type);
    let identity: IdentityRecord | undefined;
    const failures: PolicyFailure[] = [];
    for (const p of policies) {
      const failing: PolicyFailure['checks'] = [];
      const side = p.sides.get('postureChecks');
      if (!side || this.index.memberCount(side) === 0) return { passing: true, failures: [], policies };
      identity ??= this.store.get('identities', identityId);
      for (const cid of this.policyChecks(p)) {
        const r = this.evaluateCheck(cid, identityId, apiSessionId, identity);
        if (!r || r.result.passing) continue;
        failing.push({ postureCheckId: cid, postureCheckName: r.check.name, postureCheckType: r.check.typeId, actualValue: r.result.actual ?? null, expectedValue: r.result.expected ?? null });
      }
      if (failing.length === 0) return { passing: true, failures: [], policies };
      failures.push({ policyId: p.id, policyName: this.store.nameOf('servicePolicies', p.id) ?? '', checks: failing });
    }
    return { passing: false, failures, policies };
  }
}

/** Values per key, kept until the role index's version moves; at most MAX_VIEWS keys (the oldest computed go first). */
class Versioned<T> {
  private readonly entries = new Map<string, { version: number; value: T }>();

  constructor(private readonly index: RoleIndex) {}

  /** The kept value if it is current, without computing one. */
  fresh(key: string): T | undefined {
    const e = this.entries.get(key);
    return e && e.version === this.index.version ? e.value : undefined;
  }

  get(key: string, build: () => T): T {
    const hit = this.fresh(key);
    if (hit !== undefined) return hit;
    const value = build();
    this.entries.delete(key);
    if (this.entries.size >= MAX_VIEWS) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(key, { version: this.index.version, value });
    return value;
  }

  delete(key: string) {
    this.entries.delete(key);
  }
}
