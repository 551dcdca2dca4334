/**
 * Datastore integrity check and fix (M:/database/*-data-integrity).
 *
 * Two kinds of invariant:
 * - index invariants, which this module knows by itself: every unique-index entry `value → id`
 *   and every secondary-index entry `(value, id)` points at an existing record that holds that
 *   value, and every value of every indexed field of every record has its entry (both ways);
 *   two records never share a unique value; a record is stored under its own id.
 * - record invariants (references to existing entities, policy `@id` roles, owners of
 *   authenticators and enrollments, …), which the layers above describe as `RecordCheck`s and
 *   `GlobalCheck`s (src/resources/integrity-rules.ts), each finding with an optional repair.
 *
 * A run walks the store in chunks and yields to the event loop between them, so the API keeps
 * serving and the results (`IntegrityState`) are readable while it runs. Every single check reads
 * one consistent snapshot (lmdb-js keeps one read transaction per event-loop turn). A fixing run
 * repairs indexes first (references are followed through them), then the records; each repair
 * re-checks, inside its write, that the problem still exists.
 */
import type { CollectionName, Rec, Store, Tx, Coll, IndexKey } from './store.js';
import { indexKeys } from './store.js';

/**
 * Where a chunk of a collection's records starts: after `after`, or at the first record. (An
 * explicit `start: undefined` makes lmdb-js begin at the collection's shapes entry, not a record.)
 */
const recordsFrom = (after: string | undefined) => (after === undefined ? {} : { start: after });

export interface IntegrityResult {
  description: string;
  fixed: boolean;
}

/** The wire shape of `dataIntegrityCheckDetails` (times as epoch ms here). */
export interface IntegrityState {
  inProgress: boolean;
  fixingErrors: boolean;
  startTime: number | null;
  endTime: number | null;
  error: string | null;
  tooManyErrors: boolean;
  results: IntegrityResult[];
}

export interface Finding {
  description: string;
  /** Runs inside a store write; re-check there and do nothing if the problem is gone. */
  repair?: (tx: Tx) => void;
}

export interface RecordCheck {
  collection: CollectionName;
  check(rec: Rec, store: Store): Finding[];
}

export interface GlobalCheck {
  check(store: Store): Finding[];
}

export interface IntegrityOptions {
  fix: boolean;
  /** Results kept (1000 at most, then `tooManyErrors`, as upstream). */
  maxResults?: number;
  /** Records or index keys handled per event-loop turn. */
  chunk?: number;
}

export const emptyState = (): IntegrityState => ({
  inProgress: false,
  fixingErrors: false,
  startTime: null,
  endTime: null,
  error: null,
  tooManyErrors: false,
  results: [],
});

const turn = () => new Promise<void>((r) => setImmediate(r));

const show = (k: unknown) => {
  const s = typeof k === 'string' ? JSON.stringify(k) : k === undefined ? 'nothing' : JSON.stringify(k) ?? String(k);
  return s.length > 120 ? s.slice(0, 117) + '…' : s;
};

/** The record as the next commit will see it: writes still committing first, then committed data. */
function current(c: Coll, id: string): Rec | undefined {
  if (c.pending.has(id)) return c.pending.get(id) ?? undefined;
  return c.db.get(id);
}

function holds(rec: Rec | undefined, field: string, key: IndexKey): boolean {
  return rec !== undefined && indexKeys(rec[field]).includes(key);
}

class Run {
  private fixes: { finding: Finding; result?: IntegrityResult }[] = [];
  private rawFixes: { result?: IntegrityResult; apply: () => boolean }[] = [];

  constructor(
    private readonly store: Store,
    private readonly state: IntegrityState,
    private readonly opts: Required<IntegrityOptions>,
  ) {}

  private report(description: string, fixable: boolean): IntegrityResult | undefined {
    if (this.state.results.length >= this.opts.maxResults) {
      this.state.tooManyErrors = true;
      return undefined;
    }
    const r = { description: fixable || !this.opts.fix ? description : `${description} (can not be fixed automatically)`, fixed: false };
    this.state.results.push(r);
    return r;
  }

  /** A record-level finding: reported now, repaired at the end of the chunk when fixing. */
  private found(f: Finding) {
    const result = this.report(f.description, f.repair !== undefined);
    if (this.opts.fix && f.repair) this.fixes.push({ finding: f, result });
  }

  /** An index repair: `apply` runs inside the commit and returns whether it changed anything. */
  private foundIndex(description: string, apply: () => boolean) {
    const result = this.report(description, true);
    if (this.opts.fix) this.rawFixes.push({ result, apply });
  }

  private async flush() {
    if (this.rawFixes.length) {
      const batch = this.rawFixes.splice(0);
      await this.store.repairRaw(() => {
        for (const f of batch) {
          f.apply();
          if (f.result) f.result.fixed = true;
        }
      });
    }
    if (this.fixes.length) {
      const batch = this.fixes.splice(0);
      // One write per repair: a repair that fails (e.g. a delete refused) must not undo the others.
      await Promise.all(
        batch.map(async (f) => {
          try {
            await this.store.write((tx) => f.finding.repair!(tx));
            if (f.result) f.result.fixed = true;
          } catch (e) {
            if (f.result) f.result.description += ` (fix failed: ${(e as Error).message})`;
          }
        }),
      );
    }
  }

