/**
 * ZitiQL parser: text → FilterQuery { where AST, sort, skip, limit }.
 *
 * Hand-written lexer + recursive-descent parser. Whitespace is significant where the upstream
 * grammar requires it (`and`/`or` need whitespace on both sides, `in`/`between` too, ...), so each
 * token remembers whether whitespace preceded it. Every error is `errors.invalidFilter(reason)`.
 *
 * Example: parseFilter('name contains "web" and isAdmin = false sort by name desc limit 5')
 */
import { errors } from '../errors.js';

// ---- AST ---------------------------------------------------------------------------------------

export type Literal =
  | { kind: 'string'; value: string }
  | { kind: 'number'; value: number; int: boolean; text: string }
  | { kind: 'bool'; value: boolean }
  | { kind: 'null' }
  /** `ms` is the instant in epoch milliseconds (may carry a sub-millisecond fraction). */
  | { kind: 'datetime'; ms: number; text: string };

/** Source of a set function: a set symbol, or `from <set> where <query>` (related entities). */
export type SetSource = { kind: 'symbol'; name: string; pos: number } | { kind: 'from'; name: string; query: FilterQuery; pos: number };

/** Left-hand side of an operation. */
export type Operand =
  | { kind: 'field'; name: string; pos: number }
  | { kind: 'anyOf' | 'allOf'; name: string; pos: number }
  | { kind: 'count'; set: SetSource; pos: number };

export type CmpOp = '=' | '!=' | '<' | '<=' | '>' | '>=' | 'contains' | 'not contains' | 'icontains' | 'not icontains';

export type Expr =
  | { type: 'and'; items: Expr[] }
  | { type: 'or'; items: Expr[] }
  | { type: 'not'; expr: Expr }
  | { type: 'const'; value: boolean }
  /** Bare identifier used as a predicate (`isAdmin` ≡ `isAdmin = true`). */
  | { type: 'field'; name: string; pos: number }
  | { type: 'isEmpty'; set: SetSource; pos: number }
  | { type: 'cmp'; lhs: Operand; op: CmpOp; value: Literal }
  | { type: 'in'; lhs: Operand; negated: boolean; values: Literal[] }
  | { type: 'between'; lhs: Operand; negated: boolean; lower: Literal; upper: Literal };

export interface FilterQuery {
  where?: Expr;
  sort?: { field: string; desc: boolean }[];
  skip?: number;
  /** -1 = `limit none` */
  limit?: number;
}

// ---- lexer -------------------------------------------------------------------------------------

type TokType =
  | 'ident'
  | 'string'
  | 'number'
  | 'datetime'
  | 'kw'
  | 'op'
  | '('
  | ')'
  | '['
  | ']'
  | ','
  | 'not in'
  | 'not between'
  | 'not contains'
  | 'not icontains'
  | 'eof';

interface Token {
  type: TokType;
  /** Raw source text of the token. */
  text: string;
  /** 0-based offset in the filter text. */
  pos: number;
  /** Whitespace immediately precedes this token. */
  ws: boolean;
  /** Keyword (lower-case) for 'kw'; operator for 'op'. */
  kw?: string;
  lit?: Literal;
}

const KEYWORDS = new Set([
  'and', 'or', 'not', 'in', 'between', 'contains', 'icontains', 'true', 'false', 'null', 'allof', 'anyof', 'count',
  'isempty', 'asc', 'desc', 'sort', 'by', 'skip', 'limit', 'none', 'where', 'from',
]);

const isWs = (c: string | undefined) => c === ' ' || c === '\n' || c === '\t' || c === '\r';
const IDENT = /[A-Za-z][A-Za-z_]*(?:\.[A-Za-z][A-Za-z_-]*)*/y;
const QUOTED_IDENT = /'[A-Za-z][A-Za-z_]*(?:\.[A-Za-z][A-Za-z_-]*)*'/y;
const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const RFC3339 = /(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})/y;
const ESCAPES: Record<string, string> = { '"': '"', '\\': '\\', f: '\f', n: '\n', r: '\r', t: '\t' };

/** Human position: 1-based column. */
const at = (pos: number) => `at position ${pos + 1}`;

const MAX_DEPTH = 100;
const MAX_FILTER_LENGTH = 64 * 1024;

