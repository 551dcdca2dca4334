/**
 * Turns the declarative ResourceDefs into store collections, filter symbols, renderers and the
 * standard operations (list, create, detail, update, patch, delete). Field semantics live here once:
 * defaults, PUT vs PATCH, immutable and read-only fields, uniqueness, references checked on write,
 * role lists and role attributes, and what a delete does to everything that points at the entity.
 */
import { errors, ApiError } from '../core/errors.js';
import { created, empty, ok, list as listEnvelope, listOfJson } from '../core/envelope.js';
import { timeOrderedId } from '../store/ids.js';
import { parseListParams, runList, type ListSource } from '../core/query.js';
import type { SymbolTable } from '../core/filter/index.js';
import type { Ctx, Entry, Handler } from '../core/context.js';
import type { PermissionAction, Reply } from '../core/operation.js';
import { UniqueViolation, type CollectionSpec, type Rec, type Store, type Tx } from '../store/store.js';
import type { FieldDef, Mode, ResourceDef, StandardOp, View, WriteCtx } from './types.js';
import { RenderCache } from './render-cache.js';

/** Entity ids: opaque strings like upstream's shortids, growing with creation time (src/store/ids.ts). */
export function newId(): string {
  return timeOrderedId();
}

export const iso = (ms: number | undefined | null): string | null =>
  ms === undefined || ms === null ? null : new Date(ms).toISOString();

/** The registry of every resource family; built once at start-up. */
export class Registry {
  readonly byCollection = new Map<string, ResourceDef>();
  /** collection → fields elsewhere that reference it: [def, field name, field]. */
  private readonly refsTo = new Map<string, [ResourceDef, string, FieldDef][]>();
  /** collection → policy role fields that select it. */
  private readonly rolesTo = new Map<string, [ResourceDef, string][]>();
  readonly symbols = new Map<string, SymbolTable>();
  /** The symbols without credential fields: what callers who may not read them filter with. */
  readonly publicSymbols = new Map<string, SymbolTable>();
  /** Rendered list entries of the families that allow it; follows the store once attached (app.ts). */
  readonly renders: RenderCache;

  constructor(readonly defs: ResourceDef[]) {
    this.renders = new RenderCache(defs);
    for (const def of defs) {
      this.byCollection.set(def.collection, def);
      for (const [name, f] of Object.entries(def.fields)) {
        if (f.ref) push(this.refsTo, f.ref.collection, [def, name, f]);
        if (f.roles) push(this.rolesTo, f.roles, [def, name]);
      }
      const symbols = buildSymbols(def);
      this.symbols.set(def.collection, symbols);
      const open = { ...symbols };
      for (const [name, f] of Object.entries(def.fields)) if (f.secret) delete open[name];
      this.publicSymbols.set(def.collection, open);
    }
  }

  def(collection: string): ResourceDef {
    const d = this.byCollection.get(collection);
    if (!d) throw new Error(`unknown collection ${collection}`);
    return d;
  }

  collectionSpecs(): CollectionSpec[] {
    // Kept in the store without an API: the token signing keys' public halves (src/auth/tokens.ts).
    const internal: CollectionSpec[] = [{ name: 'signingKeys' }];
    return internal.concat(this.defs.map((def) => {
      const unique: string[] = [];
      const indexes: string[] = [];
      for (const [name, f] of Object.entries(def.fields)) {
        if (f.unique) unique.push(name);
        else if (f.index || f.ref || f.roles || f.attributes) indexes.push(name);
      }
      return { name: def.collection, unique, indexes };
    }));
  }

  /**
   * Delete an entity inside a write, with everything its references demand: restrict (409),
   * cascade (delete the referrer), pull (drop the id from the referrer), and `@id` roles removed.
   */
  deleteInTx(tx: Tx, def: ResourceDef, rec: Rec, ctx: Ctx, opts: { depth?: number; force?: boolean } = {}) {
    const depth = opts.depth ?? 0;
    if (depth > 8) throw new Error('delete cascade too deep');
    if (!tx.exists(def.collection, rec.id)) return;
    const wctx: WriteCtx = { tx, mode: 'delete', body: undefined, before: rec, ctx };
    if (!opts.force) def.protect?.(rec, 'delete');
    def.beforeDelete?.(rec, wctx);
    for (const [refDef, field, f] of this.refsTo.get(def.collection) ?? []) {
      const ids = tx.idsByIndex(refDef.collection, field, rec.id).filter((id) => !(refDef === def && id === rec.id));
      if (ids.length === 0) continue;
      const mode = f.ref!.onDelete;
      if (mode === 'restrict') {
        throw errors.referenced(
          'id',
          `entity type ${def.path} referenced by ${refDef.path}: [${ids.slice(0, 20).join(', ')}]`,
          rec.id,
        );
      }
      for (const id of ids) {
        const other = tx.get(refDef.collection, id);
        if (!other) continue;
        if (mode === 'cascade') this.deleteInTx(tx, refDef, other, ctx, { depth: depth + 1, force: true });
        else {
          const cur = other[field];
          const next = Array.isArray(cur) ? cur.filter((x: string) => x !== rec.id) : undefined;
          tx.put(refDef.collection, { ...other, [field]: next, updatedAt: Date.now() });
        }
      }
    }
    const role = '@' + rec.id;
    for (const [polDef, field] of this.rolesTo.get(def.collection) ?? []) {
      for (const id of tx.idsByIndex(polDef.collection, field, role)) {
        const pol = tx.get(polDef.collection, id);
        if (!pol) continue;
        tx.put(polDef.collection, { ...pol, [field]: (pol[field] as string[]).filter((r) => r !== role), updatedAt: Date.now() });
      }
    }
    tx.delete(def.collection, rec.id);
  }
}

