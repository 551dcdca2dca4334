/**
 * The policy engine (`app.policy`): the role index plus everything derived from it.
 *
 * - Built once at start-up from the store (attribute indexes and policy records; no entity record
 *   is decoded), then kept current by the store's change events. Events are emitted after commit
 *   and before the write's promise resolves (store.ts), and this listener is synchronous, so a
 *   write's HTTP response always goes out after the index reflects it (read-your-writes).
 * - Access: which services an identity may Dial/Bind (with the granting policies: the reference
 *   count of each identity→service link), which edge routers it may use, which routers serve a
 *   service. Per-identity and per-service views are cached against `index.version`.
 * - Service-update timestamps: per identity, bumped exactly when its access to a
 *   service changes (a link's count crosses zero), a service it can reach changes, its overrides
 *   change, or posture relevant to it changes. Only identities with a live API session are
 *   tracked: a new API session starts from its own creation time anyway.
 * - Service sessions: tracked per identity; removed when access or posture is lost.
 */
import type { ChangeEvent, Rec, Store } from '../store/store.js';
import { RoleIndex, POLICY_COLLS, type Delta, type Kind, type PolicyColl, type PolicyState, type Side } from './role-index.js';
import { PostureStore, type CheckResult } from './posture.js';

declare module '../core/context.js' {
  interface Services {
    /** The role index and everything derived from it. */
    policy: PolicyEngine;
  }
}

const ENTITY_KINDS: Record<string, Kind> = {
  identities: 'identities',
  services: 'services',
  edgeRouters: 'edgeRouters',
  postureChecks: 'postureChecks',
};

export type PolicyType = 'Dial' | 'Bind';

/**
 * What is kept per identity (until the index changes): the services it may Dial or Bind, sorted,
 * and the edge routers it may use — each built on first use. Whether a given service is granted,
 * and by which policies, is answered from the service's own (short, shared) policy list instead:
 * a per-identity map of every visible service to its granting policies was ~300 KB for an identity
 * that sees 2,000 services, and a fleet of 1,000 devices rebuilt all of them after every policy change.
 */
interface IdentityView {
  sortedServices?: string[];
  routers?: Set<string>;
}

interface SessionInfo {
  id: string;
  /** The signed token this process issued for it (memory only: a repeated create answers the same token). */
  token?: string;
  identityId: string;
  apiSessionId: string;
  serviceId: string;
  type: PolicyType;
}

export interface PolicyFailure {
  policyId: string;
  policyName: string;
  checks: { postureCheckId: string; postureCheckName: string; postureCheckType: string; actualValue: unknown; expectedValue: unknown }[];
}

export interface FailedServiceRequest {
  apiSessionId: string;
  serviceId: string;
  serviceName: string;
  sessionType: PolicyType;
  when: number;
  policyFailures: PolicyFailure[];
}

const MAX_VIEWS = 20_000;
const MAX_FAILURES = 50;

export class PolicyEngine {
  readonly index = new RoleIndex();
  readonly posture = new PostureStore();
  /** identity → live API session count and the newest one's creation time. */
  private readonly live = new Map<string, { count: number; newest: number }>();
  private readonly apiSessionIdentity = new Map<string, string>();
  private readonly lastChange = new Map<string, number>();
  private readonly sessionsByIdentity = new Map<string, Map<string, SessionInfo>>();
  /** `<apiSessionId>\0<serviceId>\0<type>` → session id (idempotent creates). */
  private readonly sessionByKey = new Map<string, string>();
  /** Session token → session (routers and the `session-token` header look sessions up by token). */
  /** Sessions whose removal is committing: hidden from reads until the delete lands. */
  readonly doomed = new Set<string>();
  private readonly views = new Versioned<IdentityView>(this.index);
  private readonly serviceRouters = new Versioned<Set<string>>(this.index);
  private readonly servicePolicies = new Versioned<PolicyState[]>(this.index);
  private readonly failures = new Map<string, FailedServiceRequest[]>();
  private sweepTimer?: NodeJS.Timeout;
  /** Time the index build took at start-up (ms). */
  readonly buildMs: number;

