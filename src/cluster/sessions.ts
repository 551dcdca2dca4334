/**
 * API sessions and sessions in a cluster: each controller keeps those it holds (LOCAL_COLLECTIONS
 * in replica.ts, never in etcd), so logins, session creates and activity cost no etcd round trip.
 *
 * - A token made on A works on B: its claims (`z_as`) carry what the API session is made of; B
 *   checks the signature (the signing keys are shared), that nothing revoked it and that the
 *   identity may still log in that way, and from then on holds the API session too.
 * - Ending one is news for every controller: the write that ends an API session puts
 *   `~revoked/<id>` into etcd in the same transaction (replica.ts), and every controller drops its
 *   copy (and the sessions made under it) when its watch delivers that — within the watch latency.
 *   An MFA step passed on one controller (`~as/<id>`) updates every copy the same way.
 * - What every controller sees anyway ends each one's copies on its own: an identity deleted or
 *   disabled, an authenticator deleted, an API session (OIDC, replicated) deleted. A disable is
 *   also news (`~revoked-identity/<id>`), so a token made before it is never taken on afterwards,
 *   even once the identity is enabled again.
 * - Sessions (dial/bind) deleted are news too (`~sessions-removed/…`, in the same transaction):
 *   every other controller tells its own routers (`sessionsRemoved`), as the deleting one told
 *   its own at the commit. So the ends above that each controller applies to its own copies go
 *   through the log (without revoking anything again) whenever they delete sessions.
 * - Idle expiry is local: each controller ends its copy by its own activity and what the others'
 *   activity beats told (no revocation; the sessions it ends with it are still news).
 * - Activity beats: every `beatMs` (a tenth of the inactivity timeout, 1 s to 60 s) a controller
 *   that served requests puts one leased key `P/activity/<uuid>` naming the API sessions used here
 *   since the last beat, so a controller taking on a token it never saw knows when it was last used
 *   anywhere (within one beat), and refuses it once it has been idle for the timeout. The cost is at
 *   most one etcd write per controller per beat, whatever the request rate. A graceful stop puts a
 *   final beat; a beat counts from when the reader receives it (its own clock).
 * - At start, before taking on any token, a controller reads the news etcd still keeps (its watch
 *   told only of what was put while it listened).
 * - MFA removed: the identity's record changes on every controller; each one drops the MFA pass of
 *   its own copies (`mfaStateNow`), and a copy taken on later gets its MFA state checked the same
 *   way against the identity's MFA record.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { ChangeEvent, Store, Tx, ApiSessionRecord } from '../store/store.js';
import { ApiSessions, type ApiSession, type SessionClaimsOf, type SessionSharing } from '../auth/api-sessions.js';
import { tokenDigest, type TokenClaims } from '../auth/tokens.js';
import { allowsPrimary, isDisabledAt, type PrimaryMethod } from '../auth/login-policy.js';
import { mfaStateNow, sameMfaState, type MfaState } from '../auth/mfa.js';
import { isLocal, packr, SESSION_NEWS_RETENTION_MS, type Cluster, type SessionNews } from './replica.js';
import { prefixEnd, watchPrefix } from './watch.js';

/** What a token says of its API session, beyond `sub` (identity) and `jti` (id). */
interface Carried {
  /** authenticator id */
  a: string;
  /** primary method */
  m?: string;
  /** ext-jwt signer of the login */
  ps?: string;
  /** required ext-jwt signer */
  es?: string;
  /** config types */
  ct: string[];
  /** MFA required */
  mr: boolean;
  /** client address at login */
  ip: string;
  /** created (ms) */
  c: number;
  /**
   * The etcd revision the maker's replica had applied: the token was made before a disable of its
   * identity exactly when this is below the disable's revision, whatever the clocks say.
   */
  r?: number;
}

/** Revoked ids are remembered here this long (the news keys live as long in etcd). */
const PURGE_MS = 60_000;
/** API sessions named per activity key (about 30 bytes each: well under etcd's request limit). */
const IDS_PER_BEAT_KEY = 20_000;

