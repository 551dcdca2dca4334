/**
 * Table-driven exerciser: drives an API through the checking proxy with a generic OpenAPI client
 * (swagger-client), by operationId, one table row per call. Covering a new operation is one row:
 *
 *   { op: 'detailIdentity', params: (s) => ({ id: s.get('user') }) }
 *   { op: 'createService', body: () => ({ name: 'svc' }), save: (d, s) => s.set('svc', d.id) }
 *
 * A row's `params` are the operation's path/query parameters; `body` goes to its one body parameter
 * (whatever the spec names it). The status expected is `status`, else the first 2xx the spec
 * declares.
 */
import type { Test } from 'tap';
import SwaggerClient from 'swagger-client';
import crypto from 'node:crypto';
import { ExchangeLog } from './exchanges.js';
import { CLIENT_CERT_HEADER } from './cert-relay.js';
import type { Proxy } from './prism.js';
import type { Api } from './upstream-spec.js';
import type { Server } from '../../helpers/server.js';

export interface Row {
  op: string;
  /** Defaults to the suite's API. */
  api?: Api;
  /** Session to send (`State.sessions` key); default `admin`; `none` sends no zt-session. */
  as?: string;
  params?: (s: State) => Record<string, unknown>;
  body?: (s: State) => unknown;
  /** Expected status; default the first 2xx the spec declares for the operation. */
  status?: number;
  /** Runs with the response body (`data` unwrapped when there is one) after a call with the expected status. */
  save?: (data: any, s: State, body: any) => void;
  /** Set-up outside the checked exchanges (e.g. a session created on the other API), run before the call. */
  before?: (s: State) => Promise<void>;
  /** The response media type to ask for (swagger-client `responseContentType` → `accept`). */
  accept?: string;
  /** The request media type, among those the operation consumes (swagger-client `requestContentType`). */
  contentType?: string;
  /** What the row shows; printed with the assertion. */
  note?: string;
  /**
   * A TLS client certificate to present (certificate login, ottca/CA enrollment, extensions): the
   * request reaches the controller's certificate listener through the proxy's relay
   * (`startPrism(…, { clientCerts: true })`, ./cert-relay.ts).
   */
  cert?: (s: State) => { cert: string; key: string };
}

export class Missing extends Error {}

export class State {
  /** The controller under test, for `before` set-up hooks. */
  srv?: Server;
  readonly values = new Map<string, string>();
  readonly sessions: Record<string, string | undefined> = {};
  get(name: string): string {
    const v = this.values.get(name);
    if (v === undefined) throw new Missing(name);
    return v;
  }
  set(name: string, v: string) {
    this.values.set(name, v);
  }
}

/** The rows' operations: what the suite must have exercised cleanly. */
export function liveOps(api: Api, rows: Row[]): Set<string> {
  return new Set(rows.map((r) => `${r.api ?? api}:${r.op}`));
}

export interface Exerciser {
  log: ExchangeLog;
  /** Runs one row; returns the status and body (undefined when skipped). */
  run(t: Test, row: Row): Promise<{ status: number; body: any } | undefined>;
}

