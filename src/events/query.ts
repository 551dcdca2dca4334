/**
 * The Elasticsearch `_search` subset the embedded search store answers, as a pure
 * function over documents, so it runs the same on the event loop or in a worker:
 *
 * - `query`: `match_all`, `bool` (`filter`, `must`, `should` + `minimum_should_match`,
 *   `must_not`), `range` (numbers and dates with date math: `now-24h`, `now/d`, `format`),
 *   `term`, `terms`, `match`, `exists`, `ids`.
 * - `aggs`/`aggregations`: `terms` (`field`, `size`, `order` by `_count`, `_key` or a metric
 *   sub-aggregation, `min_doc_count`, `missing`), `date_histogram` (`fixed_interval`,
 *   `calendar_interval`), `filter`, and the metrics `sum`, `avg`, `min`, `max`, `value_count`,
 *   `cardinality`, `stats`; nested to any depth.
 * - `size` (0: aggregations only), `from`, `sort`, `_source` (false or a field list), `track_total_hits`.
 *
 * Field semantics follow Elasticsearch's dynamic mapping, so a query that works here works on the
 * real cluster the exporter ships to: dotted names reach into nested objects (`zfw.source_id`
 * matches `{"zfw":{"source_id":…}}` and `{"zfw.source_id":…}`); strings are `text` with a
 * `.keyword` sub-field (exact, at most 256 characters); aggregating or sorting on a text field is
 * the same 400 Elasticsearch answers; `term` on text matches a lower-cased token.
 */
import { DateMathError, parseDate, resolveDate } from './date-math.js';

export class SearchError extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    reason: string,
  ) {
    super(reason);
  }
}

const parsing = (reason: string) => new SearchError(400, 'parsing_exception', reason);
const illegal = (reason: string) => new SearchError(400, 'illegal_argument_exception', reason);

export interface Doc {
  index: string;
  id: string;
  source: Record<string, unknown>;
  /** The store's key time: `@timestamp` parsed at ingest (when the document has one). */
  ts?: number;
}

const KEYWORD_LIMIT = 256;
const MAX_BUCKETS = 65_535;
const MAX_RESULT_WINDOW = 10_000;

// ---------------------------------------------------------------------------------------------
// Fields

function collect(v: unknown, out: unknown[]) {
  if (Array.isArray(v)) for (const x of v) collect(x, out);
  else if (v !== undefined && v !== null) out.push(v);
}

/** `keys[i][j]`: the field name's segments i..j-1 joined with dots (precomputed: walks run per document). */
function walk(o: unknown, keys: string[][], i: number, out: unknown[]) {
  const n = keys.length;
  if (i === n) return collect(o, out);
  if (Array.isArray(o)) {
    for (const x of o) walk(x, keys, i, out);
    return;
  }
  if (o === null || typeof o !== 'object') return;
  const rec = o as Record<string, unknown>;
  const row = keys[i];
  for (let j = n; j > i; j--) {
    const v = rec[row[j]];
    if (v !== undefined && Object.hasOwn(rec, row[j])) walk(v, keys, j, out);
  }
}

export interface FieldRef {
  name: string;
  base: string;
  keyword: boolean;
  date: boolean;
  keys: string[][];
}

function fieldRef(name: unknown): FieldRef {
  if (typeof name !== 'string' || name.length === 0) throw parsing('[field] must be a non-empty string');
  const keyword = name.endsWith('.keyword');
  const base = keyword ? name.slice(0, -'.keyword'.length) : name;
  const parts = base.split('.');
  const keys = parts.map((_, i) => {
    const row: string[] = [];
    for (let j = i + 1; j <= parts.length; j++) row[j] = parts.slice(i, j).join('.');
    return row;
  });
  return { name, base, keyword, date: base === '@timestamp', keys };
}

