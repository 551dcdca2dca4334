/**
 * The router control channel: one `Session` per connected WebSocket, transport-neutral (the uWS
 * adapter in src/http/ hands each socket over as a `Transport` and forwards its frames).
 *
 * A session moves hello → proof → open (→ closed):
 *   hello  the router presents its certificate chain (and may report hostname/protocols);
 *          checked against our signing CA (router-auth.ts), answered with a random nonce;
 *   proof  the router signs the nonce; the signature and the record whose `fingerprint` is the
 *          certificate's decide; a disabled router is refused;
 *   open   `welcome` carries the router's settings and the trace specs in force; the router is
 *          online (SYNC_IN_PROGRESS) and becomes SYNC_DONE when it answers `synced`.
 * Liveness: one timer for all sessions pings every open router each `heartbeatIntervalMs`; any
 * frame from the router counts as a sign of life, and a router silent for `heartbeatTimeoutMs` is
 * closed and marked offline. A closed TCP connection is noticed at once.
 * Store change events close a router's session when its record is deleted, re-enrolled (the
 * fingerprint changes or is cleared: the old certificate no longer authenticates) or disabled, and
 * push its new settings otherwise; removed sessions (dial/bind) are announced to every edge router. A second connection of the same router supersedes the first.
 */
import crypto from 'node:crypto';
import type { Logger } from 'pino';
import type { ChangeEvent, Rec, Store, ChangeOf, EdgeRouterRecord, RouterRecord } from '../store/store.js';
import type { Presence, RouterKind } from './presence.js';
import type { Traces } from './traces.js';
import { AuthError, RouterAuthenticator, type RouterCert } from './router-auth.js';
import {
  CLOSE, PROTOCOL_VERSION, ProtocolError, encode, parseRouterMessage, proofPayload,
  type ControllerMessage, type RouterSettings, type RouterState,
} from './protocol.js';

/** What a transport (the uWS WebSocket adapter, or anything else) gives the channel per connection. */
export interface Transport {
  /** Send one text frame; false when the connection is already closed. */
  send(text: string): boolean;
  /** Close with a WebSocket close code and a short reason. */
  close(code: number, reason: string): void;
  readonly remoteAddress: string;
}

/** What the transport calls back with. */
export interface Connection {
  /** One frame; `binary` frames are not part of the protocol. */
  message(text: string, binary: boolean): void;
  /** The connection is gone (either side closed it, or the network did). */
  closed(): void;
}

export interface ChannelOptions {
  store: Store;
  presence: Presence;
  traces: Traces;
  log: Logger;
  /** PEM of the CA that issues router certificates (our intermediate). */
  signingCertPem: string;
  controllerId: string;
  /** SHA-1 hex of the controller's TLS server certificate (the router signs it with the nonce). */
  controllerFingerprint: string;
  heartbeatIntervalMs: number;
  heartbeatTimeoutMs: number;
  /** Time allowed from connect to a verified proof. */
  handshakeTimeoutMs: number;
  /** Connections allowed to be mid-handshake at once; more are refused (1013 try again later). */
  maxPendingHandshakes: number;
  /** Cluster mode: every live controller, so a router knows where to reconnect if this one dies. */
  controllers?: () => { id: string; ctrlAddress: string }[];
}

/** Counters read by the metrics scrape. */
export interface ChannelStats {
  connects: number;
  /** Handshakes refused, by reason code. */
  refused: Record<string, number>;
  /** Open sessions closed by the controller, by reason. */
  dropped: Record<string, number>;
  framesIn: number;
  framesOut: number;
}

type Phase = 'hello' | 'proof' | 'open' | 'closed';

const COLLECTION_KIND: Record<'edgeRouters' | 'routers', RouterKind> = { edgeRouters: 'edge', routers: 'transit' };
const isRouterChange = (ev: ChangeEvent): ev is ChangeOf<'edgeRouters'> | ChangeOf<'routers'> => ev.collection === 'edgeRouters' || ev.collection === 'routers';

