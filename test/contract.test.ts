/**
 * One contract over every resource family, driven by the declarations (src/resources/index.ts) and
 * the embedded Management spec: for each family offering the standard six operations a valid body
 * is generated from the spec's create schema plus the declaration (references are created first,
 * role lists and attributes filled), then create, read, list (filter, paging, sort), patch, put,
 * delete and read-after-delete are checked, and the bad-input matrix: a wrong type or a value
 * outside the schema for every property, every required property missing, an unknown id in every
 * reference and role list, a duplicate value in every unique field, malformed JSON, bodies that are
 * not objects, bad filters, bad paging and a bad sort. Each refusal is a 4xx in the error envelope
 * with the expected code, and none writes anything (list count and the entity unchanged).
 *
 * A family declared later is covered as it is: its body is generated the same way. A family
 * without the full standard set must be listed in PARTIAL with exactly the operations it offers,
 * so adding one fails here until someone says how it is covered.
 *
 * Behaviour a family has beyond this contract is tested in its own file (identities.test.ts,
 * services.test.ts, policies.test.ts, routers.test.ts, auth-resources.test.ts, …).
 */
import t from 'tap';
import fs from 'node:fs';
import { ALIASES, RESOURCES } from '../src/resources/index.js';
import type { ResourceDef, StandardOp } from '../src/resources/types.js';
import { startServer, isError, type Res } from './helpers/server.js';
import { selfSignedCert } from './helpers/pki.js';
import { base, created, emptyOk, type Tap } from './helpers/assert.js';

type Schema = Record<string, any>;
const spec = JSON.parse(fs.readFileSync(new URL('../src/api/spec/management.json', import.meta.url), 'utf8'));
type Body = Record<string, any>;
const definitions = (spec as any).definitions as Record<string, Schema>;

const STANDARD: StandardOp[] = ['list', 'create', 'detail', 'update', 'patch', 'delete'];

/**
 * Families without the full standard set, with the operations they do offer and why they have no
 * create: their records come from logins, enrollments and other flows, tested with those flows.
 */
const PARTIAL: Record<string, { ops: StandardOp[]; why: string }> = {
  enrollments: { ops: ['list', 'detail', 'delete'], why: 'created with identities and routers (identities.test.ts, enroll-*.test.ts)' },
  authenticators: { ops: ['list', 'detail', 'delete'], why: 'created by a handler of its own (auth-resources.test.ts)' },
  apiSessions: { ops: ['list', 'detail', 'delete'], why: 'created by logins (sessions.test.ts)' },
  sessions: { ops: ['delete'], why: 'created by the client API (client-sessions.test.ts)' },
  controllerSettings: { ops: ['list', 'detail'], why: 'written by the controller (control-settings.test.ts)' },
  apiSessionCertificates: { ops: [], why: 'created by the client API (cert-extend.test.ts)' },
};

/**
 * Values neither the spec nor the declaration can express: a CA certificate (unique per CA), the
 * router a terminator runs on (an edge router or a transit router, checked by the family's own
 * rule) and the key source of a JWT signer (exactly one of certPem and jwksEndpoint).
 */
const SEEDS: Record<string, (ref: (collection: string) => Promise<string>, n: number) => Promise<Body> | Body> = {
  cas: (_ref, n) => ({ certPem: selfSignedCert(`contract-ca-${n}`, true) }),
  terminators: async (ref) => ({ router: await ref('edgeRouters') }),
  externalJwtSigners: (_ref, n) => ({ jwksEndpoint: `https://signer-${n}.example/jwks` }),
};

const families = [...RESOURCES, ...ALIASES];
const crudFamilies = families.filter((d) => STANDARD.every((op) => d.operations[op]));