/** Leaf values of a field in a document (`.keyword`: the strings of its base field). */
export function values(doc: Record<string, unknown>, f: FieldRef): unknown[] {
  const out: unknown[] = [];
  walk(doc, f.keys, 0, out);
  if (f.keyword) return out.filter((v) => typeof v === 'string' && v.length <= KEYWORD_LIMIT);
  return out.filter((v) => typeof v !== 'object');
}

const tokens = (s: string) => s.toLowerCase().split(/[^\p{L}\p{N}_]+/u).filter(Boolean);

function num(v: unknown): number | undefined {
  if (typeof v === 'number') return v;
  if (typeof v === 'boolean') return v ? 1 : 0;
  if (typeof v === 'string' && v.trim() !== '' && Number.isFinite(Number(v))) return Number(v);
  return undefined;
}

/** Sortable/aggregatable value: dates as epoch ms, numbers, keywords; text is refused like ES. */
function docValue(v: unknown, f: FieldRef, what: string): string | number | boolean | undefined {
  if (f.date) return parseDate(v);
  if (typeof v === 'string' && !f.keyword) {
    // A numeric field coerces numeric strings (as Elasticsearch's numeric mappings do).
    const n = num(v);
    if (n !== undefined) return n;
    throw illegal(
      `Text fields are not optimised for operations that require per-document field data like aggregations and sorting, so these operations are disabled by default. Please use a keyword field instead. Alternatively, set fielddata=true on [${f.name}] in order to load field data by uninverting the inverted index. Note that this can use significant memory. (${what})`,
    );
  }
  return v as string | number | boolean;
}

// ---------------------------------------------------------------------------------------------
// Queries

export type Matcher = (doc: Doc) => boolean;

export interface TimeBounds {
  from?: number;
  to?: number;
}

function single(o: unknown, what: string): [string, any] {
  if (o === null || typeof o !== 'object' || Array.isArray(o)) throw parsing(`[${what}] query malformed, no start_object after query name`);
  const entries = Object.entries(o as object);
  if (entries.length !== 1) throw parsing(`[${what}] query doesn't support multiple fields, found [${entries.map(([k]) => k).join('] and [')}]`);
  return entries[0];
}

const asList = (v: unknown): unknown[] => (v === undefined || v === null ? [] : Array.isArray(v) ? v : [v]);

function eqValue(docV: unknown, q: unknown, f: FieldRef): boolean {
  if (f.date) {
    const a = parseDate(docV);
    const b = typeof q === 'number' ? q : parseDate(q);
    return a !== undefined && a === b;
  }
  if (typeof docV === 'string') {
    if (f.keyword) return docV === String(q);
    return tokens(docV).includes(String(q));
  }
  if (typeof docV === 'number') return num(q) === docV;
  if (typeof docV === 'boolean') return q === docV || String(q) === String(docV);
  return false;
}

/**
 * Compile a query. `bounds` receives the `@timestamp` range of a mandatory (top-level `range`, or
 * `bool.filter`/`bool.must`) clause, which the store uses to read only that slice of time.
 */