/** Removed sessions per `session-removed` message. */
const SESSIONS_PER_MESSAGE = 100;
/** A router sends a few frames per heartbeat; a peer sending this many between two sweeps is flooding. */
const MAX_FRAMES_PER_SWEEP = 500;

class Session implements Connection {
  phase: Phase = 'hello';
  readonly openedAt = Date.now();
  lastSeen = Date.now();
  nonce = '';
  cert?: RouterCert;
  routerId = '';
  kind: RouterKind = 'edge';
  reported: RouterState = {};
  seq = 0;
  /** Frames received since the last sweep (flood guard). */
  recent = 0;

  constructor(private readonly ch: ControlChannel, readonly transport: Transport) {}

  send(msg: ControllerMessage) {
    if (this.phase === 'closed') return;
    if (this.transport.send(encode(msg))) this.ch.stats.framesOut++;
  }

  /** Tell the router why (when it helps), then close. Idempotent. */
  end(code: number, reason: string, error?: { code: string; message: string }) {
    if (this.phase === 'closed') return;
    if (error) this.send({ type: 'error', ...error });
    const wasOpen = this.phase === 'open';
    this.phase = 'closed';
    this.ch.forget(this, wasOpen);
    this.transport.close(code, reason);
  }

  message(text: string, binary: boolean) {
    if (this.phase === 'closed') return;
    this.ch.stats.framesIn++;
    this.recent++;
    this.lastSeen = Date.now();
    if (binary) return this.ch.refuse(this, 'INVALID_MESSAGE', CLOSE.protocolError, 'binary frames are not supported: send JSON text frames');
    try {
      this.ch.handle(this, parseRouterMessage(text));
    } catch (e) {
      if (e instanceof ProtocolError) {
        this.ch.refuse(this, e.code, e.code === 'UNSUPPORTED_VERSION' ? CLOSE.unsupportedVersion : CLOSE.protocolError, e.message);
      } else if (e instanceof AuthError) {
        this.ch.refuse(this, e.code, CLOSE.authFailed, e.message);
      } else {
        this.ch.log.error({ err: e, routerId: this.routerId || undefined }, 'control channel: unexpected error');
        this.end(1011, 'internal error');
      }
    }
  }

  closed() {
    if (this.phase === 'closed') return;
    const wasOpen = this.phase === 'open';
    this.phase = 'closed';
    this.ch.forget(this, wasOpen);
  }
}

export class ControlChannel {
  readonly stats: ChannelStats = { connects: 0, refused: {}, dropped: {}, framesIn: 0, framesOut: 0 };
  readonly log: Logger;
  private readonly sessions = new Set<Session>();
  private readonly byRouter = new Map<string, Session>();
  private readonly auth: RouterAuthenticator;
  private pending = 0;
  private readonly sweepMs: number;
  private readonly timer: NodeJS.Timeout;
  private closing = false;

  constructor(private readonly opts: ChannelOptions) {
    this.log = opts.log;
    this.auth = new RouterAuthenticator(opts.signingCertPem);
    opts.store.on('change', (events: ChangeEvent[]) => this.onStoreChange(events));
    // First among the listeners: the tokens of removed sessions are still known to the session
    // registry only until its own listener has run.
    opts.store.prependListener('change', (events: ChangeEvent[]) => this.announceRemovedSessions(events));
    opts.traces.on('change', (trace) => {
      for (const s of this.byRouter.values()) s.send({ type: 'trace', trace });
    });
    this.sweepMs = Math.max(50, Math.min(opts.heartbeatIntervalMs, 1000));
    this.timer = setInterval(() => this.sweep(), this.sweepMs);
    this.timer.unref();
  }

  /** Cluster mode: the live controllers changed (one joined or left): every open router is told. */
  controllersChanged() {
    const list = this.opts.controllers?.();
    if (!list) return;
    for (const s of this.byRouter.values()) s.send({ type: 'controllers', controllers: list });
  }