t.test('every declared family is covered', async (t) => {
  for (const def of families) {
    const ops = STANDARD.filter((op) => def.operations[op]);
    if (ops.length === STANDARD.length) continue;
    const partial = PARTIAL[def.collection];
    t.ok(partial, `${def.collection} offers only [${ops.join(', ')}]: list it in PARTIAL with how its records are made`);
    if (partial) t.same(ops, partial.ops, `${def.collection}: PARTIAL names the operations it offers`);
  }
  t.ok(crudFamilies.length >= 15, `${crudFamilies.length} families with the standard set`);
});

// ---------------------------------------------------------------------------------------------
// The spec's body schemas, flattened: $ref resolved, allOf merged, a discriminator replaced by
// the subtype its first enum value names.

function deref(s: Schema): Schema {
  while (s?.$ref) s = definitions[s.$ref.split('/').pop()];
  return s;
}

function flatten(s: Schema): Schema {
  s = deref(s);
  if (!s?.allOf) return s;
  const parts = s.allOf.map(flatten);
  return {
    ...Object.assign({}, ...parts),
    type: 'object',
    required: parts.flatMap((p: Schema) => p.required ?? []),
    properties: Object.assign({}, ...parts.map((p: Schema) => p.properties ?? {})),
  };
}

/** The body schema of a spec operation, flattened. */
function bodySchema(operationId: string): Schema {
  for (const item of Object.values<any>((spec as any).paths)) {
    for (const op of Object.values<any>(item)) {
      if (op?.operationId !== operationId) continue;
      const ref = op.parameters.find((p: any) => p.in === 'body').schema.$ref as string;
      const name = ref.split('/').pop()!;
      let schema = flatten(definitions[name]);
      if (schema.discriminator) {
        // The subtype the discriminator's first enum value names (posture checks: OS).
        const values: string[] = deref(schema.properties[schema.discriminator]).enum;
        const sub = Object.values(definitions).find((d) => d['x-class'] === values[0] && d.allOf?.some((x: Schema) => x.$ref === `#/definitions/${name}`));
        schema = { ...flatten(sub!), discriminator: schema.discriminator, discriminatorValue: values[0] };
      }
      return schema;
    }
  }
  throw new Error(`no spec operation ${operationId}`);
}

// ---------------------------------------------------------------------------------------------

const srv = await startServer(t);
const admin = await srv.login();
let seq = 0;
const MADE_UP = 'made-up-id-4711';

/** A value the schema accepts: the first enum value, the minimum, minItems items, required properties. */
function sample(s: Schema, prop: string): unknown {
  s = flatten(s);
  if (s.enum) return s.enum[0];
  switch (s.type) {
    case 'string':
      if (s.format === 'uri' || s.format === 'url') return `https://${prop}-${++seq}.example/`;
      return `contract-${prop}-${++seq}`;
    case 'integer':
    case 'number':
      return s.minimum ?? 0;
    case 'boolean':
      return false;
    case 'array':
      return Array.from({ length: s.minItems ?? 0 }, () => sample(s.items, prop));
    default: {
      const out: Body = {};
      for (const r of s.required ?? []) out[r] = sample(s.properties[r], r);
      return out;
    }
  }
}

/** One entity per referenced collection, made once, for the bodies that need a reference. */
const refIds = new Map<string, Promise<string>>();
function ref(collection: string): Promise<string> {
  let p = refIds.get(collection);
  if (!p) {
    const def = families.find((d) => d.collection === collection && d.operations.create)!;
    refIds.set(collection, (p = createOne(def).then((r) => r.id)));
  }
  return p;
}

async function createOne(def: ResourceDef): Promise<{ id: string; body: Body }> {
  const body = await validBody(def);
  return { id: await admin.create(`/${def.path}`, body), body };
}

