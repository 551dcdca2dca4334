/**
 * Service-update times (`GET /current-api-session/service-updates`): per identity, bumped exactly
 * when its access to a service changes (a link's count crosses zero), a service it can reach
 * changes, its overrides change, or posture relevant to it changes. Only identities with a live API
 * session are tracked: a new API session starts from its own creation time anyway.
 */
import type { ApiSessionRecord } from '../store/store.js';
import type { Delta, PolicyState, RoleIndex, Side } from './role-index.js';
import type { PolicyType } from './access.js';

const EMPTY: ReadonlySet<string> = new Set();

export class ServiceUpdateTimes {
  /** identity → live API session count and the newest one's creation time. */
  private readonly live = new Map<string, { count: number; newest: number }>();
  /** live API session → its identity. */
  private readonly apiSessionIdentity = new Map<string, string>();
  private readonly lastChange = new Map<string, number>();

  constructor(
    private readonly index: RoleIndex,
    private readonly now: () => number,
  ) {}

  apiSessionStarted(rec: ApiSessionRecord) {
    const l = this.live.get(rec.identityId);
    if (l) {
      l.count++;
      l.newest = Math.max(l.newest, rec.createdAt);
    } else this.live.set(rec.identityId, { count: 1, newest: rec.createdAt });
    this.apiSessionIdentity.set(rec.id, rec.identityId);
  }

  apiSessionEnded(rec: ApiSessionRecord) {
    const l = this.live.get(rec.identityId);
    if (l && --l.count <= 0) this.live.delete(rec.identityId);
    this.apiSessionIdentity.delete(rec.id);
  }

  /** The live API sessions of an identity. */
  *apiSessionsOf(identityId: string): Iterable<string> {
    for (const [asid, iid] of this.apiSessionIdentity) if (iid === identityId) yield asid;
  }

  /** The identity is gone. */
  forget(identityId: string) {
    this.lastChange.delete(identityId);
  }

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

  /** Bump the live identities whose access a role-index delta changed. */
  deltaBumps(d: Delta, bumped: Set<string>) {
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

  /** Bump the live identities whose access a policy change changed. */
  policyBumps({ before, after }: { before?: PolicyState; after?: PolicyState }, bumped: Set<string>) {
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

  private sideSet(side: Side): Members {
    return side.all ? new Set(this.index.entityIds(side.kind)) : side.members;
  }

  /** A posture check's definition changed: identities whose accessible services it gates. */
  checkChanged(checkId: string, bumped: Set<string>) {
    for (const p of this.index.policiesOf('postureChecks', checkId, 'servicePolicies')) {
      if (this.index.memberCount(p.sides.get('services')!) === 0) continue;
      for (const iid of this.liveMembers(p.sides.get('identities'))) this.bump(iid, bumped);
    }
  }

  /** Live identities that may Dial or Bind a service. */
  liveWithAccess(serviceId: string): Set<string> {
    const out = new Set<string>();
    for (const p of this.index.policiesOf('services', serviceId, 'servicePolicies')) for (const iid of this.liveMembers(p.sides.get('identities'))) out.add(iid);
    return out;
  }
}

/** A set of ids as the role index holds them (a side's members) or a Set. */
type Members = Iterable<string> & { readonly size: number; has(id: string): boolean };

function sameSet(a: Members, b: Members): boolean {
  if (a.size !== b.size) return false;
  for (const x of a) if (!b.has(x)) return false;
  return true;
}
