/**
 * The policy engine (`app.policy`): the access queries of access.ts, kept current.
 *
 * - Built once at start-up from the store (attribute indexes and policy records; no entity record
 *   is decoded), then kept current by the store's change events. Events are emitted after commit
 *   and before the write's promise resolves (store.ts), and this listener is synchronous, so a
 *   write's HTTP response always goes out after the index reflects it (read-your-writes).
 * - Each change event is handed to what depends on it: the role index, the service-update times
 *   (`updateTimes`), the live service sessions (`sessions`), the posture state of API sessions.
 *   Identities whose access or posture moved have their sessions re-checked; sessions that lost
 *   access are removed.
 * - A periodic sweep enforces time-based posture (MFA timeouts, wake/unlock grace windows) and
 *   retries session removals whose delete failed.
 */
import type { ApiSessionRecord, ChangeEvent, ChangeOf, Store } from '../store/store.js';
import { POLICY_COLLS, type Delta, type Kind, type PolicyColl, type PolicyState } from './role-index.js';
import { AccessQueries } from './access.js';
import { ServiceUpdateTimes } from './service-update-times.js';
import { SessionRegistry } from './session-registry.js';
import { FailedRequests } from './failed-requests.js';
import { readSnapshot, writeSnapshot, type SnapshotKey } from './index-snapshot.js';

type EntityCollection = 'identities' | 'services' | 'edgeRouters' | 'postureChecks';

const ENTITY_KINDS: Record<EntityCollection, Kind> = {
  identities: 'identities',
  services: 'services',
  edgeRouters: 'edgeRouters',
  postureChecks: 'postureChecks',
};

const isEntityChange = (ev: ChangeEvent): ev is Extract<ChangeEvent, { collection: EntityCollection }> => Object.hasOwn(ENTITY_KINDS, ev.collection);

export class PolicyEngine extends AccessQueries {
  readonly updateTimes: ServiceUpdateTimes;
  readonly sessions: SessionRegistry;
  readonly failures = new FailedRequests();
  private sweepTimer?: NodeJS.Timeout;
  /** Time the index build took at start-up (ms). */
  readonly buildMs: number;
  /** Whether the start-up read the entities from the snapshot instead of building them (index-snapshot.ts). */
  readonly fromSnapshot: boolean;

