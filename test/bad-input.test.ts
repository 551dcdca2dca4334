/**
 * Bad-input matrix over the management create operations: missing/null/empty/wrong-typed/too-long
 * fields, array bodies, unknown references, duplicates, PUT/PATCH of unknown ids and random junk.
 * Every refused request must be a 4xx with the right code, write nothing, and nothing may be 5xx.
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import { startServer, isError, type Res } from './helpers/server.js';
import { selfSignedCert } from './helpers/certs.js';

const golden = JSON.parse(fs.readFileSync(new URL('../src/api/spec/management.json', import.meta.url), 'utf8'));
function bodyDef(p: string, method: string): any {
  const param = (golden.paths[p]?.[method]?.parameters ?? []).find((x: any) => x.in === 'body');
  const name = param?.schema?.$ref?.split('/').pop();
  const def = name ? golden.definitions[name] : undefined;
  if (!def) return { required: [], properties: {} };
  // Flatten one level of allOf (posture checks).
  const parts = def.allOf ? def.allOf.map((x: any) => (x.$ref ? golden.definitions[x.$ref.split('/').pop()] : x)) : [def];
  return {
    required: parts.flatMap((x: any) => x.required ?? []),
    properties: Object.assign({}, ...parts.map((x: any) => x.properties ?? {})),
  };
}

const srv = await startServer(t);
const admin = await srv.login();

let seq = 0;
const uniq = (p: string) => `${p}-${++seq}`;
const MADE_UP = 'made-up-id-4711';

const makeCert = (ca: boolean, cn: string) => selfSignedCert(cn, ca);

async function mustCreate(p: string, body: unknown): Promise<string> {
  const r = await admin.post(p, body);
  if (r.status !== 201) throw new Error(`setup ${p}: ${r.status} ${r.text}`);
  return r.body.data.id;
}

// Fixtures the bodies refer to.
const ctId = await mustCreate('/config-types', { name: 'fixture-ct', schema: { type: 'object', properties: { hostname: { type: 'string' }, port: { type: 'integer' } }, required: ['hostname'] } });
const svcId = await mustCreate('/services', { name: 'fixture-svc', encryptionRequired: true });
const erId = await mustCreate('/edge-routers', { name: 'fixture-er' });
const caPems = [makeCert(true, 'bad-input-ca-1'), makeCert(true, 'bad-input-ca-2'), makeCert(true, 'bad-input-ca-3')];
const leafPem = makeCert(false, 'leaf');
let caIdx = 0;

type Kind = 'string' | 'boolean' | 'array' | 'object' | 'integer';
interface Family {
  path: string;
  valid: () => Record<string, any>;
  required: string[];
  /** Expected `cause.field` when a required field is missing, if not the field itself. */
  missingField?: Record<string, string[]>;
  types: Record<string, Kind>;
  named: boolean;
  /** Extra invalid bodies: [label, body, status, code, cause.field?]. */
  invalid?: () => Array<[string, Record<string, any>, number, string | string[], string?]>;
  canPut?: boolean;
  /** Extra fields a PUT body needs beyond the create body. */
  putExtra?: Record<string, unknown>;
}

const authPolicyBody = () => ({
  name: uniq('ap'),
  primary: {
    cert: { allowed: true, allowExpiredCerts: false },
    extJwt: { allowed: false, allowedSigners: [] as string[] },
    updb: { allowed: true, minPasswordLength: 5, requireSpecialChar: false, requireNumberChar: false, requireMixedCase: false, maxAttempts: 0, lockoutDurationMinutes: 0 },
  },
  secondary: { requireTotp: false, requireExtJwtSigner: null },
});

// Identities used by authenticator creates (each may hold one updb authenticator).
async function freshIdentity(): Promise<string> {
  return mustCreate('/identities', { name: uniq('authn-holder'), type: 'User', isAdmin: false });
}
const authnHolder = await freshIdentity();

