/**
 * `mesh list|get|create|update|delete <family> …`, for every family of the Management API, read
 * from the embedded upstream spec rather than written per family: a family is a top-level path
 * with a list operation (`GET /identities`); `get`, `update` and `delete` use the operations of
 * `/<family>/{id}`, `create` the POST on the family path. The options of `create` and `update` are
 * the properties of the operation's body definition (`--type Device`, `--role-attributes a,b` or
 * `'["a","b"]'`, `--is-admin`), typed by the spec; `--data JSON` gives a whole body. Role fields
 * take `@name` as well as `@id` (`resolveRoles`).
 */
import fs from 'node:fs';
import { parseArgs } from 'node:util';
import { upstreamDocument } from '../api/spec/index.js';
import { api } from './http.js';
import { CliError, loadSession, usage, type Session } from './state.js';
import { RESOURCE_HELP } from './help.js';

interface Family {
  /** Path segment: `identities`. */
  name: string;
  list?: string;
  create?: { operationId: string; definition?: any };
  detail?: string;
  update?: { operationId: string; method: 'patch' | 'put'; definition?: any };
  remove?: string;
}

const DEF = '#/definitions/';

function resolve(doc: any, schema: any): any {
  if (!schema) return undefined;
  if (schema.$ref) return resolve(doc, doc.definitions[schema.$ref.slice(DEF.length)]);
  if (schema.allOf) {
    const merged: any = { type: 'object', properties: {}, required: [] };
    for (const part of schema.allOf) {
      const r = resolve(doc, part);
      Object.assign(merged.properties, r?.properties ?? {});
      merged.required.push(...(r?.required ?? []));
    }
    return merged;
  }
  return schema;
}

function bodyOf(doc: any, op: any): any {
  const p = (op?.parameters ?? []).find((x: any) => x.in === 'body');
  return resolve(doc, p?.schema);
}

let cached: Map<string, Family> | undefined;

/** Families by every name they answer to: path segment (`service-policies`) and singular (`service-policy`). */
export function families(): Map<string, Family> {
  if (cached) return cached;
  const doc = upstreamDocument('management');
  const byName = new Map<string, Family>();
  for (const [p, item] of Object.entries<any>(doc.paths)) {
    const m = /^\/([a-z][a-z-]*)$/.exec(p);
    if (!m || !item.get || !/^list/.test(item.get.operationId)) continue;
    const name = m[1];
    const f: Family = { name, list: item.get.operationId };
    if (item.post) f.create = { operationId: item.post.operationId, definition: bodyOf(doc, item.post) };
    const one = doc.paths[`/${name}/{id}`];
    if (one?.get) f.detail = one.get.operationId;
    if (one?.patch) f.update = { operationId: one.patch.operationId, method: 'patch', definition: bodyOf(doc, one.patch) };
    else if (one?.put) f.update = { operationId: one.put.operationId, method: 'put', definition: bodyOf(doc, one.put) };
    if (one?.delete) f.remove = one.delete.operationId;
    for (const alias of [name, singular(name)]) byName.set(alias, f);
  }
  return (cached = byName);
}

function singular(name: string): string {
  if (name.endsWith('ies')) return name.slice(0, -3) + 'y';
  if (name.endsWith('ses')) return name.slice(0, -2);
  return name.endsWith('s') ? name.slice(0, -1) : name;
}

function familyNames(): string[] {
  return [...new Set([...families().values()].map((f) => f.name))].sort();
}

function family(name: string | undefined, verb: string): Family {
  if (!name) throw usage(`mesh ${verb}: which family? One of: ${familyNames().join(', ')}`);
  const f = families().get(name);
  if (!f) throw usage(`mesh ${verb}: unknown family "${name}". Families: ${familyNames().join(', ')}`);
  return f;
}

const kebab = (s: string) => s.replace(/[A-Z]/g, (c) => '-' + c.toLowerCase());

