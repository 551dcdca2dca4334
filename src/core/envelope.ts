/** Success and error envelopes: the only place response bodies are shaped. */
import { ApiError, type ErrorCause } from './errors.js';
import type { Reply } from './operation.js';

export const ERROR_META = { apiEnrollmentVersion: '0.0.1', apiVersion: '0.0.1' } as const;

export interface Pagination {
  limit: number;
  offset: number;
  totalCount: number;
}

/** `{data, meta}`: every success body. */
export const envelope = (data: unknown, meta: Record<string, unknown>, status = 200): Reply => ({ status, body: { data, meta } });

export const ok = (data: unknown, status = 200): Reply => envelope(data, {}, status);

export const empty = (status = 200): Reply => envelope({}, {}, status);

/** 201 with `{id, _links.self}`; `href` relative like upstream: `./identities/<id>`. */
export const created = (id: string, href: string): Reply => envelope({ id, _links: { self: { href } } }, {}, 201);

export const list = (data: unknown[], pagination: Pagination, filterableFields: string[]): Reply =>
  envelope(data, { pagination, filterableFields });

/**
 * A list page whose entries are JSON text already (kept renders): the bytes `list` would send.
 * One join of every piece makes one flat string of the page's size (a join and then a
 * concatenation make two, each in V8's large-object space, and a scavenge twice as often).
 */
export function listOfJson(entries: string[], pagination: Pagination, filterableFields: string[]): Reply {
  const parts: string[] = ['{"data":['];
  for (let i = 0; i < entries.length; i++) {
    if (i > 0) parts.push(',');
    parts.push(entries[i]);
  }
  parts.push(`],"meta":${JSON.stringify({ pagination, filterableFields })}}`);
  return { status: 200, contentType: 'application/json', body: parts.join('') };
}

export function renderError(err: ApiError, requestId: string): Reply {
  const error: { code: string; message: string; requestId: string; cause?: ErrorCause } = {
    code: err.code,
    message: err.message,
    requestId,
  };
  if (err.errorCause) error.cause = err.errorCause;
  return { status: err.status, body: { error, meta: ERROR_META }, headers: err.headers };
}