/** A create body: the spec's required properties, the declaration's references, roles and attributes, tags. */
async function validBody(def: ResourceDef): Promise<Body> {
  const schema = bodySchema(def.operations.create!);
  const body: Body = {};
  for (const r of schema.required ?? []) body[r] = sample(schema.properties[r], r);
  if (schema.discriminator) body[schema.discriminator] = schema.discriminatorValue;
  for (const [name, f] of Object.entries(def.fields)) {
    const wire = f.bodyName ?? name;
    if (f.readOnly || !(wire in schema.properties)) continue;
    if (f.ref) {
      const id = await ref(f.ref.collection);
      body[wire] = deref(schema.properties[wire]).type === 'array' ? [id] : id;
    } else if (f.roles) body[wire] = ['#contract'];
    else if (f.attributes) body[wire] = ['contract'];
  }
  body.tags = { contract: 'yes' };
  Object.assign(body, await SEEDS[def.collection]?.(ref, ++seq));
  return body;
}

async function count(path: string): Promise<number> {
  const r = await admin.get(`/${path}?limit=1`);
  if (r.status !== 200) throw new Error(`count ${path}: ${r.status} ${r.text}`);
  return r.body.meta.pagination.totalCount;
}

const detail = async (path: string, id: string) => (await admin.get(`/${path}/${id}`)).body?.data;

/** Wrong values for a property: other JSON types, and values outside its enum, bounds and lengths. */
function wrongValues(s: Schema): unknown[] {
  s = flatten(s);
  const out: unknown[] = [];
  switch (s.type) {
    case 'string': out.push(123, true, {}); break;
    case 'boolean': out.push('true', 1, []); break;
    case 'integer': out.push('1', true, 1.5); break;
    case 'number': out.push('1', true); break;
    case 'array': out.push({}, 'x', 7); break;
    case 'object': out.push('str', [], 42); break;
  }
  if (s.enum) out.push('not-in-the-enum');
  if (s.minimum !== undefined) out.push(s.minimum - 1);
  if (s.maximum !== undefined) out.push(s.maximum + 1);
  if (s.type === 'array' && s.minItems) out.push([]);
  if (s.type === 'string' && !s.enum) out.push('x'.repeat((s.maxLength ?? 65536) + 1));
  return out;
}

/** The field a missing or bad value of body property `wire` is reported under. */
function causeField(def: ResourceDef, wire: string): string {
  const f = Object.entries(def.fields).find(([name, f]) => (f.bodyName ?? name) === wire)?.[1];
  return f?.ref?.errorField ?? wire;
}

function without(body: Body, key: string): Body {
  const b = { ...body };
  delete b[key];
  return b;
}

const json = (raw: string) => ({ raw, headers: { 'content-type': 'application/json' } });

function refused(t: Tap, r: Res, label: string, status: number, code: string, field?: string) {
  t.ok(isError(r, status, code), `${label} → ${status} ${code}`, { got: `${r.status} ${r.text.slice(0, 300)}` });
  if (field !== undefined) t.equal(r.body?.error?.cause?.field, field, `${label}: cause.field ${field}`);
}