/** The body options of a definition: `--role-attributes` and `--roleAttributes` for `roleAttributes`. */
function bodyOptions(def: any): { options: Record<string, { type: 'string' | 'boolean'; multiple?: boolean }>; props: Map<string, [string, any]> } {
  const options: Record<string, { type: 'string' | 'boolean'; multiple?: boolean }> = {};
  const props = new Map<string, [string, any]>();
  const doc = upstreamDocument('management');
  for (const [prop, raw] of Object.entries<any>(def?.properties ?? {})) {
    const schema = resolve(doc, raw);
    const type = schema.type === 'boolean' ? 'boolean' : 'string';
    for (const flag of new Set([prop, kebab(prop)])) {
      options[flag] = { type, multiple: type === 'string' };
      props.set(flag, [prop, schema]);
    }
  }
  return { options, props };
}

/** An option's text as the spec types the property. */
function typed(prop: string, schema: any, values: string[]): unknown {
  const one = values[values.length - 1];
  const t = schema?.type ?? (schema?.$ref ? undefined : 'string');
  if (t === 'array') return values.flatMap((v) => listItems(prop, v));
  if (t === 'integer' || t === 'number') {
    const n = Number(one);
    if (one.trim() === '' || !Number.isFinite(n)) throw usage(`--${kebab(prop)}: "${one}" is not a number`);
    return n;
  }
  if (t === 'string') return one;
  // Objects, references (roles, tags, enrollment…): JSON, or a plain string when it is not JSON.
  try {
    return JSON.parse(one);
  } catch {
    return one;
  }
}

/** One list option's text: a JSON array (`'["a","b"]'`) or items separated by commas (`a,b`). */
function listItems(prop: string, text: string): string[] {
  if (!text.trim().startsWith('[')) return text.split(',').map((v) => v.trim()).filter(Boolean);
  let list: unknown;
  try {
    list = JSON.parse(text);
  } catch (e) {
    throw usage(`--${kebab(prop)}: "${text}" starts like a JSON array but is not one (${(e as Error).message}); give '["a","b"]' or a,b`);
  }
  if (!Array.isArray(list) || !list.every((v) => typeof v === 'string')) throw usage(`--${kebab(prop)}: a JSON array of strings, or items separated by commas`);
  return list;
}

/** Role fields and the family their `@` entries name (`--service-roles @web`). */
const ROLE_FAMILY: Record<string, string> = { identityRoles: 'identities', serviceRoles: 'services', edgeRouterRoles: 'edge-routers', postureCheckRoles: 'posture-checks' };

/**
 * `@name` in a role field becomes `@id`, as upstream's CLI does: the API takes only ids after `@`.
 * An entry that is already an existing id stays; a name that matches no entity, or several, is an error.
 */
async function resolveRoles(s: Session, body: Record<string, unknown>): Promise<void> {
  for (const [prop, fam] of Object.entries(ROLE_FAMILY)) {
    const roles = body[prop];
    if (!Array.isArray(roles)) continue;
    const out: unknown[] = [];
    for (const role of roles) out.push(typeof role === 'string' && role.startsWith('@') ? `@${await refId(s, fam, role.slice(1), prop)}` : role);
    body[prop] = out;
  }
}

async function refId(s: Session, fam: string, key: string, prop: string): Promise<string> {
  const q = (field: string) => `/${fam}?filter=${encodeURIComponent(`${field} = "${key.replace(/["\\]/g, '\\$&')}"`)}&limit=2`;
  if ((await api(s, 'GET', q('id'))).body.data.length) return key;
  const named = (await api(s, 'GET', q('name'))).body.data as { id: string }[];
  if (named.length === 1) return named[0].id;
  if (named.length > 1) throw new CliError(`--${kebab(prop)}: "@${key}" names more than one of ${fam}; give @ID`);
  throw new CliError(`--${kebab(prop)}: no ${singular(fam)} has the name or id "${key}" (mesh list ${fam})`);
}

