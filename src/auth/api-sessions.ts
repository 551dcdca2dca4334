/**
 * API sessions: persisted in the store (so a restart keeps logins) and mirrored in memory keyed by
 * token, so authenticating a request is a Map lookup. The mirror follows store change events, so
 * any write path (logout, admin delete, identity delete) is reflected at once.
 *
 * Last activity is kept in memory and flushed in one batched write every `activityFlushMs`,
 * never one commit per request.
 */
import crypto from 'node:crypto';
import type { ChangeEvent, Rec, Store, Tx } from '../store/store.js';
import { timeOrderedId } from '../store/ids.js';
import type { ApiSession } from '../core/context.js';

declare module '../core/context.js' {
  interface Services {
    /** The API sessions of every caller. */
    sessions: ApiSessions;
  }
}

export class ApiSessions {
  private readonly byToken = new Map<string, ApiSession>();
  private readonly byId = new Map<string, ApiSession>();
  /** Live last-activity times not yet written: id → ms. */
  private readonly activity = new Map<string, number>();
  /** Decoded identity records of callers, dropped whenever the identity changes. */
  private readonly identities = new Map<string, Rec>();
  private flushTimer?: NodeJS.Timeout;
  private sweepTimer?: NodeJS.Timeout;
  readonly timeoutMs: number;

  constructor(private readonly store: Store, opts: { timeoutMinutes: number; flushMs: number }) {
    this.timeoutMs = opts.timeoutMinutes * 60_000;
    for (const rec of store.scan('apiSessions')) this.remember(rec as ApiSession);
    store.on('change', (events: ChangeEvent[]) => {
      for (const ev of events) {
        if (ev.collection === 'identities') this.identities.delete(ev.id);
        if (ev.collection !== 'apiSessions') continue;
        if (ev.before) this.forget(ev.before as ApiSession);
        if (ev.after) this.remember(ev.after as ApiSession);
      }
    });
    this.flushTimer = setInterval(() => void this.flush().catch(() => {}), opts.flushMs);
    this.sweepTimer = setInterval(() => void this.sweep().catch(() => {}), Math.min(60_000, this.timeoutMs));
    this.flushTimer.unref();
    this.sweepTimer.unref();
  }

  get timeoutSeconds(): number {
    return Math.round(this.timeoutMs / 1000);
  }

  private remember(s: ApiSession) {
    const live = this.activity.get(s.id);
    const merged = live && live > s.lastActivityAt ? { ...s, lastActivityAt: live } : s;
    this.byToken.set(s.token, merged);
    this.byId.set(s.id, merged);
  }

  private forget(s: ApiSession) {
    this.byToken.delete(s.token);
    this.byId.delete(s.id);
  }

  get(id: string): ApiSession | undefined {
    return this.byId.get(id);
  }

  /** The live session for a token, refreshing its activity; undefined when unknown or idle too long. */
  resolve(token: string): ApiSession | undefined {
    const s = this.byToken.get(token);
    if (!s) return undefined;
    const now = Date.now();
    if (now - s.lastActivityAt > this.timeoutMs) return undefined;
    s.lastActivityAt = now;
    this.activity.set(s.id, now);
    return s;
  }

  /** The session's identity record (cached; every request needs it). */
  identityOf(s: ApiSession): Rec | undefined {
    let rec = this.identities.get(s.identityId);
    if (!rec) {
      rec = this.store.get('identities', s.identityId);
      if (rec) {
        if (this.identities.size > 100_000) this.identities.clear();
        this.identities.set(s.identityId, rec);
      }
    }
    return rec;
  }

  isEnded(s: ApiSession): boolean {
    return !this.byId.has(s.id);
  }

  isFullyAuthenticated(s: ApiSession): boolean {
    return !s.isMfaRequired || s.isMfaComplete;
  }

  expiresAt(s: ApiSession): number {
    return s.lastActivityAt + this.timeoutMs;
  }

  /** Create and persist a session; resolves once durable (and mirrored). */
  async create(fields: {
    identityId: string;
    authenticatorId: string;
    ipAddress: string;
    configTypes: string[];
    isMfaRequired: boolean;
    extJwtSignerId?: string;
    /** Extra wire fields from the login method (cert extension flags, improperClientCertChain…). */
    extra?: Record<string, unknown>;
  }): Promise<ApiSession> {
    const { extra, ...own } = fields;
    const now = Date.now();
    const rec: ApiSession = {
      id: timeOrderedId(),
      createdAt: now,
      updatedAt: now,
      tags: {},
      token: crypto.randomUUID(),
      lastActivityAt: now,
      isMfaComplete: false,
      ...extra,
      ...own,
    };
    if (rec.extJwtSignerId === undefined) delete rec.extJwtSignerId;
    await this.store.write((tx) => tx.put('apiSessions', rec));
    return this.byId.get(rec.id) ?? rec;
  }

  /** Delete API sessions (and their service sessions) inside a larger write. */
  static deleteInTx(tx: Tx, apiSessionIds: Iterable<string>) {
    for (const id of apiSessionIds) {
      for (const sid of tx.idsByIndex('sessions', 'apiSessionId', id)) tx.delete('sessions', sid);
      // Ephemeral certificates of the API session end with it (issue #5).
      for (const cid of tx.idsByIndex('apiSessionCertificates', 'apiSessionId', id)) tx.delete('apiSessionCertificates', cid);
      tx.delete('apiSessions', id);
    }
  }

  /**
   * End everything an identity is logged in with, inside a larger write (identity disable,
   * lockout): its API sessions and every session (service dial/bind) of the identity, including
   * any not tied to one of those API sessions.
   */
  static endForIdentityInTx(tx: Tx, identityId: string) {
    ApiSessions.deleteInTx(tx, tx.idsByIndex('apiSessions', 'identityId', identityId));
    for (const sid of tx.idsByIndex('sessions', 'identityId', identityId)) tx.delete('sessions', sid);
  }

  async delete(id: string): Promise<boolean> {
    return this.store.write((tx) => {
      if (!tx.exists('apiSessions', id)) return false;
      ApiSessions.deleteInTx(tx, [id]);
      return true;
    });
  }

  /** Write batched last-activity times. */
  async flush(): Promise<void> {
    if (this.activity.size === 0) return;
    const pending = [...this.activity];
    this.activity.clear();
    await this.store.write((tx) => {
      for (const [id, at] of pending) {
        const rec = tx.get('apiSessions', id);
        if (rec && rec.lastActivityAt < at) tx.put('apiSessions', { ...rec, lastActivityAt: at });
      }
    });
  }

  /** End sessions idle longer than the timeout, with their service sessions. */
  async sweep(now = Date.now()): Promise<number> {
    const expired = [...this.byId.values()].filter((s) => now - s.lastActivityAt > this.timeoutMs).map((s) => s.id);
    if (expired.length === 0) return 0;
    await this.store.write((tx) => ApiSessions.deleteInTx(tx, expired));
    return expired.length;
  }

  async close(): Promise<void> {
    clearInterval(this.flushTimer);
    clearInterval(this.sweepTimer);
    await this.flush();
  }
}