function compileQuery(q: unknown, now: number, bounds?: TimeBounds): { match: Matcher; scored: boolean } {
  if (q === undefined || q === null) return { match: () => true, scored: true };
  const [type, body] = single(q, 'query');
  switch (type) {
    case 'match_all':
      return { match: () => true, scored: true };
    case 'match_none':
      return { match: () => false, scored: true };
    case 'bool': {
      if (body === null || typeof body !== 'object' || Array.isArray(body)) throw parsing('[bool] query malformed');
      for (const k of Object.keys(body)) {
        if (!['filter', 'must', 'should', 'must_not', 'minimum_should_match', 'boost', '_name'].includes(k)) throw parsing(`[bool] query does not support [${k}]`);
      }
      const filter = asList(body.filter).map((c) => compileQuery(c, now, bounds).match);
      const must = asList(body.must).map((c) => compileQuery(c, now, bounds).match);
      const should = asList(body.should).map((c) => compileQuery(c, now).match);
      const mustNot = asList(body.must_not).map((c) => compileQuery(c, now).match);
      const msmRaw = body.minimum_should_match;
      const msm = msmRaw === undefined ? (filter.length + must.length > 0 ? 0 : Math.min(1, should.length)) : Number(msmRaw);
      if (!Number.isInteger(msm) || msm < 0) throw parsing('[minimum_should_match] must be a non-negative integer');
      return {
        scored: must.length + should.length > 0,
        match: (d) => {
          for (const m of filter) if (!m(d)) return false;
          for (const m of must) if (!m(d)) return false;
          for (const m of mustNot) if (m(d)) return false;
          if (msm > 0) {
            let n = 0;
            for (const m of should) if (m(d) && ++n >= msm) break;
            if (n < msm) return false;
          }
          return true;
        },
      };
    }
    case 'range': {
      const [field, spec] = single(body, 'range');
      const f = fieldRef(field);
      if (spec === null || typeof spec !== 'object') throw parsing(`[range] query malformed for field [${field}]`);
      const format = spec.format;
      if (format !== undefined && typeof format !== 'string') throw parsing('[range] [format] must be a string');
      for (const k of Object.keys(spec)) if (!['gte', 'gt', 'lte', 'lt', 'format', 'time_zone', 'boost', 'relation'].includes(k)) throw parsing(`[range] query does not support [${k}]`);
      const bound = (k: 'gte' | 'gt' | 'lte' | 'lt'): number | string | undefined => {
        const v = spec[k];
        if (v === undefined || v === null) return undefined;
        if (f.date) {
          try {
            return resolveDate(v, now, { format, roundUp: k === 'gt' || k === 'lte' });
          } catch (e) {
            if (e instanceof DateMathError) throw new SearchError(400, 'parse_exception', e.message);
            throw e;
          }
        }
        if (typeof v === 'number' || (typeof v === 'string' && num(v) !== undefined)) return num(v)!;
        if (typeof v === 'string') return v;
        throw parsing(`[range] [${k}] must be a number, a string or a date`);
      };
      const gte = bound('gte');
      const gt = bound('gt');
      const lte = bound('lte');
      const lt = bound('lt');
      if (f.date && bounds) {
        const from = Math.max(gte === undefined ? -Infinity : Number(gte), gt === undefined ? -Infinity : Number(gt) + 1);
        const to = Math.min(lte === undefined ? Infinity : Number(lte), lt === undefined ? Infinity : Number(lt) - 1);
        if (Number.isFinite(from)) bounds.from = Math.max(bounds.from ?? -Infinity, from);
        if (Number.isFinite(to)) bounds.to = Math.min(bounds.to ?? Infinity, to);
      }
      const inRange = (x: number | string) =>
        (gte === undefined || x >= gte) && (gt === undefined || x > gt) && (lte === undefined || x <= lte) && (lt === undefined || x < lt);
      return {
        scored: false,
        match: (d) => {
          // The key time is `@timestamp` parsed once at ingest: no need to parse it per query.
          if (f.date && d.ts !== undefined && d.source['@timestamp'] !== undefined && !Array.isArray(d.source['@timestamp'])) return inRange(d.ts);
          return values(d.source, f).some((v) => {
            if (f.date) {
              const t = parseDate(v);
              return t !== undefined && inRange(t);
            }
            if (typeof v === 'number') return typeof (gte ?? gt ?? lte ?? lt) !== 'string' && inRange(v);
            if (typeof v === 'string' && f.keyword) return inRange(v);
            const n = num(v);
            return n !== undefined && inRange(n);
          });
        },
      };
    }
    case 'term': {
      const [field, spec] = single(body, 'term');
      const f = fieldRef(field);
      const value = spec !== null && typeof spec === 'object' ? spec.value : spec;
      if (value === undefined || value === null || typeof value === 'object') throw parsing(`[term] query malformed for field [${field}]`);
      return { scored: true, match: (d) => values(d.source, f).some((v) => eqValue(v, value, f)) };
    }
    case 'terms': {
      const entries = Object.entries(body ?? {}).filter(([k]) => k !== 'boost' && k !== '_name');
      if (entries.length !== 1 || !Array.isArray(entries[0][1])) throw parsing('[terms] query requires one field with an array of values');
      const f = fieldRef(entries[0][0]);
      const list = entries[0][1] as unknown[];
      return { scored: true, match: (d) => values(d.source, f).some((v) => list.some((q) => eqValue(v, q, f))) };
    }
    case 'match': {
      const [field, spec] = single(body, 'match');
      const f = fieldRef(field);
      const query = spec !== null && typeof spec === 'object' ? spec.query : spec;
      const and = spec !== null && typeof spec === 'object' && String(spec.operator ?? 'or').toLowerCase() === 'and';
      if (query === undefined || query === null || typeof query === 'object') throw parsing(`[match] query malformed for field [${field}]`);
      const wanted = typeof query === 'string' && !f.keyword && !f.date ? tokens(query) : [];
      return {
        scored: true,
        match: (d) =>
          values(d.source, f).some((v) => {
            if (typeof v === 'string' && !f.keyword && !f.date) {
              const have = new Set(tokens(v));
              return wanted.length > 0 && (and ? wanted.every((w) => have.has(w)) : wanted.some((w) => have.has(w)));
            }
            return eqValue(v, query, f);
          }),
      };
    }
    case 'exists': {
      const f = fieldRef(body?.field);
      return { scored: false, match: (d) => values(d.source, f).length > 0 };
    }
    case 'ids': {
      const list = asList(body?.values).map(String);
      return { scored: false, match: (d) => list.includes(d.id) };
    }
    default:
      throw parsing(`unknown query [${type}]`);
  }
}