  constructor(
    store: Store,
    private readonly opts: {
      sweepMs?: number;
      now?: () => number;
      onError?: (err: unknown) => void;
      /** Where the index's entities are kept across a clean stop (single node only: a replica's store moves under it). */
      snapshotFile?: string;
    } = {},
  ) {
    super(store);
    this.updateTimes = new ServiceUpdateTimes(this.index, () => this.now());
    this.sessions = new SessionRegistry(store);
    const t0 = performance.now();
    this.fromSnapshot = this.build();
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

  /**
   * Entities from the snapshot the last clean stop left when the store is still as it was then
   * (index-snapshot.ts), else from the name and role-attribute indexes (no entity record is decoded
   * nor its pages touched: the records of a million identities are a gigabyte of the map); then
   * policies: the attribute sets are complete before any side is filled from them. True when the
   * snapshot was used.
   */
  private build(): boolean {
    const { store, index } = this;
    const restored = this.opts.snapshotFile !== undefined && readSnapshot(this.opts.snapshotFile, index, this.snapshotKey());
    if (!restored) this.loadEntities();
    for (const coll of POLICY_COLLS) for (const rec of store.scan(coll)) index.upsertPolicy(coll, rec);
    for (const rec of store.scan('apiSessions')) this.apiSessionStarted(rec);
    for (const rec of store.scan('sessions')) this.sessions.track(rec);
    index.settle();
    return restored;
  }

  /** What a snapshot of the index must have been taken at to be used now: the store as it is. */
  private snapshotKey(): SnapshotKey {
    const counts = Object.fromEntries(Object.entries(ENTITY_KINDS).map(([coll, kind]) => [kind, this.store.count(coll as EntityCollection)])) as Record<Kind, number>;
    return { stamp: this.store.stamp(), counts, minDense: this.index.minDense };
  }

  /**
   * Keep the index's entities for the next start (index-snapshot.ts). Call once the store has
   * settled and nothing writes any more (the stop): the snapshot names the store's state now.
   */
  saveSnapshot(): void {
    if (this.opts.snapshotFile === undefined) return;
    this.index.settle();
    writeSnapshot(this.opts.snapshotFile, this.index, this.snapshotKey());
  }

  private loadEntities() {
    const { store, index } = this;
    for (const [coll, kind] of Object.entries(ENTITY_KINDS) as [EntityCollection, Kind][]) {
      // Ids are matched as bytes between the two indexes (ordinals-by-bytes.ts): no string per attribute entry.
      index.reserve(kind, store.count(coll));
      store.scanIndexIdBytes(coll, 'name', (bytes, start, end, id) => index.loadNewEntity(kind, id(), bytes, start, end));
      const digested = new Set<string>();
      let attr = '';
      let isDigest = false;
      let members: number[] = [];
      const flush = () => {
        if (members.length) index.loadAttributeAt(kind, members, attr);
        members = [];
      };
      store.scanIndexIdBytes(
        coll,
        'roleAttributes',
        (bytes, start, end, id) => {
          // Attributes longer than the index key limit are digests there: those few records are read.
          if (isDigest) digested.add(id());
          else {
            const o = index.ordinalOf(kind, bytes, start, end);
            if (o >= 0) members.push(o);
          }
        },
        (key) => {
          flush();
          attr = String(key);
          isDigest = attr.includes('\u001fsha256:');
        },
      );
      flush();
      for (const id of digested) index.loadEntity(kind, id, store.get(coll, id)?.roleAttributes ?? []);
    }
  }

  // ---- change events --------------------------------------------------------------------------

  private onChange(events: ChangeEvent[]) {
    const deltas: Delta[] = [];
    const policyChanges: { before?: PolicyState; after?: PolicyState }[] = [];
    const bumped = new Set<string>();
    const changedServices = new Set<string>();
    const changedChecks = new Set<string>();
    const times = this.updateTimes;
    for (const ev of events) {
      if (isEntityChange(ev)) {
        const kind = ENTITY_KINDS[ev.collection];
        if (ev.after) this.index.upsertEntity(kind, ev.id, ev.after.roleAttributes, deltas);
        else this.index.deleteEntity(kind, ev.id, deltas);
        if (ev.collection === 'services' && ev.before && ev.after) changedServices.add(ev.id);
        if (ev.collection === 'postureChecks' && ev.before && ev.after) changedChecks.add(ev.id);
        if (ev.collection === 'identities') {
          this.forgetView(ev.id);
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
            for (const iid of this.store.idsByIndex('identities', 'overrideConfigIds', ev.id)) times.bump(iid, bumped);
          }
          break;
        case 'apiSessions':
          if (!ev.before && ev.after) this.apiSessionStarted(ev.after);
          else if (ev.before && !ev.after) this.apiSessionEnded(ev.before);
          else if (ev.before && ev.after) this.apiSessionUpdated(ev.before, ev.after, bumped);
          break;
        case 'sessions':
          if (ev.before) this.sessions.untrack(ev.before);
          if (ev.after) this.sessions.track(ev.after);
          else this.sessions.deleted(ev.id);
          break;
      }
    }
    for (const d of deltas) times.deltaBumps(d, bumped);
    for (const c of policyChanges) times.policyBumps(c, bumped);
    for (const sid of changedServices) for (const iid of times.liveWithAccess(sid)) times.bump(iid, bumped);
    for (const cid of changedChecks) times.checkChanged(cid, bumped);
    // Access or posture moved for these identities: their sessions may no longer stand.
    for (const iid of bumped) if (this.sessions.hasAny(iid)) this.revalidate(iid);
    this.index.settle();
  }

  private identityChanged(ev: ChangeOf<'identities'>, bumped: Set<string>) {
    const { before, after } = ev;
    if (!after) {
      this.posture.forgetIdentity(ev.id);
      this.failures.forget(ev.id);
      this.updateTimes.forget(ev.id);
      return;
    }
    if (before && JSON.stringify(before.serviceConfigs ?? []) !== JSON.stringify(after.serviceConfigs ?? [])) this.updateTimes.bump(ev.id, bumped);
    // MFA removed: every API session of the identity loses its MFA pass.
    const wasMfa = before?.mfa?.isVerified === true;
    const isMfa = after.mfa?.isVerified === true;
    if (wasMfa !== isMfa) {
      for (const asid of this.updateTimes.apiSessionsOf(ev.id)) {
        const s = this.posture.session(asid);
        if (!isMfa) s.passedMfaAt = undefined;
        else if (this.store.get('apiSessions', asid)?.isMfaComplete === true) s.passedMfaAt = this.now();
      }
      this.updateTimes.bump(ev.id, bumped);
    }
  }

  private apiSessionStarted(rec: ApiSessionRecord) {
    this.updateTimes.apiSessionStarted(rec);
    if (rec.isMfaComplete === true) this.posture.session(rec.id).passedMfaAt = rec.updatedAt;
  }

  private apiSessionEnded(rec: ApiSessionRecord) {
    this.updateTimes.apiSessionEnded(rec);
    this.posture.forgetSession(rec.id);
  }

  private apiSessionUpdated(before: ApiSessionRecord, after: ApiSessionRecord, bumped: Set<string>) {
    if (before.isMfaComplete !== true && after.isMfaComplete === true) {
      this.posture.session(after.id).passedMfaAt = this.now();
      this.updateTimes.bump(after.identityId, bumped);
    } else if (before.isMfaComplete === true && after.isMfaComplete !== true) {
      this.posture.session(after.id).passedMfaAt = undefined;
      this.updateTimes.bump(after.identityId, bumped);
    }
  }

  // ---- sessions -------------------------------------------------------------------------------

  /** Posture data changed for an identity (or one of its API sessions). */
  postureChanged(identityId: string) {
    this.updateTimes.bump(identityId);
    this.revalidate(identityId);
  }

  /** Remove the identity's sessions that lost access or posture. */
  revalidate(identityId: string) {
    const dead: string[] = [];
    for (const s of this.sessions.of(identityId)) {
      if (this.sessions.doomed.has(s.id)) continue;
      if (!this.hasAccess(identityId, s.serviceId, s.type) || !this.postureDecision(identityId, s.apiSessionId, s.serviceId, s.type).passing) dead.push(s.id);
    }
    this.sessions.remove(dead);
  }

  /** Periodic enforcement of time-based posture (MFA timeouts, wake/unlock grace windows). */
  sweep() {
    this.sessions.retryRemovals();
    const timed = new Set<string>();
    for (const cid of this.index.entityIds('postureChecks')) {
      const c = this.store.get('postureChecks', cid);
      if (c?.typeId === 'MFA' && ((c.timeoutSeconds ?? -1) > 0 || c.promptOnWake || c.promptOnUnlock)) timed.add(cid);
    }
    if (timed.size === 0) return;
    const doomed = this.sessions.doomed;
    for (const [iid, sessions] of this.sessions.byIdentities()) {
      let affected = false;
      for (const s of sessions.values()) {
        for (const p of this.grantingPolicies(iid, s.serviceId, s.type)) if (this.policyChecks(p).some((c) => timed.has(c))) affected = true;
        if (affected) break;
      }
      if (!affected) continue;
      const before = new Set([...sessions.keys()].filter((id) => !doomed.has(id)));
      this.revalidate(iid);
      if ([...before].some((id) => doomed.has(id))) this.updateTimes.bump(iid);
    }
  }
}
