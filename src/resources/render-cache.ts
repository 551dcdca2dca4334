/**
 * Rendered JSON of list entries, per family that declares `renderCache` (types.ts).
 *
 * A page of 100 identities is a large JSON text: rendering the records (entity refs, enrollments,
 * authenticators) and stringifying them took most of what a `?limit=100` list cost (bench/crud),
 * and their garbage showed in p99. With the JSON of each entry kept, a page is the concatenation
 * of strings already made. (Kept as bytes and joined with Buffer.concat instead, each page became
 * a native allocation: V8 counts those as external memory and ran frequent mark-compacts, a worse
 * p99 than the strings' scavenges.) Figures (docs/benchmarks.md, "Measurements behind the code").
 *
 * Correctness rests on invalidation from the store's change events, which fire synchronously
 * after each commit and before the write's response (store.ts): a record's own change drops its
 * entry; a change to a record the render reads drops the entity it points at (`byField`), or
 * every entry of the family (`any`: e.g. a renamed auth policy appears in every identity). Index
 * repairs (integrity fix) drop everything. Entries whose render depends on the clock are never
 * kept (`cacheable`). Bounded by characters kept; the oldest entries go first.
 */
import type { ChangeEvent, Rec, Store } from '../store/store.js';
import type { ResourceDef } from './types.js';

/** Characters kept over all families (~2 bytes each in V8 at worst; ASCII JSON is 1). */
const MAX_CHARS = 48 * 1024 * 1024;

export class RenderCache {
  private readonly entries = new Map<string, Map<string, string>>();
  /** collection changed → [family, field holding the family's id] (`byField`). */
  private readonly byField = new Map<string, [string, string][]>();
  /** collection changed → families to drop entirely (`any`). */
  private readonly byAny = new Map<string, string[]>();
  private chars = 0;

  constructor(private readonly defs: readonly ResourceDef[]) {
    for (const def of defs) {
      const rc = def.renderCache;
      if (!rc) continue;
      this.entries.set(def.collection, new Map());
      for (const [coll, field] of rc.byField ?? []) (this.byField.get(coll) ?? this.byField.set(coll, []).get(coll)!).push([def.collection, field]);
      for (const coll of rc.any ?? []) (this.byAny.get(coll) ?? this.byAny.set(coll, []).get(coll)!).push(def.collection);
    }
  }

  /** Follow `store`'s changes (once, at start-up). */
  attach(store: Store) {
    store.on('change', (events: ChangeEvent[]) => {
      for (const e of events) this.changed(e);
    });
    store.on('repaired', () => this.clear());
  }

  /** The kept JSON of entity `id` of `def`, if any. */
  get(def: ResourceDef, id: string): string | undefined {
    return this.entries.get(def.collection)?.get(id);
  }

  /** The kept JSON of `rec` in `def`, or render, keep (when allowed) and return it. */
  json(def: ResourceDef, rec: Rec, render: () => unknown): string {
    const m = this.entries.get(def.collection);
    const hit = m?.get(rec.id);
    if (hit !== undefined) return hit;
    const text = JSON.stringify(render());
    if (m && (def.renderCache!.cacheable?.(rec) ?? true)) {
      m.set(rec.id, text);
      this.chars += text.length;
      if (this.chars > MAX_CHARS) this.evict();
    }
    return text;
  }

  private changed(e: ChangeEvent) {
    this.drop(e.collection, e.id);
    const { before, after }: { before?: Rec; after?: Rec } = e;
    for (const [family, field] of this.byField.get(e.collection) ?? []) {
      this.drop(family, before?.[field]);
      this.drop(family, after?.[field]);
    }
    for (const family of this.byAny.get(e.collection) ?? []) this.dropAll(family);
  }

  private drop(family: string, id: unknown) {
    if (typeof id !== 'string') return;
    const m = this.entries.get(family);
    const text = m?.get(id);
    if (text === undefined) return;
    m!.delete(id);
    this.chars -= text.length;
  }

  private dropAll(family: string) {
    const m = this.entries.get(family);
    if (!m) return;
    for (const text of m.values()) this.chars -= text.length;
    m.clear();
  }

  clear() {
    for (const family of this.entries.keys()) this.dropAll(family);
  }

  /** Drop the oldest entries (insertion order) until a quarter of the budget is free. */
  private evict() {
    for (const m of this.entries.values()) {
      for (const [id, text] of m) {
        if (this.chars <= MAX_CHARS * 0.75) return;
        m.delete(id);
        this.chars -= text.length;
      }
    }
  }
}