  async indexes() {
    for (const spec of this.store.collections()) {
      const c = this.store._coll(spec.name);
      for (const [field, db] of c.unique) {
        // Entries → records.
        let after: IndexKey | undefined;
        for (;;) {
          const entries = [...db.getRange({ start: after, limit: this.opts.chunk + 1 })].filter((e) => after === undefined || e.key !== after);
          if (entries.length === 0) break;
          for (const { key, value: id } of entries) {
            const rec = c.db.get(id);
            if (holds(rec, field, key as IndexKey)) continue;
            const k = key as IndexKey;
            this.foundIndex(
              rec
                ? `unique index ${spec.name}.${field}: entry ${show(k)} points at ${spec.name} ${id}, whose ${field} is ${show(rec[field])}`
                : `unique index ${spec.name}.${field}: entry ${show(k)} points at ${spec.name} ${id}, which does not exist`,
              () => {
                if (db.get(k) !== id || holds(current(c, id), field, k)) return false;
                db.remove(k);
                return true;
              },
            );
          }
          after = entries[entries.length - 1].key as IndexKey;
          await this.flush();
          await turn();
        }
      }
      for (const [field, db] of c.indexes) {
        let after: IndexKey | undefined;
        for (;;) {
          const keys = [...db.getKeys({ start: after, limit: this.opts.chunk + 1 })].filter((k) => after === undefined || k !== after) as IndexKey[];
          if (keys.length === 0) break;
          for (const k of keys) {
            for (const id of db.getValues(k)) {
              const rec = c.db.get(id);
              if (holds(rec, field, k)) continue;
              this.foundIndex(
                rec
                  ? `index ${spec.name}.${field}: entry ${show(k)} lists ${spec.name} ${id}, whose ${field} is ${show(rec[field])}`
                  : `index ${spec.name}.${field}: entry ${show(k)} lists ${spec.name} ${id}, which does not exist`,
                () => {
                  if (holds(current(c, id), field, k) || !db.doesExist(k, id)) return false;
                  db.remove(k, id);
                  return true;
                },
              );
            }
          }
          after = keys[keys.length - 1];
          await this.flush();
          await turn();
        }
      }
      // Records → entries.
      let after: string | undefined;
      for (;;) {
        const recs = [...c.db.getRange({ ...recordsFrom(after), limit: this.opts.chunk + 1 })].filter((e) => e.key !== after);
        if (recs.length === 0) break;
        for (const { key, value: rec } of recs) this.recordIndexes(spec.name, c, key as string, rec);
        after = recs[recs.length - 1].key as string;
        await this.flush();
        await turn();
      }
    }
  }

  private recordIndexes(name: string, c: Coll, key: string, rec: Rec) {
    if (!rec || typeof rec !== 'object' || rec.id !== key) {
      this.report(`${name}: the record stored under ${show(key)} has id ${show(rec?.id)}`, false);
      return;
    }
    const id = rec.id;
    for (const [field, db] of c.unique) {
      for (const k of indexKeys(rec[field])) {
        const holder = db.get(k);
        if (holder === id) continue;
        const other = holder === undefined ? undefined : c.db.get(holder);
        if (holder !== undefined && holds(other, field, k)) {
          this.report(`${name} ${id} and ${holder} share the ${field} ${show(rec[field])}, which must be unique`, false);
          continue;
        }
        this.foundIndex(`unique index ${name}.${field}: ${name} ${id} has ${field} ${show(rec[field])} but no index entry`, () => {
          const now = db.get(k);
          if (now === id || !holds(current(c, id), field, k)) return false;
          if (now !== undefined && holds(current(c, now), field, k)) return false;
          db.put(k, id);
          return true;
        });
      }
    }
    for (const [field, db] of c.indexes) {
      for (const k of indexKeys(rec[field])) {
        if (db.doesExist(k, id)) continue;
        this.foundIndex(`index ${name}.${field}: ${name} ${id} has ${field} ${show(k)} but no index entry`, () => {
          if (db.doesExist(k, id) || !holds(current(c, id), field, k)) return false;
          db.put(k, id);
          return true;
        });
      }
    }
  }

  async records(checks: RecordCheck[], globals: GlobalCheck[]) {
    for (const g of globals) for (const f of g.check(this.store)) this.found(f);
    await this.flush();
    const byCollection = new Map<CollectionName, RecordCheck[]>();
    for (const rc of checks) byCollection.set(rc.collection, [...(byCollection.get(rc.collection) ?? []), rc]);
    for (const [name, list] of byCollection) {
      const c = this.store._coll(name);
      let after: string | undefined;
      for (;;) {
        const recs = [...c.db.getRange({ ...recordsFrom(after), limit: this.opts.chunk + 1 })].filter((e) => e.key !== after);
        if (recs.length === 0) break;
        for (const { value: rec } of recs) {
          if (!rec || typeof rec !== 'object' || typeof rec.id !== 'string') continue;
          for (const rc of list) for (const f of rc.check(rec, this.store)) this.found(f);
        }
        after = recs[recs.length - 1].key as string;
        await this.flush();
        await turn();
      }
    }
  }
}

/**
 * Run a check (or check-and-fix) into `state`, which callers may read at any time. Never rejects:
 * an unexpected failure ends the run with `state.error` set.
 */
export async function runIntegrity(
  store: Store,
  state: IntegrityState,
  checks: { records: RecordCheck[]; globals: GlobalCheck[] },
  opts: IntegrityOptions,
): Promise<void> {
  Object.assign(state, emptyState(), { inProgress: true, fixingErrors: opts.fix, startTime: Date.now() });
  const run = new Run(store, state, { maxResults: 1000, chunk: 500, ...opts });
  try {
    await run.indexes();
    await run.records(checks.records, checks.globals);
  } catch (e) {
    state.error = (e as Error).message ?? String(e);
  } finally {
    state.inProgress = false;
    state.endTime = Date.now();
  }
}