/** A regular beat waits for etcd for one interval, at least this long (ms). */
const CALL_TIMEOUT_MS = 5000;
/** How long a start waits for the API-session news in etcd before it goes on without it. */
const FIRST_READ_WAIT_MS = 5000;
/** How long a stop waits for etcd to take its final activity beat. */
const FINAL_BEAT_WAIT_MS = 2000;

/** The interval of activity beats for an inactivity timeout: a tenth of it, from 1 s to 60 s. */
export const beatInterval = (timeoutMs: number) => Math.min(60_000, Math.max(1000, Math.floor(timeoutMs / 10)));

/**
 * What this controller learns of API sessions held elsewhere: the news (ended, identities
 * disabled, MFA states) and the activity beats heard (ActivityBeats), and from those whether a
 * token made elsewhere may be taken on. Built before the ApiSessions it is handed to.
 */
export class SharedSessions implements SessionSharing {
  /** API session id → when the revocation stops mattering (ms). */
  private readonly revoked = new Map<string, number>();
  /**
   * Identity id → its latest disable (news): every API session made before it is over (made by a
   * controller that had not applied `revision`, or, for a token that does not say, until `at`);
   * and when that stops mattering.
   */
  private readonly identities = new Map<string, { at: number; revision: number; until: number }>();
  /** Latest MFA state of API sessions, as news said (applied to a copy taken on later). */
  private readonly states = new Map<string, SessionNews['states'][number] & { until: number }>();
  /** API session id → the latest activity beat (any controller's) that named it (ms). */
  private readonly active = new Map<string, number>();
  private timer?: NodeJS.Timeout;
  private closed = false;
  /** Told of sessions another controller deleted (their ids), to tell this controller's routers. */
  readonly sessionsRemoved = new Set<(ids: string[]) => void>();
  readonly timeoutMs: number;
  readonly beatMs: number;
  private readonly log: Logger;
  private readonly onNews = (news: SessionNews) => this.news(news);

  constructor(
    private readonly store: Store,
    private readonly cluster: Cluster,
    /** `timeoutMs`: the API-session inactivity timeout (its minutes in config `minuteMs`). */
    opts: { timeoutMs: number; log: Logger },
  ) {
    this.timeoutMs = opts.timeoutMs;
    this.beatMs = beatInterval(this.timeoutMs);
    this.log = opts.log;
  }

  /** Resolves once the API-session news etcd keeps was read (or etcd did not answer in time). */
  async start(): Promise<void> {
    this.cluster.sessionNewsListeners.add(this.onNews);
    this.store.on('change', (events: ChangeEvent[]) => this.changed(events));
    this.timer = setInterval(() => this.purge(), PURGE_MS);
    this.timer.unref();
    const first = this.readNews();
    // Tokens are taken on only once it was read (a token logged out or made before a disable would
    // pass); with etcd failing now, this controller goes on and reads it as soon as etcd answers.
    await Promise.race([first, new Promise((r) => setTimeout(r, FIRST_READ_WAIT_MS).unref())]);
  }

  close() {
    this.closed = true;
    clearInterval(this.timer);
    this.cluster.sessionNewsListeners.delete(this.onNews);
  }

  /** What a token made here carries, for another controller to take its API session on (`learn`). */
  claims(s: SessionClaimsOf): Record<string, unknown> {
    return { z_as: { a: s.authenticatorId, m: s.method, ps: s.primarySignerId, es: s.extJwtSignerId, ct: s.configTypes, mr: s.isMfaRequired, ip: s.ipAddress, c: s.createdAt, r: this.cluster.applied } satisfies Carried };
  }

  /** An activity beat named the API session: it was used somewhere until `at` (ms). */
  heardActive(id: string, at: number) {
    if ((this.active.get(id) ?? 0) < at) this.active.set(id, at);
  }