function push<K, V>(m: Map<K, V[]>, k: K, v: V) {
  const l = m.get(k);
  if (l) l.push(v);
  else m.set(k, [v]);
}

function buildSymbols(def: ResourceDef): SymbolTable {
  const s: SymbolTable = {
    id: { type: 'string' },
    createdAt: { type: 'datetime' },
    updatedAt: { type: 'datetime' },
    tags: { type: 'map' },
    isSystem: { type: 'bool', get: (r: Rec) => r.isSystem === true },
  };
  for (const [name, f] of Object.entries(def.fields)) if (f.filter) s[name] = { type: f.filter };
  return { ...s, ...def.symbols };
}

// ---------------------------------------------------------------------------------------------
// Rendering

export function entityRef(store: Store | Tx, def: ResourceDef | undefined, id: string | undefined | null) {
  if (!def || !id) return null;
  return {
    _links: { self: { href: `./${def.path}/${id}` } },
    entity: def.path,
    id,
    name: store.nameOf(def.collection, id) ?? null,
  };
}

export function links(def: ResourceDef, id: string) {
  const l: Record<string, { href: string }> = { self: { href: `./${def.path}/${id}` } };
  for (const name of def.links ?? []) l[name] = { href: `./${def.path}/${id}/${name}` };
  return l;
}

/** Per family, the rendered fields once (renderRecord runs for every record of every page). */
const renderedFields = new WeakMap<ResourceDef, [string, FieldDef][]>();
function fieldsToRender(def: ResourceDef): [string, FieldDef][] {
  let f = renderedFields.get(def);
  if (!f) renderedFields.set(def, (f = Object.entries(def.fields).filter(([, x]) => !x.hidden)));
  return f;
}

/** entityRef names looked up during one render pass (a page usually repeats the same few). */
function cachedRef(view: View, store: Store | Tx, target: ResourceDef | undefined, id: unknown) {
  if (typeof id !== 'string') return null;
  const cache = (view.refs ??= new Map());
  const key = `${target?.collection}\u0000${id}`;
  let ref = cache.get(key);
  if (ref === undefined) cache.set(key, (ref = entityRef(store, target, id)));
  return ref;
}

/** What a credential renders as for a caller who may not hold it. */
export const REDACTED = '';

/**
 * May the caller of `view` read credentials belonging to identity `ownerId`? Only full admins (as
 * upstream, where the whole Management API is theirs) and the owner itself, who already holds
 * them. Read permissions (`admin_readonly`, `identity.read`, …) never do: with a pending
 * enrollment token or a session token they could act as an admin. A render without a caller shows
 * none.
 */
export function readsSecrets(view: View, ownerId?: unknown): boolean {
  const me = view.ctx?.identity;
  if (!me) return false;
  return me.isAdmin === true || (typeof ownerId === 'string' && ownerId === me.id);
}

/** Does `def` render any credential (see FieldDef.secret)? */
export function hasSecrets(def: ResourceDef): boolean {
  return def.rendersSecrets === true || Object.values(def.fields).some((f) => f.secret);
}