for (const def of crudFamilies) {
  t.test(def.path, async (t) => {
    const path = def.path;
    const create = bodySchema(def.operations.create!);
    const update = bodySchema(def.operations.update!);
    const patchSchema = bodySchema(def.operations.patch!);
    const before = await count(path);

    // create, read
    const body = await validBody(def);
    const id = created(t, await admin.post(`/${path}`, body), path);
    const got = await detail(path, id);
    base(t, got, path);
    t.same(got.tags, body.tags, 'tags round-trip');
    for (const [name, f] of Object.entries(def.fields)) {
      const wire = f.bodyName ?? name;
      const v = body[wire];
      if (f.hidden || f.secret || f.readOnly || (typeof v !== 'string' && typeof v !== 'boolean' && typeof v !== 'number')) continue;
      // A reference renders as an entityRef under its body name and as the id under the field's own.
      t.same(name in got ? got[name] : got[wire], v, `${wire} round-trips`);
    }
    t.equal(await count(path), before + 1, 'list count grew by one');

    // list: filter on a field, paging, sort
    const more = [await createOne(def), await createOne(def)];
    const ids = [id, ...more.map((m) => m.id)];
    const idList = ids.map((x) => `"${x}"`).join(', ');
    const byId = await admin.get(`/${path}?filter=${encodeURIComponent(`id = "${id}"`)}`);
    t.equal(byId.status, 200, 'filter on id');
    t.same(byId.body?.data?.map((d: any) => d.id), [id], 'filter on id finds exactly the entity');
    const named = Object.entries(def.fields).find(([name, f]) => f.unique && f.filter === 'string' && typeof body[f.bodyName ?? name] === 'string');
    if (named) {
      const [name, f] = named;
      const r = await admin.get(`/${path}?filter=${encodeURIComponent(`${name} = "${body[f.bodyName ?? name]}"`)}`);
      t.same(r.body?.data?.map((d: any) => d.id), [id], `filter on ${name} finds exactly the entity`);
    }
    const sorted = async (order: string) => {
      const r = await admin.get(`/${path}?filter=${encodeURIComponent(`id in [${idList}]`)}&sort=${encodeURIComponent(`id ${order}`)}`);
      t.equal(r.status, 200, `sort id ${order}`);
      return (r.body?.data ?? []).map((d: any) => d.id);
    };
    const asc = await sorted('asc');
    t.same([...asc].sort(), asc, 'sort id asc orders by id');
    t.same(asc.length, 3, 'the filter finds the three entities');
    t.same(await sorted('desc'), [...asc].reverse(), 'sort id desc is the reverse');
    const pages: string[] = [];
    for (let offset = 0; offset < 3; offset++) {
      const r = await admin.get(`/${path}?filter=${encodeURIComponent(`id in [${idList}]`)}&sort=id&limit=1&offset=${offset}`);
      t.same(r.body?.meta?.pagination, { limit: 1, offset, totalCount: 3 }, `page ${offset}: pagination meta`);
      t.equal(r.body?.data?.length, 1, `page ${offset}: one entry`);
      pages.push(r.body?.data?.[0]?.id);
    }
    t.same(pages, asc, 'the pages of one walk the sorted list');

    // patch, put; a polymorphic family's patch names its type (the discriminator is required)
    const kind: Body = patchSchema.discriminator ? { [patchSchema.discriminator]: body[patchSchema.discriminator] } : {};
    const patch = await admin.patch(`/${path}/${id}`, { ...kind, tags: { contract: 'patched' } });
    emptyOk(t, patch, 'patch tags');
    const patched = await detail(path, id);
    t.same(patched.tags, { contract: 'patched' }, 'patch changed tags');
    for (const k of Object.keys(got)) if (!['tags', 'updatedAt', 'version'].includes(k)) t.same(patched[k], got[k], `patch kept ${k}`);
    t.ok(Date.parse(patched.updatedAt) >= Date.parse(got.updatedAt), 'updatedAt did not go back');

    const putBody: Body = { tags: { contract: 'put' } };
    for (const r of update.required ?? []) putBody[r] = r in body ? body[r] : sample(update.properties[r], r);
    for (const k of Object.keys(body)) if (k in update.properties && !(k in putBody)) putBody[k] = body[k];
    if ('name' in update.properties) putBody.name = `contract-put-${++seq}`;
    emptyOk(t, await admin.put(`/${path}/${id}`, putBody), 'put');
    const put = await detail(path, id);
    t.same(put.tags, { contract: 'put' }, 'put replaced tags');
    if (putBody.name) t.equal(put.name, putBody.name, 'put replaced name');

    // the bad-input matrix: nothing is written
    const snapshot = await detail(path, id);
    const total = await count(path);
    const post = (b: unknown) => admin.post(`/${path}`, b);
    for (const [prop, s] of Object.entries<Schema>(create.properties)) {
      if (prop === create.discriminator) continue;
      for (const v of wrongValues(s)) {
        const r = await post({ ...(await validBody(def)), [prop]: v });
        refused(t, r, `create with ${prop} = ${JSON.stringify(v).slice(0, 40)}`, 400, 'COULD_NOT_VALIDATE');
        t.match(r.body?.error?.cause?.field ?? '', new RegExp(`^${prop}(\\.|$)`), `create with bad ${prop}: cause.field names it`);
      }
    }
    for (const prop of create.required ?? []) {
      refused(t, await post(without(await validBody(def), prop)), `create without ${prop}`, 400, 'COULD_NOT_VALIDATE', prop);
      const s = flatten(create.properties[prop]);
      if (s['x-nullable'] !== true) refused(t, await post({ ...(await validBody(def)), [prop]: null }), `create with ${prop} null`, 400, 'COULD_NOT_VALIDATE', prop);
      if (s.type === 'string' && !s.enum) refused(t, await post({ ...(await validBody(def)), [prop]: '' }), `create with ${prop} empty`, 400, 'COULD_NOT_VALIDATE', prop);
    }
    if ('name' in create.properties) {
      // Names are at most 1024 characters (the spec gives no bound; the controller's default).
      refused(t, await post({ ...(await validBody(def)), name: 'n'.repeat(1025) }), 'create with a name of 1025 characters', 400, 'COULD_NOT_VALIDATE', 'name');
      const longest = await post({ ...(await validBody(def)), name: `${'m'.repeat(1016)}${String(++seq).padStart(8, '0')}` });
      t.equal(longest.status, 201, 'a name of 1024 characters is accepted');
      if (longest.status === 201) emptyOk(t, await admin.delete(`/${path}/${longest.body.data.id}`), 'delete it');
    }
    for (const [name, f] of Object.entries(def.fields)) {
      const wire = f.bodyName ?? name;
      if (f.readOnly || !(wire in create.properties)) continue;
      const many = deref(create.properties[wire]).type === 'array';
      if (f.ref) {
        const r = await post({ ...(await validBody(def)), [wire]: many ? [MADE_UP] : MADE_UP });
        if (f.ref.missing === 'notFound') refused(t, r, `create with unknown ${wire}`, 404, 'NOT_FOUND');
        else refused(t, r, `create with unknown ${wire}`, 400, 'COULD_NOT_VALIDATE', causeField(def, wire));
      }
      if (f.roles) {
        for (const roles of [[`@${MADE_UP}`], ['#all', '#contract'], ['contract'], ['']]) {
          refused(t, await post({ ...(await validBody(def)), [wire]: roles }), `create with ${wire} ${JSON.stringify(roles)}`, 400, 'COULD_NOT_VALIDATE', wire);
        }
      }
      if (f.attributes) {
        for (const attrs of [['#contract'], ['@contract']]) {
          refused(t, await post({ ...(await validBody(def)), [wire]: attrs }), `create with ${wire} ${JSON.stringify(attrs)}`, 400, 'COULD_NOT_VALIDATE', wire);
        }
      }
      if (f.unique && typeof snapshot[wire] === 'string' && snapshot[wire] !== '') {
        refused(t, await post({ ...(await validBody(def)), [wire]: snapshot[wire] }), `create with a duplicate ${wire}`, 400, 'COULD_NOT_VALIDATE', wire);
      }
    }
    refused(t, await admin.post(`/${path}`, undefined, json('{"name": ')), 'malformed JSON', 400, 'COULD_NOT_PARSE_BODY');
    for (const raw of ['[]', '"name"', '42', 'null', 'true', '']) {
      refused(t, await admin.post(`/${path}`, undefined, json(raw)), `body ${JSON.stringify(raw)}`, 400, 'COULD_NOT_VALIDATE', '(root)');
    }

    for (const [prop, s] of Object.entries<Schema>(patchSchema.properties)) {
      if (prop === patchSchema.discriminator) continue;
      const v = wrongValues(s)[0];
      refused(t, await admin.patch(`/${path}/${id}`, { ...kind, [prop]: v }), `patch ${prop} = ${JSON.stringify(v)}`, 400, 'COULD_NOT_VALIDATE');
    }
    for (const prop of update.required ?? []) {
      refused(t, await admin.put(`/${path}/${id}`, without(putBody, prop)), `put without ${prop}`, 400, 'COULD_NOT_VALIDATE', prop);
    }
    refused(t, await admin.patch(`/${path}/${id}`, undefined, json('[]')), 'patch with an array body', 400, 'COULD_NOT_VALIDATE');
    refused(t, await admin.put(`/${path}/${id}`, undefined, json('{"tags": {')), 'put with malformed JSON', 400, 'COULD_NOT_PARSE_BODY');
    refused(t, await admin.patch(`/${path}/${MADE_UP}`, { ...kind, tags: {} }), 'patch of an unknown id', 404, 'NOT_FOUND');
    refused(t, await admin.put(`/${path}/${MADE_UP}`, putBody), 'put of an unknown id', 404, 'NOT_FOUND');

    for (const q of ['filter=' + encodeURIComponent('id = '), 'filter=' + encodeURIComponent('noSuchField = 1'), 'filter=' + encodeURIComponent('(id = "x"')]) {
      refused(t, await admin.get(`/${path}?${q}`), `list ?${decodeURIComponent(q)}`, 400, 'INVALID_FILTER');
    }
    for (const q of ['limit=ten', 'limit=1.5', 'offset=x', 'offset=2.5']) {
      refused(t, await admin.get(`/${path}?${q}`), `list ?${q}`, 400, 'INVALID_PAGINATION');
    }
    refused(t, await admin.get(`/${path}?sort=noSuchField`), 'list ?sort=noSuchField', 400, 'INVALID_SORT_IDENTIFIER');

    t.equal(await count(path), total, 'the refused requests wrote nothing');
    t.same(await detail(path, id), snapshot, 'the refused requests left the entity unchanged');

    // delete, read after delete
    for (const x of ids) emptyOk(t, await admin.delete(`/${path}/${x}`), 'delete');
    refused(t, await admin.get(`/${path}/${id}`), 'read after delete', 404, 'NOT_FOUND');
    refused(t, await admin.delete(`/${path}/${id}`), 'delete again', 404, 'NOT_FOUND');
    refused(t, await admin.patch(`/${path}/${id}`, { ...kind, tags: {} }), 'patch after delete', 404, 'NOT_FOUND');
    t.equal(await count(path), before, 'list count back where it was');
  });
}

