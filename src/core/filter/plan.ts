/**
 * Index planning: find a condition that an index on one field can answer, so a list reads only
 * the index's candidates instead of scanning. Only the whole expression or conjuncts of a
 * top-level `and` chain are considered (never through `or`/`not`). The caller always re-applies
 * the compiled predicate, so a plan only has to return a superset of the matches.
 *
 * Example: planIndex(parseFilter('name = "a" and isAdmin').where, new Set(['name']))
 *          → { field: 'name', values: ['a'], exact: false }
 */
import type { Expr, Literal } from './parse.js';
import type { IndexKey } from '../../store/store.js';
import { computedOperands, operandTypes, type FieldType } from './compile.js';

export type IndexPlan =
  | { field: string; values: IndexKey[]; exact: boolean }
  | { field: string; range: Range; exact: boolean };

type Range = { gte?: IndexKey; gt?: IndexKey; lt?: IndexKey; lte?: IndexKey };

/** Longest string the store indexes (longer keys are not in the index). */
const MAX_KEY = 480;

function conjuncts(e: Expr, out: Expr[] = []): Expr[] {
  if (e.type === 'and') for (const x of e.items) conjuncts(x, out);
  else out.push(e);
  return out;
}

/** Index key(s) for a literal, in the form the store keeps for that field; undefined = cannot plan. */
function keysOf(lit: Literal, ft: FieldType | 'set' | undefined, bound: 'floor' | 'ceil' = 'floor'): IndexKey[] | undefined {
  switch (lit.kind) {
    case 'string':
      if (lit.value.length > MAX_KEY) return undefined;
      if (ft === 'number' || ft === 'bool' || ft === 'datetime' || ft === 'any') return undefined;
      return [lit.value];
    case 'number':
      if (ft === 'string' || ft === 'set') return [String(lit.value)];
      if (ft === 'number') return [lit.value];
      return undefined; // field type unknown (not compiled): a string field would be keyed by the text
    case 'bool':
      return ft === 'bool' ? [lit.value] : undefined;
    case 'datetime': {
      if (ft !== 'datetime') return undefined;
      // Datetimes are stored as ISO strings with millisecond precision.
      const ms = bound === 'ceil' ? Math.ceil(lit.ms) : Math.floor(lit.ms);
      const d = new Date(ms);
      if (Number.isNaN(d.getTime()) || d.getUTCFullYear() < 0 || d.getUTCFullYear() > 9999) return undefined;
      return [d.toISOString()];
    }
    case 'null':
      return undefined;
  }
}

function key(lit: Literal, ft: FieldType | 'set' | undefined, bound: 'floor' | 'ceil' = 'floor'): IndexKey | undefined {
  const k = keysOf(lit, ft, bound);
  return k ? k[0] : undefined;
}

interface Candidate {
  field: string;
  values?: IndexKey[];
  range?: Range;
}

/** What one conjunct can contribute, or undefined. */
function candidate(e: Expr, indexed: Set<string>): Candidate | undefined {
  if (computedOperands.has(e)) return undefined; // value comes from a custom getter, not the stored field
  if (e.type === 'field') {
    if (!indexed.has(e.name) || operandTypes.get(e) !== 'bool') return undefined;
    return { field: e.name, values: [true] };
  }
  if (e.type !== 'cmp' && e.type !== 'in' && e.type !== 'between') return undefined;
  const lhs = e.lhs;
  // Plain fields, and anyOf() over an indexed set (array indexes hold one key per element).
  if (lhs.kind !== 'field' && lhs.kind !== 'anyOf') return undefined;
  if (!indexed.has(lhs.name)) return undefined;
  const ft = operandTypes.get(e);
  if (lhs.kind === 'anyOf' && ft !== 'set') return undefined;
  const field = lhs.name;

  if (e.type === 'in') {
    if (e.negated) return undefined;
    const values: IndexKey[] = [];
    for (const l of e.values) {
      const k = keysOf(l, ft);
      if (!k) return undefined;
      values.push(...k);
    }
    return { field, values: [...new Set(values)] };
  }
  if (e.type === 'between') {
    if (e.negated) return undefined;
    const lo = key(e.lower, ft, 'floor');
    const hi = key(e.upper, ft, 'ceil');
    if (lo === undefined || hi === undefined) return undefined;
    return { field, range: { gte: lo, lt: hi } };
  }
  const { op, value } = e;
  switch (op) {
    case '=': {
      const k = keysOf(value, ft);
      return k ? { field, values: k } : undefined;
    }
    case '<':
    case '<=': {
      const k = key(value, ft, 'ceil');
      if (k === undefined) return undefined;
      return { field, range: op === '<' ? { lt: k } : { lte: k } };
    }
    case '>':
    case '>=': {
      const k = key(value, ft, 'floor');
      if (k === undefined) return undefined;
      return { field, range: op === '>' ? { gt: k } : { gte: k } };
    }
    default:
      return undefined;
  }
}

/**
 * Plan an index read for a condition. Equality / `in` (→ values) is preferred over ranges
 * (→ range; several range conjuncts on the same field are merged). `exact` is true when the plan
 * alone decides the result, i.e. every conjunct was folded into it.
 */
export function planIndex(where: Expr | undefined, indexed: Set<string>): IndexPlan | undefined {
  if (!where || indexed.size === 0) return undefined;
  const parts = conjuncts(where);
  const cands: (Candidate | undefined)[] = parts.map((p) => candidate(p, indexed));

  const eq = cands.find((c) => c?.values);
  if (eq) return { field: eq.field, values: eq.values!, exact: parts.length === 1 };

  const first = cands.find((c) => c?.range);
  if (!first) return undefined;
  const range: Range = {};
  let used = 0;
  for (const c of cands) {
    if (!c?.range || c.field !== first.field) continue;
    const r = c.range;
    const lowerFree = range.gte === undefined && range.gt === undefined;
    const upperFree = range.lt === undefined && range.lte === undefined;
    const hasLower = r.gte !== undefined || r.gt !== undefined;
    const hasUpper = r.lt !== undefined || r.lte !== undefined;
    // Fold a conjunct in only when its bounds fill empty slots; otherwise the predicate trims it.
    if ((hasLower && !lowerFree) || (hasUpper && !upperFree)) continue;
    Object.assign(range, r);
    used++;
  }
  return { field: first.field, range, exact: used === parts.length };
}