export function renderRecord(reg: Registry, def: ResourceDef, rec: Rec, view: View): Record<string, unknown> {
  const secrets = readsSecrets(view, def.owner === undefined ? undefined : rec[def.owner]);
  const out: Record<string, unknown> = {
    id: rec.id,
    createdAt: iso(rec.createdAt),
    updatedAt: iso(rec.updatedAt),
    _links: links(def, rec.id),
    tags: rec.tags ?? {},
  };
  for (const [name, f] of fieldsToRender(def)) {
    let v = rec[name];
    if (f.optional && (v === undefined || v === null)) continue;
    if (f.datetime) v = typeof v === 'number' ? iso(v) : v ?? null;
    if (f.secret && !secrets && v !== undefined && v !== null) v = REDACTED;
    out[name] = v === undefined ? (f.attributes || f.roles ? [] : null) : v;
    if (f.ref?.entityRef) {
      const target = reg.byCollection.get(f.ref.collection);
      out[f.ref.entityRef] = Array.isArray(v) ? v.map((id) => cachedRef(view, view.store, target, id)) : cachedRef(view, view.store, target, v);
    }
    if (f.roles) {
      const target = reg.byCollection.get(f.roles);
      out[name + 'Display'] = ((v as string[]) ?? []).map((role) => {
        if (!role.startsWith('@') || !target) return { role, name: role };
        return { role, name: '@' + (view.store.nameOf(target.collection, role.slice(1)) ?? role.slice(1)) };
      });
    }
  }
  if (def.render) Object.assign(out, def.render(rec, view, secrets));
  return out;
}

// ---------------------------------------------------------------------------------------------
// Writing

function present(body: any, name: string): boolean {
  return body !== null && typeof body === 'object' && Object.prototype.hasOwnProperty.call(body, name);
}

