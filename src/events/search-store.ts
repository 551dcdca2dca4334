/**
 * The embedded search store: alert and firewall-usage documents in their own LMDB environment
 * (`<dataDir>/search`), apart from the controller's datastore so neither its size nor its write
 * rate touches the entity store or its snapshots.
 *
 * Layout: `docs` holds `[index, @timestamp ms, _id] → _source`, so a time range of one index is
 * one ordered key range (every seed query filters on `@timestamp`); `ids` holds
 * `[index, _id] → @timestamp ms` for `_id` overwrites and deletes. A document without a usable
 * `@timestamp` is keyed by its ingest time (and, as in Elasticsearch, never matches a range on it).
 *
 * Growth is bounded: documents older than `retentionHours` and the oldest beyond `maxDocsPerIndex`
 * are removed by a sweep every minute (and at once when an index overflows).
 */
import { EventEmitter } from 'node:events';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { open, type Database, type RootDatabase } from 'lmdb';
import { parseDate } from './date-math.js';
import type { Doc } from './query.js';

export type DocKey = [string, number, string];

/** Same options in every thread that opens the environment (lmdb-js shares it per process). */
export function openSearchEnv(dir: string): {
  env: RootDatabase;
  docs: Database<Record<string, unknown>, DocKey>;
  ids: Database<number, [string, string]>;
  state: Database<number, string>;
  indices: Database<number, string>;
} {
  fs.mkdirSync(dir, { recursive: true });
  const env = open({ path: dir, maxDbs: 8, mapSize: 8 * 1024 ** 3, compression: false });
  return {
    env,
    // Documents of one kind share their shape: msgpack record structures kept in the database make
    // them smaller on disk and several times faster to decode (docs/benchmarks.md, "Measurements behind the code").
    docs: env.openDB<Record<string, unknown>, DocKey>({ name: 'docs', sharedStructuresKey: Symbol.for('mesh.search.structures') }),
    ids: env.openDB<number, [string, string]>({ name: 'ids' }),
    state: env.openDB<number, string>({ name: 'state' }),
    indices: env.openDB<number, string>({ name: 'indices' }),
  };
}

/** Documents of the given indices whose key time lies in [from, to], in index then time order. */
export function* readDocs(docs: Database<Record<string, unknown>, DocKey>, indices: string[], from?: number, to?: number): Iterable<Doc> {
  for (const index of indices) {
    const start: DocKey = [index, from ?? -Number.MAX_VALUE, ''];
    const end: [string, number] = [index, to === undefined ? Number.MAX_VALUE : to + 1];
    for (const { key, value } of docs.getRange({ start, end })) yield { index, id: (key as DocKey)[2], source: value, ts: (key as DocKey)[1] };
  }
}