// ---------------------------------------------------------------------------------------------
// Aggregations

interface AggState {
  add(doc: Doc): void;
  result(): Record<string, unknown>;
  /** Single value used when a parent terms aggregation orders by this one. */
  sortValue?(): number | null;
}

type AggFactory = () => AggState;

const METRICS = new Set(['sum', 'avg', 'min', 'max', 'value_count', 'cardinality', 'stats']);

function metric(type: string, spec: any): AggFactory {
  const f = fieldRef(spec?.field);
  const missing = spec?.missing;
  return () => {
    let sum = 0;
    let count = 0;
    let min = Infinity;
    let max = -Infinity;
    const distinct = new Set<unknown>();
    const value = (): number | null => {
      switch (type) {
        case 'sum': return sum;
        case 'avg': return count ? sum / count : null;
        case 'min': return count ? min : null;
        case 'max': return count ? max : null;
        case 'value_count': return count;
        case 'cardinality': return distinct.size;
      }
      return null;
    };
    return {
      add(doc) {
        let vs = values(doc.source, f);
        if (vs.length === 0 && missing !== undefined) vs = [missing];
        for (const v of vs) {
          if (type === 'cardinality' || type === 'value_count') {
            if (type === 'cardinality') distinct.add(f.date ? parseDate(v) : v);
            count++;
            continue;
          }
          const n = f.date ? parseDate(v) : num(v);
          if (n === undefined || (typeof v === 'string' && f.keyword)) {
            throw illegal(`Field [${f.name}] of type [${f.keyword ? 'keyword' : 'text'}] is not supported for aggregation [${type}]`);
          }
          sum += n;
          count++;
          if (n < min) min = n;
          if (n > max) max = n;
        }
      },
      result() {
        if (type === 'stats') return { count, min: count ? min : null, max: count ? max : null, avg: count ? sum / count : null, sum };
        return { value: value() };
      },
      sortValue: value,
    };
  };
}

interface OrderKey {
  key: string;
  dir: 1 | -1;
}