  /**
   * The news of API sessions etcd still keeps (25 hours): API sessions ended, identities disabled,
   * MFA states. The watch tells only of what is put while this controller listens, and a restart
   * forgets what it told.
   */
  private async readNews(): Promise<void> {
    for (let attempt = 1; !this.closed; attempt++) {
      try {
        const news: SessionNews = { revoked: [], identities: [], states: [], sessions: [] };
        for (const kind of ['~revoked/', '~revoked-identity/', '~as/']) {
          const prefix = this.cluster.keys.records + kind;
          const end = Buffer.from(prefixEnd(prefix));
          let from = Buffer.from(prefix);
          for (;;) {
            const page = await this.cluster.client.kv.range({ key: from, range_end: end, limit: 2000 });
            for (const kv of page.kvs) this.cluster.parseNews(kv, news, false);
            if (!page.more || page.kvs.length === 0) break;
            from = Buffer.concat([page.kvs[page.kvs.length - 1].key, Buffer.from([0])]);
          }
        }
        if (!this.closed) this.news(news);
        return;
      } catch (e) {
        if (attempt === 1) this.log.warn({ err: String((e as Error).message ?? e) }, 'cluster: could not read the API-session news; trying again');
        await new Promise((r) => setTimeout(r, 1000).unref());
      }
    }
  }

  /** A validly signed API-session token this controller does not hold: take it on, or refuse it. */
  learn(claims: TokenClaims, token: string): ApiSession | undefined {
    const c = claims.z_as as Carried | undefined;
    if (!c || typeof c !== 'object' || typeof c.a !== 'string' || !Array.isArray(c.ct) || typeof c.c !== 'number') return undefined;
    const now = Date.now();
    // Older than the revocations etcd keeps: it could have been revoked unseen. Log in again.
    if (c.c < now - SESSION_NEWS_RETENTION_MS) return undefined;
    if (this.revoked.has(claims.jti)) return undefined;
    const disabled = this.identities.get(claims.sub);
    if (disabled && (typeof c.r === 'number' ? c.r < disabled.revision : disabled.at >= c.c)) return undefined;
    const identity = this.store.get('identities', claims.sub);
    if (!identity || isDisabledAt(identity)) return undefined;
    const authenticator = this.store.get('authenticators', c.a);
    // Made with an authenticator since removed (or replaced), or before the identity was last disabled.
    if (!authenticator || authenticator.identityId !== claims.sub || authenticator.createdAt > c.c) return undefined;
    if (typeof identity.disabledAt === 'number' && identity.disabledAt >= c.c) return undefined;
    if (c.m && !allowsPrimary(this.store, { method: c.m as PrimaryMethod, identity, signerId: c.ps })) return undefined;
    // Idle for longer than the timeout, as far as the activity beats tell: refused as its own
    // controller refuses it (it expired there, with no news).
    const lastActive = Math.max(c.c, this.active.get(claims.jti) ?? 0);
    if (now - lastActive > this.timeoutMs) return undefined;
    const news = this.states.get(claims.jti);
    // MFA removed since (on any controller) takes the pass the news or the token tell of.
    const state = mfaStateNow(this.store, identity, news ?? { isMfaRequired: c.mr === true, isMfaComplete: false });
    const rec: ApiSession = {
      id: claims.jti,
      createdAt: c.c,
      updatedAt: now,
      tags: {},
      token: tokenDigest(token),
      identityId: claims.sub,
      authenticatorId: c.a,
      ipAddress: String(c.ip ?? ''),
      configTypes: c.ct.filter((x): x is string => typeof x === 'string'),
      isMfaRequired: state.isMfaRequired,
      isMfaComplete: state.isMfaComplete,
      lastActivityAt: now,
    };
    if (c.m) rec.method = c.m;
    if (c.ps) rec.primarySignerId = c.ps;
    if (c.es) rec.extJwtSignerId = c.es;
    if (state.mfaPassedAt !== undefined) rec.mfaPassedAt = state.mfaPassedAt;
    // Held here from now on (sessions made under it refer to it); written here only.
    void this.store
      .writeLocal((tx) => {
        if (!tx.exists('apiSessions', rec.id) && !this.revoked.has(rec.id)) tx.put('apiSessions', rec);
      })
      .catch((e) => this.log.warn({ err: String((e as Error).message) }, 'cluster: could not keep an API session taken on from its token'));
    return rec;
  }

