/**
 * ZitiQL compiler: AST + symbol table → a record predicate built from
 * closures, type-checked once up front. Unknown symbols and type mismatches throw
 * `errors.invalidFilter`; bad sort fields throw `errors.invalidSort` (checkSort).
 *
 * Example:
 *   const pred = compileFilter(parseFilter('anyOf(roleAttributes) = "eu"').where, { roleAttributes: { type: 'set' } });
 *   pred({ roleAttributes: ['eu', 'us'] }) // true
 */
import { errors } from '../errors.js';
import type { CmpOp, Expr, Literal, Operand, SetSource } from './parse.js';

export type SymbolType = 'string' | 'number' | 'bool' | 'datetime' | 'set' | 'map';

export interface SymbolDef {
  type: SymbolType;
  /**
   * Value of the symbol for a record; defaults to `rec[name]`. 'set' → string[] | undefined,
   * 'map' → Record<string, unknown> | undefined, 'datetime' → ISO string (or Date / epoch ms).
   * A method, so that a table's getter may take the record type of its own family: the engine
   * passes it the records of the list it filters.
   */
  get?(rec: unknown): unknown;
  /**
   * 'set' symbols whose elements are ids of related entities may describe them, enabling the
   * sub-query form `isEmpty(from <set> where <query>)` / `count(from <set> where <query>)`.
   */
  related?: { symbols: SymbolTable; lookup(id: string): unknown };
}

export type SymbolTable = Record<string, SymbolDef>;

type Pred = (rec: unknown) => boolean;
/** Scalar type a field operand is compared as; 'any' = map entry (`tags.<key>`), typed by the literal. */
export type FieldType = 'string' | 'number' | 'bool' | 'datetime' | 'any';
type Kind = 'string' | 'number' | 'bool' | 'datetime';

/**
 * Type of the left-hand side of each compiled cmp/in/between/field node ('set' for anyOf/allOf),
 * recorded for planIndex so index keys get the stored form (e.g. `name = 5` looks up "5").
 */
export const operandTypes = new WeakMap<object, FieldType | 'set'>();
/**
 * Nodes whose left-hand side is read through a custom `get` (computed values such as
 * `isSystem: r.isSystem === true`): the stored field's index may disagree, so planIndex skips them.
 */
export const computedOperands = new WeakSet<object>();

const at = (pos: number) => `at position ${pos + 1}`;
function fail(reason: string): never {
  throw errors.invalidFilter(reason);
}

const hasOwn = (o: object, k: string) => Object.prototype.hasOwnProperty.call(o, k);

function describeLit(l: Literal): string {
  switch (l.kind) {
    case 'string':
      return `the string ${JSON.stringify(l.value)}`;
    case 'number':
      return `the number ${l.text}`;
    case 'bool':
      return `the boolean ${l.value}`;
    case 'null':
      return 'null';
    case 'datetime':
      return `the datetime ${l.text}`;
  }
}

/** Code-point (= UTF-8 byte) order, which differs from UTF-16 `<` only around surrogates. */
function compareStrings(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x === y) continue;
    if (x >= 0xd800 && y >= 0xd800) {
      x = x >= 0xe000 ? x - 0x800 : x + 0x2000;
      y = y >= 0xe000 ? y - 0x800 : y + 0x2000;
    }
    return x - y;
  }
  return a.length - b.length;
}

/** Datetime field value → epoch ms, or undefined. */
function toMs(v: unknown): number | undefined {
  if (typeof v === 'string') {
    const ms = Date.parse(v);
    return Number.isNaN(ms) ? undefined : ms;
  }
  if (v instanceof Date) {
    const ms = v.getTime();
    return Number.isNaN(ms) ? undefined : ms;
  }
  if (typeof v === 'number' && Number.isFinite(v)) return v;
  return undefined;
}

/** Normalizer of record values for a comparison kind; undefined = null / missing / wrong type. */
function normalizer(kind: Kind, ft: FieldType): (v: unknown) => unknown {
  switch (kind) {
    case 'string':
      // A string symbol holding a number/bool compares by its text; map entries must be strings.
      return ft === 'string'
        ? (v) => (typeof v === 'string' ? v : typeof v === 'number' || typeof v === 'boolean' ? String(v) : undefined)
        : (v) => (typeof v === 'string' ? v : undefined);
    case 'number':
      return (v) => (typeof v === 'number' && !Number.isNaN(v) ? v : undefined);
    case 'bool':
      return (v) => (typeof v === 'boolean' ? v : undefined);
    case 'datetime':
      return toMs;
  }
}

