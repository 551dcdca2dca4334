/**
 * Duplicate member names in a JSON body. JSON.parse keeps the last of `{"isAdmin":true,
 * "isAdmin":false}` without a word, so a body whose reader and writer disagree on which one counts
 * could pass a check on one and act on the other; such a body is refused instead.
 *
 * The check costs a byte scan on the hot path: the member names of the text are counted (strings
 * followed by `:`), and those of the parsed value; only when the two differ is the text walked
 * again to name the duplicate. bench/json-keys.ts measures it against JSON.parse alone.
 *
 * Example: `duplicateKey(Buffer.from('{"a":{"b":1,"b":2}}'), {a:{b:2}})` → `'a.b'`.
 */

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;

const isSpace = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

/** Member names in a JSON text that JSON.parse accepted (strings outside strings are aligned). */
export function countNames(text: Uint8Array): number {
  let n = 0;
  const len = text.length;
  let i = 0;
  while (i < len) {
    if (text[i++] !== QUOTE) continue;
    // Inside a string: to its closing quote.
    while (i < len) {
      const c = text[i];
      if (c === BACKSLASH) i += 2;
      else if (c === QUOTE) break;
      else i++;
    }
    i++;
    while (i < len && isSpace(text[i])) i++;
    if (text[i] === COLON) n++;
  }
  return n;
}

/** Own keys of every object in a parsed JSON value (depth is bounded by the router before). */
export function countParsedNames(v: unknown): number {
  if (v === null || typeof v !== 'object') return 0;
  let n = 0;
  if (Array.isArray(v)) {
    for (const x of v) n += countParsedNames(x);
    return n;
  }
  for (const k in v) n += 1 + countParsedNames((v as Record<string, unknown>)[k]);
  return n;
}

/** The dotted path (validator style: `tags.k`, `0.name`) of the first duplicated member name, if any. */
export function duplicateKey(text: Uint8Array, parsed: unknown): string | undefined {
  if (countNames(text) === countParsedNames(parsed)) return undefined;
  return findDuplicate(Buffer.from(text.buffer, text.byteOffset, text.byteLength).toString('utf8'));
}

interface Frame {
  names?: Set<string>;
  /** The member being read (objects) or the index (arrays). */
  at: string | number;
}

/** The slow path: tokenizes the text, keeping the names of each open object. */
function findDuplicate(s: string): string | undefined {
  const stack: Frame[] = [];
  const path = () => stack.map((f) => String(f.at)).join('.');
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === '{') stack.push({ names: new Set(), at: '' });
    else if (c === '[') stack.push({ at: 0 });
    else if (c === '}' || c === ']') stack.pop();
    else if (c === ',') {
      const top = stack[stack.length - 1];
      if (top && !top.names) top.at = (top.at as number) + 1;
    } else if (c === '"') {
      const start = i;
      for (i++; i < s.length && s[i] !== '"'; i++) if (s[i] === '\\') i++;
      let j = i + 1;
      while (j < s.length && isSpace(s.charCodeAt(j))) j++;
      const top = stack[stack.length - 1];
      if (s[j] !== ':' || !top?.names) continue;
      const name = JSON.parse(s.slice(start, i + 1)) as string;
      if (top.names.has(name)) {
        top.at = name;
        return path();
      }
      top.names.add(name);
      top.at = name;
      i = j;
    }
  }
  return undefined;
}