function fail(reason: string): never {
  throw errors.invalidFilter(reason);
}

function matchAt(re: RegExp, text: string, pos: number): string | undefined {
  re.lastIndex = pos;
  const m = re.exec(text);
  return m ? m[0] : undefined;
}

/** Parse an RFC 3339 timestamp into epoch ms (with sub-ms fraction); undefined if invalid. */
function parseRfc3339(s: string): number | undefined {
  RFC3339.lastIndex = 0;
  const m = RFC3339.exec(s);
  if (!m || m[0].length !== s.length) return undefined;
  const [y, mo, d, h, mi, se] = m.slice(1, 7).map(Number);
  if (mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || se > 59) return undefined;
  const date = new Date(0);
  date.setUTCFullYear(y, mo - 1, d);
  if (date.getUTCDate() !== d || date.getUTCMonth() !== mo - 1) return undefined;
  date.setUTCHours(h, mi, se, 0);
  let ms = date.getTime();
  if (m[7]) ms += Number('0' + m[7]) * 1000;
  const zone = m[8];
  if (zone !== 'Z' && zone !== 'z') {
    const oh = Number(zone.slice(1, 3));
    const om = Number(zone.slice(4, 6));
    if (oh > 23 || om > 59) return undefined;
    ms -= (zone[0] === '-' ? -1 : 1) * (oh * 60 + om) * 60_000;
  }
  return ms;
}

function lex(text: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  const n = text.length;
  while (true) {
    const start = i;
    while (i < n && isWs(text[i])) i++;
    const ws = i > start;
    if (i >= n) {
      out.push({ type: 'eof', text: '', pos: i, ws });
      return out;
    }
    const pos = i;
    const c = text[i];
    const push = (type: TokType, len: number, extra?: Partial<Token>) => {
      out.push({ type, text: text.slice(pos, pos + len), pos, ws, ...extra });
      i = pos + len;
    };

    if (c === '(' || c === ')' || c === '[' || c === ']' || c === ',') {
      push(c, 1);
      continue;
    }
    if (c === '=' || c === '<' || c === '>' || c === '!') {
      const two = text.slice(i, i + 2);
      if (two === '<=' || two === '>=' || two === '!=') push('op', 2, { kw: two });
      else if (c === '!') fail(`unexpected character "!" ${at(pos)}`);
      else push('op', 1, { kw: c });
      continue;
    }
    if (c === '"') {
      let j = i + 1;
      let value = '';
      for (;;) {
        if (j >= n) fail(`unclosed string starting ${at(pos)}`);
        const ch = text[j];
        if (ch === '"') break;
        if (ch === '\\') {
          const e = text[j + 1];
          if (e === undefined) fail(`unclosed string starting ${at(pos)}`);
          const rep = ESCAPES[e];
          if (rep === undefined) fail(`invalid escape "\\${e}" in string ${at(j)}`);
          value += rep;
          j += 2;
          continue;
        }
        if (ch.charCodeAt(0) < 0x20) fail(`invalid control character in string ${at(j)}`);
        value += ch;
        j++;
      }
      push('string', j + 1 - pos, { lit: { kind: 'string', value } });
      continue;
    }
    if (c === '-' || (c >= '0' && c <= '9')) {
      const t = matchAt(NUMBER, text, i);
      if (!t) fail(`unexpected character "${c}" ${at(pos)}`);
      const int = !/[.eE]/.test(t) && Number.isSafeInteger(Number(t));
      push('number', t.length, { lit: { kind: 'number', value: Number(t), int, text: t } });
      continue;
    }
    if (c === "'") {
      const t = matchAt(QUOTED_IDENT, text, i);
      if (!t) fail(`unexpected character "'" ${at(pos)}`);
      push('ident', t.length);
      continue;
    }
    if (text.startsWith('datetime(', i)) {
      let j = i + 'datetime('.length;
      while (j < n && isWs(text[j])) j++;
      const ts = matchAt(RFC3339, text, j);
      if (!ts) fail(`invalid datetime literal ${at(pos)}: expected an RFC 3339 timestamp such as datetime(2021-01-01T00:00:00Z)`);
      const ms = parseRfc3339(ts);
      if (ms === undefined || !Number.isFinite(ms)) fail(`invalid datetime "${ts}" ${at(j)}`);
      j += ts.length;
      while (j < n && isWs(text[j])) j++;
      if (text[j] !== ')') fail(`invalid datetime literal ${at(pos)}: missing ")"`);
      push('datetime', j + 1 - pos, { lit: { kind: 'datetime', ms, text: ts } });
      continue;
    }
    const word = matchAt(IDENT, text, i);
    if (word) {
      const lower = word.toLowerCase();
      if (!KEYWORDS.has(lower)) {
        push('ident', word.length);
        continue;
      }
      if (lower === 'not') {
        // Compound tokens: `not in` (exactly one whitespace char), `not between|contains|icontains` (one or more).
        let j = i + 3;
        while (j < n && isWs(text[j])) j++;
        const gap = j - (i + 3);
        const next = gap > 0 ? matchAt(IDENT, text, j)?.toLowerCase() : undefined;
        if (next === 'in' && gap === 1) {
          push('not in', j + 2 - pos);
          continue;
        }
        if (next === 'between' || next === 'contains' || next === 'icontains') {
          push(`not ${next}` as TokType, j + next.length - pos);
          continue;
        }
      }
      push('kw', word.length, { kw: lower });
      continue;
    }
    fail(`unexpected character "${c}" ${at(pos)}`);
  }
}