const families: Family[] = [
  {
    path: '/identities', named: true,
    valid: () => ({ name: uniq('ident'), type: 'User', isAdmin: false }),
    required: ['name', 'type', 'isAdmin'],
    types: { name: 'string', type: 'string', isAdmin: 'boolean', roleAttributes: 'array', externalId: 'string', defaultHostingCost: 'integer', tags: 'object', appData: 'object' },
    invalid: () => [
      ['type not in enum', { type: 'Robot' }, 400, 'COULD_NOT_VALIDATE', 'type'],
      ['roleAttributes with #', { roleAttributes: ['#nope'] }, 400, 'COULD_NOT_VALIDATE', 'roleAttributes'],
      ['roleAttributes with @', { roleAttributes: ['@nope'] }, 400, 'COULD_NOT_VALIDATE', 'roleAttributes'],
      ['defaultHostingCost -1', { defaultHostingCost: -1 }, 400, 'COULD_NOT_VALIDATE', 'defaultHostingCost'],
      ['defaultHostingCost 65536', { defaultHostingCost: 65536 }, 400, 'COULD_NOT_VALIDATE', 'defaultHostingCost'],
      ['defaultHostingCost 1.5', { defaultHostingCost: 1.5 }, 400, 'COULD_NOT_VALIDATE', 'defaultHostingCost'],
      ['defaultHostingPrecedence bad', { defaultHostingPrecedence: 'sometimes' }, 400, 'COULD_NOT_VALIDATE', 'defaultHostingPrecedence'],
      ['unknown authPolicyId', { authPolicyId: MADE_UP }, 400, 'COULD_NOT_VALIDATE', 'authPolicyId'],
      ['tags value object', { tags: { k: { nested: true } } }, 400, 'COULD_NOT_VALIDATE'],
    ],
  },
  {
    path: '/services', named: true,
    valid: () => ({ name: uniq('svc'), encryptionRequired: true }),
    required: ['name', 'encryptionRequired'],
    types: { name: 'string', encryptionRequired: 'boolean', roleAttributes: 'array', configs: 'array', terminatorStrategy: 'string', maxIdleTimeMillis: 'integer' },
    invalid: () => [
      ['unknown config id', { configs: [MADE_UP] }, 400, 'COULD_NOT_VALIDATE', 'configs'],
      ['roleAttributes with #', { roleAttributes: ['#x'] }, 400, 'COULD_NOT_VALIDATE', 'roleAttributes'],
    ],
  },
  {
    path: '/configs', named: true,
    valid: () => ({ name: uniq('cfg'), configTypeId: ctId, data: { hostname: 'h', port: 22 } }),
    required: ['name', 'configTypeId', 'data'],
    missingField: { configTypeId: ['configTypeId', 'type'] },
    types: { name: 'string', configTypeId: 'string', data: 'object' },
    invalid: () => [
      ['unknown configTypeId', { configTypeId: MADE_UP }, 400, 'COULD_NOT_VALIDATE', 'type'],
      ['data is a string', { data: 'invalid' }, 400, 'COULD_NOT_VALIDATE', 'data'],
      ['data violates the schema', { data: { port: 22 } }, 400, 'COULD_NOT_VALIDATE', '(root)'],
      ['data wrong property type', { data: { hostname: 'h', port: 'x' } }, 400, 'COULD_NOT_VALIDATE'],
    ],
  },
  {
    path: '/config-types', named: true,
    valid: () => ({ name: uniq('ct') }),
    required: ['name'],
    types: { name: 'string', schema: 'object' },
    invalid: () => [
      ['schema not a JSON schema', { schema: { type: 'objectionable' } }, 400, 'COULD_NOT_VALIDATE', 'schema'],
      ['schema bad required', { schema: { type: 'object', required: 'x' } }, 400, 'COULD_NOT_VALIDATE', 'schema'],
    ],
  },
  {
    path: '/service-policies', named: true,
    valid: () => ({ name: uniq('sp'), type: 'Dial', semantic: 'AnyOf', identityRoles: ['#a'], serviceRoles: [`@${svcId}`], postureCheckRoles: [] }),
    required: ['name', 'type', 'semantic'],
    types: { name: 'string', type: 'string', semantic: 'string', identityRoles: 'array', serviceRoles: 'array', postureCheckRoles: 'array' },
    invalid: () => [
      ['#all plus another role', { identityRoles: ['#all', '#a'] }, 400, 'COULD_NOT_VALIDATE', 'identityRoles'],
      ['unprefixed role', { serviceRoles: ['plain'] }, 400, 'COULD_NOT_VALIDATE', 'serviceRoles'],
      ['@unknown identity', { identityRoles: [`@${MADE_UP}`] }, 400, 'COULD_NOT_VALIDATE', 'identityRoles'],
      ['@unknown service', { serviceRoles: [`@${MADE_UP}`] }, 400, 'COULD_NOT_VALIDATE', 'serviceRoles'],
      ['@unknown posture check', { postureCheckRoles: [`@${MADE_UP}`] }, 400, 'COULD_NOT_VALIDATE', 'postureCheckRoles'],
      ['semantic not in enum', { semantic: 'Maybe' }, 400, 'COULD_NOT_VALIDATE', 'semantic'],
      ['type not in enum', { type: 'Sideways' }, 400, 'COULD_NOT_VALIDATE', 'type'],
      ['empty role', { identityRoles: [''] }, 400, 'COULD_NOT_VALIDATE', 'identityRoles'],
    ],
  },
  {
    path: '/edge-router-policies', named: true,
    valid: () => ({ name: uniq('erp'), semantic: 'AllOf', identityRoles: ['#all'], edgeRouterRoles: [`@${erId}`] }),
    required: ['name', 'semantic'],
    types: { name: 'string', semantic: 'string', identityRoles: 'array', edgeRouterRoles: 'array' },
    invalid: () => [
      ['#all plus another role', { edgeRouterRoles: ['#all', `@${erId}`] }, 400, 'COULD_NOT_VALIDATE', 'edgeRouterRoles'],
      ['@unknown router', { edgeRouterRoles: [`@${MADE_UP}`] }, 400, 'COULD_NOT_VALIDATE', 'edgeRouterRoles'],
      ['unprefixed role', { identityRoles: ['x'] }, 400, 'COULD_NOT_VALIDATE', 'identityRoles'],
      ['semantic not in enum', { semantic: 'allof' }, 400, 'COULD_NOT_VALIDATE', 'semantic'],
    ],
  },
  {
    path: '/service-edge-router-policies', named: true,
    valid: () => ({ name: uniq('serp'), semantic: 'AnyOf', serviceRoles: ['#all'], edgeRouterRoles: ['#all'] }),
    required: ['name', 'semantic'],
    types: { name: 'string', semantic: 'string', serviceRoles: 'array', edgeRouterRoles: 'array' },
    invalid: () => [
      ['@unknown service', { serviceRoles: [`@${MADE_UP}`] }, 400, 'COULD_NOT_VALIDATE', 'serviceRoles'],
      ['#all plus another role', { serviceRoles: ['#all', '#x'] }, 400, 'COULD_NOT_VALIDATE', 'serviceRoles'],
      ['semantic not in enum', { semantic: 'None' }, 400, 'COULD_NOT_VALIDATE', 'semantic'],
    ],
  },
  {
    path: '/posture-checks', named: true,
    valid: () => ({ name: uniq('pc'), typeId: 'DOMAIN', domains: ['example.com'], roleAttributes: ['pc'] }),
    required: ['name', 'typeId', 'domains'],
    types: { name: 'string', typeId: 'string', domains: 'array', roleAttributes: 'array' },
    invalid: () => [
      ['DOMAIN with empty domains', { domains: [] }, 400, 'COULD_NOT_VALIDATE', 'domains'],
      ['unknown typeId', { typeId: 'TEMPERATURE' }, 400, 'COULD_NOT_VALIDATE', 'typeId'],
      ['domains of numbers', { domains: [1, 2] }, 400, 'COULD_NOT_VALIDATE'],
    ],
  },
  {
    path: '/edge-routers', named: true,
    valid: () => ({ name: uniq('er') }),
    required: ['name'],
    types: { name: 'string', cost: 'integer', isTunnelerEnabled: 'boolean', roleAttributes: 'array', noTraversal: 'boolean', disabled: 'boolean', ctrlChanListeners: 'object' },
    invalid: () => [
      ['cost -1', { cost: -1 }, 400, 'COULD_NOT_VALIDATE', 'cost'],
      ['cost 65536', { cost: 65536 }, 400, 'COULD_NOT_VALIDATE', 'cost'],
      ['cost 2.5', { cost: 2.5 }, 400, 'COULD_NOT_VALIDATE', 'cost'],
      ['roleAttributes with #', { roleAttributes: ['#r'] }, 400, 'COULD_NOT_VALIDATE', 'roleAttributes'],
    ],
  },
  {
    path: '/routers', named: true,
    valid: () => ({ name: uniq('tr') }),
    required: ['name'],
    types: { name: 'string', cost: 'integer', noTraversal: 'boolean', disabled: 'boolean' },
    invalid: () => [
      ['cost -1', { cost: -1 }, 400, 'COULD_NOT_VALIDATE', 'cost'],
      ['cost 65536', { cost: 65536 }, 400, 'COULD_NOT_VALIDATE', 'cost'],
    ],
  },
  {
    path: '/terminators', named: false,
    valid: () => ({ service: svcId, router: erId, binding: 'transport', address: `tcp:localhost:${2000 + ++seq}` }),
    required: ['service', 'router', 'address', 'binding'],
    types: { service: 'string', router: 'string', address: 'string', binding: 'string', cost: 'integer', precedence: 'string' },
    invalid: () => [
      ['unknown service', { service: MADE_UP }, 404, 'NOT_FOUND'],
      ['unknown router', { router: MADE_UP }, 404, 'NOT_FOUND'],
      ['cost -1', { cost: -1 }, 400, 'COULD_NOT_VALIDATE', 'cost'],
      ['cost 65536', { cost: 65536 }, 400, 'COULD_NOT_VALIDATE', 'cost'],
      ['precedence not in enum', { precedence: 'sometimes' }, 400, 'COULD_NOT_VALIDATE', 'precedence'],
    ],
  },
  {
    path: '/cas', named: true, putExtra: { identityNameFormat: '[caName]-[commonName]' },
    valid: () => ({ name: uniq('ca'), certPem: caPems[caIdx++ % caPems.length], isAutoCaEnrollmentEnabled: false, isOttCaEnrollmentEnabled: false, isAuthEnabled: false, identityRoles: [] }),
    required: ['name', 'certPem', 'isAutoCaEnrollmentEnabled', 'isOttCaEnrollmentEnabled', 'isAuthEnabled', 'identityRoles'],
    types: { name: 'string', certPem: 'string', isAutoCaEnrollmentEnabled: 'boolean', isOttCaEnrollmentEnabled: 'boolean', isAuthEnabled: 'boolean', identityRoles: 'array', identityNameFormat: 'string' },
    invalid: () => [
      ['certPem not PEM', { certPem: 'not a certificate' }, 400, ['INVALID_CERT_PEM', 'COULD_NOT_VALIDATE'], 'certPem'],
      ['leaf certificate', { certPem: leafPem }, 400, 'CERTIFICATE_IS_NOT_CA'],
      ['externalIdClaim without location', { externalIdClaim: { matcher: 'ALL', matcherCriteria: '', parser: 'NONE', parserCriteria: '', index: 0 } }, 400, 'COULD_NOT_VALIDATE'],
    ],
  },
  {
    path: '/auth-policies', named: true,
    valid: authPolicyBody,
    required: ['name', 'primary', 'secondary'],
    types: { name: 'string', primary: 'object', secondary: 'object' },
    invalid: () => [
      ['unknown allowed signer', { primary: { ...authPolicyBody().primary, extJwt: { allowed: true, allowedSigners: [MADE_UP] } } }, 404, 'NOT_FOUND'],
      ['unknown secondary signer', { secondary: { requireTotp: false, requireExtJwtSigner: MADE_UP } }, 404, 'NOT_FOUND'],
      ['primary.updb missing', { primary: { cert: { allowed: true, allowExpiredCerts: false }, extJwt: { allowed: false, allowedSigners: [] } } }, 400, 'COULD_NOT_VALIDATE'],
      ['maxAttempts a string', { primary: { ...authPolicyBody().primary, updb: { ...authPolicyBody().primary.updb, maxAttempts: 'three' } } }, 400, 'COULD_NOT_VALIDATE'],
    ],
  },
  {
    path: '/external-jwt-signers', named: true,
    valid: () => {
      const n = uniq('jwt');
      return { name: n, issuer: `https://${n}.example`, audience: 'mesh-aud', enabled: true, jwksEndpoint: `https://${n}.example/jwks` };
    },
    required: ['name', 'enabled', 'issuer', 'audience'],
    types: { name: 'string', issuer: 'string', audience: 'string', enabled: 'boolean', jwksEndpoint: 'string', scopes: 'array', useExternalId: 'boolean' },
    invalid: () => [
      ['neither certPem nor jwksEndpoint', { jwksEndpoint: undefined }, 400, 'COULD_NOT_VALIDATE'],
      ['certPem not PEM', { jwksEndpoint: undefined, certPem: 'garbage', kid: 'k1' }, 400, ['INVALID_CERT_PEM', 'COULD_NOT_VALIDATE'], 'certPem'],
      ['targetToken not in enum', { targetToken: 'REFRESH' }, 400, 'COULD_NOT_VALIDATE', 'targetToken'],
      ['unknown enrollAuthPolicyId', { enrollAuthPolicyId: MADE_UP }, 400, 'COULD_NOT_VALIDATE', 'enrollAuthPolicyId'],
    ],
  },
  {
    path: '/authenticators', named: false,
    valid: () => ({ method: 'updb', identityId: authnHolder, username: uniq('user'), password: 'secret-pass-1' }),
    required: ['method', 'identityId'],
    types: { method: 'string', identityId: 'string', username: 'string', password: 'string' },
    invalid: () => [
      ['method not updb/cert', { method: 'magic' }, 400, 'COULD_NOT_VALIDATE', 'method'],
      ['updb without password', { password: undefined }, 400, 'COULD_NOT_VALIDATE', 'password'],
      ['updb without username', { username: undefined }, 400, 'COULD_NOT_VALIDATE', 'username'],
      ['password too short', { password: 'abc' }, 400, 'COULD_NOT_VALIDATE', 'password'],
      ['username too short', { username: 'ab' }, 400, 'COULD_NOT_VALIDATE', 'username'],
      ['cert without certPem', { method: 'cert', username: undefined, password: undefined }, 400, 'COULD_NOT_VALIDATE'],
      ['unknown identityId', { identityId: MADE_UP }, 400, 'COULD_NOT_VALIDATE', 'identityId'],
    ],
  },
];

