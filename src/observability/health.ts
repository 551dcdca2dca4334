/**
 * Liveness and readiness.
 *
 *   GET /health/live   200 while the process serves requests at all (the event loop answers).
 *   GET /health/ready  200 when this controller should get traffic, else 503 with the failing checks:
 *                      not shutting down; the store answers reads and has room left in its map;
 *                      the worker pool queue is not full (callers would get 429); the TLS server
 *                      certificate is within its validity; in cluster mode, the replica is loaded,
 *                      its watch is up, and a marker written every 2 s comes back through it
 *                      within 2 s (src/cluster/replica.ts: etcd has a leader and the watch keeps
 *                      up). A 503 carries Retry-After (the router adds it).
 *   GET /health-checks the same checks in upstream's health-check envelope (`data.controller`).
 *
 * Unauthenticated, like upstream's health-check API: they reveal nothing but healthy or not.
 */
import crypto from 'node:crypto';
import type { App } from '../api/context.js';

export interface Check {
  id: string;
  healthy: boolean;
  detail: string;
}

/** Store map use past which the controller reports itself not ready (writes would soon fail). */
const STORE_FULL_RATIO = 0.95;

export class Health {
  /** Set when shutdown begins: readiness fails at once so load balancers stop sending traffic. */
  closing = false;
  private readonly serverNotAfter: number;
  private readonly serverNotBefore: number;

  constructor(private readonly app: App) {
    const cert = new crypto.X509Certificate(app.pki.serverCertPem);
    this.serverNotAfter = Date.parse(cert.validTo);
    this.serverNotBefore = Date.parse(cert.validFrom);
  }

  checks(now = Date.now()): Check[] {
    const { app } = this;
    const out: Check[] = [{ id: 'controller.shutdown', healthy: !this.closing, detail: this.closing ? 'shutting down' : 'serving' }];
    try {
      const readable = app.store.get('authPolicies', 'default') !== undefined;
      const s = app.store.env.getStats() as { pageSize: number; lastPageNumber: number; mapSize: number };
      const ratio = ((s.lastPageNumber + 1) * s.pageSize) / s.mapSize;
      out.push({ id: 'store.read', healthy: readable, detail: readable ? 'ok' : 'the default auth policy is missing' });
      out.push({ id: 'store.space', healthy: ratio < STORE_FULL_RATIO, detail: `${(ratio * 100).toFixed(1)}% of the map in use` });
    } catch (e) {
      out.push({ id: 'store.read', healthy: false, detail: (e as Error).message });
    }
    const cluster = app.store.cluster?.status();
    if (cluster) out.push({ id: 'cluster.replica', healthy: cluster.ready, detail: cluster.detail });
    const queued = app.pool.queueSize;
    out.push({ id: 'pool.queue', healthy: queued < app.config.workerQueue, detail: `${queued} of ${app.config.workerQueue} queued` });
    const certOk = now >= this.serverNotBefore && now <= this.serverNotAfter;
    out.push({ id: 'tls.server-certificate', healthy: certOk, detail: `valid until ${new Date(this.serverNotAfter).toISOString()}` });
    return out;
  }

  ready(): { healthy: boolean; checks: Check[] } {
    const checks = this.checks();
    return { healthy: checks.every((c) => c.healthy), checks };
  }
}
