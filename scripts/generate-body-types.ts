/**
 * Writes src/core/bodies.ts: the request body of every operation of the embedded specs as a
 * TypeScript type, so a handler reading a body field the spec does not have fails to compile.
 *
 *   npm run build && node dist/scripts/generate-body-types.js
 *
 * The types say what the router's validation (src/api/validate.ts) lets through: an optional
 * property may be null ("unset"), a required one only when the spec marks it `x-nullable`; objects
 * without properties and `tags` are open records; a polymorphic body (`discriminator`) is the
 * union of its subtypes; an operation that consumes a non-JSON media type (legacy `POST /enroll`)
 * may receive the text itself. Run it after scripts/import-upstream-spec.ts;
 * test/unit/core/bodies.test.ts fails while the file on disk differs from what this script would write.
 */
import { repoPath, writeWhenRun } from './lib/generated-file.js';
import { upstreamDocument, upstreamOperations, type ApiName } from '../src/api/spec/index.js';

type Schema = {
  $ref?: string;
  type?: string;
  enum?: unknown[];
  items?: Schema;
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: Schema | boolean;
  allOf?: Schema[];
  discriminator?: string;
  'x-nullable'?: boolean;
};

type Doc = {
  definitions: Record<string, Schema>;
  paths: Record<string, Record<string, { consumes?: string[] }>>;
};

const DEF_PREFIX = '#/definitions/';
const APIS: readonly ApiName[] = ['client', 'management', 'fabric'];

const pascal = (s: string) => s[0].toUpperCase() + s.slice(1);
const refName = (s: Schema | undefined) => (s?.$ref?.startsWith(DEF_PREFIX) ? s.$ref.slice(DEF_PREFIX.length) : undefined);
const key = (name: string) => (/^[A-Za-z_$][\w$]*$/.test(name) ? name : `'${name}'`);
const paren = (t: string) => (/[|&]/.test(t) ? `(${t})` : t);

/** One API's definitions as TypeScript, emitted on demand (only those a body reaches). */
class Emitter {
  private readonly doc: Doc;
  private readonly prefix: string;
  private readonly emitted = new Map<string, string>();
  /** Discriminated definition → the definitions that extend it (its subtypes). */
  private readonly subtypes = new Map<string, string[]>();

  constructor(api: ApiName) {
    this.doc = upstreamDocument(api) as Doc;
    this.prefix = pascal(api);
    const defs = this.doc.definitions;
    for (const [name, def] of Object.entries(defs)) {
      if (typeof def.discriminator !== 'string') continue;
      this.subtypes.set(name, Object.keys(defs).filter((sub) => defs[sub].allOf?.some((p) => refName(p) === name)));
    }
  }

  /** The type's name, emitting its definition the first time. */
  ref(name: string): string {
    const typeName = this.prefix + pascal(name);
    if (this.emitted.has(name)) return typeName;
    this.emitted.set(name, '');
    const def = this.doc.definitions[name];
    const subs = this.subtypes.get(name);
    let body: string;
    if (name === 'subTags') body = 'Record<string, string | boolean | number | null>';
    else if (subs) {
      // The base with its discriminator a plain string (subtype names are accepted as aliases), and
      // the union of the subtypes, each of which extends the base.
      this.emitted.set(`${name}Base`, `export type ${typeName}Base = ${this.type({ ...def, discriminator: undefined, properties: { ...def.properties, [def.discriminator!]: { type: 'string' } } })};\n`);
      body = subs.length ? subs.map((s) => this.ref(s)).join(' | ') : `${typeName}Base`;
    } else body = this.type(def);
    this.emitted.set(name, `export type ${typeName} = ${body};\n`);
    return typeName;
  }

  private nullable(s: Schema | undefined): boolean {
    for (let i = 0; s && i < 32; i++) {
      if (s['x-nullable'] === true) return true;
      const r = refName(s);
      if (r) s = this.doc.definitions[r];
      else if (s.allOf?.length === 1 && !s.properties && !s.type) s = s.allOf[0];
      else break;
    }
    return false;
  }