function parseOrder(order: unknown, subs: Record<string, unknown>): OrderKey[] {
  const list = order === undefined ? [{ _count: 'desc' }] : Array.isArray(order) ? order : [order];
  const out: OrderKey[] = [];
  for (const o of list) {
    if (o === null || typeof o !== 'object') throw parsing('[order] must be an object or an array of objects');
    for (const [k, d] of Object.entries(o as object)) {
      const dir = String(d).toLowerCase();
      if (dir !== 'asc' && dir !== 'desc') throw parsing(`unknown order direction [${String(d)}]`);
      const name = k === '_term' ? '_key' : k;
      if (name !== '_count' && name !== '_key') {
        const sub = name.split('.')[0];
        const def = subs[sub] as Record<string, unknown> | undefined;
        const type = def ? Object.keys(def).find((x) => x !== 'aggs' && x !== 'aggregations' && x !== 'meta') : undefined;
        if (!type || !METRICS.has(type)) throw new SearchError(400, 'aggregation_execution_exception', `Invalid aggregation order path [${k}]. The provided aggregation [${sub}] either does not exist, or is a pipeline aggregation and cannot be used to sort the buckets.`);
      }
      out.push({ key: name, dir: dir === 'asc' ? 1 : -1 });
    }
  }
  // Ties are broken by key ascending, as Elasticsearch does.
  if (!out.some((o) => o.key === '_key')) out.push({ key: '_key', dir: 1 });
  return out;
}

const cmp = (a: unknown, b: unknown): number => {
  if (a === b) return 0;
  if (a === null || a === undefined) return 1;
  if (b === null || b === undefined) return -1;
  return (a as number) < (b as number) ? -1 : 1;
};

interface Bucket {
  key: string | number | boolean;
  count: number;
  subs: Map<string, AggState>;
}

function bucketFactory(subs: Record<string, AggFactory>) {
  return (key: string | number | boolean): Bucket => ({
    key,
    count: 0,
    subs: new Map(Object.entries(subs).map(([n, f]) => [n, f()])),
  });
}

function renderBucket(b: Bucket, extra: Record<string, unknown> = {}): Record<string, unknown> {
  const out: Record<string, unknown> = { key: b.key, ...extra, doc_count: b.count };
  for (const [n, s] of b.subs) out[n] = s.result();
  return out;
}

function termsAgg(spec: any, subDefs: Record<string, unknown>, subs: Record<string, AggFactory>): AggFactory {
  const f = fieldRef(spec?.field);
  const size = spec?.size ?? 10;
  if (!Number.isInteger(size) || size < 1) throw parsing(`[size] must be greater than 0. Found [${size}] in [terms]`);
  if (size > MAX_BUCKETS) throw new SearchError(400, 'too_many_buckets_exception', `Trying to create too many buckets. Must be less than or equal to: [${MAX_BUCKETS}] but was [${size}].`);
  const minDocCount = spec?.min_doc_count ?? 1;
  const order = parseOrder(spec?.order, subDefs);
  const missing = spec?.missing;
  const make = bucketFactory(subs);
  return () => {
    const buckets = new Map<string | number | boolean, Bucket>();
    return {
      add(doc) {
        let vs = values(doc.source, f);
        if (vs.length === 0 && missing !== undefined) vs = [missing];
        // A document counts once per distinct value (arrays may repeat one).
        const seen = vs.length > 1 ? new Set<unknown>() : undefined;
        for (const raw of vs) {
          const k = docValue(raw, f, 'terms');
          if (k === undefined || seen?.has(k)) continue;
          seen?.add(k);
          let b = buckets.get(k);
          if (!b) buckets.set(k, (b = make(k)));
          b.count++;
          for (const s of b.subs.values()) s.add(doc);
        }
      },
      result() {
        const all = [...buckets.values()].filter((b) => b.count >= minDocCount);
        const val = (b: Bucket, key: string) => {
          if (key === '_count') return b.count;
          if (key === '_key') return b.key;
          const [name, prop] = key.split('.');
          const s = b.subs.get(name)!;
          if (prop && prop !== 'value') return (s.result() as Record<string, unknown>)[prop];
          return s.sortValue ? s.sortValue() : null;
        };
        all.sort((a, b) => {
          for (const o of order) {
            const c = cmp(val(a, o.key), val(b, o.key));
            if (c !== 0) return c * o.dir;
          }
          return 0;
        });
        const shown = all.slice(0, size);
        const other = all.slice(size).reduce((n, b) => n + b.count, 0);
        return {
          doc_count_error_upper_bound: 0,
          sum_other_doc_count: other,
          buckets: shown.map((b) => renderBucket(b, f.date ? { key_as_string: new Date(b.key as number).toISOString() } : {})),
        };
      },
    };
  };
}