  constructor(
    readonly store: Store,
    private readonly opts: { sweepMs?: number; now?: () => number; onError?: (err: unknown) => void } = {},
  ) {
    const t0 = performance.now();
    this.build();
    this.buildMs = performance.now() - t0;
    store.on('change', (events: ChangeEvent[]) => {
      // A listener that throws would break the store's commit callback for every write after it.
      try {
        this.onChange(events);
      } catch (e) {
        opts.onError?.(e);
      }
    });
    this.sweepTimer = setInterval(() => this.sweep(), opts.sweepMs ?? 5000);
    this.sweepTimer.unref();
  }

  close() {
    clearInterval(this.sweepTimer);
  }

  private now(): number {
    return this.opts.now?.() ?? Date.now();
  }

  // ---- build ----------------------------------------------------------------------------------

  /** Load entities from the name and role-attribute indexes (no record decoding), then policies. */
  private build() {
    const { store, index } = this;
    for (const [coll, kind] of Object.entries(ENTITY_KINDS)) {
      const attrs = new Map<string, string[]>();
      for (const [, id] of store.uniqueEntries(coll, 'name')) attrs.set(id, []);
      for (const key of store.indexKeys(coll, 'roleAttributes')) {
        for (const id of store.idsByIndex(coll, 'roleAttributes', key)) attrs.get(id)?.push(String(key));
      }
      // Attributes longer than the index key limit are digests there: read those few records.
      for (const [id, list] of attrs) {
        if (list.some((a) => a.includes('\u001fsha256:'))) index.loadEntity(kind, id, store.get(coll, id)?.roleAttributes ?? []);
        else index.loadEntity(kind, id, list);
      }
    }
    for (const coll of POLICY_COLLS) for (const rec of store.scan(coll)) index.upsertPolicy(coll, rec);
    for (const rec of store.scan('apiSessions')) this.sessionStarted(rec);
    for (const rec of store.scan('sessions')) this.trackSession(rec);
  }

  // ---- change events --------------------------------------------------------------------------

  private onChange(events: ChangeEvent[]) {
    const deltas: Delta[] = [];
    const policyChanges: { before?: PolicyState; after?: PolicyState }[] = [];
    const bumped = new Set<string>();
    const changedServices = new Set<string>();
    const changedChecks = new Set<string>();
    for (const ev of events) {
      const kind = ENTITY_KINDS[ev.collection];
      if (kind) {
        if (ev.after) this.index.upsertEntity(kind, ev.id, ev.after.roleAttributes, deltas);
        else this.index.deleteEntity(kind, ev.id, deltas);
        if (ev.collection === 'services' && ev.before && ev.after) changedServices.add(ev.id);
        if (ev.collection === 'postureChecks' && ev.before && ev.after) changedChecks.add(ev.id);
        if (ev.collection === 'identities') {
          this.views.delete(ev.id);
          this.identityChanged(ev, bumped);
        }
        continue;
      }
      switch (ev.collection) {
        case 'servicePolicies':
        case 'edgeRouterPolicies':
        case 'serviceEdgeRouterPolicies': {
          const coll = ev.collection as PolicyColl;
          if (ev.after) {
            const { before, after } = this.index.upsertPolicy(coll, ev.after);
            policyChanges.push({ before, after });
          } else {
            const { before } = this.index.deletePolicy(ev.id, []);
            policyChanges.push({ before });
          }
          break;
        }
        case 'configs':
          if (ev.before) {
            // Services using the config (a delete already pulled it from them: those updates bump too).
            for (const sid of this.store.idsByIndex('services', 'configs', ev.id)) changedServices.add(sid);
            for (const iid of this.store.idsByIndex('identities', 'overrideConfigIds', ev.id)) this.bump(iid, bumped);
          }
          break;
        case 'apiSessions':
          if (!ev.before && ev.after) this.sessionStarted(ev.after);
          else if (ev.before && !ev.after) this.sessionEnded(ev.before);
          else if (ev.before && ev.after) this.sessionUpdated(ev.before, ev.after, bumped);
          break;
        case 'sessions':
          if (ev.before) this.untrackSession(ev.before);
          if (ev.after) this.trackSession(ev.after);
          if (!ev.after) this.doomed.delete(ev.id);
          break;
      }
    }
    for (const d of deltas) this.deltaBumps(d, bumped);
    for (const c of policyChanges) this.policyBumps(c, bumped);
    for (const sid of changedServices) for (const iid of this.liveWithAccess(sid)) this.bump(iid, bumped);
    for (const cid of changedChecks) this.checkChanged(cid, bumped);
    // Access or posture moved for these identities: their sessions may no longer stand.
    for (const iid of bumped) if (this.sessionsByIdentity.has(iid)) this.revalidate(iid);
  }