  /** News from etcd: API sessions ended, MFA states changed. */
  private news(news: SessionNews) {
    if (news.sessions.length) {
      const ids = news.sessions.map((s) => s.jti);
      for (const listener of this.sessionsRemoved) listener(ids);
    }
    const until = Date.now() + SESSION_NEWS_RETENTION_MS;
    for (const r of news.revoked) this.revoked.set(r.id, until);
    for (const s of news.states) this.states.set(s.id, { ...s, until });
    for (const i of news.identities) if ((this.identities.get(i.id)?.revision ?? -1) < i.revision) this.identities.set(i.id, { at: i.at, revision: i.revision, until });
    const ended = news.revoked.map((r) => r.id);
    const states = news.states;
    // Ended through the log (nothing to revoke again), so the sessions made here under them are
    // news for the routers on the other controllers; with none, it commits here only.
    if (ended.length)
      void this.store
        .write((tx) => ApiSessions.deleteInTx(tx, ended.filter((id) => tx.exists('apiSessions', id))), { revoke: false })
        .catch((e) => this.log.warn({ err: String((e as Error).message) }, 'cluster: could not end API sessions revoked elsewhere'));
    if (states.length === 0) return;
    void this.store
      .writeLocal((tx) => {
        for (const s of states) {
          const cur = tx.get('apiSessions', s.id);
          const identity = cur && tx.get('identities', String(cur.identityId));
          // A pass the identity's MFA removal (in the same revision or since) took away stays away.
          if (cur && identity) setMfaState(tx, cur, mfaStateNow(this.store, identity, s));
        }
      })
      .catch((e) => this.log.warn({ err: String((e as Error).message) }, 'cluster: could not apply API-session news'));
  }

  /** The identity's MFA was removed or replaced: the copies held here lose what it passed. */
  private mfaChanged(identityIds: string[]) {
    void this.store
      .writeLocal((tx) => {
        for (const iid of identityIds) {
          const identity = tx.get('identities', iid);
          if (!identity) continue;
          for (const id of tx.idsByIndex('apiSessions', 'identityId', iid)) {
            const cur = tx.get('apiSessions', id);
            // An OIDC API session is one record everywhere: the removal's own write dropped it.
            if (cur && isLocal('apiSessions', cur)) setMfaState(tx, cur, mfaStateNow(this.store, identity, cur as unknown as MfaState));
          }
        }
      })
      .catch((e) => this.log.warn({ err: String((e as Error).message) }, 'cluster: could not drop the MFA pass of API sessions after an MFA removal'));
  }