function wrongValues(kind: Kind): unknown[] {
  switch (kind) {
    case 'string': return [123, true, {}, ['x']];
    case 'boolean': return ['true', 1, [], {}];
    case 'array': return [{}, 'x', 7];
    case 'object': return ['str', [], 42];
    case 'integer': return ['1', true, [], {}];
  }
}

function without(body: Record<string, any>, key: string) {
  const b = { ...body };
  delete b[key];
  return b;
}

async function count(p: string): Promise<number> {
  const r = await admin.get(`${p}?limit=1`);
  if (r.status !== 200) throw new Error(`count ${p}: ${r.status}`);
  return r.body.meta.pagination.totalCount;
}

const allStatuses: Array<[string, number]> = [];
function track(label: string, r: Res) {
  allStatuses.push([label, r.status]);
}

for (const fam of families) {
  t.test(`create ${fam.path}`, async (t) => {
    const before = await count(fam.path);
    const createDef = bodyDef(fam.path, 'post');
    const putDef = bodyDef(`${fam.path}/{id}`, 'put');
    const patchDef = bodyDef(`${fam.path}/{id}`, 'patch');
    t.ok(fam.required.every((f) => createDef.required.includes(f) || f === 'domains'), 'required list agrees with the spec');
    let created = 0;
    const post = async (label: string, body: unknown, raw?: string) => {
      const r = raw !== undefined ? await admin.post(fam.path, undefined, { raw, headers: { 'content-type': 'application/json' } }) : await admin.post(fam.path, body);
      track(`${fam.path} ${label}`, r);
      t.ok(r.status < 500, `${label}: no 5xx (${r.status} ${r.body?.error?.code ?? ''})`);
      if (r.status === 201) created++;
      return r;
    };
    const expect400 = (r: Res, label: string, field?: string | string[], code = 'COULD_NOT_VALIDATE') => {
      t.ok(isError(r, 400, code), `${label} → 400 ${code}: got ${r.status} ${r.body?.error?.code ?? ''} ${JSON.stringify(r.body?.error?.cause ?? '')}`);
      if (field !== undefined) {
        const fields = Array.isArray(field) ? field : [field];
        t.ok(fields.includes(r.body?.error?.cause?.field), `${label}: cause.field ${fields.join('|')} (got ${r.body?.error?.cause?.field})`);
      }
    };

    // The valid body really is valid.
    const ok = await post('valid', fam.valid());
    t.equal(ok.status, 201, `valid create: ${ok.text.slice(0, 300)}`);
    const id = ok.body?.data?.id as string;
    t.equal(ok.body?.data?._links?.self?.href, `.${fam.path}/${id}`);
    const got = await admin.get(`${fam.path}/${id}`);
    t.equal(got.status, 200, 'created entity readable');

    for (const field of fam.required) {
      const base = fam.valid();
      const expectField = fam.missingField?.[field] ?? field;
      expect400(await post(`missing ${field}`, without(base, field)), `missing ${field}`, expectField);
      if (createDef.properties[field]?.['x-nullable'] !== true) {
        expect400(await post(`null ${field}`, { ...fam.valid(), [field]: null }), `null ${field}`, expectField);
      }
      if (fam.types[field] === 'string') {
        expect400(await post(`empty ${field}`, { ...fam.valid(), [field]: '' }), `empty string ${field}`, field === 'configTypeId' ? ['configTypeId', 'type'] : field);
      }
    }
    for (const [field, kind] of Object.entries(fam.types)) {
      for (const v of wrongValues(kind)) {
        const r = await post(`${field}=${JSON.stringify(v)}`, { ...fam.valid(), [field]: v });
        expect400(r, `${field} as ${JSON.stringify(v)} (${kind} expected)`);
      }
    }
    if (fam.named) {
      expect400(await post('name 1025', { ...fam.valid(), name: 'n'.repeat(1025) }), 'name longer than 1024', 'name');
      expect400(await post('name 5000', { ...fam.valid(), name: 'n'.repeat(5000) }), 'name of 5000 chars', 'name');
      const max = await post('name 1024', { ...fam.valid(), name: `${'m'.repeat(1020)}${String(seq++).padStart(4, '0')}` });
      t.equal(max.status, 201, `name of exactly 1024 chars accepted: ${max.status} ${max.text.slice(0, 200)}`);
      const dupName = ok.status === 201 ? (await admin.get(`${fam.path}/${id}`)).body?.data?.name : undefined;
      if (dupName) {
        const d = await post('duplicate name', { ...fam.valid(), name: dupName });
        expect400(d, 'duplicate name', 'name');
      }
    }
    // Other long strings are bounded too.
    for (const [field, kind] of Object.entries(fam.types)) {
      if (kind !== 'string' || field === 'name') continue;
      const r = await post(`${field} 70000`, { ...fam.valid(), [field]: 'x'.repeat(70000) });
      t.equal(r.status, 400, `${field} of 70000 chars → 400 (${r.status})`);
    }
    for (const [label, body] of [['array body', [fam.valid()]], ['string body', 'name'], ['number body', 42], ['null body', null], ['empty object', {}]] as Array<[string, unknown]>) {
      const r = await post(label, undefined, JSON.stringify(body));
      t.equal(r.status, 400, `${label} → 400 (${r.status})`);
      t.ok(['COULD_NOT_VALIDATE', 'COULD_NOT_PARSE_BODY'].includes(r.body?.error?.code), `${label} code ${r.body?.error?.code}`);
    }
    const noBody = await admin.post(fam.path);
    track(`${fam.path} no body`, noBody);
    t.equal(noBody.status, 400, `no body → 400 (${noBody.status})`);
    for (const [label, patch, status, code, field] of fam.invalid?.() ?? []) {
      const body: Record<string, any> = { ...fam.valid(), ...patch };
      for (const k of Object.keys(body)) if (body[k] === undefined) delete body[k];
      const r = await post(label, body);
      const codes = Array.isArray(code) ? code : [code];
      t.ok(codes.some((c) => isError(r, status, c)), `${label} → ${status} ${codes.join('|')}: got ${r.status} ${r.body?.error?.code ?? ''} ${JSON.stringify(r.body?.error?.cause ?? '')}`);
      if (field) t.equal(r.body?.error?.cause?.field, field, `${label}: cause.field ${field}`);
    }

    // Nothing but the successful creates was written.
    t.equal(await count(fam.path), before + created, `only ${created} successful create(s) were written`);

    // PUT / PATCH / DELETE of a made-up id.
    if (fam.canPut !== false) {
      const put = await admin.put(`${fam.path}/${MADE_UP}`, { ...fam.valid(), ...fam.putExtra });
      track(`${fam.path} PUT unknown`, put);
      t.ok(isError(put, 404, 'NOT_FOUND'), `PUT unknown id → 404: ${put.status} ${put.body?.error?.code}`);
    }
    const patchBody: Record<string, any> = fam.named ? { name: uniq('patched') } : { tags: { a: 'b' } };
    if (fam.path === '/posture-checks') patchBody.typeId = 'DOMAIN';
    const patch = await admin.patch(`${fam.path}/${MADE_UP}`, patchBody);
    track(`${fam.path} PATCH unknown`, patch);
    t.ok(isError(patch, 404, 'NOT_FOUND'), `PATCH unknown id → 404: ${patch.status} ${patch.body?.error?.code}`);
    const del = await admin.delete(`${fam.path}/${MADE_UP}`);
    t.ok(isError(del, 404, 'NOT_FOUND'), `DELETE unknown id → 404: ${del.status}`);

    // PUT / PATCH of the real entity with bad input is refused and changes nothing.
    if (ok.status === 201) {
      const snapshot = (await admin.get(`${fam.path}/${id}`)).body?.data;
      if (fam.canPut !== false) {
        for (const field of putDef.required as string[]) {
          const r = await admin.put(`${fam.path}/${id}`, without({ ...fam.valid(), ...fam.putExtra }, field));
          track(`${fam.path} PUT missing ${field}`, r);
          t.equal(r.status, 400, `PUT without ${field} → 400 (${r.status})`);
        }
      }
      for (const [field, kind] of Object.entries(fam.types)) {
        if (!(field in patchDef.properties)) continue; // not patchable: ignored like any unknown property
        const r = await admin.patch(`${fam.path}/${id}`, { [field]: wrongValues(kind)[0], ...(fam.path === '/posture-checks' && field !== 'typeId' ? { typeId: 'DOMAIN' } : {}) });
        track(`${fam.path} PATCH ${field}`, r);
        t.equal(r.status, 400, `PATCH ${field} wrong type → 400 (${r.status} ${r.body?.error?.code ?? ''})`);
      }
      if (fam.named) {
        const r = await admin.patch(`${fam.path}/${id}`, { name: '', ...(fam.path === '/posture-checks' ? { typeId: 'DOMAIN' } : {}) });
        t.equal(r.status, 400, `PATCH empty name → 400 (${r.status})`);
        const r2 = await admin.patch(`${fam.path}/${id}`, { name: 'z'.repeat(1025), ...(fam.path === '/posture-checks' ? { typeId: 'DOMAIN' } : {}) });
        t.equal(r2.status, 400, `PATCH long name → 400 (${r2.status})`);
      }
      const arr = await admin.request('PATCH', `${fam.path}/${id}`, undefined, { raw: '[]', headers: { 'content-type': 'application/json' } });
      t.equal(arr.status, 400, `PATCH with an array body → 400 (${arr.status})`);
      const after = (await admin.get(`${fam.path}/${id}`)).body?.data;
      t.same(after, snapshot, 'refused PUT/PATCH changed nothing');
    }
  });
}