const FIXED: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const CALENDAR: Record<string, string> = {
  minute: 'm', '1m': 'm', hour: 'h', '1h': 'h', day: 'd', '1d': 'd', week: 'w', '1w': 'w', month: 'M', '1M': 'M', quarter: 'q', '1q': 'q', year: 'y', '1y': 'y',
};

function dateHistogramAgg(spec: any, subs: Record<string, AggFactory>): AggFactory {
  const f = fieldRef(spec?.field);
  let floor: (t: number) => number;
  if (typeof spec?.fixed_interval === 'string' || typeof spec?.interval === 'string') {
    const m = /^(\d+)(ms|s|m|h|d)$/.exec(spec.fixed_interval ?? spec.interval);
    if (!m) throw parsing(`failed to parse setting [date_histogram.fixedInterval] with value [${spec.fixed_interval ?? spec.interval}] as a time value`);
    const step = Number(m[1]) * FIXED[m[2]];
    floor = (t) => Math.floor(t / step) * step;
  } else if (typeof spec?.calendar_interval === 'string') {
    const unit = CALENDAR[spec.calendar_interval];
    if (!unit) throw illegal(`The supplied interval [${spec.calendar_interval}] could not be parsed as a calendar interval.`);
    floor = (t) => {
      const d = new Date(t);
      const y = d.getUTCFullYear();
      switch (unit) {
        case 'm': return Math.floor(t / 60_000) * 60_000;
        case 'h': return Math.floor(t / 3_600_000) * 3_600_000;
        case 'd': return Date.UTC(y, d.getUTCMonth(), d.getUTCDate());
        case 'w': return Date.UTC(y, d.getUTCMonth(), d.getUTCDate() - ((d.getUTCDay() + 6) % 7));
        case 'M': return Date.UTC(y, d.getUTCMonth(), 1);
        case 'q': return Date.UTC(y, Math.floor(d.getUTCMonth() / 3) * 3, 1);
        default: return Date.UTC(y, 0, 1);
      }
    };
  } else {
    throw illegal('Invalid interval specified, must be non-null and non-empty');
  }
  const minDocCount = spec?.min_doc_count ?? 0;
  const make = bucketFactory(subs);
  return () => {
    const buckets = new Map<number, Bucket>();
    return {
      add(doc) {
        for (const v of values(doc.source, f)) {
          const t = f.date ? parseDate(v) : num(v);
          if (t === undefined) continue;
          const k = floor(t);
          let b = buckets.get(k);
          if (!b) buckets.set(k, (b = make(k)));
          b.count++;
          for (const s of b.subs.values()) s.add(doc);
        }
      },
      result() {
        const list = [...buckets.values()].filter((b) => b.count >= Math.max(1, minDocCount)).sort((a, b) => (a.key as number) - (b.key as number));
        return { buckets: list.map((b) => renderBucket(b, { key_as_string: new Date(b.key as number).toISOString() })) };
      },
    };
  };
}

function filterAgg(spec: unknown, now: number, subs: Record<string, AggFactory>): AggFactory {
  const { match } = compileQuery(spec, now);
  return () => {
    const b = bucketFactory(subs)('');
    return {
      add(doc) {
        if (!match(doc)) return;
        b.count++;
        for (const s of b.subs.values()) s.add(doc);
      },
      result() {
        const out: Record<string, unknown> = { doc_count: b.count };
        for (const [n, s] of b.subs) out[n] = s.result();
        return out;
      },
    };
  };
}