/** Comparison kind for a literal against a field type; throws a type-mismatch error. */
function kindFor(ft: FieldType, lit: Literal, what: string, pos: number): Kind {
  if (lit.kind === 'null') return fail(`null can only be compared with = or != on a plain field (${what} ${at(pos)})`);
  if (ft === 'any') return lit.kind;
  if (ft === 'string' && (lit.kind === 'string' || lit.kind === 'number')) return 'string';
  if (ft === lit.kind) return ft;
  return fail(`type mismatch: ${what} is of type ${ft} and cannot be compared with ${describeLit(lit)} ${at(pos)}`);
}

/** Literal value in the normalized domain of `kind`. */
function litValue(kind: Kind, lit: Literal): string | number | boolean {
  switch (lit.kind) {
    case 'string':
      return lit.value;
    case 'number':
      return kind === 'string' ? String(lit.value) : lit.value;
    case 'bool':
      return lit.value;
    case 'datetime':
      return lit.ms;
    case 'null':
      return fail('unexpected null');
  }
}

/** Predicate over one value (field value or set element) for `<op> <literal>`. */
function valueTest(ft: FieldType, op: CmpOp, lit: Literal, what: string, pos: number): (v: unknown) => boolean {
  let kind = kindFor(ft, lit, what, pos);
  const isContains = op === 'contains' || op === 'not contains' || op === 'icontains' || op === 'not icontains';
  if (isContains) {
    if (ft === 'any' && lit.kind === 'number') kind = 'string';
    if (kind !== 'string') fail(`type mismatch: "${op}" needs a string field, but ${what} is of type ${ft} ${at(pos)}`);
  }
  if (kind === 'bool' && op !== '=' && op !== '!=') fail(`operator "${op}" cannot be used with booleans ${at(pos)}`);
  const norm = normalizer(kind, ft);
  const b = litValue(kind, lit);
  if (kind === 'string') {
    const s = b as string;
    const up = s.toUpperCase();
    switch (op) {
      case '=':
        return (v) => norm(v) === s;
      case '!=':
        return (v) => norm(v) !== s;
      case '<':
        return (v) => {
          const a = norm(v) as string | undefined;
          return a !== undefined && compareStrings(a, s) < 0;
        };
      case '<=':
        return (v) => {
          const a = norm(v) as string | undefined;
          return a !== undefined && compareStrings(a, s) <= 0;
        };
      case '>':
        return (v) => {
          const a = norm(v) as string | undefined;
          return a !== undefined && compareStrings(a, s) > 0;
        };
      case '>=':
        return (v) => {
          const a = norm(v) as string | undefined;
          return a !== undefined && compareStrings(a, s) >= 0;
        };
      case 'contains':
        return (v) => {
          const a = norm(v) as string | undefined;
          return a !== undefined && a.includes(s);
        };
      case 'not contains':
        return (v) => {
          const a = norm(v) as string | undefined;
          return a === undefined || !a.includes(s);
        };
      case 'icontains':
        return (v) => {
          const a = norm(v) as string | undefined;
          return a !== undefined && a.toUpperCase().includes(up);
        };
      case 'not icontains':
        return (v) => {
          const a = norm(v) as string | undefined;
          return a === undefined || !a.toUpperCase().includes(up);
        };
    }
  }
  // number, datetime (epoch ms) and bool: plain JS comparisons on the normalized value.
  const n = b as number;
  switch (op) {
    case '=':
      return (v) => norm(v) === n;
    case '!=':
      return (v) => norm(v) !== n;
    case '<':
      return (v) => {
        const a = norm(v) as number | undefined;
        return a !== undefined && a < n;
      };
    case '<=':
      return (v) => {
        const a = norm(v) as number | undefined;
        return a !== undefined && a <= n;
      };
    case '>':
      return (v) => {
        const a = norm(v) as number | undefined;
        return a !== undefined && a > n;
      };
    case '>=':
      return (v) => {
        const a = norm(v) as number | undefined;
        return a !== undefined && a >= n;
      };
    default:
      return fail(`operator "${op}" is not supported here ${at(pos)}`);
  }
}

function inTest(ft: FieldType, values: Literal[], what: string, pos: number): (v: unknown) => boolean {
  const kind = kindFor(ft, values[0], what, pos);
  for (const l of values) kindFor(ft, l, what, pos);
  if (kind === 'bool') fail(`"in" cannot be used with booleans ${at(pos)}`);
  const norm = normalizer(kind, ft);
  const set = new Set(values.map((l) => litValue(kind, l)));
  return (v) => {
    const a = norm(v);
    return a !== undefined && set.has(a as string | number);
  };
}

function betweenTest(ft: FieldType, lower: Literal, upper: Literal, what: string, pos: number): (v: unknown) => boolean {
  const kind = kindFor(ft, lower, what, pos);
  kindFor(ft, upper, what, pos);
  if (kind !== 'number' && kind !== 'datetime') fail(`type mismatch: "between" needs a number or datetime field, but ${what} is of type ${ft} ${at(pos)}`);
  const norm = normalizer(kind, ft);
  const lo = litValue(kind, lower) as number;
  const hi = litValue(kind, upper) as number;
  return (v) => {
    const a = norm(v) as number | undefined;
    return a !== undefined && a >= lo && a < hi; // upper bound exclusive
  };
}