const COMMON = {
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;


function familyHelp(verb: string, f?: Family): string {
  let text = RESOURCE_HELP[verb];
  const def = verb === 'create' ? f?.create?.definition : verb === 'update' ? f?.update?.definition : undefined;
  if (def) {
    const req = new Set<string>(def.required ?? []);
    const doc = upstreamDocument('management');
    text += `\n\nProperties of ${f!.name}:\n` + Object.entries<any>(def.properties ?? {})
      .map(([p, raw]) => [p, resolve(doc, raw)])
      .map(([p, s]) => `  --${kebab(p).padEnd(28)} ${s.type ?? 'json'}${s.enum ? ` (${s.enum.join(', ')})` : ''}${req.has(p) ? ', required' : ''}`)
      .join('\n');
  } else if (!f) text += `\n\nFamilies: ${familyNames().join(', ')}`;
  return text;
}

/** An id, or a name looked up with a filter. */
async function idOf(f: Family, key: string): Promise<string> {
  const s = loadSession();
  if (!f.detail) throw usage(`${f.name} has no single-entity operations`);
  const direct = await api(s, 'GET', `/${f.name}?filter=${encodeURIComponent(`id = "${key.replace(/"/g, '\\"')}" or name = "${key.replace(/"/g, '\\"')}"`)}&limit=2`).catch(() => undefined);
  const found = direct?.body?.data as any[] | undefined;
  if (found?.length === 1) return found[0].id;
  if (found && found.length > 1) throw new CliError(`"${key}" names more than one ${singular(f.name)}; give the id`);
  // Families without a name field: the key is taken as an id.
  return key;
}

function printTable(rows: any[]) {
  if (rows.length === 0) return;
  const skip = new Set(['_links', 'createdAt', 'updatedAt', 'tags']);
  const cols = ['id', ...Object.keys(rows[0]).filter((k) => k !== 'id' && !skip.has(k) && ['string', 'number', 'boolean'].includes(typeof rows[0][k]))].slice(0, 6);
  const cell = (v: unknown) => (v === undefined || v === null ? '' : Array.isArray(v) ? v.join(',') : String(v)).slice(0, 40);
  const width = cols.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (vals: string[]) => vals.map((v, i) => v.padEnd(width[i])).join('  ').trimEnd();
  process.stdout.write(line(cols) + '\n' + rows.map((r) => line(cols.map((c) => cell(r[c])))).join('\n') + '\n');
}

export async function resourceCommand(verb: 'list' | 'get' | 'create' | 'update' | 'delete', argv: string[]): Promise<void> {
  // First pass: the family (it decides which options exist).
  const first = parseArgs({ args: argv, options: { ...COMMON }, strict: false, allowPositionals: true });
  const fam = first.positionals[0] ? families().get(first.positionals[0]) : undefined;
  if (first.values.help) {
    process.stdout.write(familyHelp(verb, fam) + '\n');
    return;
  }
  const f = family(first.positionals[0], verb);
  const def = verb === 'create' ? f.create?.definition : verb === 'update' ? f.update?.definition : undefined;
  const { options: bodyOpts, props } = bodyOptions(def);
  const extra = {
    list: { limit: { type: 'string' }, offset: { type: 'string' } },
    get: {},
    create: { data: { type: 'string' }, 'jwt-out': { type: 'string' } },
    update: { data: { type: 'string' } },
    delete: {},
  }[verb] as Record<string, { type: 'string' | 'boolean' }>;
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: { ...bodyOpts, ...extra, ...COMMON }, strict: true, allowPositionals: true });
  } catch (e) {
    throw usage(`mesh ${verb} ${f.name}: ${(e as Error).message}\n\n${familyHelp(verb, f)}`);
  }
  const { values, positionals } = parsed as { values: Record<string, any>; positionals: string[] };
  const s = loadSession();
  const out = (data: unknown): void => void process.stdout.write(JSON.stringify(data, null, 2) + '\n');

  if (verb === 'list') {
    if (positionals.length > 2) throw usage(`mesh list ${f.name}: one FILTER at most (quote it)`);
    const q = new URLSearchParams();
    if (positionals[1]) q.set('filter', positionals[1]);
    if (values.limit !== undefined) q.set('limit', values.limit);
    if (values.offset !== undefined) q.set('offset', values.offset);
    const r = await api(s, 'GET', `/${f.name}${q.size ? '?' + q : ''}`);
    if (values.json) return out(r.body.data);
    printTable(r.body.data);
    const p = r.body.meta?.pagination;
    if (p) process.stdout.write(`${r.body.data.length} of ${p.totalCount} ${f.name}${p.totalCount > r.body.data.length ? ` (offset ${p.offset}; --limit/--offset for more)` : ''}\n`);
    return;
  }

  if (verb === 'create') {
    if (!f.create) throw usage(`${f.name} cannot be created through the API`);
    const body = requestBody(values, props);
    await resolveRoles(s, body);
    if (positionals[1] !== undefined) {
      if (!def?.properties?.name) throw usage(`${f.name} has no name; give the properties as options`);
      body.name = positionals[1];
    }
    // Required yes/no properties default to no, as `ziti edge create` does (`isAdmin`).
    for (const req of def?.required ?? []) if (body[req] === undefined && def.properties?.[req]?.type === 'boolean') body[req] = false;
    // --jwt-out: ask for a one-time-token enrollment where the body has one (identities).
    if (values['jwt-out'] && def?.properties?.enrollment && body.enrollment === undefined) body.enrollment = { ott: true };
    const r = await api(s, 'POST', `/${f.name}`, body);
    const id = r.body?.data?.id;
    if (values['jwt-out']) {
      const d = (await api(s, 'GET', `/${f.name}/${encodeURIComponent(id)}`)).body?.data;
      const jwt = d?.enrollment?.ott?.jwt ?? d?.enrollment?.updb?.jwt ?? d?.enrollmentJwt;
      if (typeof jwt !== 'string') throw new CliError(`${f.name} ${id} was created but has no enrollment JWT to write`);
      fs.writeFileSync(values['jwt-out'], jwt + '\n', { mode: 0o600 });
    }
    if (values.json) return out(r.body.data);
    process.stdout.write(`created ${singular(f.name)} ${id}${values['jwt-out'] ? `; enrollment JWT written to ${values['jwt-out']}` : ''}\n`);
    return;
  }

  const key = positionals[1];
  if (!key) throw usage(`mesh ${verb} ${f.name}: which one? Give its id or name`);
  if (positionals.length > 2) throw usage(`mesh ${verb} ${f.name}: unexpected ${positionals.slice(2).join(' ')}`);
  const id = encodeURIComponent(await idOf(f, key));
  if (verb === 'get') {
    const r = await api(s, 'GET', `/${f.name}/${id}`);
    if (values.json) return out(r.body.data);
    const d = r.body.data;
    const width = Math.max(...Object.keys(d).map((k) => k.length));
    for (const [k, v] of Object.entries(d)) if (k !== '_links') process.stdout.write(`${k.padEnd(width)}  ${typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v)}\n`);
    return;
  }
  if (verb === 'update') {
    if (!f.update) throw usage(`${f.name} cannot be updated through the API`);
    const body = requestBody(values, props);
    if (Object.keys(body).length === 0) throw usage(`mesh update ${f.name}: nothing to change; give --PROPERTY VALUE or --data`);
    await resolveRoles(s, body);
    await api(s, f.update.method.toUpperCase(), `/${f.name}/${id}`, body);
    process.stdout.write(`updated ${singular(f.name)} ${decodeURIComponent(id)}\n`);
    return;
  }
  if (!f.remove) throw usage(`${f.name} cannot be deleted through the API`);
  await api(s, 'DELETE', `/${f.name}/${id}`);
  process.stdout.write(`deleted ${singular(f.name)} ${decodeURIComponent(id)}\n`);
}

/** A create or update body: `--data JSON` first, then every `--PROPERTY VALUE` option over it. */
function requestBody(values: Record<string, any>, props: Map<string, [string, any]>): Record<string, unknown> {
  let body: Record<string, unknown> = {};
  if (values.data !== undefined) {
    try {
      body = JSON.parse(values.data);
    } catch (e) {
      throw usage(`--data: not JSON: ${(e as Error).message}`);
    }
  }
  applyOptions(body, values, props);
  return body;
}

function applyOptions(body: Record<string, unknown>, values: Record<string, any>, props: Map<string, [string, any]>) {
  for (const [flag, v] of Object.entries(values)) {
    const p = props.get(flag);
    if (!p || v === undefined) continue;
    const [prop, schema] = p;
    body[prop] = typeof v === 'boolean' ? v : typed(prop, schema, v as string[]);
  }
}
