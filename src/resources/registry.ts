/**
 * The registry of every resource family: store collections and their indexes, filter symbols,
 * and what a delete does to everything that points at the entity (restrict, cascade, pull, and
 * `@id` role entries removed).
 */
import { errors } from '../core/errors.js';
import type { SymbolTable } from '../core/filter/index.js';
import type { CollectionSpec, Rec, Store, Tx, CollectionName, RecordOf } from '../store/store.js';
import type { FieldDef, ResourceDef } from './types.js';
import { RenderCache } from './render-cache.js';

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

  def<C extends CollectionName>(collection: C): ResourceDef<C> {
    const d = this.byCollection.get(collection);
    if (!d) throw new Error(`unknown collection ${collection}`);
    // byCollection is keyed by each def's own collection.
    return d as unknown as ResourceDef<C>;
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
      return { name: def.collection, unique, indexes, indexesInMemory: def.indexesInMemory };
    }));
  }

  /**
   * Delete an entity inside a write, with everything its references demand: restrict (409),
   * cascade (delete the referrer), pull (drop the id from the referrer), and `@id` roles removed.
   */
  deleteInTx(tx: Tx, def: ResourceDef, rec: Rec, opts: { depth?: number; force?: boolean } = {}) {
    const depth = opts.depth ?? 0;
    if (depth > 8) throw new Error('delete cascade too deep');
    if (!tx.exists(def.collection, rec.id)) return;
    if (!opts.force) def.protect?.(rec, 'delete');
    def.beforeDelete?.(rec, { tx });
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
        if (mode === 'cascade') this.deleteInTx(tx, refDef, other, { depth: depth + 1, force: true });
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

export function mustGet<C extends CollectionName>(store: Store | Tx, def: ResourceDef<C>, id: string): RecordOf<C> {
  const rec = store.get(def.collection, id);
  if (!rec) throw errors.notFound();
  return rec;
}
