/**
 * Writing a record of a family. Field semantics live here once: defaults, PUT vs PATCH, immutable
 * and read-only fields, uniqueness, references checked on write, role lists and role attributes.
 */
import { errors } from '../core/errors.js';
import type { Ctx } from './context.js';
import { timeOrderedId } from '../store/ids.js';
import { UniqueViolation, type CollectionName, type Rec, type Store, type Tx } from '../store/store.js';
import type { FieldDef, Mode, ResourceDef, WriteCtx, Writer } from './types.js';
import type { Registry } from './registry.js';
import { keysOf } from './enrollments.js';

/** Entity ids: opaque strings like upstream's shortids, growing with creation time (src/store/ids.ts). */
export function newId(): string {
  return timeOrderedId();
}

function present(body: Record<string, unknown>, name: string): boolean {
  return body !== null && typeof body === 'object' && Object.prototype.hasOwnProperty.call(body, name);
}

/** The writer of a request: its caller, and the application's enrollment keys. */
export function writerOf(ctx: Ctx): Writer {
  return { store: ctx.app.store, identity: ctx.identity, enrollments: keysOf(ctx.app) };
}

/** Role list: `#attr`, `#all` alone, or `@<existing id>`; stored sorted and without duplicates. */
export function checkRoles(tx: Tx, reg: Registry, field: string, roles: unknown, target: CollectionName): string[] {
  if (roles === undefined || roles === null) return [];
  if (!Array.isArray(roles)) throw errors.field(field, 'must be an array of strings', roles);
  const out = new Set<string>();
  for (const r of roles) {
    if (typeof r !== 'string' || r.length < 2 || (r[0] !== '#' && r[0] !== '@'))
      throw errors.field(field, 'role entries must prefixed with # (to indicate role attributes) or @ (to indicate a name or id)', r);
    out.add(r);
  }
  if (out.has('#all') && out.size > 1) throw errors.field(field, 'if using #all, it should be the only role specified', roles);
  const def = reg.def(target);
  const missing = [...out].filter((r) => r[0] === '@' && !tx.exists(target, r.slice(1)));
  if (missing.length) throw errors.field(field, `no ${def.family.replace(/-/g, ' ')}s found with the given ids`, missing);
  return [...out].sort();
}

/** Role attributes: plain strings, none starting with `#` or `@`; stored sorted, without duplicates. */
export function checkAttributes(field: string, attrs: unknown): string[] {
  if (attrs === undefined || attrs === null) return [];
  if (!Array.isArray(attrs)) throw errors.field(field, 'must be an array of strings', attrs);
  for (const a of attrs) {
    if (typeof a !== 'string' || a.length === 0) throw errors.field(field, 'role attributes must be non-empty strings', a);
    if (a[0] === '#' || a[0] === '@') throw errors.field(field, 'role attributes may not be prefixed with # or @', a);
  }
  return [...new Set(attrs as string[])].sort();
}

/** Apply a request body to a record according to the field definitions. */
const TAGS_FIELD: FieldDef = { default: () => ({}) };
/** Per family, `tags` and its declared fields as entries, made once (applyBody runs for every write). */
const bodyFields = new WeakMap<ResourceDef, [string, FieldDef][]>();