t.test('duplicates in other unique fields', async (t) => {
  const ca = await admin.post('/cas', { name: uniq('ca-dup'), certPem: caPems[0], isAutoCaEnrollmentEnabled: false, isOttCaEnrollmentEnabled: false, isAuthEnabled: false, identityRoles: [] });
  // caPems[0] was used by the first valid /cas create above.
  t.ok(isError(ca, 400, 'COULD_NOT_VALIDATE'), `same CA certificate twice → 400: ${ca.status} ${ca.body?.error?.code}`);
  t.equal(ca.body?.error?.cause?.field, 'certPem');
  const n = uniq('iss');
  const first = await admin.post('/external-jwt-signers', { name: n, issuer: `https://${n}.example`, audience: 'a', enabled: true, jwksEndpoint: 'https://x.example/jwks' });
  t.equal(first.status, 201);
  const dupIssuer = await admin.post('/external-jwt-signers', { name: uniq('iss'), issuer: `https://${n}.example`, audience: 'a', enabled: true, jwksEndpoint: 'https://x.example/jwks' });
  t.equal(dupIssuer.status, 400, `duplicate issuer → 400 (${dupIssuer.status})`);
  const holder = await freshIdentity();
  const a1 = await admin.post('/authenticators', { method: 'updb', identityId: holder, username: uniq('dupuser'), password: 'secret-pass-1' });
  t.equal(a1.status, 201);
  const a2 = await admin.post('/authenticators', { method: 'updb', identityId: holder, username: uniq('dupuser'), password: 'secret-pass-1' });
  t.ok(isError(a2, 409, 'MAX_AUTHENTICATOR_METHODS_REACHED'), `second updb authenticator → 409: ${a2.status} ${a2.body?.error?.code}`);
  const other = await freshIdentity();
  const sameUser = await admin.post('/authenticators', { method: 'updb', identityId: other, username: a1.status === 201 ? (await admin.get(`/authenticators/${a1.body.data.id}`)).body.data.username : 'x', password: 'secret-pass-1' });
  t.equal(sameUser.status, 400, `username already used by another identity → 400 (${sameUser.status})`);
});