// ---- parser ------------------------------------------------------------------------------------

const describe = (t: Token) => (t.type === 'eof' ? 'end of filter' : `token ${JSON.stringify(t.text)}`);

class Parser {
  private i = 0;
  constructor(private readonly toks: Token[]) {}

  peek(k = 0): Token {
    return this.toks[Math.min(this.i + k, this.toks.length - 1)];
  }

  next(): Token {
    const t = this.peek();
    if (t.type !== 'eof') this.i++;
    return t;
  }

  unexpected(t: Token = this.peek(), expected?: string): never {
    fail(`unexpected ${describe(t)} ${at(t.pos)}${expected ? `, expected ${expected}` : ''}`);
  }

  isKw(t: Token, kw: string) {
    return t.type === 'kw' && t.kw === kw;
  }

  expect(type: TokType, expected: string, opts: { ws?: 'required' | 'forbidden' } = {}): Token {
    const t = this.peek();
    if (t.type !== type) this.unexpected(t, expected);
    this.checkWs(t, opts.ws, expected);
    return this.next();
  }

  expectKw(kw: string, opts: { ws?: 'required' | 'forbidden' } = {}): Token {
    const t = this.peek();
    if (!this.isKw(t, kw)) this.unexpected(t, `"${kw}"`);
    this.checkWs(t, opts.ws, `"${kw}"`);
    return this.next();
  }

  checkWs(t: Token, ws: 'required' | 'forbidden' | undefined, what: string) {
    if (ws === 'required' && !t.ws) fail(`whitespace required before ${what} ${at(t.pos)}`);
    if (ws === 'forbidden' && t.ws) fail(`unexpected whitespace before ${what} ${at(t.pos)}`);
  }

  /** Whitespace must follow the token just consumed. */
  requireWsAfter(prev: Token) {
    const t = this.peek();
    if (!t.ws) {
      if (t.type === 'eof') this.unexpected(t);
      fail(`whitespace required after ${JSON.stringify(prev.text)} ${at(t.pos)}`);
    }
  }

  // query = boolExpr [WS+ sortBy] [WS+ skip] [WS+ limit] | sortBy ... | skip ... | limit
  query(): FilterQuery {
    const q: FilterQuery = {};
    let first = true;
    const clauseStart = (kw: string) => {
      const t = this.peek();
      if (!this.isKw(t, kw)) return false;
      if (!first && !t.ws) fail(`whitespace required before "${t.text}" ${at(t.pos)}`);
      return true;
    };
    const t0 = this.peek();
    if (!(this.isKw(t0, 'sort') || this.isKw(t0, 'skip') || this.isKw(t0, 'limit'))) {
      q.where = this.or();
      first = false;
    }
    if (clauseStart('sort')) {
      const sortTok = this.next();
      this.requireWsAfter(sortTok);
      const byTok = this.expectKw('by');
      this.requireWsAfter(byTok);
      q.sort = [this.sortField()];
      while (this.peek().type === ',') {
        this.next();
        q.sort.push(this.sortField());
      }
      first = false;
    }
    if (clauseStart('skip')) {
      const tok = this.next();
      this.requireWsAfter(tok);
      q.skip = this.integer('skip');
      first = false;
    }
    if (clauseStart('limit')) {
      const tok = this.next();
      this.requireWsAfter(tok);
      if (this.isKw(this.peek(), 'none')) {
        this.next();
        q.limit = -1;
      } else q.limit = this.integer('limit');
      first = false;
    }
    if (first) this.unexpected();
    return q;
  }

