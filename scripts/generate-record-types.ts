/**
 * Writes src/store/records.ts: one record type per store collection, so a store call naming a
 * collection that does not exist, or a field its record does not have, fails to compile.
 *
 *   npm run build && node dist/scripts/generate-record-types.js
 *
 * A family's fields come from its declaration (src/resources: `collection` and `fields`); a
 * field's type from, in order: src/store/stored-fields.ts (stored-only fields, collections without
 * a family, and types the other sources cannot give), the field's own flags (datetime, role lists,
 * references), the management spec's create and detail definitions of the family, its filter
 * type. Run it after changing a family's fields or stored-fields.ts; test/operations.test.ts fails
 * while the file on disk differs from what this script would write.
 */
import { repoPath, writeWhenRun } from './lib/generated-file.js';
import { RESOURCES, createRegistry } from '../src/resources/index.js';
import type { FieldDef, ResourceDef } from '../src/resources/types.js';
import { upstreamDocument } from '../src/api/spec/index.js';
import { STORED_FIELDS } from '../src/store/stored-fields.js';

type Schema = { $ref?: string; type?: string; items?: Schema; properties?: Record<string, Schema>; required?: string[]; allOf?: Schema[]; enum?: unknown[] };

const doc = upstreamDocument('management') as { definitions: Record<string, Schema>; paths: Record<string, Record<string, { operationId?: string; parameters?: { in: string; schema?: Schema }[]; responses?: Record<string, { schema?: Schema }> }>> };

const deref = (s: Schema | undefined): Schema | undefined => (s?.$ref ? deref(doc.definitions[s.$ref.replace('#/definitions/', '')]) : s);

/** Properties and required names of a definition, its `allOf` parts merged. */
function flatten(s: Schema | undefined): { props: Record<string, Schema>; required: Set<string> } {
  const out = { props: {} as Record<string, Schema>, required: new Set<string>() };
  const r = deref(s);
  if (!r) return out;
  for (const part of r.allOf ?? []) {
    const p = flatten(part);
    Object.assign(out.props, p.props);
    for (const n of p.required) out.required.add(n);
  }
  Object.assign(out.props, r.properties ?? {});
  for (const n of r.required ?? []) out.required.add(n);
  return out;
}

function operation(operationId: string | undefined) {
  for (const item of Object.values(doc.paths)) for (const op of Object.values(item)) if (op.operationId === operationId) return op;
  return undefined;
}

/** The family's create body and detail (envelope `data`) definitions. */
function definitions(def: ResourceDef) {
  const create = flatten(operation(def.operations.create)?.parameters?.find((p) => p.in === 'body')?.schema);
  const envelope = deref(operation(def.operations.detail)?.responses?.['200']?.schema);
  const detail = flatten(envelope?.properties?.data);
  return { create, detail };
}

/** TypeScript for a spec schema: scalars and arrays of them; objects stay open records. */
function fromSchema(s: Schema | undefined): string | undefined {
  const r = deref(s);
  if (!r) return undefined;
  switch (r.type) {
    case 'string':
      return 'string';
    case 'integer':
    case 'number':
      return 'number';
    case 'boolean':
      return 'boolean';
    case 'array': {
      const item = fromSchema(r.items);
      return item ? `${item.includes(' ') ? `(${item})` : item}[]` : 'unknown[]';
    }
    case 'object':
      return 'Record<string, unknown>';
  }
  return r.properties || r.allOf ? 'Record<string, unknown>' : undefined;
}

const FILTER_TYPES: Record<string, string> = { string: 'string', number: 'number', bool: 'boolean', datetime: 'number', set: 'string[]', map: 'Record<string, unknown>' };

function fieldType(name: string, f: FieldDef, defs: ReturnType<typeof definitions>): string {
  const wire = f.bodyName ?? name;
  const isArray = Array.isArray(f.default?.()) || f.filter === 'set';
  if (f.datetime) return 'number';
  if (f.roles || f.attributes) return 'string[]';
  if (f.ref) return isArray ? 'string[]' : 'string';
  return fromSchema(defs.create.props[wire]) ?? fromSchema(defs.detail.props[wire]) ?? (f.filter && FILTER_TYPES[f.filter]) ?? (isArray ? 'unknown[]' : 'unknown');
}

/** Written on create (a default) or required by the create body: present in every record. */
function always(name: string, f: FieldDef, defs: ReturnType<typeof definitions>): boolean {
  if (f.default) return true;
  return !f.readOnly && !f.optional && defs.create.required.has(f.bodyName ?? name);
}

const typeName = (collection: string) => collection[0].toUpperCase() + collection.slice(1).replace(/ies$/, 'y').replace(/s$/, '') + 'Record';

function member(key: string, type: string): string {
  return `  ${key}: ${type};`;
}

/** One collection's record type: its family's fields, then the stored-only ones (which win). */
function recordType(collection: string, def: ResourceDef | undefined): string {
  const lines = new Map<string, string>();
  if (def) {
    const defs = definitions(def);
    lines.set('tags', member('tags?', 'Record<string, unknown>'));
    lines.set('isSystem', member('isSystem?', 'boolean'));
    for (const [name, f] of Object.entries(def.fields)) lines.set(name, member(always(name, f, defs) ? name : `${name}?`, fieldType(name, f, defs)));
  }
  for (const [key, spec] of Object.entries(STORED_FIELDS[collection] ?? {})) {
    const [type, doc] = typeof spec === 'string' ? [spec] : spec;
    lines.set(key.replace(/\?$/, ''), (doc ? `  /** ${doc} */\n` : '') + member(key, type));
  }
  return `export type ${typeName(collection)} = BaseRecord & {\n${[...lines.values()].join('\n')}\n};\n`;
}

/** The file's text. */
export function recordTypesSource(): string {
  const byCollection = new Map<string, ResourceDef>(RESOURCES.map((d) => [d.collection, d]));
  const collections: string[] = createRegistry().collectionSpecs().map((s) => s.name);
  for (const c of Object.keys(STORED_FIELDS)) if (!collections.includes(c)) throw new Error(`stored-fields.ts names ${c}, which no collection spec declares`);
  return [
    '// Generated by scripts/generate-record-types.ts from src/resources, the management spec and src/store/stored-fields.ts: do not edit.\n',
    '/** What every stored record has. */',
    'export type BaseRecord = { id: string; createdAt: number; updatedAt: number };\n',
    ...collections.map((c) => recordType(c, byCollection.get(c))),
    '/** Collection name → its record type. */',
    `export type Records = {\n${collections.map((c) => `  ${c}: ${typeName(c)};`).join('\n')}\n};\n`,
    'export type CollectionName = keyof Records;\n',
  ].join('\n');
}

/** Where the file lives. */
export const recordTypesPath = (): string => repoPath(import.meta.url, 'src', 'store', 'records.ts');

writeWhenRun(import.meta.url, recordTypesPath(), recordTypesSource);