function compileAggs(defs: unknown, now: number, depth = 0): Record<string, AggFactory> {
  if (defs === undefined || defs === null) return {};
  if (typeof defs !== 'object' || Array.isArray(defs)) throw parsing('[aggs] must be an object');
  if (depth > 16) throw parsing('aggregations nested too deeply');
  const out: Record<string, AggFactory> = {};
  for (const [name, def] of Object.entries(defs as Record<string, unknown>)) {
    if (!/^[^\[\]>]+$/.test(name)) throw parsing(`Invalid aggregation name [${name}]. Aggregation names can contain any character except '[', ']', and '>'`);
    if (def === null || typeof def !== 'object' || Array.isArray(def)) throw parsing(`Expected [START_OBJECT] under [${name}]`);
    const d = def as Record<string, any>;
    const subDefs = (d.aggs ?? d.aggregations ?? {}) as Record<string, unknown>;
    const types = Object.keys(d).filter((k) => k !== 'aggs' && k !== 'aggregations' && k !== 'meta');
    if (types.length !== 1) throw parsing(`Expected exactly one aggregation type under [${name}], found [${types.join(', ')}]`);
    const type = types[0];
    const subs = compileAggs(subDefs, now, depth + 1);
    if (METRICS.has(type)) {
      if (Object.keys(subDefs).length) throw new SearchError(400, 'aggregation_initialization_exception', `Aggregator [${name}] of type [${type}] cannot accept sub-aggregations`);
      out[name] = metric(type, d[type]);
    } else if (type === 'terms') out[name] = termsAgg(d.terms, subDefs, subs);
    else if (type === 'date_histogram') out[name] = dateHistogramAgg(d.date_histogram, subs);
    else if (type === 'filter') out[name] = filterAgg(d.filter, now, subs);
    else throw parsing(`Unknown aggregation type [${type}] did you mean [terms]?`);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The request

export interface CompiledSearch {
  match: Matcher;
  scored: boolean;
  bounds: TimeBounds;
  aggs: Record<string, AggFactory>;
  size: number;
  from: number;
  sort: { field: FieldRef | '_score' | '_doc'; dir: 1 | -1 }[];
  source: boolean | string[];
  trackTotalHits: boolean | number;
}

const TOP_KEYS = new Set(['query', 'aggs', 'aggregations', 'size', 'from', 'sort', '_source', 'track_total_hits', 'timeout', 'version', 'seq_no_primary_term', 'stored_fields']);

export function compileSearch(body: unknown, now: number): CompiledSearch {
  const b = (body ?? {}) as Record<string, any>;
  if (typeof b !== 'object' || Array.isArray(b)) throw parsing('request body must be a JSON object');
  for (const k of Object.keys(b)) if (!TOP_KEYS.has(k)) throw parsing(`Unknown key for a START_OBJECT in [${k}].`);
  const bounds: TimeBounds = {};
  const { match, scored } = compileQuery(b.query, now, bounds);
  const size = b.size ?? 10;
  const from = b.from ?? 0;
  if (!Number.isInteger(size) || size < 0) throw illegal(`[size] parameter cannot be negative, found [${size}]`);
  if (!Number.isInteger(from) || from < 0) throw illegal(`[from] parameter cannot be negative, found [${from}]`);
  if (from + size > MAX_RESULT_WINDOW)
    throw illegal(`Result window is too large, from + size must be less than or equal to: [${MAX_RESULT_WINDOW}] but was [${from + size}].`);
  const sort: CompiledSearch['sort'] = [];
  for (const s of asList(b.sort)) {
    if (typeof s === 'string') sort.push({ field: s === '_score' || s === '_doc' ? s : fieldRef(s), dir: s === '_score' ? -1 : 1 });
    else if (s && typeof s === 'object') {
      for (const [k, v] of Object.entries(s)) {
        const order = String(typeof v === 'object' && v !== null ? (v as any).order ?? 'asc' : v).toLowerCase();
        if (order !== 'asc' && order !== 'desc') throw parsing(`[sort] unknown order [${order}]`);
        sort.push({ field: k === '_score' || k === '_doc' ? k : fieldRef(k), dir: order === 'asc' ? 1 : -1 });
      }
    } else throw parsing('[sort] malformed');
  }
  let source: boolean | string[] = true;
  if (b._source === false) source = false;
  else if (Array.isArray(b._source)) source = b._source.map(String);
  else if (typeof b._source === 'string') source = [b._source];
  const tth = b.track_total_hits ?? 10_000;
  return { match, scored, bounds, aggs: compileAggs(b.aggs ?? b.aggregations, now), size, from, sort, source, trackTotalHits: tth };
}

function project(source: Record<string, unknown>, fields: string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of fields) {
    const prefix = f.replace(/\*$/, '');
    for (const [k, v] of Object.entries(source)) if (k === f || (f.endsWith('*') && k.startsWith(prefix)) || f.startsWith(k + '.')) out[k] = v;
  }
  return out;
}

/**
 * Run a compiled search over documents (in `@timestamp` order). The `took` time is the caller's.
 * Returns the response body of Elasticsearch's `_search`.
 */
export function executeSearch(c: CompiledSearch, docs: Iterable<Doc>, took: () => number): Record<string, unknown> {
  const aggs = Object.entries(c.aggs).map(([n, f]) => [n, f()] as const);
  const want = c.from + c.size;
  const sorted = c.sort.length > 0;
  // Without a sort, the first hits in store order; with one, all matches are ranked (bounded by the window).
  let hits: { d: Doc; seq: number; keys?: unknown[] }[] = [];
  let total = 0;
  const keyOf = (d: Doc, f: FieldRef | '_score' | '_doc') => {
    if (f === '_score' || f === '_doc') return 0;
    const vs = values(d.source, f).map((v) => docValue(v, f, 'sort')).filter((v) => v !== undefined);
    return vs.length ? vs[0] : null;
  };
  const rank = () => {
    hits.sort((a, b) => {
      for (let k = 0; k < c.sort.length; k++) {
        const x = cmp(a.keys![k], b.keys![k]);
        if (x !== 0) return x * c.sort[k].dir;
      }
      return a.seq - b.seq;
    });
    hits = hits.slice(0, want);
  };
  // Memory stays bounded: sorted hits are ranked and trimmed to the window as they accumulate.
  const trimAt = Math.max(2 * want, 1024);
  for (const d of docs) {
    if (!c.match(d)) continue;
    for (const [, a] of aggs) a.add(d);
    if (want > 0 && (sorted || hits.length < want)) {
      hits.push({ d, seq: total, keys: sorted ? c.sort.map((s) => keyOf(d, s.field)) : undefined });
      if (sorted && hits.length >= trimAt) rank();
    }
    total++;
  }
  if (sorted) rank();
  const score = c.scored ? 1 : 0;
  const page = hits.slice(c.from, want).map(({ d, keys }) => {
    const h: Record<string, unknown> = { _index: d.index, _id: d.id, _score: sorted ? null : score };
    if (c.source !== false) h._source = c.source === true ? d.source : project(d.source, c.source);
    // Sort values as Elasticsearch reports them: dates as epoch milliseconds.
    if (sorted) h.sort = c.sort.map((s, k) => (s.field === '_score' ? score : keys![k] ?? null));
    return h;
  });
  const limit = c.trackTotalHits === true ? Infinity : c.trackTotalHits === false ? 0 : Number(c.trackTotalHits);
  const out: Record<string, unknown> = {
    took: took(),
    timed_out: false,
    _shards: { total: 1, successful: 1, skipped: 0, failed: 0 },
    hits: {
      ...(c.trackTotalHits === false ? {} : { total: total > limit ? { value: limit, relation: 'gte' } : { value: total, relation: 'eq' } }),
      max_score: page.length && !sorted ? score : null,
      hits: page,
    },
  };
  if (aggs.length) out.aggregations = Object.fromEntries(aggs.map(([n, a]) => [n, a.result()]));
  return out;
}
