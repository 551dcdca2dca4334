/** Success and error envelopes: the only place response bodies are shaped. */
import crypto from 'node:crypto';
import { ApiError, defaultRetryAfter, type ErrorCause } from './errors.js';
import type { Reply } from './operation.js';

const ERROR_META = { apiEnrollmentVersion: '0.0.1', apiVersion: '0.0.1' } as const;

export interface Pagination {
  limit: number;
  offset: number;
  totalCount: number;
}

/** `{data, meta}`: every success body. */
export const envelope = (data: unknown, meta: Record<string, unknown>, status = 200): Reply => ({ status, body: { data, meta } });

export const ok = (data: unknown, status = 200): Reply => envelope(data, {}, status);

export const empty = (status = 200): Reply => envelope({}, {}, status);

/** Stands in for a raw value while the rest of its body is encoded: unguessable, so no other value can pose as it. */
const RAW_MARK = `mesh-raw-${crypto.randomUUID()}`;
const RAW_MARK_JSON = `"${RAW_MARK}"`;

/**
 * `ok(data, status)` with `data[field]` set to `raw`, written into the body as the JSON string it
 * is, unscanned. Only for values made of characters JSON never escapes (a signed token: base64url,
 * `.` and `~`): JSON.stringify reads every character of a string for escapes, a few percent of a
 * session create's CPU for a session token (docs/benchmarks.md, "2026-11-28, late").
 */
export function okWithRaw(data: Record<string, unknown>, field: string, raw: string, status = 200): Reply {
  data[field] = RAW_MARK;
  const json = JSON.stringify({ data, meta: {} });
  const at = json.indexOf(RAW_MARK_JSON);
  return { status, contentType: 'application/json', body: `${json.slice(0, at)}"${raw}"${json.slice(at + RAW_MARK_JSON.length)}` };
}

/** 201 with `{id, _links.self}`; `href` relative like upstream: `./identities/<id>`. */
export const created = (id: string, href: string): Reply => envelope({ id, _links: { self: { href } } }, {}, 201);

export const list = (data: unknown[], pagination: Pagination, filterableFields: string[]): Reply =>
  envelope(data, { pagination, filterableFields });

/** Size of the pieces a large JSON body is built and sent in. */
export const PIECE_BYTES = 256 * 1024;

/** A body already encoded as bytes, in pieces of about PIECE_BYTES, sent one after another. */
export class BodyPieces {
  constructor(
    readonly pieces: Buffer[],
    readonly byteLength: number,
  ) {}
}

/**
 * A list page's JSON, `{"data":[…],"meta":{…}}`, built an entry at a time into pieces of about
 * PIECE_BYTES: the whole page never exists as one string, nor as one UTF-8 copy of it (at tens of
 * thousands of identities each would be tens of MiB, made in one go on the main thread, and the
 * garbage collector then walks and frees them). A small page stays one string, as before.
 */
export class ListWriter {
  private parts: string[] = ['{"data":['];
  private chars = 9;
  private readonly pieces: Buffer[] = [];
  private bytes = 0;
  private entries = 0;

  /** Add one entry's JSON text; true when a piece was just cut (a point where the caller may pause). */
  add(json: string): boolean {
    if (this.entries++ > 0) this.parts.push(',');
    this.parts.push(json);
    this.chars += json.length + 1;
    if (this.chars < PIECE_BYTES) return false;
    this.cut();
    return true;
  }

  private cut() {
    const piece = Buffer.from(this.parts.join(''));
    this.pieces.push(piece);
    this.bytes += piece.length;
    this.parts = [];
    this.chars = 0;
  }

  finish(pagination: Pagination, filterableFields: string[]): Reply {
    this.parts.push(`],"meta":${JSON.stringify({ pagination, filterableFields })}}`);
    if (this.pieces.length === 0) return { status: 200, contentType: 'application/json', body: this.parts.join('') };
    this.cut();
    return { status: 200, contentType: 'application/json', body: new BodyPieces(this.pieces, this.bytes) };
  }
}

/** A list page whose entries are JSON text already (kept renders): the bytes `list` would send. */
export function listOfJson(entries: string[], pagination: Pagination, filterableFields: string[]): Reply {
  const w = new ListWriter();
  for (const e of entries) w.add(e);
  return w.finish(pagination, filterableFields);
}

/** The error envelope of `err`; a 429 or 503 always with Retry-After (RETRY_AFTER_SECONDS unless the error names its own). */
export function renderError(err: ApiError, requestId: string): Reply {
  const error: { code: string; message: string; requestId: string; cause?: ErrorCause } = {
    code: err.code,
    message: err.message,
    requestId,
  };
  if (err.errorCause) error.cause = err.errorCause;
  const retryAfter = err.headers?.['retry-after'] === undefined ? defaultRetryAfter(err.status) : undefined;
  const headers = retryAfter ? { ...err.headers, 'retry-after': retryAfter } : err.headers;
  return { status: err.status, body: { error, meta: ERROR_META }, headers };
}
