/**
 * The upstream edge API v0.28.0 Swagger 2.0 documents (YAML), and the fabric API document of the
 * same controller release (`fabric.yml`, info.version 0.16.54), turned into the ones this
 * controller serves (`src/api/spec/{client,management,fabric}.json`): the brand-rename table and
 * the specs' own defects, fixed the same way every time. Used by scripts/import-upstream-spec.ts, which writes the
 * JSON files, and by test/spec.test.ts, which checks (where the upstream files are given) that the
 * committed JSON is exactly this transformation of them.
 *
 *   const { doc, notes } = importUpstreamSpec('client', fs.readFileSync('client.yml', 'utf8'));
 *
 * What the import changes (everything else is kept in meaning, in document order):
 * - Brand words carried as wire values: `ziti-token-issuer-id`, `ziti-instance-id`,
 *   `ziti-authenticator-extend-requested`, `ziti-tunneler-client.v1`, `ziti-tunneler-server.v1` become
 *   `mesh-…` wherever they appear (names, enums, examples, descriptions); the `mfaProviders` enum value
 *   `ziti` becomes `mesh`; audiences `openziti`/`openziti-enroller` (as whole values) become
 *   `mesh`/`mesh-enroller`. The session header `zt-session` is kept.
 * - Descriptive prose: `info` title/description lose the brand, `info.contact` (upstream's support
 *   channels) and the example `host` (`demo.ziti.dev`) are dropped, "Ziti SDK"/"Ziti Edge API" in
 *   descriptions are neutralised. Base64 inside example certificates is left alone.
 * - Spec defects: YAML `!!float` tags (numbers such as `maxLength: !!float 255`) are written as JSON
 *   integers where integral; `controllerSettingsList.items` (null upstream) becomes
 *   `$ref: controllerSettingDetail`; `DELETE /current-api-session` (no operationId upstream) gets
 *   `deleteCurrentAPISession`; `required` entries naming properties the schema does not declare
 *   (`postureResponseProcessCreate` requires a non-existent `process`) are removed.
 * - fabric.yml only: its `subTags.additionalProperties` is a flow mapping whose closing brace is
 *   indented less than YAML allows (go's YAML reader takes it, js-yaml refuses the file); it is
 *   read as the one-line `{ type: object }` it means. Its title/description become `Fabric`/`Fabric API`.
 * It throws if any `$ref` does not resolve or an operationId is missing or duplicated.
 */
import { load } from 'js-yaml';

export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Obj = { [k: string]: Json };

export const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch'];

/** Substring renames applied to every string value and object key of the document. */
const SUBSTRING_RENAMES: [string, string][] = [
  ['ziti-token-issuer-id', 'mesh-token-issuer-id'],
  ['ziti-instance-id', 'mesh-instance-id'],
  ['ziti-authenticator-extend-requested', 'mesh-authenticator-extend-requested'],
  ['ziti-authenticator-roll-key-requested', 'mesh-authenticator-roll-key-requested'],
  ['ziti-tunneler-client.v1', 'mesh-tunneler-client.v1'],
  ['ziti-tunneler-server.v1', 'mesh-tunneler-server.v1'],
  // descriptive prose
  ['OpenZiti Edge', 'Edge'],
  ['Ziti Edge', 'Edge'],
  ['OpenZiti Fabric', 'Fabric'],
  ['Ziti Fabric', 'Fabric'],
  ['(i.e. Ziti SDK', '(i.e. an SDK'],
  ['Ziti SDK', 'SDK'],
];

/** Whole-value renames (a string value equal to the key is replaced). */
const VALUE_RENAMES: Record<string, string> = {
  openziti: 'mesh',
  'openziti-enroller': 'mesh-enroller',
};

interface Report {
  notes: string[];
}

function renameString(s: string): string {
  let out = s;
  for (const [from, to] of SUBSTRING_RENAMES) if (out.includes(from)) out = out.split(from).join(to);
  if (Object.prototype.hasOwnProperty.call(VALUE_RENAMES, out)) out = VALUE_RENAMES[out]!;
  return out;
}

