/**
 * Prometheus metrics (`GET /metrics`, prom-client): request counts and latencies per operation,
 * worker pool queue depth, API sessions, online routers and control channel activity, store size
 * and records, plus the Node process defaults (CPU, memory, event loop lag, GC).
 *
 * Everything but the request metrics is read at scrape time (`collect`), so nothing is updated
 * on hot paths except the request statistics (request-stats.ts: two Map lookups per request).
 *
 * Each controller has its own Registry (a benchmark may embed several in one process).
 * Labels never carry paths, ids or query strings: `operation` is the upstream operationId, the raw
 * route path (`/metrics`), or `unmatched`, so cardinality stays bounded.
 */
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { RequestStats } from './request-stats.js';
import type { App } from '../api/context.js';
import type { RequestRecord } from '../api/router.js';
import type { ControlChannel } from '../control/channel.js';
import type { Audit } from '../events/audit.js';


export class Metrics {
  readonly registry = new Registry();
  private readonly requests = new RequestStats();

  constructor(app: App, channel: ControlChannel, audit?: Audit) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });

    new Gauge({
      name: 'mesh_build_info',
      help: 'Controller build (value is always 1)',
      labelNames: ['version', 'revision', 'controller_id'],
      registers,
      collect() {
        this.set({ version: app.version, revision: app.revision, controller_id: app.controllerId }, 1);
      },
    });
    new Gauge({
      name: 'mesh_worker_pool_queue_depth',
      help: 'Tasks waiting for a worker thread (password hashing, certificate signing)',
      registers,
      collect() {
        this.set(app.pool.queueSize);
      },
    });
    new Gauge({
      name: 'mesh_worker_pool_queue_limit',
      help: 'Queue depth past which callers get 429 RATE_LIMITED',
      registers,
      collect() {
        this.set(app.config.workerQueue);
      },
    });
    new Gauge({
      name: 'mesh_api_sessions',
      help: 'API sessions currently held',
      registers,
      collect() {
        this.set(app.store.count('apiSessions'));
      },
    });
    new Gauge({
      name: 'mesh_sessions',
      help: 'Service sessions (Dial/Bind) currently held',
      registers,
      collect() {
        this.set(app.store.count('sessions'));
      },
    });
    new Gauge({
      name: 'mesh_routers_online',
      help: 'Routers connected over the control channel, by kind (edge, transit)',
      labelNames: ['kind'],
      registers,
      collect() {
        for (const [kind, n] of Object.entries(app.presence.countByKind())) this.set({ kind }, n);
      },
    });
    new Gauge({
      name: 'mesh_routers_enrolled',
      help: 'Router records, by kind (edge, transit)',
      labelNames: ['kind'],
      registers,
      collect() {
        this.set({ kind: 'edge' }, app.store.count('edgeRouters'));
        this.set({ kind: 'transit' }, app.store.count('routers'));
      },
    });
    new Gauge({
      name: 'mesh_control_handshakes_pending',
      help: 'Router control channel connections not yet authenticated',
      registers,
      collect() {
        this.set(channel.pendingHandshakes);
      },
    });
    const stats = channel.stats;
    monotonic(registers, 'mesh_control_connects_total', 'Routers that completed the control channel handshake', () => ({ '': stats.connects }));
    monotonic(registers, 'mesh_control_refused_total', 'Control channel handshakes refused, by reason', () => stats.refused, 'reason');
    monotonic(registers, 'mesh_control_dropped_total', 'Router sessions closed by the controller, by reason', () => stats.dropped, 'reason');
    monotonic(registers, 'mesh_control_frames_total', 'Control channel frames, by direction', () => ({ in: stats.framesIn, out: stats.framesOut }), 'direction');

    const commits = app.store.commitStats;
    monotonic(registers, 'mesh_store_commits_total', 'LMDB transactions committed (group commit: each carries every write issued while the previous one committed)', () => ({ '': commits.commits }));
    monotonic(registers, 'mesh_store_committed_writes_total', 'Atomic writes carried by those transactions', () => ({ '': commits.writes }));
    monotonic(registers, 'mesh_store_commit_seconds_total', 'Time from starting each transaction to its being durable on disk', () => ({ '': commits.seconds }));
    const signing = app.keys.signingStats;
    monotonic(registers, 'mesh_session_tokens_signed_total', 'Session (dial/bind) tokens signed', () => ({ '': signing.tokens }));
    monotonic(registers, 'mesh_session_token_signatures_total', 'Signatures those tokens took (one per batch: a Merkle tree of the tokens asked for together)', () => ({ '': signing.batches }));
    const cluster = app.store.cluster;
    if (cluster) {
      const cs = cluster.stats;
      monotonic(registers, 'mesh_cluster_txns_total', 'etcd transactions sent (each carries the writes issued while the previous one was in flight)', () => ({ '': cs.txns }));
      monotonic(registers, 'mesh_cluster_writes_total', 'Guarded writes carried by those transactions', () => ({ '': cs.writes }));
      monotonic(registers, 'mesh_cluster_write_retries_total', 'Writes run again, by reason: a guard failed (others changed what they read), or they read a write still in flight', () => ({ guard: cs.retries, pending: cs.waits }), 'reason');
      monotonic(registers, 'mesh_cluster_txn_seconds_total', 'Seconds from sending an etcd transaction to its answer (one in flight at a time)', () => ({ '': cs.txnSeconds }));
      monotonic(registers, 'mesh_cluster_applies_total', 'LMDB transactions applying watch events to the replica', () => ({ '': cs.applies }));
      monotonic(registers, 'mesh_cluster_apply_seconds_total', 'Seconds those LMDB transactions took, change events included', () => ({ '': cs.applySeconds }));
      new Gauge({ name: 'mesh_cluster_applied_revision', help: 'etcd revision the local replica has applied', registers, collect() { this.set(cluster.applied); } });
      new Gauge({ name: 'mesh_cluster_replica_ready', help: '1 while the replica follows etcd and is caught up', registers, collect() { this.set(cluster.status().ready ? 1 : 0); } });
    }
    new Gauge({
      name: 'mesh_store_size_bytes',
      help: 'Bytes of the LMDB map in use (last page written x page size)',
      registers,
      collect() {
        const s = app.store.env.getStats() as { pageSize: number; lastPageNumber: number };
        this.set((s.lastPageNumber + 1) * s.pageSize);
      },
    });
    new Gauge({
      name: 'mesh_store_map_size_bytes',
      help: 'Configured LMDB map size (the most the store can grow to)',
      registers,
      collect() {
        this.set((app.store.env.getStats() as { mapSize: number }).mapSize);
      },
    });
    new Gauge({
      name: 'mesh_store_records',
      help: 'Records per store collection',
      labelNames: ['collection'],
      registers,
      collect() {
        for (const c of app.store.collections()) this.set({ collection: c.name }, app.store.count(c.name));
      },
    });
    if (audit) {
      monotonic(registers, 'mesh_audit_events_total', 'Changes recorded in the audit trail', () => ({ '': audit.stats.events }));
      monotonic(registers, 'mesh_audit_webhook_sent_total', 'Audit events delivered to the webhook', () => ({ '': audit.stats.webhookSent }));
      monotonic(registers, 'mesh_audit_webhook_dropped_total', 'Audit events dropped before reaching the webhook: queue full (overflow) or every try failed (failed)', () => audit.stats.webhookDropped, 'reason');
      new Gauge({ name: 'mesh_audit_webhook_queue', help: 'Audit events waiting for the webhook', registers, collect() { this.set(audit.webhookQueued); } });
    }
  }

  /** The request hook (Router.onRequest). */
  observe(r: RequestRecord): void {
    this.requests.observe(r.api ?? (r.rawRoute ? 'raw' : 'none'), r.operationId ?? r.rawRoute ?? 'unmatched', r.method, r.status, r.durationMs / 1000);
  }

  async render(): Promise<{ body: string; contentType: string }> {
    return { body: this.requests.render() + '\n' + (await this.registry.metrics()), contentType: this.registry.contentType };
  }
}

/**
 * A counter whose source is a monotonic number (or map of numbers) kept elsewhere: each scrape
 * adds what the source grew by since the last one.
 */
function monotonic(registers: Registry[], name: string, help: string, read: () => Record<string, number>, label?: string) {
  const seen = new Map<string, number>();
  new Counter({
    name,
    help,
    labelNames: label ? [label] : [],
    registers,
    collect() {
      for (const [k, v] of Object.entries(read())) {
        const d = v - (seen.get(k) ?? 0);
        seen.set(k, v);
        if (d > 0) {
          if (label) this.inc({ [label]: k }, d);
          else this.inc(d);
        }
      }
    },
  });
}