  integer(what: string): number {
    const t = this.peek();
    if (t.type !== 'number') this.unexpected(t, `a number after "${what}"`);
    this.next();
    const lit = t.lit as Extract<Literal, { kind: 'number' }>;
    if (!lit.int) fail(`expected integer value for ${what}, got ${t.text} ${at(t.pos)}`);
    return lit.value;
  }

  sortField(): { field: string; desc: boolean } {
    const id = this.expect('ident', 'a sort field');
    const t = this.peek();
    let desc = false;
    if ((this.isKw(t, 'asc') || this.isKw(t, 'desc')) && t.ws) {
      this.next();
      desc = t.kw === 'desc';
    }
    return { field: id.text, desc };
  }

  or(): Expr {
    const first = this.and();
    const items = [first];
    while (this.isKw(this.peek(), 'or')) {
      const op = this.next();
      if (!op.ws) fail(`whitespace required before "or" ${at(op.pos)}`);
      this.requireWsAfter(op);
      items.push(this.and());
    }
    return items.length === 1 ? first : { type: 'or', items };
  }

  and(): Expr {
    const first = this.primary();
    const items = [first];
    while (this.isKw(this.peek(), 'and')) {
      const op = this.next();
      if (!op.ws) fail(`whitespace required before "and" ${at(op.pos)}`);
      this.requireWsAfter(op);
      items.push(this.primary());
    }
    return items.length === 1 ? first : { type: 'and', items };
  }

  /** Nesting of parentheses, `not` and sub-queries; bounded so a hostile filter cannot exhaust the stack. */
  private depth = 0;

  primary(): Expr {
    if (++this.depth > MAX_DEPTH) fail(`filter nested more than ${MAX_DEPTH} levels deep`);
    try {
      return this.primaryInner();
    } finally {
      this.depth--;
    }
  }

  private primaryInner(): Expr {
    const t = this.peek();
    switch (t.type) {
      case '(': {
        this.next();
        const e = this.or();
        this.expect(')', '")"');
        return e;
      }
      case 'ident': {
        this.next();
        const lhs: Operand = { kind: 'field', name: t.text, pos: t.pos };
        if (this.atOperator()) return this.operation(lhs);
        return { type: 'field', name: t.text, pos: t.pos };
      }
      case 'kw':
        switch (t.kw) {
          case 'not': {
            this.next();
            this.requireWsAfter(t);
            // Lowest precedence (ANTLR prefix alternative listed last): `not a and b` = `not (a and b)`.
            return { type: 'not', expr: this.or() };
          }
          case 'true':
          case 'false':
            this.next();
            return { type: 'const', value: t.kw === 'true' };
          case 'isempty': {
            this.next();
            const set = this.setArg(t);
            return { type: 'isEmpty', set, pos: t.pos };
          }
          case 'anyof':
          case 'allof': {
            this.next();
            this.expect('(', '"("', { ws: 'forbidden' });
            const id = this.expect('ident', 'a set field');
            this.expect(')', '")"');
            const kind = t.kw === 'anyof' ? 'anyOf' : 'allOf';
            return this.operation({ kind, name: id.text, pos: id.pos });
          }
          case 'count': {
            this.next();
            const set = this.setArg(t);
            return this.operation({ kind: 'count', set, pos: t.pos });
          }
        }
        break;
    }
    this.unexpected(t);
  }

