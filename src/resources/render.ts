/** Rendering a record of a family as the wire shows it: fields, entity references, role displays, links, secrets. */
import type { Rec, Store, Tx } from '../store/store.js';
import type { FieldDef, ResourceDef, View } from './types.js';
import type { Registry } from './registry.js';

export const iso = (ms: number | undefined | null): string | null =>
  ms === undefined || ms === null ? null : new Date(ms).toISOString();

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