function applyBody(reg: Registry, def: ResourceDef, wctx: WriteCtx, rec: Rec) {
  const { mode, body, before, tx } = wctx;
  let fields = bodyFields.get(def);
  if (!fields) bodyFields.set(def, (fields = [['tags', TAGS_FIELD], ...Object.entries(def.fields)]));
  for (const [name, f] of fields) {
    if (f.readOnly) continue;
    const wire = f.bodyName ?? name;
    const has = present(body, wire);
    let v: unknown = has ? body[wire] : undefined;
    if (mode !== 'create' && f.immutable) {
      rec[name] = before![name];
      continue;
    }
    // PATCH: keys decide what changes; a JSON null counts as not supplied, except on a nullable field.
    if (mode === 'patch' && (!has || (v === null && !f.nullClears))) {
      rec[name] = before![name];
      continue;
    }
    if (v === null || v === undefined) {
      if (mode !== 'create' && f.nullKeeps) v = before![name];
      else v = f.default ? f.default() : undefined;
    }
    if (f.nullKeeps && v === '') throw errors.field(wire, `${wire} must be at least 1 character long`, v);
    if (f.attributes) v = checkAttributes(name, v);
    if (f.roles) v = checkRoles(tx, reg, name, v, f.roles);
    if (f.ref && v !== undefined && v !== null) {
      const ids = Array.isArray(v) ? v : [v];
      for (const id of ids) {
        if (typeof id !== 'string' || !tx.exists(f.ref.collection, id)) {
          if (f.ref.missing === 'notFound') throw errors.notFound();
          throw errors.field(f.ref.errorField ?? wire, `no ${reg.def(f.ref.collection).family.replace(/-/g, ' ')} found with the given id`, id);
        }
      }
      if (Array.isArray(v)) v = [...new Set(v as string[])];
    }
    if (v === undefined) delete rec[name];
    else rec[name] = v;
  }
}

/** Run a write and turn unique-index violations into the upstream field error. */
export async function write<T>(store: Store, fn: (tx: Tx) => T): Promise<T> {
  try {
    return await store.write(fn);
  } catch (e) {
    if (e instanceof UniqueViolation) throw errors.field(e.field, `duplicate value '${String(e.value)}' in unique index on ${e.collection} store`, e.value);
    throw e;
  }
}

export async function createRecord(reg: Registry, def: ResourceDef, writer: Writer, body: Record<string, unknown>, extra?: (rec: Rec, tx: Tx) => void): Promise<Rec> {
  const now = Date.now();
  const id = newId();
  // Made before the write, not inside its callback: what a family signs or seals for a new record.
  const prepared = def.beforeCreate?.(id, body, writer);
  return write(writer.store, (tx) => createInTx(reg, def, writer, tx, id, now, body, extra, prepared));
}

/**
 * The steps of a create inside a caller's write: what a POST does, and what a bulk import
 * (src/cli/import.ts) does for each of the many records one of its writes carries; `prepared` is
 * what the family's `beforeCreate` made for this record before the write.
 */
export function createInTx(reg: Registry, def: ResourceDef, writer: Writer, tx: Tx, id: string, now: number, body: Record<string, unknown>, extra?: (rec: Rec, tx: Tx) => void, prepared?: unknown): Rec {
  const rec: Rec = { id, createdAt: now, updatedAt: now };
  const wctx: WriteCtx = { tx, mode: 'create', body, writer, prepared };
  applyBody(reg, def, wctx, rec);
  def.prepare?.(rec, wctx);
  extra?.(rec, tx);
  tx.put(def.collection, rec);
  def.afterWrite?.(rec, wctx);
  return rec;
}

export async function updateRecord(reg: Registry, def: ResourceDef, writer: Writer, id: string, body: Record<string, unknown>, mode: Mode): Promise<Rec> {
  return write(writer.store, (tx) => {
    const before = tx.get(def.collection, id);
    if (!before) throw errors.notFound();
    def.protect?.(before, mode);
    const rec: Rec = { id, createdAt: before.createdAt, updatedAt: Math.max(Date.now(), before.updatedAt + 1) };
    // Server-side fields survive untouched.
    for (const [name, f] of Object.entries(def.fields)) if (f.readOnly && before[name] !== undefined) rec[name] = before[name];
    if (before.isSystem) rec.isSystem = true;
    const wctx: WriteCtx = { tx, mode, body, before, writer };
    applyBody(reg, def, wctx, rec);
    def.prepare?.(rec, wctx);
    tx.put(def.collection, rec);
    def.afterWrite?.(rec, wctx);
    return rec;
  });
}