  private identityChanged(ev: ChangeEvent, bumped: Set<string>) {
    const { before, after } = ev;
    if (!after) {
      this.posture.forgetIdentity(ev.id);
      this.failures.delete(ev.id);
      this.lastChange.delete(ev.id);
      return;
    }
    if (before && JSON.stringify(before.serviceConfigs ?? []) !== JSON.stringify(after.serviceConfigs ?? [])) this.bump(ev.id, bumped);
    // MFA removed: every API session of the identity loses its MFA pass.
    const wasMfa = before?.mfa?.isVerified === true;
    const isMfa = after.mfa?.isVerified === true;
    if (wasMfa !== isMfa) {
      for (const [asid, iid] of this.apiSessionIdentity) {
        if (iid !== ev.id) continue;
        const s = this.posture.session(asid);
        if (!isMfa) s.passedMfaAt = undefined;
        else if (this.store.get('apiSessions', asid)?.isMfaComplete === true) s.passedMfaAt = this.now();
      }
      this.bump(ev.id, bumped);
    }
  }

  private sessionStarted(rec: Rec) {
    const l = this.live.get(rec.identityId);
    if (l) {
      l.count++;
      l.newest = Math.max(l.newest, rec.createdAt);
    } else this.live.set(rec.identityId, { count: 1, newest: rec.createdAt });
    this.apiSessionIdentity.set(rec.id, rec.identityId);
    if (rec.isMfaComplete === true) this.posture.session(rec.id).passedMfaAt = rec.mfaCompletedAt ?? rec.updatedAt ?? rec.createdAt;
  }

  private sessionEnded(rec: Rec) {
    const l = this.live.get(rec.identityId);
    if (l && --l.count <= 0) this.live.delete(rec.identityId);
    this.apiSessionIdentity.delete(rec.id);
    this.posture.forgetSession(rec.id);
  }

  private sessionUpdated(before: Rec, after: Rec, bumped: Set<string>) {
    if (before.isMfaComplete !== true && after.isMfaComplete === true) {
      this.posture.session(after.id).passedMfaAt = this.now();
      this.bump(after.identityId, bumped);
    } else if (before.isMfaComplete === true && after.isMfaComplete !== true) {
      this.posture.session(after.id).passedMfaAt = undefined;
      this.bump(after.identityId, bumped);
    }
  }

  private trackSession(rec: Rec) {
    let m = this.sessionsByIdentity.get(rec.identityId);
    if (!m) this.sessionsByIdentity.set(rec.identityId, (m = new Map()));
    const info: SessionInfo = { id: rec.id, identityId: rec.identityId, apiSessionId: rec.apiSessionId, serviceId: rec.serviceId, type: rec.type === 'Bind' ? 'Bind' : 'Dial' };
    m.set(rec.id, info);
    this.sessionByKey.set(sessionKey(info.apiSessionId, info.serviceId, info.type), rec.id);
  }

  private untrackSession(rec: Rec) {
    const key = sessionKey(rec.apiSessionId, rec.serviceId, rec.type === 'Bind' ? 'Bind' : 'Dial');
    if (this.sessionByKey.get(key) === rec.id) this.sessionByKey.delete(key);
    const m = this.sessionsByIdentity.get(rec.identityId);
    if (!m) return;
    m.delete(rec.id);
    if (m.size === 0) this.sessionsByIdentity.delete(rec.identityId);
  }

  // ---- service-update bumps -------------------------------------------------------------------

  isLive(identityId: string): boolean {
    return this.live.has(identityId);
  }

