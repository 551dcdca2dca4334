/**
 * Lean HTTPS clients for load generation: keep-alive connections to one origin, a CA to verify
 * the server, and a callback-free `request()` that resolves with status and byte count (and the
 * body only when asked). Two back ends with the same interface:
 *
 *  - `undici` (when the package can be imported; it is not a declared dependency, so it is
 *    optional): a Pool with `connections` sockets driven through `dispatch` with a plain handler
 *    object, the cheapest path undici offers;
 *  - `https`: node:https with a keep-alive Agent, maxSockets = connections;
 *  - `raw`: pre-encoded requests over raw node:tls keep-alive sockets (raw-http.ts), the cheapest
 *    per request; for load loops that must outrun the controller.
 *
 *   const c = await createClient({ origin: 'https://127.0.0.1:1280', ca, connections: 16 });
 *   const r = await c.request({ method: 'GET', path: '/version', headers: {} });
 *   await c.close();
 */
import https from 'node:https';
import { RawHttpClient } from './raw-http.js';

export type ClientKind = 'undici' | 'https' | 'raw';

/** A pre-built request. Build these once, outside the timed loop. */
export interface RequestSpec {
  method: string;
  path: string;
  /** Shared, never mutated by the client. */
  headers: Record<string, string>;
  body?: Buffer;
  /** Keep the response body (otherwise only its size is counted). */
  wantBody?: boolean;
}

export interface HttpResult {
  status: number;
  bytes: number;
  body?: Buffer;
  /** Seconds of a Retry-After header (429/503), when the client kind reads headers (undici, https). */
  retryAfter?: number;
}

export interface HttpClient {
  readonly kind: ClientKind;
  request(spec: RequestSpec): Promise<HttpResult>;
  close(): Promise<void>;
}

export interface ClientOptions {
  /** https://host:port */
  origin: string;
  /** PEM of the CA(s) that sign the server certificate. */
  ca: Buffer | string;
  connections: number;
  /** Default: undici when importable, else https. */
  kind?: ClientKind;
  /** Per-request timeout (ms); a timed-out request rejects with code ETIMEDOUT. Default 60 s. */
  timeoutMs?: number;
  /** TLS client certificate chain and key (PEM), for mutual TLS (a device's enrolled certificate). */
  cert?: Buffer | string;
  key?: Buffer | string;
}

export async function undiciAvailable(): Promise<boolean> {
  return (await loadUndici()) !== undefined;
}

let undiciModule: any | null | undefined;
async function loadUndici(): Promise<any | undefined> {
  if (undiciModule === undefined) {
    const name = 'undici'; // a variable: no compile-time dependency on the package
    try {
      undiciModule = await import(name);
    } catch {
      undiciModule = null;
    }
  }
  return undiciModule ?? undefined;
}

export async function createClient(opts: ClientOptions): Promise<HttpClient> {
  const kind = opts.kind ?? ((await undiciAvailable()) ? 'undici' : 'https');
  if (kind === 'raw') return new RawHttpClient(opts);
  if (kind === 'undici') {
    const undici = await loadUndici();
    if (!undici) throw new Error('undici is not installed; use --client https');
    return new UndiciClient(undici, opts);
  }
  return new NodeHttpsClient(opts);
}

class UndiciClient implements HttpClient {
  readonly kind = 'undici' as const;
  private readonly pool: any;
  private readonly timeoutMs: number;

  constructor(undici: any, opts: ClientOptions) {
    this.timeoutMs = opts.timeoutMs ?? 60_000;
    this.pool = new undici.Pool(opts.origin, {
      connections: opts.connections,
      pipelining: 1,
      keepAliveTimeout: 60_000,
      headersTimeout: this.timeoutMs,
      bodyTimeout: this.timeoutMs,
      connect: { ca: opts.ca, cert: opts.cert, key: opts.key, rejectUnauthorized: true },
    });
  }