export async function exerciser(proxy: Proxy, state: State, log = new ExchangeLog(proxy)): Promise<Exerciser> {
  // swagger-client builds URLs from host/schemes/basePath: point it at the proxy (a client-side
  // setting, not a change to what is checked; prism routes on basePath-relative paths).
  const spec = structuredClone(proxy.spec.doc);
  const base = new URL(proxy.base);
  spec.host = base.host;
  spec.schemes = ['http'];
  spec.basePath = '/';
  const client = await SwaggerClient({ spec });
  const bodyParam = new Map<string, string>();
  for (const item of Object.values<any>(spec.paths)) {
    for (const op of Object.values<any>(item)) {
      if (!op?.operationId) continue;
      const b = [...(item.parameters ?? []), ...(op.parameters ?? [])].find((p: any) => p.in === 'body');
      if (b) bodyParam.set(op.operationId, b.name);
    }
  }
  return {
    log,
    async run(t, row) {
      const api = row.api ?? proxy.api;
      if (api !== proxy.api) throw new Error(`row ${row.op} is for ${api}, exerciser is ${proxy.api}`);
      const label = `${api}:${row.op}${row.note ? ` (${row.note})` : ''}`;
      let parameters: Record<string, unknown>;
      let certName: string | undefined;
      try {
        await row.before?.(state);
      } catch (e) {
        t.fail(`${label}: set-up failed: ${(e as Error).message}`);
        return undefined;
      }
      try {
        parameters = { ...(row.params?.(state) ?? {}) };
        const creds = row.cert?.(state);
        if (creds) {
          certName = crypto.createHash('sha1').update(creds.cert).digest('hex');
          proxy.clientCert(certName, creds.cert, creds.key);
        }
        if (row.body) {
          const name = bodyParam.get(row.op);
          if (!name) throw new Error(`${row.op} takes no body`);
          parameters[name] = row.body(state);
        }
      } catch (e) {
        if (e instanceof Missing) {
          t.fail(`${label}: needs "${e.message}", which an earlier row did not produce`);
          return undefined;
        }
        throw e;
      }
      const as = row.as ?? 'admin';
      const token = as === 'none' ? undefined : state.sessions[as];
      if (as !== 'none' && !token) {
        t.fail(`${label}: no session "${as}"`);
        return undefined;
      }
      const userFetch = (url: string, init: RequestInit) => {
        const headers = { ...(init.headers as Record<string, string>) };
        if (token) headers['zt-session'] = token;
        if (certName) headers[CLIENT_CERT_HEADER] = certName;
        return log.fetch(url, { ...init, headers });
      };
      const first = log.exchanges.length;
      let status: number;
      let body: any;
      try {
        const res = await client.execute({ operationId: row.op, parameters, userFetch, ...(row.accept ? { responseContentType: row.accept } : {}), ...(row.contentType ? { requestContentType: row.contentType } : {}) } as any);
        status = res.status;
        body = res.body;
      } catch (e: any) {
        if (!e?.response) {
          t.fail(`${label}: client error ${e?.message ?? e}`);
          return undefined;
        }
        status = e.response.status;
        body = e.response.body;
      }
      const expected = row.status ?? successStatus(spec, row.op);
      checkExchanges(t, log, first, row.op, label);
      const statusOk = status === expected;
      t.ok(statusOk, `${label} → ${status}${statusOk ? '' : ` (expected ${expected}): ${JSON.stringify(body)?.slice(0, 300)}`}`);
      if (statusOk && row.save) row.save(body && typeof body === 'object' && 'data' in body ? body.data : body, state, body);
      return { status, body };
    },
  };
}

/** Asserts that the exchanges since index `first` exist, are clean, and are all `op`. */
export function checkExchanges(t: Test, log: ExchangeLog, first: number, op: string, label: string) {
  const xs = log.exchanges.slice(first);
  if (xs.length === 0) t.fail(`${label}: no exchange went through the proxy`);
  for (const x of xs) {
    const ok = x.problems.length === 0 && x.operationId === op;
    const why = [...x.problems, ...(x.operationId === op ? [] : [`matched ${x.operationId}, not ${op}`])];
    t.ok(ok, `${log.label(x)} conforms to the upstream spec${ok ? '' : ': ' + why.join('; ')}`);
  }
}

/** The first 2xx status the spec declares for an operation. */
export function successStatus(doc: any, op: string): number {
  for (const item of Object.values<any>(doc.paths)) {
    for (const o of Object.values<any>(item)) {
      if (o?.operationId === op) return Number(Object.keys(o.responses ?? {}).find((s) => /^2\d\d$/.test(s)) ?? 200);
    }
  }
  throw new Error(`no operation ${op}`);
}