  /** TypeScript for a schema. */
  type(s: Schema | undefined): string {
    if (!s) return 'unknown';
    const r = refName(s);
    if (r) return this.ref(r);
    const parts: string[] = [];
    if (s.allOf) {
      for (const p of s.allOf) {
        const pr = refName(p);
        // A subtype's reference to its discriminated base is the base, not the union.
        parts.push(pr && this.subtypes.has(pr) ? (this.ref(pr), `${this.prefix}${pascal(pr)}Base`) : paren(this.type(p)));
      }
    }
    const own = this.own(s);
    if (own) parts.push(own);
    return parts.length ? parts.join(' & ') : 'unknown';
  }

  /** The schema's own type, without its allOf parts. */
  private own(s: Schema): string | undefined {
    if (s.enum && s.enum.every((v) => typeof v === 'string')) return s.enum.map((v) => `'${v}'`).join(' | ');
    switch (s.type) {
      case 'string':
        return 'string';
      case 'integer':
      case 'number':
        return 'number';
      case 'boolean':
        return 'boolean';
      case 'array': {
        const item = this.type(s.items);
        return `${paren(this.nullable(s.items) ? `${item} | null` : item)}[]`;
      }
    }
    if (s.properties) {
      const required = new Set(s.required ?? []);
      const members = Object.entries(s.properties).map(([name, p]) => {
        const t = this.type(p);
        if (!required.has(name)) return `${key(name)}?: ${t} | null`;
        return `${key(name)}: ${this.nullable(p) ? `${t} | null` : t}`;
      });
      return `{ ${members.join('; ')} }`;
    }
    // `type: object` beside allOf parts adds nothing to them.
    if ((s.type === 'object' && !s.allOf) || s.additionalProperties !== undefined) {
      const ap = s.additionalProperties;
      if (ap && typeof ap === 'object' && (ap.properties || ap.$ref || ap.allOf || (ap.type && ap.type !== 'object')))
        return `Record<string, ${this.nullable(ap) ? `${this.type(ap)} | null` : this.type(ap)}>`;
      return 'Record<string, unknown>';
    }
    return undefined;
  }

  source(): string {
    return [...this.emitted.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([, text]) => text).join('');
  }
}

/** The body an operation's handler receives, as the router parses and validates it (src/api/router.ts `parseBody`). */
function bodyType(e: Emitter, doc: Doc, op: ReturnType<typeof upstreamOperations>[number]): string | undefined {
  let t: string;
  if (op.bodyDefinition) t = op.bodyIsArray ? `${e.ref(op.bodyDefinition)}[]` : e.ref(op.bodyDefinition);
  else if (op.bodySchema) t = e.type(op.bodySchema as Schema);
  else return undefined;
  const consumes = doc.paths[op.path][op.method.toLowerCase()].consumes ?? [];
  if (consumes.some((m) => m !== 'application/json' && !m.endsWith('+json')) && t !== 'string') t = `${t} | string`;
  return op.bodyRequired ? t : `${t} | undefined`;
}

/** The file's text. */
export function bodyTypesSource(): string {
  const out = ['// Generated by scripts/generate-body-types.ts from client.json, management.json and fabric.json: do not edit.\n'];
  const maps: string[] = [];
  for (const api of APIS) {
    const e = new Emitter(api);
    const doc = upstreamDocument(api) as Doc;
    const members = new Map<string, string>();
    for (const op of upstreamOperations(api)) {
      const t = bodyType(e, doc, op);
      if (t) members.set(op.operationId, t);
    }
    out.push(e.source());
    maps.push(
      `/** operationId → the body a ${api} API handler receives (operations without a body are absent). */\n` +
        `export interface ${pascal(api)}Bodies {\n${[...members].sort(([a], [b]) => a.localeCompare(b)).map(([id, t]) => `  ${id}: ${t};`).join('\n')}\n}\n`,
    );
  }
  return [...out, ...maps].join('\n');
}

/** Where the file lives. */
export const bodyTypesPath = (): string => repoPath(import.meta.url, 'src', 'core', 'bodies.ts');

writeWhenRun(import.meta.url, bodyTypesPath(), bodyTypesSource);