  /** Changes every controller sees: each ends its own copies of what they end. */
  private changed(events: ChangeEvent[]) {
    const identities: string[] = [];
    const authenticators: [identityId: string, authenticatorId: string][] = [];
    const apiSessions: string[] = [];
    const mfa: string[] = [];
    for (const ev of events) {
      if (ev.collection === 'identities') {
        if (!ev.after || (ev.after.disabledAt && ev.after.disabledAt !== ev.before?.disabledAt && isDisabledAt(ev.after))) identities.push(ev.id);
        else if (ev.before?.mfa && ev.before.mfa.id !== ev.after.mfa?.id) mfa.push(ev.id);
      } else if (ev.collection === 'authenticators' && ev.before && !ev.after) authenticators.push([String(ev.before.identityId), ev.id]);
      else if (ev.collection === 'apiSessions' && ev.before && !ev.after) apiSessions.push(ev.id);
    }
    if (mfa.length) this.mfaChanged(mfa);
    if (identities.length + authenticators.length + apiSessions.length === 0) return;
    // Through the log (nothing to revoke: every controller ends its own), so the sessions this
    // controller holds are news for the routers on the others; with none, it commits here only.
    void this.store
      .write((tx: Tx) => {
        for (const id of identities) ApiSessions.endForIdentityInTx(tx, id);
        for (const [identityId, authenticatorId] of authenticators) ApiSessions.deleteInTx(tx, tx.idsByIndex('apiSessions', 'identityId', identityId).filter((id) => tx.get('apiSessions', id)?.authenticatorId === authenticatorId));
        // Sessions (and certificates) made here under an API session ended elsewhere.
        for (const id of apiSessions) {
          for (const sid of tx.idsByIndex('sessions', 'apiSessionId', id)) tx.delete('sessions', sid);
          for (const cid of tx.idsByIndex('apiSessionCertificates', 'apiSessionId', id)) tx.delete('apiSessionCertificates', cid);
        }
      }, { revoke: false })
      .catch((e) => this.log.warn({ err: String((e as Error).message) }, 'cluster: could not end API sessions after a change'));
  }

  private purge() {
    const now = Date.now();
    for (const [id, until] of this.revoked) if (until <= now) this.revoked.delete(id);
    for (const [id, s] of this.states) if (s.until <= now) this.states.delete(id);
    for (const [id, s] of this.identities) if (s.until <= now) this.identities.delete(id);
    for (const [id, at] of this.active) if (now - at > this.timeoutMs + this.beatMs) this.active.delete(id);
  }
}

/**
 * The activity beats (see above): this controller's, naming the API sessions used here, and the
 * other controllers', which keep the copies held here from looking idle.
 */
export class ActivityBeats {
  private beatTimer?: NodeJS.Timeout;
  private watch?: { close(): void };
  private closed = false;
  /** The regular beat in flight, if any. */
  private beating: Promise<void> = Promise.resolve();
  private inFlight = false;
  private readonly beatDir: string;

  constructor(
    private readonly cluster: Cluster,
    private readonly sessions: ApiSessions,
    private readonly shared: SharedSessions,
    private readonly log: Logger,
  ) {
    this.beatDir = `${cluster.keys.prefix}/activity/`;
  }

  start() {
    this.beatTimer = setInterval(() => this.beat(), this.shared.beatMs);
    this.beatTimer.unref();
    void this.followBeats();
  }

  /**
   * Stop, after putting the final beat: the API sessions used here since the last beat would
   * otherwise look idle elsewhere up to a beat early. Call it once requests have stopped and their
   * activity was flushed (ApiSessions.close), before the etcd client closes; with etcd unreachable
   * it gives up after FINAL_BEAT_WAIT_MS, so a stop never hangs on it.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.beatTimer);
    this.watch?.close();
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<void>((r) => (timer = setTimeout(r, FINAL_BEAT_WAIT_MS)));
    // A beat in flight gives its ids back when etcd fails it: the final one then carries them.
    const final = this.beating.then(() => this.putBeat(this.sessions.takeUsed(), Date.now() + FINAL_BEAT_WAIT_MS));
    await Promise.race([final, waited.then(() => Promise.reject(new Error(`etcd did not answer within ${FINAL_BEAT_WAIT_MS} ms`)))])
      .catch((e) => this.log.warn({ err: String((e as Error).message ?? e) }, 'cluster: could not write the final activity beat; API sessions used since the last one may look idle elsewhere up to a beat early'))
      .finally(() => clearTimeout(timer));
  }

  /** Tell the other controllers which API sessions were used here since the last beat. */
  private beat() {
    // One at a time: while one waits for etcd, what is used meanwhile goes with the next.
    if (this.closed || this.inFlight) return;
    const ids = this.sessions.takeUsed();
    this.inFlight = true;
    this.beating = this.putBeat(ids, Date.now() + Math.max(this.shared.beatMs, CALL_TIMEOUT_MS))
      .catch((e) => {
        // etcd unreachable: they go with the next beat.
        for (const id of ids) this.sessions.used?.add(id);
        this.log.warn({ err: String((e as Error).message ?? e) }, 'cluster: could not write an activity beat; trying with the next one');
      })
      .finally(() => (this.inFlight = false));
  }

