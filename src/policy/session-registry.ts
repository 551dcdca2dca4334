/**
 * The live service sessions (Dial/Bind), in memory, mirrored from the `sessions` collection by the
 * policy engine's change listener: per identity (to re-check them when its access or posture
 * moves) and per (API session, service, type) (creates are idempotent on that key).
 *
 * A session whose removal is committing is `doomed`: hidden from every read at once, so a refused
 * session never answers again while its delete is in flight; the delete's change event (or the
 * sweep's retry of a failed delete) ends that.
 */
import type { Store, SessionRecord } from '../store/store.js';
import type { PolicyType } from './access.js';

export interface SessionInfo {
  id: string;
  identityId: string;
  apiSessionId: string;
  serviceId: string;
  type: PolicyType;
}

export class SessionRegistry {
  private readonly byIdentity = new Map<string, Map<string, SessionInfo>>();
  /** `<apiSessionId>\0<serviceId>\0<type>` → session id. */
  private readonly byKey = new Map<string, string>();
  /** Sessions whose removal is committing: hidden from reads until the delete lands. */
  readonly doomed = new Set<string>();

  constructor(private readonly store: Store) {}

  track(rec: SessionRecord) {
    let m = this.byIdentity.get(rec.identityId);
    if (!m) this.byIdentity.set(rec.identityId, (m = new Map()));
    const info: SessionInfo = { id: rec.id, identityId: rec.identityId, apiSessionId: rec.apiSessionId, serviceId: rec.serviceId, type: rec.type === 'Bind' ? 'Bind' : 'Dial' };
    m.set(rec.id, info);
    this.byKey.set(sessionKey(info.apiSessionId, info.serviceId, info.type), rec.id);
  }

  untrack(rec: SessionRecord) {
    const key = sessionKey(rec.apiSessionId, rec.serviceId, rec.type === 'Bind' ? 'Bind' : 'Dial');
    if (this.byKey.get(key) === rec.id) this.byKey.delete(key);
    const m = this.byIdentity.get(rec.identityId);
    if (!m) return;
    m.delete(rec.id);
    if (m.size === 0) this.byIdentity.delete(rec.identityId);
  }

  /** A session record left the store: it is no longer doomed, it is gone. */
  deleted(id: string) {
    this.doomed.delete(id);
  }

  hasAny(identityId: string): boolean {
    return this.byIdentity.has(identityId);
  }

  /** Every tracked session of an identity, doomed ones included. */
  of(identityId: string): Iterable<SessionInfo> {
    return this.byIdentity.get(identityId)?.values() ?? [];
  }

  /** Identities with sessions, and their sessions by id. */
  byIdentities(): Iterable<[string, ReadonlyMap<string, SessionInfo>]> {
    return this.byIdentity;
  }

  /** An existing session of the API session for (service, type), if any. */
  find(apiSessionId: string, serviceId: string, type: PolicyType): string | undefined {
    const id = this.byKey.get(sessionKey(apiSessionId, serviceId, type));
    return id === undefined || this.doomed.has(id) ? undefined : id;
  }

  /** A live session of an identity by id (none while its removal commits). */
  live(identityId: string, sessionId: string): SessionInfo | undefined {
    const s = this.byIdentity.get(identityId)?.get(sessionId);
    return s === undefined || this.doomed.has(s.id) ? undefined : s;
  }

  /** Hide the sessions at once and delete them; a failed delete is retried by `retryRemovals`. */
  remove(ids: string[]) {
    if (ids.length === 0) return;
    for (const id of ids) this.doomed.add(id);
    this.deleteRecords(ids);
  }

  /** Retry the removals that have not landed (their delete failed). */
  retryRemovals() {
    const stuck: string[] = [];
    for (const id of this.doomed) {
      if (!this.store.has('sessions', id)) this.doomed.delete(id);
      else stuck.push(id);
    }
    if (stuck.length) this.deleteRecords(stuck);
  }

  private deleteRecords(ids: string[]) {
    this.store
      .write((tx) => {
        for (const id of ids) tx.delete('sessions', id);
      })
      .catch(() => {
        // retryRemovals tries again; meanwhile the sessions stay hidden.
      });
  }
}

function sessionKey(apiSessionId: string, serviceId: string, type: PolicyType): string {
  return `${apiSessionId}\u0000${serviceId}\u0000${type}`;
}
