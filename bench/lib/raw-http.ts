/**
 * The cheapest HTTPS/1.1 load client we could write: `connections` raw `node:tls` keep-alive sockets,
 * each request encoded once per RequestSpec (cached) and written as one buffer, one request per
 * socket at a time (no pipelining), the answer parsed just far enough to find its end (status line,
 * `content-length`, or chunked framing).
 *
 * Why: at 32 connections undici spends ~26 µs of client CPU per request (node:https ~118 µs), so
 * one load-generator core tops out near 38k requests/s against a trivial uWS server; the controller
 * targets 50k/s on the other core. This client spends ~10 µs (see docs/policy.md for the measured
 * ceilings). Used by bench/policy (`--client raw`, its default there).
 */
import tls from 'node:tls';
import { performance } from 'node:perf_hooks';
import type { ClientOptions, HttpClient, HttpResult, RequestSpec } from './http.js';

const CRLF2 = Buffer.from('\r\n\r\n');

interface Pending {
  spec: RequestSpec;
  resolve: (r: HttpResult) => void;
  reject: (e: Error) => void;
  /** Sent again once, on a new socket, when a kept-alive socket closed before any answer. */
  retried: boolean;
}

export class RawHttpClient implements HttpClient {
  readonly kind = 'raw' as const;
  private readonly encoded = new WeakMap<RequestSpec, Buffer>();
  private readonly idle: Conn[] = [];
  private readonly waiting: Pending[] = [];
  private readonly all = new Set<Conn>();
  private readonly host: string;
  private readonly port: number;
  private readonly hostHeader: string;
  /** One timer for every connection's timeout: a timer per request costs more than the request's parsing. */
  private readonly watchdog: NodeJS.Timeout;
  closed = false;

  constructor(private readonly opts: ClientOptions) {
    const u = new URL(opts.origin);
    this.host = u.hostname.replace(/^\[|\]$/g, '');
    this.port = Number(u.port || 443);
    this.hostHeader = u.host;
    const timeoutMs = opts.timeoutMs ?? 60_000;
    this.watchdog = setInterval(() => {
      const now = performance.now();
      for (const c of this.all) c.expire(now, timeoutMs);
    }, Math.min(1000, timeoutMs));
    this.watchdog.unref();
  }

  request(spec: RequestSpec): Promise<HttpResult> {
    return new Promise((resolve, reject) => this.dispatch({ spec, resolve, reject, retried: false }));
  }

  private dispatch(p: Pending) {
    if (this.closed) return p.reject(new Error('client closed'));
    const conn = this.idle.pop() ?? (this.all.size < this.opts.connections ? this.connect() : undefined);
    if (conn) conn.send(p, this.encode(p.spec));
    else this.waiting.push(p);
  }

  /** A connection finished a request: give it the next waiting one, or park it. */
  release(conn: Conn) {
    const next = this.waiting.shift();
    if (next) conn.send(next, this.encode(next.spec));
    else this.idle.push(conn);
  }

  /** A connection closed: requests it had not answered are retried once (see Conn.onClose). */
  dropped(conn: Conn, unanswered?: Pending, err?: Error) {
    this.all.delete(conn);
    const i = this.idle.indexOf(conn);
    if (i >= 0) this.idle.splice(i, 1);
    if (!unanswered) return;
    const code = (err as NodeJS.ErrnoException | undefined)?.code;
    if (!unanswered.retried && conn.reused && !this.closed && (code === undefined || code === 'ECONNRESET' || code === 'EPIPE')) {
      unanswered.retried = true;
      this.dispatch(unanswered);
    } else unanswered.reject(err ?? Object.assign(new Error('connection closed before the answer'), { code: 'ECONNRESET' }));
  }

  private connect(): Conn {
    const c = new Conn(this, tls.connect({ host: this.host, port: this.port, ca: this.opts.ca, cert: this.opts.cert, key: this.opts.key, rejectUnauthorized: true }));
    this.all.add(c);
    return c;
  }

