/**
 * Every request a compatibility suite sends through the checking proxy goes through
 * `ExchangeLog.fetch` (handed to swagger-client as `userFetch`, to the browzer edge client as its
 * fetch). Each exchange is recorded with the operation it matched in the upstream spec and the
 * reasons it is not clean:
 * - prism listed violations in `sl-violations` (request or response out of spec);
 * - prism answered itself (`application/problem+json`: a VIOLATIONS 500, a request-validation 422,
 *   a security 401, an unmatched route 404);
 * - the response did not come from the controller (no `server: mesh-controller/…`): prism re-mocks
 *   an upstream 501, so a pending operation called through the proxy must never count as covered.
 * A suite asserts that each of its exchanges is clean; `cleanOps()` is what it exercised.
 */
import { specOperations, type Api } from './upstream-spec.js';
import type { Proxy } from './prism.js';

export interface Exchange {
  api: Api;
  method: string;
  /** Path relative to the API base, with the query string. */
  url: string;
  operationId?: string;
  status: number;
  problems: string[];
  body?: unknown;
}

interface Route { operationId: string; method: string; re: RegExp; literals: number }

const routes = new Map<Api, Route[]>();
function routesOf(api: Api): Route[] {
  let r = routes.get(api);
  if (!r) {
    r = specOperations(api).map((o) => {
      const segs = o.path.split('/').filter(Boolean);
      const re = new RegExp('^/' + segs.map((s) => (s.startsWith('{') ? '[^/]+' : s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))).join('/') + '/?$');
      return { operationId: o.operationId, method: o.method, re, literals: segs.filter((s) => !s.startsWith('{')).length };
    });
    // most literal segments first: `/identities/{id}` must not swallow a literal sibling
    r.sort((a, b) => b.literals - a.literals);
    routes.set(api, r);
  }
  return r;
}

/** The operationId of `method path` in the upstream spec of `api` (path relative to the base path). */
export function operationFor(api: Api, method: string, pathname: string): string | undefined {
  const m = method.toUpperCase();
  return routesOf(api).find((r) => r.method === m && r.re.test(pathname))?.operationId;
}

const CONTROLLER = /^mesh-controller\//;

export class ExchangeLog {
  readonly exchanges: Exchange[] = [];

  constructor(readonly proxy: Proxy) {}

  /** A WHATWG-fetch-compatible function that records and checks the exchange. */
  readonly fetch = async (input: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
    const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url);
    const method = (init.method ?? (input instanceof Request ? input.method : 'GET')).toUpperCase();
    const res = await fetch(url, init);
    const base = new URL(this.proxy.base);
    const x: Exchange = {
      api: this.proxy.api,
      method,
      url: url.pathname + url.search,
      operationId: url.host === base.host ? operationFor(this.proxy.api, method, url.pathname) : undefined,
      status: res.status,
      problems: [],
    };
    if (url.host !== base.host) x.problems.push(`not sent through the checking proxy (${url.host})`);
    if (!x.operationId) x.problems.push('matches no operation of the upstream spec');
    const violations = res.headers.get('sl-violations');
    if (violations) {
      let list: string[];
      try {
        list = (JSON.parse(violations) as { location?: string[]; message: string }[]).map((v) => `${(v.location ?? []).join('.')}: ${v.message}`);
      } catch {
        list = [violations.slice(0, 500)];
      }
      for (const v of list) x.problems.push(`violation ${v}`);
    }
    const type = res.headers.get('content-type') ?? '';
    if (type.includes('application/problem+json')) {
      const text = await res.clone().text();
      x.problems.push(`answered by prism, not the controller: ${text.slice(0, 600)}`);
    } else if (!CONTROLLER.test(res.headers.get('server') ?? '')) {
      x.problems.push(`response did not come from the controller (server: ${res.headers.get('server')}); prism mocks what answers 501`);
    }
    if (type.includes('json')) {
      try {
        x.body = await res.clone().json();
      } catch {
        x.problems.push('JSON content type but the body does not parse');
      }
    }
    this.exchanges.push(x);
    return res;
  };

  /** `api:operationId` of every operation with at least one clean exchange. */
  cleanOps(): Set<string> {
    return new Set(this.exchanges.filter((x) => x.operationId && x.problems.length === 0).map((x) => `${x.api}:${x.operationId}`));
  }

  label(x: Exchange): string {
    return `${x.api}:${x.operationId ?? '?'} ${x.method} ${x.url.length > 90 ? x.url.slice(0, 87) + '...' : x.url} → ${x.status}`;
  }
}