  request(spec: RequestSpec): Promise<HttpResult> {
    return new Promise((resolve, reject) => {
      let status = 0;
      let bytes = 0;
      let retryAfter: number | undefined;
      const chunks: Buffer[] | undefined = spec.wantBody ? [] : undefined;
      this.pool.dispatch(
        { method: spec.method, path: spec.path, headers: spec.headers, body: spec.body },
        {
          onConnect() {},
          onHeaders(statusCode: number, rawHeaders: Buffer[]) {
            status = statusCode;
            if (statusCode === 429 || statusCode === 503)
              for (let i = 0; i + 1 < rawHeaders.length; i += 2)
                if (rawHeaders[i].toString('latin1').toLowerCase() === 'retry-after') retryAfter = Number(rawHeaders[i + 1].toString('latin1'));
            return true;
          },
          onData(chunk: Buffer) {
            bytes += chunk.length;
            if (chunks) chunks.push(chunk);
            return true;
          },
          onComplete() {
            resolve({ status, bytes, body: chunks ? Buffer.concat(chunks) : undefined, retryAfter });
          },
          onError(err: Error) {
            reject(err);
          },
        },
      );
    });
  }

  async close(): Promise<void> {
    await this.pool.close();
  }
}

/**
 * Requests the node:https client sent again because the server had closed the kept-alive socket
 * they were written to (see NodeHttpsClient.request). Reported by the benchmarks so that a
 * retry is never invisible.
 */
export const keepAliveRetries = { count: 0 };

class NodeHttpsClient implements HttpClient {
  readonly kind = 'https' as const;
  private readonly agent: https.Agent;
  private readonly host: string;
  private readonly port: number;
  private readonly timeoutMs: number;

  constructor(opts: ClientOptions) {
    const u = new URL(opts.origin);
    this.host = u.hostname.replace(/^\[|\]$/g, '');
    this.port = Number(u.port || 443);
    this.timeoutMs = opts.timeoutMs ?? 60_000;
    // `timeout` also makes the agent honour the server's `Keep-Alive: timeout=N` hint (it closes an
    // idle socket 1 s before the server would); node ignores the hint when the agent has no timeout.
    this.agent = new https.Agent({ keepAlive: true, maxSockets: opts.connections, maxFreeSockets: opts.connections, timeout: this.timeoutMs, ca: opts.ca, cert: opts.cert, key: opts.key });
  }

  request(spec: RequestSpec): Promise<HttpResult> {
    return this.send(spec, true);
  }

  /**
   * A request written to a kept-alive socket that the server closed as idle at the same moment
   * fails with ECONNRESET/EPIPE before any answer: the server never read it. Like Go's net/http
   * (the SDKs' client) and as node's documentation advises (`request.reusedSocket`), send it once
   * more on a new connection. A reset on a new connection, or after an answer started, stays an error.
   */
  private send(spec: RequestSpec, mayRetry: boolean): Promise<HttpResult> {
    return new Promise((resolve, reject) => {
      let answered = false;
      const req = https.request(
        { agent: this.agent, host: this.host, port: this.port, method: spec.method, path: spec.path, headers: spec.headers, timeout: this.timeoutMs },
        (res) => {
          answered = true;
          let bytes = 0;
          const chunks: Buffer[] | undefined = spec.wantBody ? [] : undefined;
          res.on('data', (chunk: Buffer) => {
            bytes += chunk.length;
            if (chunks) chunks.push(chunk);
          });
          const retryAfter = res.headers['retry-after'] === undefined ? undefined : Number(res.headers['retry-after']);
          res.on('end', () => resolve({ status: res.statusCode ?? 0, bytes, body: chunks ? Buffer.concat(chunks) : undefined, retryAfter }));
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(Object.assign(new Error('request timed out'), { code: 'ETIMEDOUT' })));
      req.on('error', (e: NodeJS.ErrnoException) => {
        if (mayRetry && !answered && req.reusedSocket && (e.code === 'ECONNRESET' || e.code === 'EPIPE')) {
          keepAliveRetries.count++;
          this.send(spec, false).then(resolve, reject);
        } else reject(e);
      });
      req.end(spec.body);
    });
  }

  async close(): Promise<void> {
    this.agent.destroy();
  }
}

/** One-off JSON request (setup steps such as logging in); not for timed loops. */
export async function requestJson(client: HttpClient, method: string, path: string, headers: Record<string, string>, json?: unknown): Promise<{ status: number; body: any }> {
  const body = json === undefined ? undefined : Buffer.from(JSON.stringify(json));
  const h = body ? { ...headers, 'content-type': 'application/json' } : headers;
  const r = await client.request({ method, path, headers: h, body, wantBody: true });
  let parsed: any;
  try {
    parsed = r.body && r.body.length ? JSON.parse(r.body.toString('utf8')) : undefined;
  } catch {
    parsed = r.body?.toString('utf8');
  }
  return { status: r.status, body: parsed };
}