/** Index names as Elasticsearch allows them. */
export function checkIndexName(name: string): string | undefined {
  if (name.length === 0 || Buffer.byteLength(name) > 255) return 'must be 1 to 255 bytes long';
  if (name !== name.toLowerCase()) return 'must be lowercase';
  if (/[\\/*?"<>| ,#:]/.test(name)) return 'must not contain \\, /, *, ?, ", <, >, |, space, comma, # or :';
  if (/^[-_+]/.test(name)) return 'must not start with -, _ or +';
  if (name === '.' || name === '..') return 'must not be . or ..';
  return undefined;
}

/** `zfw.events*,mesh.alert*` → a matcher over index names (`*` anywhere, `_all`). */
export function patternMatcher(pattern: string): { match: (index: string) => boolean; concrete: string[] } {
  const parts = pattern.split(',').map((p) => p.trim()).filter(Boolean);
  const include: RegExp[] = [];
  const exclude: RegExp[] = [];
  const concrete: string[] = [];
  for (const p of parts) {
    const neg = p.startsWith('-') && include.length > 0;
    const body = neg ? p.slice(1) : p;
    const re = new RegExp('^' + (body === '_all' ? '.*' : body.split('*').map((s) => s.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*')) + '$');
    (neg ? exclude : include).push(re);
    if (!neg && !body.includes('*') && body !== '_all') concrete.push(body);
  }
  return { match: (i) => include.some((r) => r.test(i)) && !exclude.some((r) => r.test(i)), concrete };
}

export interface IndexedDoc {
  index: string;
  id: string;
  source: Record<string, unknown>;
}

export type BulkOutcome = { ok: true; id: string; created: boolean } | { ok: false; id?: string; status: number; type: string; reason: string };

export class SearchStore extends EventEmitter {
  readonly env: RootDatabase;
  readonly docs: Database<Record<string, unknown>, DocKey>;
  private readonly ids: Database<number, [string, string]>;
  /** Small controller state kept with the events (which alerts are raised). */
  readonly state: Database<number, string>;
  /** Index names ever written (name → creation time). */
  private readonly indexNames: Database<number, string>;
  /** index → document count, kept in memory (counted once at start). */
  private readonly counts = new Map<string, number>();
  private sweepTimer?: NodeJS.Timeout;
  private sweeping?: Promise<void>;
  private closed = false;

  constructor(
    readonly dir: string,
    private readonly opts: { retentionHours: number; maxDocsPerIndex: number },
  ) {
    super();
    const { env, docs, ids, state, indices } = openSearchEnv(dir);
    this.env = env;
    this.state = state;
    this.indexNames = indices;
    this.docs = docs;
    this.ids = ids;
    for (const index of this.indexNames.getKeys()) {
      const n = this.docs.getCount({ start: [index as string, -Number.MAX_VALUE, ''], end: [index as string, Number.MAX_VALUE] });
      if (n > 0) this.counts.set(index as string, n);
    }
    this.sweepTimer = setInterval(() => void this.sweep(), 60_000);
    this.sweepTimer.unref();
  }

  indices(): { index: string; docs: number }[] {
    return [...this.counts].filter(([, n]) => n > 0).map(([index, docs]) => ({ index, docs })).sort((a, b) => a.index.localeCompare(b.index));
  }

  hasIndex(index: string): boolean {
    return (this.counts.get(index) ?? 0) > 0;
  }

  /**
   * Write documents atomically in one commit; resolves once durable. `op: 'create'` refuses an
   * existing `_id` (409), `index` replaces it, `delete` removes it. Emits `indexed` with what was written.
   */
  async bulk(items: { op: 'index' | 'create' | 'delete'; index: string; id?: string; source?: Record<string, unknown> }[]): Promise<BulkOutcome[]> {
    if (this.closed) throw new Error('search store is closed');
    const now = Date.now();
    const outcomes: BulkOutcome[] = [];
    const written: IndexedDoc[] = [];
    const puts: { key: DocKey; source: Record<string, unknown>; oldKey?: DocKey }[] = [];
    const dels: DocKey[] = [];
    /** Writes of this request not yet visible to reads. */
    const local = new Map<string, number | null>();
    const existing = (index: string, id: string): number | undefined => {
      const k = `${index}\u0000${id}`;
      if (local.has(k)) return local.get(k) ?? undefined;
      return this.ids.get([index, id]);
    };
    // Generated ids come from one draw of random bytes per request, not one call into the CSPRNG per document.
    let fresh = 0;
    for (const it of items) if (it.id === undefined) fresh++;
    const random = fresh > 0 ? crypto.randomBytes(15 * fresh) : undefined;
    let drawn = 0;
    for (const it of items) {
      // A fresh random id (120 bits; every audit event) names no document yet: no lookup.
      const id = it.id ?? random!.toString('base64url', 15 * drawn, 15 * ++drawn);
      const prior = it.id === undefined ? undefined : existing(it.index, id);
      if (it.op === 'delete') {
        if (prior === undefined) {
          outcomes.push({ ok: false, id, status: 404, type: 'not_found', reason: 'document missing' });
          continue;
        }
        dels.push([it.index, prior, id]);
        local.set(`${it.index}\u0000${id}`, null);
        outcomes.push({ ok: true, id, created: false });
        continue;
      }
      if (it.op === 'create' && prior !== undefined) {
        outcomes.push({ ok: false, id, status: 409, type: 'version_conflict_engine_exception', reason: `[${id}]: version conflict, document already exists` });
        continue;
      }
      const ts = it.source!['@timestamp'];
      const parsed = ts === undefined ? now : parseDate(ts);
      if (parsed === undefined) {
        outcomes.push({ ok: false, id, status: 400, type: 'document_parsing_exception', reason: `failed to parse field [@timestamp] of type [date] in document with id '${id}'` });
        continue;
      }
      puts.push({ key: [it.index, parsed, id], source: it.source!, oldKey: prior !== undefined ? [it.index, prior, id] : undefined });
      local.set(`${it.index}\u0000${id}`, parsed);
      outcomes.push({ ok: true, id, created: prior === undefined });
      written.push({ index: it.index, id, source: it.source! });
    }
    if (puts.length || dels.length) {
      await this.env.batch(() => {
        for (const k of dels) {
          this.docs.remove(k);
          this.ids.remove([k[0], k[2]]);
        }
        for (const p of puts) {
          if (!this.counts.has(p.key[0]) && this.indexNames.get(p.key[0]) === undefined) this.indexNames.put(p.key[0], now);
          if (p.oldKey) this.docs.remove(p.oldKey);
          this.docs.put(p.key, p.source);
          this.ids.put([p.key[0], p.key[2]], p.key[1]);
        }
      });
      for (const k of dels) this.counts.set(k[0], (this.counts.get(k[0]) ?? 1) - 1);
      for (const p of puts) if (!p.oldKey) this.counts.set(p.key[0], (this.counts.get(p.key[0]) ?? 0) + 1);
      if (written.length) this.emit('indexed', written);
      if ([...this.counts.values()].some((n) => n > this.opts.maxDocsPerIndex)) void this.sweep();
    }
    return outcomes;
  }

  /** Remove expired documents and the oldest beyond the per-index limit. */
  sweep(now = Date.now()): Promise<void> {
    if (this.closed) return Promise.resolve();
    return (this.sweeping ??= this.doSweep(now).finally(() => (this.sweeping = undefined)));
  }

  private async doSweep(now: number) {
    const cutoff = now - this.opts.retentionHours * 3_600_000;
    for (const [index, count] of [...this.counts]) {
      const victims: DocKey[] = [];
      for (const key of this.docs.getKeys({ start: [index, -Number.MAX_VALUE, ''], end: [index, cutoff] })) victims.push(key as DocKey);
      const over = count - victims.length - this.opts.maxDocsPerIndex;
      if (over > 0) {
        for (const key of this.docs.getKeys({ start: [index, cutoff, ''], end: [index, Number.MAX_VALUE], limit: over })) victims.push(key as DocKey);
      }
      for (let i = 0; i < victims.length; i += 10_000) {
        const chunk = victims.slice(i, i + 10_000);
        await this.env.batch(() => {
          for (const k of chunk) {
            this.docs.remove(k);
            this.ids.remove([k[0], k[2]]);
          }
        });
        this.counts.set(index, (this.counts.get(index) ?? chunk.length) - chunk.length);
      }
      if ((this.counts.get(index) ?? 0) <= 0) this.counts.delete(index);
    }
  }

  async close() {
    if (this.closed) return;
    this.closed = true;
    if (this.sweepTimer) clearInterval(this.sweepTimer);
    await this.sweeping;
    await this.env.flushed;
    await this.env.close();
  }
}
