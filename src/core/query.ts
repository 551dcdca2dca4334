/**
 * List queries: `limit`, `offset`, `sort` and `filter`, executed against the
 * store. An equality/`in`/range filter on an indexed field reads only the index's candidates; a
 * sort on an indexed field walks the index in order; everything else scans in id order.
 */
import { errors } from './errors.js';
import type { Pagination } from './envelope.js';
import { parseFilter, compileFilter, checkSort, planIndex, type Expr, type FilterQuery, type SymbolTable } from './filter/index.js';
import { DIGEST_PREFIX, type CollectionName, type Rec, type Store } from '../store/store.js';
import { runToEnd } from './slices.js';

export const DEFAULT_LIMIT = 10;
export const MAX_LIMIT = 500;
export const MAX_OFFSET = 100_000;

export interface ListParams {
  limit: number; // -1 = no limit
  offset: number;
  filter: FilterQuery;
  sort: { field: string; desc: boolean }[];
}

const INT = /^-?\d{1,18}$/;

function intParam(q: URLSearchParams, name: string): number | undefined {
  const v = q.get(name);
  if (v === null || v === '') return undefined;
  if (!INT.test(v.trim())) throw errors.invalidPagination(name, v);
  return Number(v.trim());
}

function clampLimit(limit: number | undefined): number {
  if (limit === undefined || limit === 0 || limit < -1) return DEFAULT_LIMIT;
  if (limit === -1) return -1;
  return Math.min(limit, MAX_LIMIT);
}

function clampOffset(offset: number | undefined): number {
  if (offset === undefined || offset < 0) return 0;
  return Math.min(offset, MAX_OFFSET);
}

/** `sort=name asc,createdAt desc` */
function parseSortParam(v: string | null): { field: string; desc: boolean }[] {
  if (v === null || v.trim() === '') return [];
  return v.split(',').map((part) => {
    const words = part.trim().split(/\s+/);
    if (words.length > 2 || !/^[A-Za-z][A-Za-z_.-]*$/.test(words[0])) throw errors.invalidSort(`invalid sort field: ${part.trim()}`);
    const dir = (words[1] ?? 'asc').toLowerCase();
    if (dir !== 'asc' && dir !== 'desc') throw errors.invalidSort(`invalid sort direction: ${words[1]}`);
    return { field: words[0], desc: dir === 'desc' };
  });
}

/**
 * `sortParamIgnored`: lists whose `sort` parameter upstream never reads (role attributes) ignore it
 * rather than refusing what consoles send with every list request; a filter's `sort by` still applies.
 */
export function parseListParams(q: URLSearchParams, symbols: SymbolTable, opts: { sortParamIgnored?: boolean } = {}): ListParams {
  const filterText = q.get('filter') ?? '';
  const filter = parseFilter(filterText);
  const limitQ = intParam(q, 'limit');
  const offsetQ = intParam(q, 'offset');
  const sort = filter.sort ?? (opts.sortParamIgnored ? [] : parseSortParam(q.get('sort')));
  checkSort(sort, symbols);
  return {
    limit: clampLimit(filter.limit ?? limitQ),
    offset: clampOffset(filter.skip ?? offsetQ),
    filter,
    sort: sort.slice(0, 5),
  };
}

type Val = string | number | boolean | null | undefined;

function compareVals(a: Val, b: Val): number {
  if (a === b) return 0;
  if (a === null || a === undefined) return -1;
  if (b === null || b === undefined) return 1;
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  const sa = String(a);
  const sb = String(b);
  return sa < sb ? -1 : sa > sb ? 1 : 0;
}

export interface ListSource {
  /** '' when `records` are given. */
  collection: CollectionName | '';
  symbols: SymbolTable;
  filterableFields: string[];
  /** Restrict to these ids (sub-lists such as a policy's identities). */
  candidates?: Iterable<string>;
  /** The candidates are a superset: the filter must still run on each (default: they are exact). */
  candidatesNeedFilter?: boolean;
  /** Extra condition applied with the filter (roleFilter, visibility). */
  where?: (rec: Rec) => boolean;
  /**
   * The records themselves, when the list is not a store collection (fixed type lists, role
   * attributes, records already narrowed and ordered by the caller): `collection` and `candidates`
   * are unused, and the records keep their order unless a sort is asked for.
   */
  records?: Iterable<Rec>;
}