  private encode(spec: RequestSpec): Buffer {
    let b = this.encoded.get(spec);
    if (!b) {
      let head = `${spec.method} ${spec.path} HTTP/1.1\r\nhost: ${this.hostHeader}\r\n`;
      for (const [k, v] of Object.entries(spec.headers)) head += `${k}: ${v}\r\n`;
      head += `content-length: ${spec.body?.length ?? 0}\r\n\r\n`;
      b = spec.body ? Buffer.concat([Buffer.from(head, 'latin1'), spec.body]) : Buffer.from(head, 'latin1');
      this.encoded.set(spec, b);
    }
    return b;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.watchdog);
    for (const c of this.all) c.socket.destroy();
    this.all.clear();
    this.idle.length = 0;
  }
}

class Conn {
  private current?: Pending;
  private buf?: Buffer;
  private sentAt = 0;
  /** Whether this socket already answered a request (only then is a silent close retried). */
  reused = false;

  constructor(private readonly client: RawHttpClient, readonly socket: tls.TLSSocket) {
    socket.setNoDelay(true);
    socket.on('data', (d: Buffer) => this.onData(d));
    socket.on('error', (e) => this.onClose(e));
    socket.on('close', () => this.onClose());
  }

  send(p: Pending, bytes: Buffer) {
    this.current = p;
    this.buf = undefined;
    this.sentAt = performance.now();
    this.socket.write(bytes);
  }

  expire(now: number, timeoutMs: number) {
    if (this.current && now - this.sentAt > timeoutMs) this.socket.destroy(Object.assign(new Error('request timed out'), { code: 'ETIMEDOUT' }));
  }

  private onData(d: Buffer) {
    const p = this.current;
    if (!p) return; // nothing asked: ignore (the server does not push)
    const buf = this.buf ? Buffer.concat([this.buf, d]) : d;
    const r = parseResponse(buf);
    if (!r) {
      this.buf = buf;
      return;
    }
    this.current = undefined;
    this.buf = undefined;
    this.reused = true;
    const status = (buf[9] - 48) * 100 + (buf[10] - 48) * 10 + (buf[11] - 48);
    const body = r.body;
    const closeAfter = /\r\nconnection: *close/i.test(buf.toString('latin1', 0, buf.indexOf(CRLF2)));
    if (closeAfter) this.socket.end();
    else this.client.release(this);
    p.resolve({ status, bytes: body.length, body: p.spec.wantBody ? Buffer.from(body) : undefined });
  }

  private onClose(err?: Error) {
    const p = this.current;
    this.current = undefined;
    this.client.dropped(this, p, err);
  }
}

/**
 * The response at the start of `buf` once complete: where it ends and its body, else undefined
 * (more bytes needed). Answers carry `content-length` (uWS `end(body)`) or chunked framing.
 */
function parseResponse(buf: Buffer): { end: number; body: Buffer } | undefined {
  const h = buf.indexOf(CRLF2);
  if (h < 0) return undefined;
  const head = buf.toString('latin1', 0, h);
  const m = /\r\ncontent-length: *(\d+)/i.exec(head);
  if (m) {
    const end = h + 4 + Number(m[1]);
    return buf.length >= end ? { end, body: buf.subarray(h + 4, end) } : undefined;
  }
  if (/\r\ntransfer-encoding: *chunked/i.test(head)) {
    const parts: Buffer[] = [];
    let i = h + 4;
    for (;;) {
      const lineEnd = buf.indexOf('\r\n', i);
      if (lineEnd < 0) return undefined;
      const size = parseInt(buf.toString('latin1', i, lineEnd), 16);
      const next = lineEnd + 2 + size + 2;
      if (buf.length < next) return undefined;
      if (size === 0) return { end: next, body: Buffer.concat(parts) };
      parts.push(buf.subarray(lineEnd + 2, lineEnd + 2 + size));
      i = next;
    }
  }
  // Neither: a bodiless answer (204, 304, HEAD).
  return { end: h + 4, body: buf.subarray(0, 0) };
}
