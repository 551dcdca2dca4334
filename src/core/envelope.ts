/** Success and error envelopes (api-reference §3): the only place response bodies are shaped. */
import { ApiError, type ErrorCause } from './errors.js';
import type { Reply } from './operation.js';

export const ERROR_META = { apiEnrollmentVersion: '0.0.1', apiVersion: '0.0.1' } as const;

export interface Pagination {
  limit: number;
  offset: number;
  totalCount: number;
}

export const ok = (data: unknown, status = 200): Reply => ({ status, body: { data, meta: {} } });

export const empty = (status = 200): Reply => ({ status, body: { data: {}, meta: {} } });

/** 201 with `{id, _links.self}`; `href` relative like upstream: `./identities/<id>`. */
export const created = (id: string, href: string): Reply => ({
  status: 201,
  body: { data: { id, _links: { self: { href } } }, meta: {} },
});

export const list = (data: unknown[], pagination: Pagination, filterableFields: string[]): Reply => ({
  status: 200,
  body: { data, meta: { pagination, filterableFields } },
});

export function renderError(err: ApiError, requestId: string): Reply {
  const error: { code: string; message: string; requestId: string; cause?: ErrorCause } = {
    code: err.code,
    message: err.message,
    requestId,
  };
  if (err.errorCause) error.cause = err.errorCause;
  return { status: err.status, body: { error, meta: ERROR_META }, headers: err.headers };
}