  /** Record a relevant change for an identity (only tracked while it has API sessions). */
  bump(identityId: string, bumped?: Set<string>) {
    const l = this.live.get(identityId);
    if (!l) return;
    const prev = this.lastChange.get(identityId) ?? 0;
    // Strictly later than anything this identity's sessions have reported so far.
    this.lastChange.set(identityId, Math.max(this.now(), prev + 1, l.newest + 1));
    bumped?.add(identityId);
  }

  /** `lastChangeAt` for an API session. */
  lastChangeAt(apiSession: { identityId: string; createdAt: number }, startedAt: number): number {
    return Math.max(this.lastChange.get(apiSession.identityId) ?? 0, apiSession.createdAt, startedAt);
  }

  /** Live identities selected by a side (iterating the smaller of the two sets). */
  private *liveMembers(side: Side | undefined): Iterable<string> {
    if (!side) return;
    if (side.all || this.live.size < side.members.size) {
      for (const iid of this.live.keys()) if (this.index.isMember(side, iid)) yield iid;
    } else for (const iid of side.members) if (this.live.has(iid)) yield iid;
  }

  /** Whether a policy other than `exclude` grants identity→service of the type. */
  private grantsOther(identityId: string, serviceId: string, type: PolicyType | undefined, exclude: string): boolean {
    for (const p of this.index.policiesOf('identities', identityId, 'servicePolicies')) {
      if (p.id === exclude || p.type !== type) continue;
      const s = p.sides.get('services');
      if (s && this.index.isMember(s, serviceId)) return true;
    }
    return false;
  }

  private deltaBumps(d: Delta, bumped: Set<string>) {
    const p = d.side.policy;
    if (p.coll !== 'servicePolicies') return;
    const services = p.sides.get('services')!;
    const identities = p.sides.get('identities')!;
    if (d.side.kind === 'identities') {
      for (const iid of [...d.added, ...d.removed]) {
        if (!this.live.has(iid) || bumped.has(iid)) continue;
        for (const sid of this.index.members(services)) {
          if (!this.grantsOther(iid, sid, p.type, p.id)) {
            this.bump(iid, bumped);
            break;
          }
        }
      }
    } else if (d.side.kind === 'services') {
      const changed = [...d.added, ...d.removed];
      for (const iid of this.liveMembers(identities)) {
        if (bumped.has(iid)) continue;
        if (changed.some((sid) => !this.grantsOther(iid, sid, p.type, p.id))) this.bump(iid, bumped);
      }
    } else if (d.side.kind === 'postureChecks' && this.index.memberCount(services) > 0) {
      for (const iid of this.liveMembers(identities)) this.bump(iid, bumped);
    }
  }

  private policyBumps({ before, after }: { before?: PolicyState; after?: PolicyState }, bumped: Set<string>) {
    const p = (after ?? before)!;
    if (p.coll !== 'servicePolicies') return;
    const idsBefore = before?.sides.get('identities');
    const idsAfter = after?.sides.get('identities');
    const svcBefore = before ? this.sideSet(before.sides.get('services')!) : new Set<string>();
    const svcAfter = after ? this.sideSet(after.sides.get('services')!) : new Set<string>();
    const postureChanged = !!before && !!after && !sameSet(this.sideSet(before.sides.get('postureChecks')!), this.sideSet(after.sides.get('postureChecks')!));
    const candidates = new Set<string>();
    for (const side of [idsBefore, idsAfter]) {
      if (!side) continue;
      if (side.all) for (const iid of this.live.keys()) candidates.add(iid);
      else for (const iid of this.live.size < side.members.size ? [...this.live.keys()].filter((i) => side.members.has(i)) : side.members) if (this.live.has(iid)) candidates.add(iid);
    }
    for (const iid of candidates) {
      if (bumped.has(iid)) continue;
      const inOld = !!idsBefore && (idsBefore.all ? this.index.hasEntity('identities', iid) : idsBefore.members.has(iid));
      const inNew = !!idsAfter && this.index.isMember(idsAfter, iid);
      const oldS = inOld ? svcBefore : EMPTY;
      const newS = inNew ? svcAfter : EMPTY;
      let changed = false;
      if (postureChanged && inNew && newS.size > 0) changed = true;
      const sameType = before?.type === after?.type || !before || !after;
      for (const sid of oldS) {
        if (changed) break;
        if (sameType && newS.has(sid)) continue;
        if (!this.grantsOther(iid, sid, before!.type, p.id)) changed = true;
      }
      for (const sid of newS) {
        if (changed) break;
        if (sameType && oldS.has(sid)) continue;
        if (!this.grantsOther(iid, sid, after!.type, p.id)) changed = true;
      }
      if (changed) this.bump(iid, bumped);
    }
  }