  /** Put one beat naming `ids` (none: nothing to put), giving up at `deadline` (ms). */
  private async putBeat(ids: string[], deadline: number): Promise<void> {
    if (ids.length === 0) return;
    // The beat's time, not each request's: the API sessions count as used until then, so they are
    // refused at most one beat later than on a single node, never too early. Only a controller
    // reading the key at its start uses it (clamped to its own clock); a watching one takes the
    // time it receives the beat.
    const at = Date.now();
    // The key is worth keeping until an API session it names would be idle anyway.
    const lease = await this.cluster.client.lease(Math.ceil((this.shared.timeoutMs + 2 * this.shared.beatMs) / 1000), { autoKeepAlive: false, deadline }).grant();
    for (let i = 0; i < ids.length; i += IDS_PER_BEAT_KEY) {
      await this.cluster.client.kv.put({ key: Buffer.from(`${this.beatDir}${randomUUID()}`), value: packr.pack({ at, ids: ids.slice(i, i + IDS_PER_BEAT_KEY) }), lease }, { deadline });
    }
  }

  /** Read every activity beat in etcd, then watch for new ones (listing again after a compaction). */
  private async followBeats(): Promise<void> {
    for (let attempt = 1; !this.closed; attempt++) {
      try {
        const res = await this.cluster.client.kv.range({ key: Buffer.from(this.beatDir), range_end: Buffer.from(prefixEnd(this.beatDir)) });
        // Beats put before this controller watched: their writer's time, but never later than
        // now here (a writer's clock ahead would keep its API sessions alive longer).
        const now = Date.now();
        for (const kv of res.kvs) this.heard(kv, (at) => Math.min(at, now));
        if (this.closed) return;
        this.watch = watchPrefix(this.cluster.client, this.beatDir, Number(res.header.revision) + 1, {
          // A beat as it arrives: used until now by this controller's clock, whatever the
          // writer's (later than the real use by the watch latency: refused that much later at
          // most, never too early).
          events: (events) => {
            const now = Date.now();
            for (const ev of events) if (ev.type === 'Put') this.heard(ev.kv, () => now);
          },
          compacted: () => void this.followBeats(),
        });
        return;
      } catch (e) {
        if (attempt === 1) this.log.warn({ err: String((e as Error).message ?? e) }, 'cluster: could not read the activity beats; trying again');
        await new Promise((r) => setTimeout(r, 1000).unref());
      }
    }
  }

  /** One beat: the API sessions it names were used until `time(its writer's time)` here. */
  private heard(kv: { value: Buffer }, time: (writerAt: number) => number) {
    let v: { at?: unknown; ids?: unknown };
    try {
      v = packr.unpack(kv.value) as typeof v;
    } catch {
      return;
    }
    const writerAt = Number(v?.at);
    if (!Number.isFinite(writerAt) || !Array.isArray(v.ids)) return;
    const at = time(writerAt);
    for (const id of v.ids) {
      if (typeof id !== 'string') continue;
      this.shared.heardActive(id, at);
      this.sessions.noteActivity(id, at);
    }
  }
}


/** Put an API session's MFA state into its record, when it changes it. */
function setMfaState(tx: Tx, cur: ApiSessionRecord, s: MfaState) {
  if (sameMfaState(cur as unknown as MfaState, s)) return;
  const next: ApiSessionRecord = { ...cur, isMfaRequired: s.isMfaRequired, isMfaComplete: s.isMfaComplete, updatedAt: Date.now() };
  if (s.mfaPassedAt === undefined) delete next.mfaPassedAt;
  else next.mfaPassedAt = s.mfaPassedAt;
  tx.put('apiSessions', next);
}