/** Deep copy applying renames and number normalisation (YAML `!!float` integers → integers). */
function transform(v: unknown): Json {
  if (v === null || v === undefined) return null;
  if (typeof v === 'string') return renameString(v);
  if (typeof v === 'number') return Number.isInteger(v) ? Math.trunc(v) : v;
  if (typeof v === 'boolean') return v;
  if (v instanceof Date) return v.toISOString();
  if (Array.isArray(v)) return v.map(transform);
  if (typeof v === 'object') {
    const out: Obj = {};
    for (const [k, val] of Object.entries(v as Record<string, unknown>)) out[renameString(k)] = transform(val);
    return out;
  }
  throw new Error('unexpected YAML value ' + String(v));
}

function isObj(v: Json | undefined): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function fixDocument(api: string, doc: Obj, report: Report): void {
  const info = doc.info as Obj;
  delete info.contact;
  if (api === 'client') {
    info.title = 'Edge Client';
    info.description = 'Edge Client API';
  } else if (api === 'fabric') {
    info.title = 'Fabric';
    info.description = 'Fabric API';
  } else {
    info.title = 'Edge Management';
    info.description = 'Edge Management API';
  }
  if (doc.host !== undefined) {
    report.notes.push(`${api}: dropped example host ${JSON.stringify(doc.host)}`);
    delete doc.host;
  }

  const defs = doc.definitions as Obj;

  // mfaProviders enum: ziti -> mesh
  const mfaProviders = defs.mfaProviders;
  if (isObj(mfaProviders) && Array.isArray(mfaProviders.enum)) {
    mfaProviders.enum = mfaProviders.enum.map((e) => (e === 'ziti' ? 'mesh' : e));
    report.notes.push(`${api}: mfaProviders enum ziti -> mesh`);
  }

  // controllerSettingsList.items is null upstream
  const csl = defs.controllerSettingsList;
  if (isObj(csl) && (csl.items === null || csl.items === undefined)) {
    csl.items = { $ref: '#/definitions/controllerSettingDetail' };
    report.notes.push(`${api}: controllerSettingsList.items null -> $ref controllerSettingDetail`);
  }

  // required entries naming properties declared nowhere in the (allOf-merged) schema
  const declared = (schema: Json, acc: Set<string>, seenRefs: Set<string>): Set<string> => {
    if (!isObj(schema)) return acc;
    if (typeof schema.$ref === 'string') {
      const name = schema.$ref.replace('#/definitions/', '');
      if (!seenRefs.has(name)) {
        seenRefs.add(name);
        declared(defs[name] ?? null, acc, seenRefs);
      }
    }
    if (isObj(schema.properties)) for (const k of Object.keys(schema.properties)) acc.add(k);
    if (Array.isArray(schema.allOf)) for (const s of schema.allOf) declared(s, acc, seenRefs);
    return acc;
  };
  const fixRequired = (schema: Json, where: string, props: Set<string>): void => {
    if (!isObj(schema)) return;
    if (Array.isArray(schema.required)) {
      const bad = schema.required.filter((r) => typeof r !== 'string' || !props.has(r));
      if (bad.length > 0) {
        schema.required = schema.required.filter((r) => typeof r === 'string' && props.has(r));
        if ((schema.required as Json[]).length === 0) delete schema.required;
        report.notes.push(`${api}: ${where}: removed required ${JSON.stringify(bad)} (no such property)`);
      }
    }
    if (Array.isArray(schema.allOf)) schema.allOf.forEach((s, i) => fixRequired(s, `${where}.allOf[${i}]`, props));
    const nested = (s: Json, w: string): void => {
      if (isObj(s) && s.$ref === undefined) fixRequired(s, w, declared(s, new Set(), new Set()));
    };
    if (isObj(schema.properties)) for (const [pk, pv] of Object.entries(schema.properties)) nested(pv, `${where}.${pk}`);
    if (isObj(schema.items)) nested(schema.items, `${where}.items`);
    if (isObj(schema.additionalProperties)) nested(schema.additionalProperties, `${where}.additionalProperties`);
  };
  for (const [name, schema] of Object.entries(defs)) fixRequired(schema, name, declared(schema, new Set(), new Set()));

  // operationIds
  const paths = doc.paths as Obj;
  const seen = new Set<string>();
  for (const [path, item] of Object.entries(paths)) {
    if (!isObj(item)) continue;
    for (const method of HTTP_METHODS) {
      const op = item[method];
      if (!isObj(op)) continue;
      if (typeof op.operationId !== 'string' || op.operationId === '') {
        if (path === '/current-api-session' && method === 'delete') {
          // keep key order readable: operationId first
          const rest = { ...op };
          for (const k of Object.keys(op)) delete op[k];
          op.operationId = 'deleteCurrentAPISession';
          Object.assign(op, rest);
          report.notes.push(`${api}: DELETE /current-api-session operationId -> deleteCurrentAPISession`);
        } else {
          throw new Error(`${api}: ${method.toUpperCase()} ${path} has no operationId`);
        }
      }
      const id = op.operationId as string;
      if (seen.has(id)) throw new Error(`${api}: duplicate operationId ${id}`);
      seen.add(id);
    }
  }

  // every $ref resolves
  const walk = (v: Json, where: string): void => {
    if (Array.isArray(v)) v.forEach((x, i) => walk(x, `${where}[${i}]`));
    else if (isObj(v)) {
      if (typeof v.$ref === 'string') {
        // Definitions, and the shared parameters and responses the fabric document uses.
        const m = /^#\/(definitions|parameters|responses)\/(.+)$/.exec(v.$ref);
        const section = m ? (doc[m[1]!] as Obj | undefined) : undefined;
        if (!m || !section || !(m[2]! in section)) throw new Error(`${api}: unresolved $ref ${v.$ref} at ${where}`);
      }
      for (const [k, x] of Object.entries(v)) walk(x, `${where}.${k}`);
    }
  };
  walk(doc, '');

  // nothing brand-bearing may remain outside known prose/examples
  const leftovers: string[] = [];
  const scan = (v: Json, where: string): void => {
    if (typeof v === 'string') {
      if (/ziti-(token|instance|authenticator|tunneler)/i.test(v)) leftovers.push(where);
    } else if (Array.isArray(v)) v.forEach((x, i) => scan(x, `${where}[${i}]`));
    else if (isObj(v)) for (const [k, x] of Object.entries(v)) scan(x, `${where}.${k}`);
  };
  scan(doc, '');
  if (leftovers.length > 0) throw new Error(`${api}: brand values left at ${leftovers.join(', ')}`);
}

export type UpstreamApi = 'client' | 'management' | 'fabric';

/** fabric.yml's multi-line `additionalProperties: {` … `}` (see the header) as one line. */
function fixFlowMapping(text: string, report: Report): string {
  const re = /additionalProperties: \{\n\s+type: object\n\s+\}/g;
  const n = text.match(re)?.length ?? 0;
  if (n > 0) report.notes.push(`fabric: ${n} multi-line flow mapping(s) additionalProperties {type: object} read as one line`);
  return text.replace(re, 'additionalProperties: { type: object }');
}

/** The served document for `api` made from upstream's YAML text, and what was changed. */
export function importUpstreamSpec(api: UpstreamApi, yamlText: string): { doc: Obj; notes: string[] } {
  const report: Report = { notes: [] };
  const text = api === 'fabric' ? fixFlowMapping(yamlText, report) : yamlText;
  const doc = transform(load(text)) as Obj;
  if (!isObj(doc) || doc.swagger !== '2.0') throw new Error(`${api}.yml is not a swagger 2.0 document`);
  fixDocument(api, doc, report);
  return { doc, notes: report.notes };
}