/** Role list: `#attr`, `#all` alone, or `@<existing id>`; stored sorted and without duplicates. */
export function checkRoles(tx: Tx, reg: Registry, field: string, roles: unknown, target: string): string[] {
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

export function applyBody(reg: Registry, def: ResourceDef, wctx: WriteCtx, rec: Rec) {
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
    // PATCH: keys decide what changes; a JSON null counts as not supplied (api-reference §10.7).
    if (mode === 'patch' && (!has || v === null)) {
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

export async function createRecord(reg: Registry, def: ResourceDef, ctx: Ctx, body: any, extra?: (rec: Rec, tx: Tx) => void): Promise<Rec> {
  const now = Date.now();
  return write(ctx.app.store, (tx) => {
    const rec: Rec = { id: newId(), createdAt: now, updatedAt: now };
    const wctx: WriteCtx = { tx, mode: 'create', body, ctx };
    applyBody(reg, def, wctx, rec);
    def.prepare?.(rec, wctx);
    extra?.(rec, tx);
    tx.put(def.collection, rec);
    def.afterWrite?.(rec, wctx);
    return rec;
  });
}

export async function updateRecord(reg: Registry, def: ResourceDef, ctx: Ctx, id: string, body: any, mode: Mode): Promise<Rec> {
  return write(ctx.app.store, (tx) => {
    const before = tx.get(def.collection, id);
    if (!before) throw errors.notFound();
    def.protect?.(before, mode);
    const rec: Rec = { id, createdAt: before.createdAt, updatedAt: Math.max(Date.now(), before.updatedAt + 1) };
    // Server-side fields survive untouched.
    for (const [name, f] of Object.entries(def.fields)) if (f.readOnly && before[name] !== undefined) rec[name] = before[name];
    if (before.isSystem) rec.isSystem = true;
    const wctx: WriteCtx = { tx, mode, body, before, ctx };
    applyBody(reg, def, wctx, rec);
    def.prepare?.(rec, wctx);
    tx.put(def.collection, rec);
    def.afterWrite?.(rec, wctx);
    return rec;
  });
}

// ---------------------------------------------------------------------------------------------
// Standard operations

export function listSource(reg: Registry, def: ResourceDef, extra?: Partial<ListSource>): ListSource {
  const symbols = reg.symbols.get(def.collection)!;
  return {
    collection: def.collection,
    symbols,
    filterableFields: Object.keys(symbols),
    ...extra,
  };
}

/** List a collection (optionally restricted) and render each record. */
export function listRecords(reg: Registry, def: ResourceDef, ctx: Ctx, extra?: Partial<ListSource>, render?: (r: Rec) => unknown): Reply {
  const src = listSource(reg, def, extra);
  const view: View = { store: ctx.app.store, ctx, refs: new Map() };
  // Callers who may not read every record's credentials neither filter nor sort by them.
  const allSecrets = readsSecrets(view) || !hasSecrets(def);
  if (!allSecrets) src.symbols = reg.publicSymbols.get(def.collection)!;
  const selected = roleFilter(ctx, def);
  if (selected) {
    const prev = src.candidates ? new Set(src.candidates) : undefined;
    src.candidates = prev ? [...selected].filter((id) => prev.has(id)) : selected;
  }
  const p = parseListParams(ctx.req.query, src.symbols);
  const { page, pagination } = runList(ctx.app.store, src, p);
  const store = ctx.app.store;
  // A page of ids: records are read here, and only those not kept as JSON (below).
  const load = (e: Rec | string) => (typeof e === 'string' ? store.get(def.collection, e) : e);
  if (!render && def.renderCache && allSecrets) {
    // Entries kept as JSON: the page is spliced from them.
    const entries: string[] = [];
    for (const e of page) {
      let json = reg.renders.get(def, typeof e === 'string' ? e : e.id);
      if (json === undefined) {
        const rec = load(e);
        if (!rec) continue;
        json = reg.renders.json(def, rec, () => renderRecord(reg, def, rec, view));
      }
      entries.push(json);
    }
    return listOfJson(entries, pagination, src.filterableFields);
  }
  const r = render ?? ((rec: Rec) => renderRecord(reg, def, rec, view));
  const records: Rec[] = [];
  for (const e of page) {
    const rec = load(e);
    if (rec) records.push(rec);
  }
  return listEnvelope(records.map(r), pagination, src.filterableFields);
}

/**
 * `roleFilter=#a&roleFilter=@id&roleSemantic=AnyOf` on entities that carry role attributes: the ids
 * selected, read from the role-attribute index (AllOf intersects, AnyOf unites) plus existing `@id`s.
 */
function roleFilter(ctx: Ctx, def: ResourceDef): Set<string> | undefined {
  const roles = ctx.req.query.getAll('roleFilter').filter((r) => r !== '');
  if (roles.length === 0) return undefined;
  const attrField = Object.entries(def.fields).find(([, f]) => f.attributes)?.[0];
  if (!attrField) return undefined;
  const semantic = (ctx.req.query.get('roleSemantic') ?? 'AllOf').toLowerCase();
  if (semantic !== 'allof' && semantic !== 'anyof') throw errors.field('roleSemantic', 'must be one of AllOf, AnyOf', ctx.req.query.get('roleSemantic'));
  const store = ctx.app.store;
  const attrs = roles.filter((r) => r.startsWith('#')).map((r) => r.slice(1));
  const out = new Set<string>();
  if (attrs.includes('all')) {
    for (const rec of store.scan(def.collection)) out.add(rec.id);
    return out;
  }
  if (attrs.length > 0) {
    const sets = attrs.map((a) => store.idsByIndex(def.collection, attrField, a));
    if (semantic === 'anyof') for (const s of sets) for (const id of s) out.add(id);
    else {
      sets.sort((a, b) => a.length - b.length);
      const rest = sets.slice(1).map((s) => new Set(s));
      for (const id of sets[0]) if (rest.every((s) => s.has(id))) out.add(id);
    }
  }
  for (const r of roles) if (r.startsWith('@') && store.get(def.collection, r.slice(1))) out.add(r.slice(1));
  return out;
}

/** The six standard handlers of a family, whichever of them it offers. */
export function standardHandlers(reg: Registry, def: ResourceDef): Record<StandardOp, Handler> {
  return {
    list: (ctx) => listRecords(reg, def, ctx),
    detail: (ctx) => ok(renderRecord(reg, def, mustGet(ctx.app.store, def, ctx.params.id), { store: ctx.app.store, ctx })),
    create: async (ctx) => {
      const rec = await createRecord(reg, def, ctx, ctx.body);
      return created(rec.id, `./${def.path}/${rec.id}`);
    },
    update: async (ctx) => {
      await updateRecord(reg, def, ctx, ctx.params.id, ctx.body, 'put');
      return empty();
    },
    patch: async (ctx) => {
      await updateRecord(reg, def, ctx, ctx.params.id, ctx.body, 'patch');
      return empty();
    },
    delete: async (ctx) => {
      await write(ctx.app.store, (tx) => {
        const rec = tx.get(def.collection, ctx.params.id);
        if (!rec) throw errors.notFound();
        reg.deleteInTx(tx, def, rec, ctx);
      });
      return empty();
    },
  };
}

const STANDARD_ACTION: Record<StandardOp, PermissionAction> = {
  list: 'read', detail: 'read', create: 'create', update: 'update', patch: 'update', delete: 'delete',
};

/**
 * A family's operation table entries, from its declaration: Management API, admin level, the
 * permission `<family>.<action>` unless the declaration says otherwise, no rate limit, the body
 * as the spec says.
 */
export function standardEntries(reg: Registry, def: ResourceDef): Entry[] {
  const handlers = standardHandlers(reg, def);
  const entries: Entry[] = [];
  for (const op of Object.keys(STANDARD_ACTION) as StandardOp[]) {
    const operationId = def.operations[op];
    if (!operationId) continue;
    const permission = def.permissions && op in def.permissions ? def.permissions[op] ?? null : { family: def.family, action: STANDARD_ACTION[op] };
    entries.push({ api: 'management', operationId, auth: 'admin', permission, limit: null, body: 'spec', handler: handlers[op] });
  }
  return entries;
}

export function mustGet(store: Store | Tx, def: ResourceDef, id: string): Rec {
  const rec = store.get(def.collection, id);
  if (!rec) throw errors.notFound();
  return rec;
}

export { ApiError };