  /** A new connection from the transport. */
  accept(transport: Transport): Connection {
    const s = new Session(this, transport);
    if (this.closing) {
      transport.close(CLOSE.shutdown, 'controller shutting down');
      s.phase = 'closed';
      return s;
    }
    if (this.pending >= this.opts.maxPendingHandshakes) {
      this.count(this.stats.refused, 'BUSY');
      transport.close(1013, 'too many handshakes in progress; try again later');
      s.phase = 'closed';
      return s;
    }
    this.pending++;
    this.sessions.add(s);
    return s;
  }

  /** Called by a session leaving (closed by either side). */
  forget(s: Session, wasOpen: boolean) {
    if (!this.sessions.delete(s)) return;
    if (!wasOpen) {
      this.pending--;
      return;
    }
    if (this.byRouter.get(s.routerId) === s) {
      this.byRouter.delete(s.routerId);
      this.opts.presence.offline(s.routerId);
      this.log.info({ routerId: s.routerId, kind: s.kind }, 'router disconnected');
    }
  }

  refuse(s: Session, code: string, closeCode: number, message: string) {
    // Before authentication it is a refused handshake; after, a session the controller dropped.
    this.count(s.phase === 'open' ? this.stats.dropped : this.stats.refused, s.phase === 'open' ? code.toLowerCase().replace(/_/g, '-') : code);
    this.log.info({ remoteAddress: s.transport.remoteAddress, routerId: s.routerId || undefined, code, reason: message }, 'router refused');
    s.end(closeCode, code.toLowerCase().replace(/_/g, ' '), { code, message });
  }

  private count(m: Record<string, number>, key: string) {
    m[key] = (m[key] ?? 0) + 1;
  }

  handle(s: Session, msg: ReturnType<typeof parseRouterMessage>) {
    switch (msg.type) {
      case 'hello': {
        if (s.phase !== 'hello') throw new ProtocolError('INVALID_MESSAGE', 'hello was already received');
        s.cert = this.auth.checkChain(msg.certChain);
        s.reported = { hostname: msg.hostname, protocols: msg.protocols, versionInfo: msg.versionInfo, interfaces: msg.interfaces };
        if (msg.routerId) s.routerId = msg.routerId;
        s.nonce = crypto.randomBytes(32).toString('base64url');
        s.phase = 'proof';
        s.send({ type: 'challenge', protocolVersion: PROTOCOL_VERSION, nonce: s.nonce, controllerId: this.opts.controllerId, controllerFingerprint: this.opts.controllerFingerprint });
        return;
      }
      case 'proof': {
        if (s.phase !== 'proof') throw new ProtocolError('INVALID_MESSAGE', s.phase === 'hello' ? 'send hello first' : 'already authenticated');
        const cert = s.cert!;
        const payload = proofPayload(s.nonce, this.opts.controllerFingerprint, cert.fingerprint);
        if (!this.auth.verifyProof(cert, payload, msg.signature)) throw new AuthError('INVALID_PROOF', 'the signature does not verify with the presented certificate');
        const found = this.findRouter(cert.fingerprint);
        if (!found) throw new AuthError('UNKNOWN_ROUTER', 'no enrolled router holds this certificate');
        if (s.routerId && s.routerId !== found.rec.id) throw new AuthError('UNKNOWN_ROUTER', 'the certificate belongs to a different router');
        if (found.rec.disabled) {
          s.routerId = found.rec.id;
          this.refuse(s, 'ROUTER_DISABLED', CLOSE.routerDisabled, 'this router is disabled');
          return;
        }
        this.open(s, found.rec, found.kind);
        return;
      }
      case 'synced':
        this.mustBeOpen(s);
        this.opts.presence.update(s.routerId, { syncStatus: 'SYNC_DONE' });
        return;
      case 'state': {
        this.mustBeOpen(s);
        const { type: _t, ...state } = msg;
        this.opts.presence.update(s.routerId, presencePatch(state));
        return;
      }
      case 'ping':
        s.send({ type: 'pong', seq: msg.seq });
        return;
      case 'pong':
        return;
      case 'bye':
        s.end(CLOSE.normal, 'bye');
        return;
    }
  }