// ---- symbol resolution -------------------------------------------------------------------------

interface Resolved {
  ft: FieldType;
  get: (rec: unknown) => unknown;
  /** Read through a custom getter. */
  computed?: boolean;
}

function lookupDef(symbols: SymbolTable, name: string): SymbolDef | undefined {
  return hasOwn(symbols, name) ? symbols[name] : undefined;
}

const getterOf = (def: SymbolDef, name: string): ((rec: unknown) => unknown) =>
  def.get ?? ((rec) => (rec == null ? undefined : (rec as Record<string, unknown>)[name]));

/** A scalar field: plain symbol or `<map>.<key>`. */
function resolveScalar(symbols: SymbolTable, name: string, pos: number): Resolved {
  const def = lookupDef(symbols, name);
  if (def) {
    if (def.type === 'set')
      fail(
        `field "${name}" is a set symbol but is used in non-set function context; use anyOf(${name}), allOf(${name}), count(${name}) or isEmpty(${name}) ${at(pos)}`,
      );
    if (def.type === 'map') fail(`field "${name}" is a map; compare one of its entries, e.g. ${name}.<key> = "value" ${at(pos)}`);
    return { ft: def.type, get: getterOf(def, name), computed: def.get !== undefined };
  }
  // Map access: the longest dotted prefix that is a map symbol; the rest is the key.
  for (let dot = name.lastIndexOf('.'); dot > 0; dot = name.lastIndexOf('.', dot - 1)) {
    const prefix = name.slice(0, dot);
    const mdef = lookupDef(symbols, prefix);
    if (!mdef) continue;
    if (mdef.type !== 'map') break;
    const key = name.slice(dot + 1);
    const mget = getterOf(mdef, prefix);
    return {
      ft: 'any',
      get: (rec) => {
        const m = mget(rec) as Record<string, unknown> | null | undefined;
        return m != null && typeof m === 'object' && hasOwn(m, key) ? m[key] : undefined;
      },
    };
  }
  return fail(`unknown field "${name}" ${at(pos)}`);
}

function resolveSet(symbols: SymbolTable, name: string, fn: string, pos: number): { def: SymbolDef; get: (rec: unknown) => unknown; computed: boolean } {
  const def = lookupDef(symbols, name);
  if (!def) {
    resolveScalar(symbols, name, pos); // throws "unknown field" unless it is a map entry
    return fail(`field "${name}" is not a set symbol and cannot be used in ${fn}() ${at(pos)}`);
  }
  if (def.type !== 'set') fail(`field "${name}" is not a set symbol and cannot be used in ${fn}() ${at(pos)}`);
  return { def, get: getterOf(def, name), computed: def.get !== undefined };
}

/** count(...) / isEmpty(...) argument → number of elements (or matching related entities). */
function setCounter(symbols: SymbolTable, src: SetSource, fn: string): { count: (rec: unknown) => number; any: Pred } {
  const { def, get } = resolveSet(symbols, src.name, fn, src.pos);
  if (src.kind === 'symbol') {
    const count = (rec: unknown) => {
      const arr = get(rec);
      return Array.isArray(arr) ? arr.length : 0;
    };
    return { count, any: (rec) => count(rec) > 0 };
  }
  const related = def.related;
  if (!related) return fail(`field "${src.name}" does not support sub-queries (from ${src.name} where ...) ${at(src.pos)}`);
  // Sub-query sort/skip/limit have no effect on counting; only the condition is applied.
  const pred = compileFilter(src.query.where, related.symbols);
  const lookup = related.lookup;
  const matches = (id: unknown) => {
    if (typeof id !== 'string') return false;
    const r = lookup(id);
    return r !== undefined && r !== null && pred(r);
  };
  return {
    count: (rec) => {
      const arr = get(rec);
      if (!Array.isArray(arr)) return 0;
      let n = 0;
      for (const id of arr) if (matches(id)) n++;
      return n;
    },
    any: (rec) => {
      const arr = get(rec);
      if (!Array.isArray(arr)) return false;
      for (const id of arr) if (matches(id)) return true;
      return false;
    },
  };
}

