/**
 * Access log: one structured line per request. It carries what operators need and nothing secret:
 * request id, method, path without the query string (enrollment tokens and filters travel there),
 * operation, status, duration, remote address and the caller's identity id — never headers (the
 * zt-session token, Authorization), bodies (passwords, CSRs, keys) or query values.
 *
 * Level: info for every request when `requestLog` is on (4xx are the client's business, not the
 * controller's); 5xx at error, always, even with the access log off.
 *
 * The info line is composed here from the logger's own pieces (level prefix, time, bindings,
 * stream: pino.symbols), giving the very line `log.info(fields, 'request')` writes, at a fraction
 * of the cost of pino's generic serializer or of JSON.stringify of the fields, which at poll rates
 * took a sizeable share of a core (docs/benchmarks.md, "Measurements behind the code").
 */
import { pino, type Logger } from 'pino';
import type { RequestRecord } from '../api/router.js';

const S = pino.symbols;

export function requestLogger(log: Logger, enabled: boolean): (r: RequestRecord) => void {
  const http = log.child({ component: 'http' });
  // Decided once: with the access log off (or the level above info) a request builds no log object.
  const info = enabled && http.isLevelEnabled('info');
  const line = info ? infoLine(http) : undefined;
  return (r) => {
    if (!info && r.status < 500) return;
    if (r.status < 500 && line) return line(r);
    const fields = {
      requestId: r.requestId,
      method: r.method.toUpperCase(),
      path: r.path,
      operationId: r.operationId ?? r.rawRoute,
      status: r.status,
      ms: roundMs(r.durationMs),
      remoteAddress: r.remoteAddress,
      identityId: r.identityId,
    };
    if (r.status >= 500) http.error(fields, 'request');
    else http.info(fields, 'request');
  };
}

const roundMs = (ms: number) => Math.round(ms * 1000) / 1000;

/** Characters JSON.stringify would escape in a string (surrogates: any, to stay simple). */
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;
const str = (s: string) => (NEEDS_ESCAPE.test(s) ? JSON.stringify(s) : `"${s}"`);

/**
 * `http.info(fields, 'request')` of the fields above, byte for byte, or undefined when the logger
 * is customised beyond what this reproduces.
 */
function infoLine(http: Logger): ((r: RequestRecord) => void) | undefined {
  const l = http as unknown as Record<symbol, any>;
  const prefix: unknown = l[S.lsCacheSym]?.[http.levels.values.info];
  const stream = l[S.streamSym];
  const time = l[S.timeSym];
  const custom = l[S.mixinSym] || l[S.hooksSym]?.logMethod || l[(S as unknown as Record<string, symbol>).msgPrefixSym] || l[S.nestedKeySym] || l[S.formattersSym]?.log !== defaultFormatters.log;
  if (typeof prefix !== 'string' || typeof stream?.write !== 'function' || typeof time !== 'function' || custom) return undefined;
  const chindings: string = l[S.chindingsSym] ?? '';
  const tail = `,${JSON.stringify(l[S.messageKeySym] ?? 'msg')}:"request"}\n`;
  return (r) => {
    const op = r.operationId ?? r.rawRoute;
    let s = `${prefix}${time()}${chindings},"requestId":${str(r.requestId)},"method":${str(r.method.toUpperCase())},"path":${str(r.path)}`;
    if (op !== undefined) s += `,"operationId":${str(op)}`;
    s += `,"status":${r.status},"ms":${roundMs(r.durationMs)},"remoteAddress":${str(r.remoteAddress)}`;
    if (r.identityId !== undefined) s += `,"identityId":${str(r.identityId)}`;
    stream.write(s + tail);
  };
}

/** pino's default `formatters.log` (identity), read from a fresh logger to compare against. */
const defaultFormatters = (pino({ enabled: false }) as unknown as Record<symbol, { log: unknown }>)[S.formattersSym];
