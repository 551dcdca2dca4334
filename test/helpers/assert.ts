/** Assertions shared by the resource suites: envelopes, entity base fields, field errors. */
import type { Test } from 'tap';
import { isError, type Client, type Res } from './server.js';
import { ApiError } from '../../src/core/errors.js';

export type Tap = Test;

export const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

export function kind(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v;
}

export function hasFields(t: Tap, obj: any, fields: Record<string, string>, label: string) {
  for (const [name, kinds] of Object.entries(fields)) {
    t.ok(obj !== null && typeof obj === 'object' && name in obj, `${label}: field ${name} present`);
    t.ok(kinds.split('|').includes(kind(obj?.[name])), `${label}: field ${name} is ${kinds} (got ${kind(obj?.[name])})`);
  }
}

export function created(t: Tap, r: Res, path: string): string {
  t.equal(r.status, 201, `create ${path} → 201 (${r.text.slice(0, 300)})`);
  const id = r.body?.data?.id;
  t.type(id, 'string', 'create returns id');
  t.same(r.body, { data: { id, _links: { self: { href: `./${path}/${id}` } } }, meta: {} }, 'create envelope');
  return id;
}

export function emptyOk(t: Tap, r: Res, what: string) {
  t.equal(r.status, 200, `${what} → 200 (${r.text.slice(0, 300)})`);
  t.same(r.body, { data: {}, meta: {} }, `${what} empty envelope`);
}

export function base(t: Tap, d: any, path: string) {
  t.type(d?.id, 'string', 'id');
  t.match(d?.createdAt, RFC3339, 'createdAt RFC 3339');
  t.match(d?.updatedAt, RFC3339, 'updatedAt RFC 3339');
  t.equal(kind(d?.tags), 'object', 'tags object');
  t.equal(d?._links?.self?.href, `./${path}/${d?.id}`, '_links.self');
}

export function fieldError(t: Tap, r: Res, field: string, label: string) {
  t.ok(isError(r, 400, 'COULD_NOT_VALIDATE'), `${label} → 400 COULD_NOT_VALIDATE (${r.status} ${r.text.slice(0, 200)})`);
  t.equal(r.body?.error?.cause?.field, field, `${label}: cause.field ${field}`);
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export const get = async (c: Client, p: string) => (await c.get(p)).body?.data;

/** Runs fn, expects a COULD_NOT_VALIDATE ApiError (400) and returns its cause. */
export function validationCause(fn: () => unknown): { field: string; reason: string; value: string } {
  try {
    fn();
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    if (e.code !== 'COULD_NOT_VALIDATE' || e.status !== 400) throw new Error(`unexpected ${e.code}`);
    return e.errorCause as any;
  }
  throw new Error('expected a validation error');
}