  private sideSet(side: Side): Set<string> {
    return side.all ? new Set(this.index.entityIds(side.kind)) : side.members;
  }

  /** A posture check's definition changed: identities whose accessible services it gates. */
  private checkChanged(checkId: string, bumped: Set<string>) {
    for (const p of this.index.policiesOf('postureChecks', checkId, 'servicePolicies')) {
      if (this.index.memberCount(p.sides.get('services')!) === 0) continue;
      for (const iid of this.liveMembers(p.sides.get('identities'))) this.bump(iid, bumped);
    }
  }

  /** Live identities that may Dial or Bind a service. */
  private liveWithAccess(serviceId: string): Set<string> {
    const out = new Set<string>();
    for (const p of this.index.policiesOf('services', serviceId, 'servicePolicies')) for (const iid of this.liveMembers(p.sides.get('identities'))) out.add(iid);
    return out;
  }

  // ---- access ---------------------------------------------------------------------------------

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
  // one generator behind all three cost ~2 µs per call, +40% CPU for a page of 100 services.

  /** `["Bind", "Dial"]`, `["Dial"]`, … or `["Invalid"]`. */
  permissions(identityId: string, serviceId: string): string[] {
    let dial = false;
    let bind = false;
    for (const p of this.servicePoliciesOf(serviceId)) {
      if ((p.type === 'Bind' ? bind : dial) || !this.index.isMember(p.sides.get('identities')!, identityId)) continue;
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
    for (const p of this.servicePoliciesOf(serviceId)) if ((p.type === 'Bind') === (type === 'Bind') && this.index.isMember(p.sides.get('identities')!, identityId)) out.push(p);
    return out;
  }

  hasAccess(identityId: string, serviceId: string, type?: PolicyType): boolean {
    for (const p of this.servicePoliciesOf(serviceId)) {
      if (type && (p.type === 'Bind') !== (type === 'Bind')) continue;
      if (this.index.isMember(p.sides.get('identities')!, identityId)) return true;
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
   * every session create: when the service's router set is not cached, its policies are tried one
   * by one against the identity's routers, which usually answers at the first policy instead of
   * building the union of every policy's routers (~170 µs for a service in 50 policies of 500).
   */
  hasCommonRouter(identityId: string, serviceId: string): boolean {
    const mine = this.identityRouters(identityId);
    if (mine.size === 0) return false;
    const cached = this.serviceRouters.fresh(serviceId);
    if (cached) return intersects(mine, cached);
    for (const p of this.index.policiesOf('services', serviceId, 'serviceEdgeRouterPolicies')) {
      const side = p.sides.get('edgeRouters')!;
      if (this.index.memberCount(side) <= mine.size) {
        for (const r of this.index.members(side)) if (mine.has(r)) return true;
      } else {
        for (const r of mine) if (this.index.isMember(side, r)) return true;
      }
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

  // ---- posture --------------------------------------------------------------------------------

  /** The posture checks a policy attaches. */
  policyChecks(p: PolicyState): string[] {
    const side = p.sides.get('postureChecks');
    return side ? [...this.index.members(side)].sort() : [];
  }

  evaluateCheck(checkId: string, identityId: string, apiSessionId: string, identity?: Rec): { check: Rec; result: CheckResult } | undefined {
    const check = this.store.get('postureChecks', checkId);
    if (!check) return undefined;
    return { check, result: this.posture.evaluate(check, identityId, apiSessionId, identity) };
  }

  /** Failing checks per granting policy; `passing` when at least one policy has all checks passing. */
  postureDecision(identityId: string, apiSessionId: string, serviceId: string, type: PolicyType): { passing: boolean; failures: PolicyFailure[]; policies: PolicyState[] } {
    const policies = this.grantingPolicies(identityId, serviceId, type);
    let identity: Rec | undefined;
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

  recordFailure(identityId: string, f: FailedServiceRequest) {
    let l = this.failures.get(identityId);
    if (!l) this.failures.set(identityId, (l = []));
    l.push(f);
    if (l.length > MAX_FAILURES) l.splice(0, l.length - MAX_FAILURES);
  }

  failedRequests(identityId: string): FailedServiceRequest[] {
    return this.failures.get(identityId) ?? [];
  }

  /** Posture data changed for an identity (or one of its API sessions). */
  postureChanged(identityId: string) {
    const bumped = new Set<string>();
    this.bump(identityId, bumped);
    this.revalidate(identityId);
  }

  // ---- sessions -------------------------------------------------------------------------------

  sessionsOf(identityId: string): Iterable<SessionInfo> {
    return this.sessionsByIdentity.get(identityId)?.values() ?? [];
  }

  /** An existing session of the API session for (service, type), if any. */
  findSession(apiSessionId: string, serviceId: string, type: PolicyType): string | undefined {
    const id = this.sessionByKey.get(sessionKey(apiSessionId, serviceId, type));
    return id === undefined || this.doomed.has(id) ? undefined : id;
  }

  /** A live session of an identity by id (none while its removal commits). */
  liveSession(identityId: string, sessionId: string): SessionInfo | undefined {
    const s = this.sessionsByIdentity.get(identityId)?.get(sessionId);
    return s === undefined || this.doomed.has(s.id) ? undefined : s;
  }

  /** Remove the identity's sessions that lost access or posture. */
  revalidate(identityId: string) {
    const dead: string[] = [];
    for (const s of this.sessionsOf(identityId)) {
      if (this.doomed.has(s.id)) continue;
      if (!this.hasAccess(identityId, s.serviceId, s.type) || !this.postureDecision(identityId, s.apiSessionId, s.serviceId, s.type).passing) dead.push(s.id);
    }
    this.removeSessions(dead);
  }

  private removeSessions(ids: string[]) {
    if (ids.length === 0) return;
    for (const id of ids) this.doomed.add(id);
    this.store
      .write((tx) => {
        for (const id of ids) tx.delete('sessions', id);
      })
      .catch(() => {
        // The sweep retries; meanwhile the sessions stay hidden.
      });
  }

  /** Periodic enforcement of time-based posture (MFA timeouts, wake/unlock grace windows). */
  sweep() {
    const timed = new Set<string>();
    for (const cid of this.index.entityIds('postureChecks')) {
      const c = this.store.get('postureChecks', cid);
      if (c?.typeId === 'MFA' && ((c.timeoutSeconds ?? -1) > 0 || c.promptOnWake || c.promptOnUnlock)) timed.add(cid);
    }
    // Removals that have not landed (a failed write) are retried here.
    const stuck: string[] = [];
    for (const id of this.doomed) {
      if (!this.store.has('sessions', id)) this.doomed.delete(id);
      else stuck.push(id);
    }
    if (stuck.length) {
      this.store
        .write((tx) => {
          for (const id of stuck) tx.delete('sessions', id);
        })
        .catch(() => {});
    }
    if (timed.size === 0) return;
    for (const [iid, sessions] of this.sessionsByIdentity) {
      let affected = false;
      for (const s of sessions.values()) {
        for (const p of this.grantingPolicies(iid, s.serviceId, s.type)) if (this.policyChecks(p).some((c) => timed.has(c))) affected = true;
        if (affected) break;
      }
      if (!affected) continue;
      const before = new Set([...sessions.keys()].filter((id) => !this.doomed.has(id)));
      this.revalidate(iid);
      if ([...before].some((id) => this.doomed.has(id))) this.bump(iid);
    }
  }
}

const EMPTY: ReadonlySet<string> = new Set();

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

function intersects(a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  const [small, big] = a.size <= b.size ? [a, b] : [b, a];
  for (const x of small) if (big.has(x)) return true;
  return false;
}

function sameSet(a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  if (a.size !== b.size) return false;
  for (const x of a) if (!b.has(x)) return false;
  return true;
}

function sessionKey(apiSessionId: string, serviceId: string, type: PolicyType): string {
  return `${apiSessionId}\u0000${serviceId}\u0000${type}`;
}