/** Applies a per-value test through the operand (field, anyOf, allOf, count). */
function applyOperand(
  node: object,
  symbols: SymbolTable,
  lhs: Operand,
  build: (ft: FieldType, what: string) => (v: unknown) => boolean,
): Pred {
  switch (lhs.kind) {
    case 'field': {
      const { ft, get, computed } = resolveScalar(symbols, lhs.name, lhs.pos);
      operandTypes.set(node, ft);
      if (computed) computedOperands.add(node);
      const test = build(ft, `field "${lhs.name}"`);
      return (rec) => test(get(rec));
    }
    case 'anyOf': {
      const { get, computed } = resolveSet(symbols, lhs.name, 'anyOf', lhs.pos);
      operandTypes.set(node, 'set');
      if (computed) computedOperands.add(node);
      const test = build('string', `anyOf(${lhs.name})`);
      return (rec) => {
        const arr = get(rec);
        if (!Array.isArray(arr)) return false;
        for (let i = 0; i < arr.length; i++) if (test(arr[i])) return true;
        return false;
      };
    }
    case 'allOf': {
      const { get } = resolveSet(symbols, lhs.name, 'allOf', lhs.pos);
      operandTypes.set(node, 'set');
      const test = build('string', `allOf(${lhs.name})`);
      return (rec) => {
        const arr = get(rec);
        if (!Array.isArray(arr)) return true;
        for (let i = 0; i < arr.length; i++) if (!test(arr[i])) return false;
        return true;
      };
    }
    case 'count': {
      const { count } = setCounter(symbols, lhs.set, 'count');
      const test = build('number', `count(${lhs.set.name})`);
      return (rec) => test(count(rec));
    }
  }
}

function compileExpr(e: Expr, symbols: SymbolTable): Pred {
  switch (e.type) {
    case 'const': {
      const v = e.value;
      return () => v;
    }
    case 'not': {
      const p = compileExpr(e.expr, symbols);
      return (rec) => !p(rec);
    }
    case 'and': {
      const ps = e.items.map((x) => compileExpr(x, symbols));
      if (ps.length === 2) {
        const [a, b] = ps;
        return (rec) => a(rec) && b(rec);
      }
      return (rec) => {
        for (let i = 0; i < ps.length; i++) if (!ps[i](rec)) return false;
        return true;
      };
    }
    case 'or': {
      const ps = e.items.map((x) => compileExpr(x, symbols));
      if (ps.length === 2) {
        const [a, b] = ps;
        return (rec) => a(rec) || b(rec);
      }
      return (rec) => {
        for (let i = 0; i < ps.length; i++) if (ps[i](rec)) return true;
        return false;
      };
    }
    case 'field': {
      const { ft, get, computed } = resolveScalar(symbols, e.name, e.pos);
      if (ft !== 'bool' && ft !== 'any')
        fail(`field "${e.name}" is of type ${ft} and cannot be used as a condition on its own (compare it, e.g. ${e.name} = ...) ${at(e.pos)}`);
      operandTypes.set(e, ft);
      if (computed) computedOperands.add(e);
      return (rec) => get(rec) === true;
    }
    case 'isEmpty': {
      const { any } = setCounter(symbols, e.set, 'isEmpty');
      return (rec) => !any(rec);
    }
    case 'cmp': {
      const { lhs, op, value } = e;
      if (value.kind === 'null') {
        if (lhs.kind !== 'field') fail(`null can only be compared with a plain field, not ${lhs.kind}(${lhs.kind === 'count' ? lhs.set.name : lhs.name}) ${at(lhs.pos)}`);
        const { ft, get } = resolveScalar(symbols, lhs.name, lhs.pos);
        operandTypes.set(e, ft);
        return op === '=' ? (rec) => get(rec) == null : (rec) => get(rec) != null;
      }
      return applyOperand(e, symbols, lhs, (ft, what) => valueTest(ft, op, value, what, lhs.pos));
    }
    case 'in': {
      const p = applyOperand(e, symbols, e.lhs, (ft, what) => inTest(ft, e.values, what, e.lhs.pos));
      return e.negated ? (rec) => !p(rec) : p;
    }
    case 'between': {
      const p = applyOperand(e, symbols, e.lhs, (ft, what) => betweenTest(ft, e.lower, e.upper, what, e.lhs.pos));
      return e.negated ? (rec) => !p(rec) : p;
    }
  }
}

const always: Pred = () => true;

/** Compile a parsed condition against a symbol table. `undefined` → matches everything. */
export function compileFilter(where: Expr | undefined, symbols: SymbolTable): Pred {
  if (!where) return always;
  return compileExpr(where, symbols);
}

/** Validate sort fields: known, and not a set or map symbol. */
export function checkSort(sort: { field: string; desc: boolean }[], symbols: SymbolTable): void {
  for (const { field } of sort) {
    const def = lookupDef(symbols, field);
    if (!def) throw errors.invalidSort(`unknown sort field "${field}"`);
    if (def.type === 'set') throw errors.invalidSort(`cannot sort by "${field}": it is a set field`);
    if (def.type === 'map') throw errors.invalidSort(`cannot sort by "${field}": it is a map field`);
  }
}