export interface ListResult {
  /**
   * The page. Paths that find the page from ids alone (indexes, id order) give ids and leave the
   * records to the caller, which may not need them (list entries kept as JSON, render-cache.ts).
   */
  page: (Rec | string)[];
  pagination: Pagination;
}

/**
 * Records (or ids) handled between two points where a sliced run may pause: a record decoded
 * from the store costs several µs, and all large answers together get TURN_MS a turn (slices.ts).
 */
const STEP = 32;

/** Run a list query; returns the page of records and the pagination block. */
export function runList(store: Store, src: ListSource, p: ListParams): ListResult {
  return runToEnd(listSteps(store, src, p));
}

/**
 * runList as steps: it yields every STEP records it reads, so a caller may run it in slices
 * (slices.ts) and a scan of a large collection never holds the event loop for long.
 */
export function* listSteps(store: Store, src: ListSource, p: ListParams): Generator<void, ListResult> {
  let n = 0;
  const pred = compileFilter(p.filter.where, src.symbols);
  const extra = src.where;
  const match = extra ? (r: Rec) => extra(r) && pred(r) : pred;
  const limit = p.limit;
  const offset = p.offset;
  const end = limit === -1 ? Infinity : offset + limit;
  const pagination = (totalCount: number): Pagination => ({ limit, offset, totalCount });

  const sort = p.sort;
  if (src.records) {
    const all: Rec[] = [];
    for (const rec of src.records) {
      if (match(rec)) all.push(rec);
      if (++n % STEP === 0) yield;
    }
    if (sort.length) sortRecords(all, src.symbols, sort);
    return { page: all.slice(offset, end), pagination: pagination(all.length) };
  }
  const collection = src.collection;
  if (collection === '') throw new Error('a list source names its collection or gives its records');

  let ids: string[] | undefined;
  let exactPlan = false;
  if (src.candidates) {
    ids = [...new Set(src.candidates)];
  } else if (p.filter.where) {
    // Datetime fields are indexed by their stored epoch ms while the planner keys datetimes as ISO
    // strings: such an index (enrollments' expiresAt) must not answer filters, the predicate does.
    const indexed = new Set(Object.keys(src.symbols).filter((f) => src.symbols[f].type !== 'datetime' && store.isIndexed(collection, f)));
    const plan = planIndex(p.filter.where, indexed);
    if (plan) {
      // A range read is widened for `>` and `<=` (the predicate trims it), so only `>=`/`<` ranges are exact.
      exactPlan = plan.exact && ('values' in plan || (plan.range.gt === undefined && plan.range.lte === undefined));
      const set = new Set<string>();
      if ('values' in plan) for (const v of plan.values) for (const id of store.idsByIndex(collection, plan.field, v)) set.add(id);
      else {
        const r = plan.range;
        // Index ranges are [start, end); widen for gt/lte and let the predicate trim the edges.
        const start = r.gte ?? r.gt;
        const endKey = r.lt ?? (typeof r.lte === 'string' ? r.lte + '\u0000' : r.lte !== undefined ? Number(r.lte) + 1e-9 : undefined);
        for (const id of store.idsByRange(collection, plan.field, { start, end: endKey })) set.add(id);
      }
      ids = [...set];
    }
  }

  // A filter on `name` alone (the admin console's search box) runs over the name index's keys,
  // decoding only the records of the page.
  if (!ids && !extra && p.filter.where && store.isUnique(collection, 'name') && (sort.length === 0 || (sort.length === 1 && sort[0].field === 'name'))) {
    const fields = fieldsOf(p.filter.where);
    if (fields && [...fields].every((f) => f === 'name' || f === 'id') && !src.symbols.name?.get) {
      const matched: string[] = [];
      for (const [key, id] of store.uniqueEntries(collection, 'name')) {
        // Very long names are indexed under a digest (and NUL splits keys): read those records themselves.
        const probe = typeof key !== 'string' || key.length >= DIGEST_PREFIX ? store.get(collection, id) : ({ id, name: key } as unknown as Rec);
        if (probe && pred(probe)) matched.push(id);
        if (++n % STEP === 0) yield;
      }
      if (sort.length === 0) matched.sort();
      else if (sort[0].desc) matched.reverse();
      return { page: matched.slice(offset, end), pagination: pagination(matched.length) };
    }
  }

  // The candidate ids alone decide the result (exact index plan, or a plain sub-list): count them
  // and load only the page.
  if (ids && (exactPlan || (!p.filter.where && !src.candidatesNeedFilter)) && !extra && sort.length === 0) {
    ids.sort();
    return { page: ids.slice(offset, end), pagination: pagination(ids.length) };
  }

  // Fast path: no filter, no sort, whole collection: page straight from the id order.
  if (!ids && !p.filter.where && !extra && sort.length === 0) {
    const total = store.count(collection);
    const page: string[] = [];
    for (const id of store.ids(collection, { offset, limit: limit === -1 ? undefined : limit })) {
      page.push(id);
      if (++n % STEP === 0) yield;
    }
    return { page, pagination: pagination(total) };
  }

  // Only `name` is both unique and present on every record, so its index lists every record.
  const byUnique = !ids && sort.length >= 1 && sort[0].field === 'name' && store.isUnique(collection, 'name') && (sort.length === 1 || (sort.length === 2 && sort[1].field === 'id'));
  // Sorted by a unique field and nothing to filter: page the index itself.
  if (byUnique && !p.filter.where && !extra) {
    const range = { reverse: sort[0].desc, offset, limit: limit === -1 ? undefined : limit };
    const page: string[] = [];
    for (const id of store.idsByRange(collection, sort[0].field, range)) {
      page.push(id);
      if (++n % STEP === 0) yield;
    }
    return { page, pagination: pagination(store.count(collection)) };
  }

  // An unbounded page (`limit=-1`) keeps the ids of the records it matched, not the records: tens
  // of thousands of decoded records held while a large answer renders in slices survived every
  // young-generation collection meanwhile, which then took milliseconds each (bench/list-stall.ts). Its
  // entries are read again as they are rendered, most not at all (kept JSON, render-cache.ts).
  const keep = (rec: Rec): Rec | string => (limit === -1 ? rec.id : rec);

  // Sorted by a unique field (always present, e.g. `name`): walk its index in order.
  if (!ids && sort.length >= 1 && store.isUnique(collection, sort[0].field) && (sort.length === 1 || (sort.length === 2 && sort[1].field === 'id'))) {
    const records: (Rec | string)[] = [];
    let total = 0;
    for (const id of store.idsByRange(collection, sort[0].field, { reverse: sort[0].desc })) {
      if (++n % STEP === 0) yield;
      const rec = store.get(collection, id);
      if (!rec || !match(rec)) continue;
      if (total >= offset && total < end) records.push(keep(rec));
      total++;
    }
    return { page: records, pagination: pagination(total) };
  }

  let source: Iterable<Rec>;
  if (ids) {
    ids.sort();
    source = (function* () {
      for (const id of ids!) {
        const rec = store.get(collection, id);
        if (rec) yield rec;
      }
    })();
  } else {
    source = store.scan(collection);
  }

  if (sort.length === 0) {
    const records: (Rec | string)[] = [];
    let total = 0;
    for (const rec of source) {
      if (++n % STEP === 0) yield;
      if (!match(rec)) continue;
      if (total >= offset && total < end) records.push(keep(rec));
      total++;
    }
    return { page: records, pagination: pagination(total) };
  }

  const all: Rec[] = [];
  for (const rec of source) {
    if (match(rec)) all.push(rec);
    if (++n % STEP === 0) yield;
  }
  sortRecords(all, src.symbols, sort);
  return { page: all.slice(offset, end), pagination: pagination(all.length) };
}

/** Plain fields an expression reads; undefined when it uses set functions or sub-queries. */
function fieldsOf(e: Expr, out = new Set<string>()): Set<string> | undefined {
  switch (e.type) {
    case 'and':
    case 'or':
      for (const x of e.items) if (!fieldsOf(x, out)) return undefined;
      return out;
    case 'not':
      return fieldsOf(e.expr, out);
    case 'const':
      return out;
    case 'field':
      out.add(e.name);
      return out;
    case 'cmp':
    case 'in':
    case 'between':
      if (e.lhs.kind !== 'field') return undefined;
      out.add(e.lhs.name);
      return out;
    default:
      return undefined;
  }
}

export function sortRecords(all: Rec[], symbols: SymbolTable, sort: ListParams['sort']) {
  const keys = [...sort];
  if (!keys.some((k) => k.field === 'id')) keys.push({ field: 'id', desc: false });
  const getters = keys.map((k) => ({ get: symbols[k.field]?.get ?? ((r: Rec) => r[k.field]), desc: k.desc }));
  all.sort((a, b) => {
    for (const g of getters) {
      const c = compareVals(g.get(a) as Val, g.get(b) as Val);
      if (c !== 0) return g.desc ? -c : c;
    }
    return 0;
  });
}
