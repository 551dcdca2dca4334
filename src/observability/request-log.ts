/**
 * Access log: one structured line per request. It carries what operators need and nothing secret:
 * request id, method, path without the query string (enrollment tokens and filters travel there),
 * operation, status, duration, remote address and the caller's identity id — never headers (the
 * zt-session token, Authorization), bodies (passwords, CSRs, keys) or query values.
 *
 * Level: info for every request when `requestLog` is on (4xx are the client's business, not the
 * controller's); 5xx at error, always, even with the access log off.
 */
import type { Logger } from 'pino';
import type { RequestRecord } from '../api/router.js';

export function requestLogger(log: Logger, enabled: boolean): (r: RequestRecord) => void {
  const http = log.child({ component: 'http' });
  // Decided once: with the access log off (or the level above info) a request builds no log object.
  const info = enabled && http.isLevelEnabled('info');
  return (r) => {
    if (!info && r.status < 500) return;
    const fields = {
      requestId: r.requestId,
      method: r.method.toUpperCase(),
      path: r.path,
      operationId: r.operationId ?? r.rawRoute,
      status: r.status,
      ms: Math.round(r.durationMs * 1000) / 1000,
      remoteAddress: r.remoteAddress,
      identityId: r.identityId,
    };
    if (r.status >= 500) http.error(fields, 'request');
    else http.info(fields, 'request');
  };
}
