/**
 * The time-based alert checks: certificates about to expire (CAs, and the controller's root,
 * intermediate and server certificates) and enrollments that expired unused.
 *
 * Expired enrollments come from a range read of the enrollments' `expiresAt` index up to now, so
 * a scan costs in proportion to the expired ones only: scanning every enrollment record of the
 * "large" model every minute decoded all of them (JWTs included) and kept their pages mapped. A record is read only for a newly alerted enrollment (its owner's name).
 */
import crypto from 'node:crypto';
import type { EventsApp as App } from './context.js';
import { listed, type Alert, type Condition, type Findings, type Pacer } from './alert-scan.js';
import { nameOf } from './alert-structural.js';

export const CERT = 'cert:';
export const ENROLLMENT_EXPIRED = 'enrollment-expired:';

function certExpiry(pem: unknown): number | undefined {
  if (typeof pem !== 'string') return undefined;
  try {
    return Date.parse(new crypto.X509Certificate(pem).validTo);
  } catch {
    return undefined;
  }
}

export async function expiryFindings(app: App, now: number, certExpiryDays: number, pace: Pacer): Promise<Findings[]> {
  const store = app.store;
  const horizon = now + certExpiryDays * 86_400_000;
  const certs: Condition[] = [];
  const certAlert = (key: string, type: string, id: string, name: string, expires: number | undefined) => {
    if (expires === undefined || expires > horizon) return;
    const expired = expires <= now;
    const alert: Alert = {
      key: `${CERT}${key}:${expires}`,
      alert_type: 'certificate.expiring',
      event_source_type: type,
      event_source_id: id,
      event_source_name: name,
      severity: expired ? 'error' : 'warning',
      message: expired ? `${type} certificate ${name} expired at ${new Date(expires).toISOString()}` : `${type} certificate ${name} expires at ${new Date(expires).toISOString()}`,
      logs: [`not after: ${new Date(expires).toISOString()}`, `warning window: ${certExpiryDays} days`],
    };
    certs.push({ key: alert.key, alert: () => alert });
  };
  for (const ca of store.scan('cas')) {
    if (pace.due(16)) await pace.yield();
    certAlert(`ca:${ca.id}`, 'ca', ca.id, nameOf(ca), certExpiry(ca.certPem));
  }
  const pki = app.pki;
  certAlert('controller:root', 'controller', app.instanceId, 'root CA', certExpiry(pki.rootCertPem));
  certAlert('controller:intermediate', 'controller', app.instanceId, 'intermediate CA', certExpiry(pki.intermediateCertPem));
  certAlert('controller:server', 'controller', app.instanceId, 'server', certExpiry(pki.serverCertPem));

  // Index keys are numbers (epoch ms) here; the range ends just after now (its end is exclusive).
  const expired = new Set<string>();
  for (const id of store.idsByRange('enrollments', 'expiresAt', { end: now + 1 })) {
    if (pace.due()) await pace.yield();
    expired.add(id);
  }
  function* enrollmentConditions(): Generator<Condition> {
    for (const id of expired) {
      const key = `${ENROLLMENT_EXPIRED}${id}`;
      yield {
        key,
        alert: () => {
          const e = store.get('enrollments', id);
          if (!e || typeof e.expiresAt !== 'number' || e.expiresAt > now) return undefined;
          const owner = e.identityId ? store.get('identities', e.identityId) : e.edgeRouterId ? store.get('edgeRouters', e.edgeRouterId) : e.transitRouterId ? store.get('routers', e.transitRouterId) : undefined;
          const ownerType = e.identityId ? 'identity' : e.edgeRouterId ? 'edge router' : 'router';
          return {
            key,
            alert_type: 'enrollment.expired',
            event_source_type: 'enrollment',
            event_source_id: e.id,
            event_source_name: `${e.method} enrollment of ${ownerType} ${nameOf(owner)}`,
            severity: 'info',
            message: `the ${e.method} enrollment of ${ownerType} ${nameOf(owner)} expired unused at ${new Date(e.expiresAt).toISOString()}`,
            logs: [`enrollment: ${e.id}`, `method: ${e.method}`, `${ownerType}: ${nameOf(owner)} (${e.identityId ?? e.edgeRouterId ?? e.transitRouterId})`],
          };
        },
      };
    }
  }
  const enrollments: Findings = {
    prefix: ENROLLMENT_EXPIRED,
    conditions: { [Symbol.iterator]: enrollmentConditions },
    count: expired.size,
    holds: (key) => expired.has(key.slice(ENROLLMENT_EXPIRED.length)),
  };
  return [listed(CERT, certs), enrollments];
}
