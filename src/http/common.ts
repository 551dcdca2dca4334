/** What both transports (uWS and node:https) share: reply encoding and in-flight tracking. */
import http from 'node:http';
import type { Reply, Req } from '../core/operation.js';
import { BodyPieces, PIECE_BYTES, renderError } from '../core/envelope.js';
import { ApiError, errors } from '../core/errors.js';
import { shortId } from '../store/ids.js';

/**
 * TLS 1.2 suites both listeners offer: forward-secret AEAD only (TLS 1.3 suites are all of that
 * kind and stay as the library has them). Node's default list also takes CBC with SHA-1, CCM8 and
 * ARIA, uWS's CBC with SHA-1; no client of these APIs needs them.
 */
export const TLS12_CIPHERS = [
  'ECDHE-ECDSA-AES128-GCM-SHA256', 'ECDHE-ECDSA-AES256-GCM-SHA384', 'ECDHE-ECDSA-CHACHA20-POLY1305',
  'ECDHE-RSA-AES128-GCM-SHA256', 'ECDHE-RSA-AES256-GCM-SHA384', 'ECDHE-RSA-CHACHA20-POLY1305',
].join(':');

export type Handle = (req: Req) => Promise<Reply>;

/** The answer when the router itself rejects (it never should): the catalog's 500, like any other error. */
export const routerRejected = (): Reply => renderError(errors.unhandled(), shortId());

export const STATUS_TEXT: Record<number, string> = http.STATUS_CODES as Record<number, string>;

/** The methods the APIs serve. Anything else (PROPFIND, BREW, TRACE, CONNECT…) is answered by methodNotAllowed before routing. */
export const KNOWN_METHODS = new Set(['get', 'head', 'post', 'put', 'patch', 'delete', 'options']);
const ALLOW = 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS';

/** 405 in the error envelope, with `Allow`. */
/**
 * The `done` of a reply being sent, which also runs the reply's `finished`: a large answer frees
 * its queue slot once written (src/resources/list.ts).
 */
export function withFinished(reply: Reply, done: () => void): () => void {
  const { finished } = reply;
  if (!finished) return done;
  return () => {
    finished();
    done();
  };
}

export function methodNotAllowed(): Reply {
  const reply = renderError(errors.methodNotAllowed(), shortId());
  reply.headers = { ...reply.headers, allow: ALLOW };
  return reply;
}

/** The answer to a request head the HTTP parser refused, where it lets us answer (node:https; see docs/limits.md). */
export function rawErrorResponse(status: 405 | 431): string {
  const reply = status === 405 ? methodNotAllowed() : renderError(new ApiError('REQUEST_HEADERS_TOO_LARGE'), shortId());
  const body = JSON.stringify(reply.body);
  const headers = { ...reply.headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), connection: 'close' };
  return `HTTP/1.1 ${status} ${STATUS_TEXT[status]}\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n${body}`;
}

/** A Reply's body bytes and media type: JSON unless the body is already a string, Buffer or pieces (no type when there is no body). */
export function replyBody(reply: Reply): { body: Buffer | string | BodyPieces; contentType?: string } {
  if (reply.body === undefined) return { body: '' };
  if (reply.body instanceof BodyPieces) return { body: reply.body, contentType: reply.contentType ?? 'application/json' };
  if (typeof reply.body === 'string' || Buffer.isBuffer(reply.body)) return { body: reply.body, contentType: reply.contentType ?? 'text/plain; charset=utf-8' };
  return { body: JSON.stringify(reply.body), contentType: reply.contentType ?? 'application/json' };
}

/** A body's length in bytes. */
export const byteLength = (body: Buffer | string | BodyPieces): number => (body instanceof BodyPieces ? body.byteLength : Buffer.byteLength(body));

/** A body as byte pieces of at most about PIECE_BYTES, to be written one after another. */
export function inPieces(body: Buffer | string | BodyPieces): Buffer[] {
  if (body instanceof BodyPieces) return body.pieces;
  const buf = typeof body === 'string' ? Buffer.from(body) : body;
  const out: Buffer[] = [];
  for (let at = 0; at < buf.length; at += PIECE_BYTES) out.push(buf.subarray(at, at + PIECE_BYTES));
  return out;
}

/** Turn a Reply into status, headers and bytes (a fresh headers object the caller may extend). */
export function encodeReply(reply: Reply): { status: number; headers: Record<string, string>; body: Buffer | string | BodyPieces } {
  const { body, contentType } = replyBody(reply);
  const headers: Record<string, string> = { ...reply.headers };
  if (contentType) headers['content-type'] = contentType;
  return { status: reply.status, headers, body };
}

/**
 * Counts requests being served so shutdown can wait for them, and answers those still running
 * when it stops waiting (each registered how to: a 503 rather than a cut connection).
 */
export class InFlight {
  private n = 0;
  private waiters: (() => void)[] = [];
  private readonly abandon = new Set<() => void>();
  begin(abandon?: () => void): () => void {
    this.n++;
    if (abandon) this.abandon.add(abandon);
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      if (abandon) this.abandon.delete(abandon);
      if (--this.n === 0) for (const w of this.waiters.splice(0)) w();
    };
  }
  get count() {
    return this.n;
  }
  drain(graceMs: number): Promise<void> {
    if (this.n === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const t = setTimeout(resolve, graceMs);
      this.waiters.push(() => {
        clearTimeout(t);
        resolve();
      });
    });
  }
  /** Answer every request still running through its `abandon`; returns how many there were. */
  abandonAll(): number {
    const all = [...this.abandon];
    for (const a of all) a();
    return all.length;
  }
}

/** Time for abandoned requests' answers to reach the socket before connections are closed. */
export const FLUSH_BEFORE_CLOSE_MS = 100;