  private mustBeOpen(s: Session) {
    if (s.phase !== 'open') throw new ProtocolError('INVALID_MESSAGE', 'authenticate first (hello, proof)');
  }

  private findRouter(fingerprint: string): { rec: EdgeRouterRecord | RouterRecord; kind: RouterKind } | undefined {
    for (const [collection, kind] of Object.entries(COLLECTION_KIND) as ['edgeRouters' | 'routers', RouterKind][]) {
      for (const id of this.opts.store.idsByIndex(collection, 'fingerprint', fingerprint)) {
        const rec = this.opts.store.get(collection, id);
        if (rec && rec.fingerprint === fingerprint) return { rec, kind };
      }
    }
    return undefined;
  }

  private open(s: Session, rec: EdgeRouterRecord | RouterRecord, kind: RouterKind) {
    this.pending--;
    s.phase = 'open';
    s.routerId = rec.id;
    s.kind = kind;
    s.lastSeen = Date.now();
    this.stats.connects++;
    const previous = this.byRouter.get(rec.id);
    // Register the new session before closing the old one, so the old one's close does not mark
    // the router offline.
    this.byRouter.set(rec.id, s);
    if (previous) {
      this.count(this.stats.dropped, 'superseded');
      previous.end(CLOSE.superseded, 'superseded by a newer connection of this router');
    }
    this.opts.presence.online({
      routerId: rec.id,
      kind,
      connectedAt: Date.now(),
      syncStatus: 'SYNC_IN_PROGRESS',
      hostname: s.reported.hostname ?? '',
      protocols: s.reported.protocols ?? {},
      remoteAddress: s.transport.remoteAddress,
      ...(s.reported.versionInfo ? { versionInfo: s.reported.versionInfo } : {}),
      ...(s.reported.interfaces ? { interfaces: s.reported.interfaces } : {}),
    });
    s.send({
      type: 'welcome',
      protocolVersion: PROTOCOL_VERSION,
      routerId: rec.id,
      kind,
      controllerId: this.opts.controllerId,
      heartbeatIntervalMs: this.opts.heartbeatIntervalMs,
      heartbeatTimeoutMs: this.opts.heartbeatTimeoutMs,
      router: routerSettings(rec, kind),
      traces: this.opts.traces.list(),
      ...(this.opts.controllers ? { controllers: this.opts.controllers() } : {}),
    });
    this.log.info({ routerId: rec.id, kind, name: rec.name, remoteAddress: s.transport.remoteAddress }, 'router connected');
  }

  private onStoreChange(events: ChangeEvent[]) {
    for (const ev of events) {
      if (!isRouterChange(ev)) continue;
      const kind = COLLECTION_KIND[ev.collection];
      const s = this.byRouter.get(ev.id);
      if (!s) continue;
      const after = ev.after;
      if (!after) this.drop(s, CLOSE.revoked, 'deleted', 'the router was deleted');
      // Re-enroll removes the fingerprint (and un-verifies the router); extension replaces it.
      else if (after.fingerprint !== s.cert?.fingerprint || (ev.before?.isVerified === true && after.isVerified === false))
        this.drop(s, CLOSE.revoked, 're-enrolled', 'the router certificate was revoked (re-enrolled or replaced)');
      else if (after.disabled) this.drop(s, CLOSE.routerDisabled, 'disabled', 'this router was disabled');
      else s.send({ type: 'router-update', router: routerSettings(after, kind) });
    }
  }

  /**
   * Sessions (dial/bind) whose record left the store — deleted by their owner or an admin, ended
   * with their API session, their identity disabled or deleted, access or posture lost — are
   * announced to every connected edge router at once, as upstream's SessionRemoved: one
   * `session-removed` per store write, naming every session it removed by id (the `jti` of its
   * token, which is how a router holding a signed token matches it). In a cluster the sessions
   * another controller deleted come as news (`sessionsRemoved`).
   */
  private announceRemovedSessions(events: ChangeEvent[]) {
    let removed: string[] | undefined;
    for (const ev of events) if (ev.collection === 'sessions' && !ev.after && ev.before) (removed ??= []).push(ev.id);
    if (removed) this.sessionsRemoved(removed);
  }