t.test('families without create: read, list and refusals', async (t) => {
  for (const def of families.filter((d) => !crudFamilies.includes(d))) {
    const path = def.path;
    if (def.operations.detail) refused(t, await admin.get(`/${path}/${MADE_UP}`), `${path}: read of an unknown id`, 404, 'NOT_FOUND');
    if (def.operations.delete) refused(t, await admin.delete(`/${path}/${MADE_UP}`), `${path}: delete of an unknown id`, 404, 'NOT_FOUND');
    if (!def.operations.list) continue;
    const r = await admin.get(`/${path}?limit=2`);
    t.equal(r.status, 200, `${path}: list`);
    t.same(Object.keys(r.body?.meta?.pagination ?? {}).sort(), ['limit', 'offset', 'totalCount'], `${path}: pagination meta`);
    const first = r.body?.data?.[0];
    if (first && def.operations.detail) t.equal((await detail(path, first.id))?.id, first.id, `${path}: the first entry reads`);
    refused(t, await admin.get(`/${path}?filter=${encodeURIComponent('noSuchField = 1')}`), `${path}: bad filter`, 400, 'INVALID_FILTER');
    refused(t, await admin.get(`/${path}?limit=ten`), `${path}: bad paging`, 400, 'INVALID_PAGINATION');
  }
});
