/**
 * The operational routes outside the upstream APIs, on the same listener: `/metrics` (Prometheus
 * text format; optionally behind a bearer token, MESH_METRICS_TOKEN) and the health endpoints
 * (health.ts). GET and HEAD only.
 */
import crypto from 'node:crypto';
import type { RawRoute, Reply, Req } from '../core/operation.js';
import { errors } from '../core/errors.js';
import type { Metrics } from './metrics.js';
import type { Health } from './health.js';

const NO_STORE = { 'cache-control': 'no-store' };

function readOnly(path: string, handle: (req: Req) => Reply | Promise<Reply>): RawRoute {
  return {
    method: '*',
    path,
    handle(req) {
      if (req.method !== 'get' && req.method !== 'head') throw errors.methodNotAllowed();
      return handle(req);
    },
  };
}

function sameSecret(given: string, expected: string): boolean {
  const a = crypto.createHash('sha256').update(given).digest();
  const b = crypto.createHash('sha256').update(expected).digest();
  return crypto.timingSafeEqual(a, b);
}

export function operationalRoutes(deps: { metrics: Metrics; health: Health; metricsToken?: string }): RawRoute[] {
  const { metrics, health, metricsToken } = deps;
  return [
    readOnly('/metrics', async (req) => {
      if (metricsToken) {
        const m = /^Bearer\s+(.+)$/i.exec(req.headers.authorization ?? '');
        if (!m || !sameSecret(m[1].trim(), metricsToken)) throw errors.unauthorized({ 'www-authenticate': 'Bearer realm="metrics"' });
      }
      const { body, contentType } = await metrics.render();
      return { status: 200, body, contentType, headers: NO_STORE };
    }),
    readOnly('/health/live', () => ({ status: 200, body: { status: 'live' }, headers: NO_STORE })),
    readOnly('/health/ready', () => {
      const { healthy, checks } = health.ready();
      return { status: healthy ? 200 : 503, body: { status: healthy ? 'ready' : 'not-ready', checks }, headers: NO_STORE };
    }),
    readOnly('/health-checks', () => {
      const { healthy, checks } = health.ready();
      const at = new Date().toISOString();
      const body = {
        data: {
          controller: {
            healthy,
            timestamp: at,
            checks: checks.map((c) => ({ id: c.id, healthy: c.healthy, details: c.detail, lastCheckTime: at, consecutiveFailures: c.healthy ? 0 : 1 })),
          },
        },
        meta: {},
      };
      return { status: healthy ? 200 : 503, body, headers: NO_STORE };
    }),
  ];
}