  /** `(` setExpr `)` right after a set function keyword. */
  setArg(fn: Token): SetSource {
    this.expect('(', `"(" after "${fn.text}"`, { ws: 'forbidden' });
    const t = this.peek();
    let set: SetSource;
    if (this.isKw(t, 'from')) {
      this.next();
      this.requireWsAfter(t);
      const id = this.expect('ident', 'a set field');
      const where = this.expectKw('where', { ws: 'required' });
      this.requireWsAfter(where);
      set = { kind: 'from', name: id.text, query: this.query(), pos: id.pos };
    } else {
      const id = this.expect('ident', 'a set field');
      set = { kind: 'symbol', name: id.text, pos: id.pos };
    }
    this.expect(')', '")"');
    return set;
  }

  atOperator(): boolean {
    const t = this.peek();
    switch (t.type) {
      case 'op':
      case 'not in':
      case 'not between':
      case 'not contains':
      case 'not icontains':
        return true;
      case 'kw':
        return t.kw === 'in' || t.kw === 'between' || t.kw === 'contains' || t.kw === 'icontains';
      default:
        return false;
    }
  }

  literal(allowed: Literal['kind'][], what: string): Literal {
    const t = this.peek();
    let lit: Literal | undefined;
    if (t.lit) lit = t.lit;
    else if (this.isKw(t, 'true') || this.isKw(t, 'false')) lit = { kind: 'bool', value: t.kw === 'true' };
    else if (this.isKw(t, 'null')) lit = { kind: 'null' };
    if (!lit || !allowed.includes(lit.kind)) this.unexpected(t, what);
    this.next();
    return lit;
  }

  operation(lhs: Operand): Expr {
    const opTok = this.next();
    const type = opTok.type;
    if (type === 'op') {
      const op = opTok.kw as CmpOp;
      const value =
        op === '=' || op === '!='
          ? this.literal(['string', 'number', 'datetime', 'bool', 'null'], 'a string, number, datetime, boolean or null')
          : this.literal(['string', 'number', 'datetime'], 'a string, number or datetime');
      return { type: 'cmp', lhs, op, value };
    }
    if ((type === 'kw' && opTok.kw === 'in') || type === 'not in') {
      if (!opTok.ws) fail(`whitespace required before "${opTok.text}" ${at(opTok.pos)}`);
      this.requireWsAfter(opTok);
      return { type: 'in', lhs, negated: type === 'not in', values: this.array() };
    }
    if ((type === 'kw' && opTok.kw === 'between') || type === 'not between') {
      if (!opTok.ws) fail(`whitespace required before "${opTok.text}" ${at(opTok.pos)}`);
      this.requireWsAfter(opTok);
      const lower = this.literal(['number', 'datetime'], 'a number or datetime');
      const and = this.expectKw('and', { ws: 'required' });
      this.requireWsAfter(and);
      const upper = this.literal([lower.kind], lower.kind === 'number' ? 'a number' : 'a datetime');
      return { type: 'between', lhs, negated: type === 'not between', lower, upper };
    }
    const contains = (type === 'kw' && opTok.kw === 'contains') || type === 'not contains';
    const icontains = (type === 'kw' && opTok.kw === 'icontains') || type === 'not icontains';
    if (contains || icontains) {
      this.requireWsAfter(opTok);
      const value = contains ? this.literal(['string', 'number'], 'a string or number') : this.literal(['string'], 'a string');
      const op: CmpOp = type === 'kw' ? (opTok.kw as CmpOp) : (type as CmpOp);
      return { type: 'cmp', lhs, op, value };
    }
    this.unexpected(opTok, 'an operator');
  }

  /** Non-empty homogeneous array of strings, numbers or datetimes. */
  array(): Literal[] {
    this.expect('[', '"["');
    const first = this.literal(['string', 'number', 'datetime'], 'a string, number or datetime');
    const values = [first];
    while (this.peek().type === ',') {
      this.next();
      values.push(this.literal([first.kind], `a ${first.kind} (array values must all have the same type)`));
    }
    this.expect(']', '"," or "]"');
    return values;
  }
}

/** Parse a filter string. Empty or whitespace-only → `{}` (match all). */
export function parseFilter(text: string): FilterQuery {
  if (typeof text !== 'string' || !/[^ \n\t\r]/.test(text)) return {};
  if (text.length > MAX_FILTER_LENGTH) fail(`filter longer than ${MAX_FILTER_LENGTH} characters`);
  const toks = lex(text);
  const p = new Parser(toks);
  const q = p.query();
  const t = p.peek();
  if (t.type !== 'eof') p.unexpected(t);
  return q;
}