t.test('references on delete', async (t) => {
  const ct = await mustCreate('/config-types', { name: uniq('ct-ref') });
  await mustCreate('/configs', { name: uniq('cfg-ref'), configTypeId: ct, data: { a: 1 } });
  const del = await admin.delete(`/config-types/${ct}`);
  t.ok(isError(del, 409, 'CAN_NOT_DELETE_REFERENCED_ENTITY'), `delete used config type → 409: ${del.status}`);
  t.equal((await admin.get(`/config-types/${ct}`)).status, 200, 'still there');
  const dflt = await admin.delete('/auth-policies/default');
  t.equal(dflt.status, 409, `delete default auth policy → 409 (${dflt.status})`);
  const me = await admin.get('/current-identity');
  const delAdmin = await admin.delete(`/identities/${me.body.data.id}`);
  t.ok(isError(delAdmin, 400, 'ENTITY_CAN_NOT_BE_DELETED'), `delete default admin → 400: ${delAdmin.status}`);
});

t.test('random junk never yields a 5xx', async (t) => {
  const junk: string[] = [
    '', ' ', 'null', 'true', '0', '-1e309', '1e400', '"str"', '[]', '[[[[[]]]]]', '{}', '{"":""}',
    '{"__proto__":{"isAdmin":true},"name":"proto"}', '{"constructor":{"prototype":{"x":1}}}', '{"name":{"$ne":null}}',
    `{"name":"${'\\u0000'.repeat(10)}"}`, '{"name":"\\ud800"}', '{"name":"😀","type":"User","isAdmin":false,"tags":{"😀":"😀"}}',
    JSON.stringify({ name: 'deep', tags: JSON.parse('{"a":'.repeat(200) + '1' + '}'.repeat(200)) }),
    '{"name": 1e308, "type": -0, "isAdmin": 1.7976931348623157e309}', '{"a":1,"a":2}', '\u00ff\u00fe', '\x00\x01\x02', '{"name":"x"}{"name":"y"}',
    JSON.stringify({ roleAttributes: Array.from({ length: 5000 }, (_, i) => `r${i}`), name: 'many-roles', type: 'User', isAdmin: false }),
    JSON.stringify({ tags: Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`k${i}`, 'v'])), name: 'many-tags', type: 'User', isAdmin: false }),
  ];
  const targets = families.map((f) => f.path);
  let n = 0;
  for (const p of targets) {
    for (const raw of junk) {
      for (const [m, url] of [['POST', p], ['PUT', `${p}/${MADE_UP}`], ['PATCH', `${p}/${MADE_UP}`]] as const) {
        const r = await admin.request(m, url, undefined, { raw, headers: { 'content-type': 'application/json' } });
        n++;
        if (r.status >= 500) t.fail(`${m} ${url} ${JSON.stringify(raw.slice(0, 60))} → ${r.status} ${r.text.slice(0, 200)}`);
      }
    }
  }
  t.pass(`${n} junk requests sent`);
  const proto = await admin.get(`/identities?filter=${encodeURIComponent('name = "proto"')}`);
  for (const x of proto.body?.data ?? []) t.equal(x.isAdmin, false, '__proto__ did not make an admin');
  // Query strings too.
  for (const q of ['limit=%00', 'filter=%ff%fe', 'filter=' + encodeURIComponent('('.repeat(500)), 'offset=99999999999999999999', 'limit=1e3', 'sort=' + encodeURIComponent('name,'.repeat(50)), 'roleSemantic=%00', 'roleFilter=']) {
    const r = await admin.get(`/identities?${q}`);
    t.ok(r.status < 500, `GET /identities?${q.slice(0, 40)} → ${r.status}`);
  }
  // Still serving.
  t.equal((await admin.get('/identities?limit=1')).status, 200);
});