  /** Tell every connected edge router of these removed sessions. */
  sessionsRemoved(removed: string[]) {
    // At most SESSIONS_PER_MESSAGE sessions per message (a mass removal, say an identity with
    // thousands of sessions, goes in frames of a few dozen KiB), as upstream chunks its own.
    for (let i = 0; i < removed.length; i += SESSIONS_PER_MESSAGE) {
      const msg: ControllerMessage = { type: 'session-removed', ids: removed.slice(i, i + SESSIONS_PER_MESSAGE) };
      for (const s of this.byRouter.values()) if (s.kind === 'edge') s.send(msg);
    }
  }

  private drop(s: Session, closeCode: number, why: string, message: string) {
    this.count(this.stats.dropped, why);
    this.log.info({ routerId: s.routerId, reason: why }, 'router disconnected by the controller');
    s.end(closeCode, why, { code: why.toUpperCase().replace(/-/g, '_'), message });
  }

  /** Heartbeats, silent routers, expired certificates and stalled handshakes: one pass over all sessions. */
  private lastPing = 0;
  private sweep() {
    const now = Date.now();
    const ping = now - this.lastPing >= this.opts.heartbeatIntervalMs;
    if (ping) this.lastPing = now;
    for (const s of [...this.sessions]) {
      const burst = s.recent;
      s.recent = 0;
      if (burst > MAX_FRAMES_PER_SWEEP) {
        this.refuse(s, 'RATE_LIMITED', CLOSE.protocolError, `more than ${MAX_FRAMES_PER_SWEEP} frames in ${this.sweepMs} ms`);
        continue;
      }
      if (s.phase === 'open') {
        if (now - s.lastSeen > this.opts.heartbeatTimeoutMs) this.drop(s, CLOSE.timeout, 'heartbeat-timeout', `no frame from the router for ${this.opts.heartbeatTimeoutMs} ms`);
        else if (s.cert && now > s.cert.notAfter) this.drop(s, CLOSE.revoked, 'certificate-expired', 'the router certificate has expired');
        else if (ping) s.send({ type: 'ping', seq: ++s.seq });
      } else if (s.phase !== 'closed' && now - s.openedAt > this.opts.handshakeTimeoutMs) {
        this.refuse(s, 'HANDSHAKE_TIMEOUT', CLOSE.timeout, `authenticate within ${this.opts.handshakeTimeoutMs} ms`);
      }
    }
  }

  /** Sessions mid-handshake (metrics). */
  get pendingHandshakes(): number {
    return this.pending;
  }

  /** Stop: close every session (1001) and mark every router offline. */
  close() {
    this.closing = true;
    clearInterval(this.timer);
    for (const s of [...this.sessions]) s.end(CLOSE.shutdown, 'controller shutting down');
  }
}

function presencePatch(state: RouterState) {
  const patch: Record<string, unknown> = {};
  if (state.hostname !== undefined) patch.hostname = state.hostname;
  if (state.protocols !== undefined) patch.protocols = state.protocols;
  if (state.versionInfo !== undefined) patch.versionInfo = state.versionInfo;
  if (state.interfaces !== undefined) patch.interfaces = state.interfaces;
  return patch;
}

function routerSettings(rec: EdgeRouterRecord | RouterRecord, kind: RouterKind): RouterSettings {
  const out: RouterSettings = {
    name: rec.name,
    cost: rec.cost ?? 0,
    noTraversal: rec.noTraversal === true,
    disabled: rec.disabled === true,
    ctrlChanListeners: rec.ctrlChanListeners ?? {},
  };
  if (kind === 'edge') {
    const edge = rec as EdgeRouterRecord;
    out.roleAttributes = edge.roleAttributes ?? [];
    out.isTunnelerEnabled = edge.isTunnelerEnabled === true;
  }
  return out;
}