t.test('no response was a 5xx', async (t) => {
  const bad = allStatuses.filter(([, s]) => s >= 500);
  t.same(bad, [], 'no 5xx anywhere in the matrix');
  t.ok(allStatuses.length > 500, `${allStatuses.length} matrix requests`);
});

t.test('deeply nested bodies are refused and the controller keeps serving', async (t) => {
  const own = await startServer(t);
  const a = await own.login();
  const ct = await a.post('/config-types', { name: 'free-form' });
  let deep = '1';
  for (let i = 0; i < 20000; i++) deep = `{"a":${deep}}`;
  const raw = (body: string) => ({ raw: body, headers: { 'content-type': 'application/json' } });
  const r1 = await a.post('/configs', undefined, raw(`{"name":"deep","configTypeId":"${ct.body.data.id}","data":${deep}}`));
  t.ok(isError(r1, 400, 'COULD_NOT_PARSE_BODY'), `deep config data → 400 (${r1.status})`);
  const r2 = await a.post('/identities', undefined, raw(`{"name":"n","type":"User","isAdmin":false,"appData":{"x":${'['.repeat(100000)}1${']'.repeat(100000)}}}`));
  t.ok(r2.status === 400, `deep array → 400 (${r2.status})`);
  let ok = '1';
  for (let i = 0; i < 20; i++) ok = `{"a":${ok}}`;
  const r3 = await a.post('/configs', undefined, raw(`{"name":"nested-ok","configTypeId":"${ct.body.data.id}","data":${ok}}`));
  t.equal(r3.status, 201, '20 levels are fine');
  t.equal((await a.get('/version')).status, 200, 'still serving');
  t.equal((await a.get('/configs?filter=name="deep"')).body.meta.pagination.totalCount, 0, 'nothing written');
});
