/**
 * Bad input each family refuses by rules of its own (config data against its type's schema, CA
 * certificates, auth policy signers, signer key sources, posture check lists, the authenticator
 * create handler's fields), duplicates in unique fields beyond names, references on delete and
 * random junk. The matrix every family shares (wrong types, missing required, unknown references,
 * duplicate names, body shapes, bad lists) is test/contract.test.ts, driven by the declarations.
 * Every refused request must be a 4xx with the right code, write nothing, and nothing may be 5xx.
 */
import t from 'tap';
import { ALIASES, RESOURCES } from '../src/resources/index.js';
import { startServer, isError, type Res } from './helpers/server.js';
import { selfSignedCert } from './helpers/pki.js';
import { authPolicyBody } from './helpers/bodies.js';

const srv = await startServer(t);
const admin = await srv.login();

let seq = 0;
const uniq = (p: string) => `${p}-${++seq}`;
const MADE_UP = 'made-up-id-4711';

const makeCert = (ca: boolean, cn: string) => selfSignedCert(cn, ca);

// Fixtures the bodies refer to.
const ctId = await admin.create('/config-types', { name: 'fixture-ct', schema: { type: 'object', properties: { hostname: { type: 'string' }, port: { type: 'integer' } }, required: ['hostname'] } });
const svcId = await admin.create('/services', { name: 'fixture-svc', encryptionRequired: true });
const erId = await admin.create('/edge-routers', { name: 'fixture-er' });
const caPems = [makeCert(true, 'bad-input-ca-1'), makeCert(true, 'bad-input-ca-2'), makeCert(true, 'bad-input-ca-3')];
const leafPem = makeCert(false, 'leaf');
let caIdx = 0;

type Kind = 'string' | 'boolean' | 'array' | 'object' | 'integer';
interface Family {
  path: string;
  valid: () => Record<string, any>;
  /** Invalid bodies, each the valid body with these changes: [label, changes, status, code(s), cause.field?]. */
  invalid: () => Array<[string, Record<string, any>, number, string | string[], string?]>;
  /** For a create outside the declarations (authenticators): required properties and their types. */
  required?: string[];
  types?: Record<string, Kind>;
}

const authPolicy = () => authPolicyBody(uniq('ap'));

// Identities used by authenticator creates (each may hold one updb authenticator).
async function freshIdentity(): Promise<string> {
  return admin.create('/identities', { name: uniq('authn-holder'), type: 'User', isAdmin: false });
}
const authnHolder = await freshIdentity();

const families: Family[] = [
  {
    path: '/identities',
    valid: () => ({ name: uniq('ident'), type: 'User', isAdmin: false }),
    invalid: () => [['tags value object', { tags: { k: { nested: true } } }, 400, 'COULD_NOT_VALIDATE']],
  },
  {
    path: '/configs',
    valid: () => ({ name: uniq('cfg'), configTypeId: ctId, data: { hostname: 'h', port: 22 } }),
    invalid: () => [
      ['data violates the schema', { data: { port: 22 } }, 400, 'COULD_NOT_VALIDATE', '(root)'],
      ['data wrong property type', { data: { hostname: 'h', port: 'x' } }, 400, 'COULD_NOT_VALIDATE'],
    ],
  },
  {
    path: '/config-types',
    valid: () => ({ name: uniq('ct') }),
    invalid: () => [
      ['schema not a JSON schema', { schema: { type: 'objectionable' } }, 400, 'COULD_NOT_VALIDATE', 'schema'],
      ['schema bad required', { schema: { type: 'object', required: 'x' } }, 400, 'COULD_NOT_VALIDATE', 'schema'],
    ],
  },
  {
    path: '/edge-router-policies',
    valid: () => ({ name: uniq('erp'), semantic: 'AllOf', identityRoles: ['#all'], edgeRouterRoles: [`@${erId}`] }),
    invalid: () => [['semantic in lower case', { semantic: 'allof' }, 400, 'COULD_NOT_VALIDATE', 'semantic']],
  },
  {
    path: '/posture-checks',
    valid: () => ({ name: uniq('pc'), typeId: 'DOMAIN', domains: ['example.com'], roleAttributes: ['pc'] }),
    invalid: () => [
      ['DOMAIN with empty domains', { domains: [] }, 400, 'COULD_NOT_VALIDATE', 'domains'],
      ['unknown typeId', { typeId: 'TEMPERATURE' }, 400, 'COULD_NOT_VALIDATE', 'typeId'],
      ['domains of numbers', { domains: [1, 2] }, 400, 'COULD_NOT_VALIDATE'],
    ],
  },
  {
    path: '/terminators',
    valid: () => ({ service: svcId, router: erId, binding: 'transport', address: `tcp:localhost:${2000 + ++seq}` }),
    invalid: () => [['unknown router', { router: MADE_UP }, 404, 'NOT_FOUND']],
  },
  {
    path: '/cas',
    valid: () => ({ name: uniq('ca'), certPem: caPems[caIdx++ % caPems.length], isAutoCaEnrollmentEnabled: false, isOttCaEnrollmentEnabled: false, isAuthEnabled: false, identityRoles: [] }),
    invalid: () => [
      ['certPem not PEM', { certPem: 'not a certificate' }, 400, ['INVALID_CERT_PEM', 'COULD_NOT_VALIDATE'], 'certPem'],
      ['leaf certificate', { certPem: leafPem }, 400, 'CERTIFICATE_IS_NOT_CA'],
      ['externalIdClaim without location', { externalIdClaim: { matcher: 'ALL', matcherCriteria: '', parser: 'NONE', parserCriteria: '', index: 0 } }, 400, 'COULD_NOT_VALIDATE'],
    ],
  },
  {
    path: '/auth-policies',
    valid: authPolicy,
    invalid: () => [
      ['unknown allowed signer', { primary: { ...authPolicy().primary, extJwt: { allowed: true, allowedSigners: [MADE_UP] } } }, 404, 'NOT_FOUND'],
      ['unknown secondary signer', { secondary: { requireTotp: false, requireExtJwtSigner: MADE_UP } }, 404, 'NOT_FOUND'],
      ['primary.updb missing', { primary: { cert: { allowed: true, allowExpiredCerts: false }, extJwt: { allowed: false, allowedSigners: [] } } }, 400, 'COULD_NOT_VALIDATE'],
      ['maxAttempts a string', { primary: { ...authPolicy().primary, updb: { ...authPolicy().primary.updb, maxAttempts: 'three' } } }, 400, 'COULD_NOT_VALIDATE'],
    ],
  },
  {
    path: '/external-jwt-signers',
    valid: () => {
      const n = uniq('jwt');
      return { name: n, issuer: `https://${n}.example`, audience: 'mesh-aud', enabled: true, jwksEndpoint: `https://${n}.example/jwks` };
    },
    invalid: () => [
      ['neither certPem nor jwksEndpoint', { jwksEndpoint: undefined }, 400, 'COULD_NOT_VALIDATE'],
      ['certPem not PEM', { jwksEndpoint: undefined, certPem: 'garbage', kid: 'k1' }, 400, ['INVALID_CERT_PEM', 'COULD_NOT_VALIDATE'], 'certPem'],
      ['unknown enrollAuthPolicyId', { enrollAuthPolicyId: MADE_UP }, 400, 'COULD_NOT_VALIDATE', 'enrollAuthPolicyId'],
    ],
  },
  {
    path: '/authenticators',
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
    let created = 0;
    const post = async (label: string, body: unknown) => {
      const r = await admin.post(fam.path, body);
      track(`${fam.path} ${label}`, r);
      t.ok(r.status < 500, `${label}: no 5xx (${r.status} ${r.body?.error?.code ?? ''})`);
      if (r.status === 201) created++;
      return r;
    };
    const expect400 = (r: Res, label: string, field?: string) => {
      t.ok(isError(r, 400, 'COULD_NOT_VALIDATE'), `${label} → 400 COULD_NOT_VALIDATE: got ${r.status} ${r.body?.error?.code ?? ''} ${JSON.stringify(r.body?.error?.cause ?? '')}`);
      if (field !== undefined) t.equal(r.body?.error?.cause?.field, field, `${label}: cause.field ${field}`);
    };

    // The valid body really is valid.
    const ok = await post('valid', fam.valid());
    t.equal(ok.status, 201, `valid create: ${ok.text.slice(0, 300)}`);

    for (const field of fam.required ?? []) {
      expect400(await post(`missing ${field}`, without(fam.valid(), field)), `missing ${field}`, field);
      expect400(await post(`null ${field}`, { ...fam.valid(), [field]: null }), `null ${field}`, field);
    }
    for (const [field, kind] of Object.entries(fam.types ?? {})) {
      for (const v of wrongValues(kind)) expect400(await post(`${field}=${JSON.stringify(v)}`, { ...fam.valid(), [field]: v }), `${field} as ${JSON.stringify(v)} (${kind} expected)`);
    }
    for (const [label, patch, status, code, field] of fam.invalid()) {
      const body: Record<string, any> = { ...fam.valid(), ...patch };
      for (const k of Object.keys(body)) if (body[k] === undefined) delete body[k];
      const r = await post(label, body);
      const codes = Array.isArray(code) ? code : [code];
      t.ok(codes.some((c) => isError(r, status, c)), `${label} → ${status} ${codes.join('|')}: got ${r.status} ${r.body?.error?.code ?? ''} ${JSON.stringify(r.body?.error?.cause ?? '')}`);
      if (field) t.equal(r.body?.error?.cause?.field, field, `${label}: cause.field ${field}`);
    }

    // Nothing but the successful creates was written.
    t.equal(await count(fam.path), before + created, `only ${created} successful create(s) were written`);
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
  const ct = await admin.create('/config-types', { name: uniq('ct-ref') });
  await admin.create('/configs', { name: uniq('cfg-ref'), configTypeId: ct, data: { a: 1 } });
  const del = await admin.delete(`/config-types/${ct}`);
  t.ok(isError(del, 409, 'CAN_NOT_DELETE_REFERENCED_ENTITY'), `delete used config type → 409: ${del.status}`);
  t.equal((await admin.get(`/config-types/${ct}`)).status, 200, 'still there');
  const dflt = await admin.delete('/auth-policies/default');
  t.equal(dflt.status, 409, `delete default auth policy → 409 (${dflt.status})`);
  const me = await admin.get('/current-identity');
  const delAdmin = await admin.delete(`/identities/${me.body.data.id}`);
  t.ok(isError(delAdmin, 400, 'ENTITY_CAN_NOT_BE_DELETED'), `delete default admin → 400: ${delAdmin.status}`);
});

t.test('input that makes no sense: refused with 400 naming the field, nothing written (docs/limits.md)', async (t) => {
  const counts = async () => Object.fromEntries(await Promise.all(['identities', 'services', 'service-policies'].map(async (p) => [p, (await admin.get(`/${p}?limit=1`)).body.meta.pagination.totalCount])));
  const before = await counts();
  const json = (raw: string) => ({ raw, headers: { 'content-type': 'application/json' } });
  const cases: Array<[string, Promise<Res>, string]> = [
    ['a name holding NUL', admin.post('/identities', { name: 'a\u0000b', type: 'User', isAdmin: false }), 'name'],
    ['a name holding DEL', admin.post('/services', { name: 'a\u007fb', encryptionRequired: true }), 'name'],
    ['an attribute holding ESC', admin.post('/identities', { name: uniq('ctl'), type: 'User', isAdmin: false, roleAttributes: ['\u001b[31mred'] }), 'roleAttributes.0'],
    ['maxIdleTimeMillis -1', admin.post('/services', { name: uniq('svc'), encryptionRequired: true, maxIdleTimeMillis: -1 }), 'maxIdleTimeMillis'],
    ['a terminatorStrategy of 5,000 characters', admin.post('/services', { name: uniq('svc'), encryptionRequired: true, terminatorStrategy: 's'.repeat(5000) }), 'terminatorStrategy'],
    ['serviceHostingCosts naming no service', admin.post('/identities', { name: uniq('host'), type: 'User', isAdmin: false, serviceHostingCosts: { [MADE_UP]: 10 } }), `serviceHostingCosts.${MADE_UP}`],
    ['serviceHostingPrecedences naming no service', admin.post('/identities', { name: uniq('host'), type: 'User', isAdmin: false, serviceHostingPrecedences: { [MADE_UP]: 'required' } }), `serviceHostingPrecedences.${MADE_UP}`],
    ['100,000 identityRoles', admin.post('/service-policies', { name: uniq('sp'), type: 'Dial', semantic: 'AnyOf', identityRoles: Array(100000).fill('#a'), serviceRoles: [] }), 'identityRoles'],
    ['duplicate keys', admin.post('/identities', undefined, json(`{"name":"${uniq('dup')}","type":"User","isAdmin":false,"isAdmin":true}`)), 'isAdmin'],
    ['a nested duplicate key', admin.post('/services', undefined, json(`{"name":"${uniq('dup')}","encryptionRequired":true,"tags":{"a":"1","a":"2"}}`)), 'tags.a'],
  ];
  for (const [label, p, field] of cases) {
    const r = await p;
    t.ok(isError(r, 400, 'COULD_NOT_VALIDATE'), `${label} → 400 COULD_NOT_VALIDATE (${r.status} ${r.body?.error?.code})`);
    t.equal(r.body?.error?.cause?.field, field, `${label}: cause.field ${field}`);
  }
  t.same(await counts(), before, 'nothing written');

  // Hosting maps keyed by a real service are fine; a key the identity already holds survives its service.
  const svc = await admin.create('/services', { name: uniq('host-svc'), encryptionRequired: true });
  const holder = await admin.create('/identities', { name: uniq('host'), type: 'User', isAdmin: false, serviceHostingCosts: { [svc]: 5 }, serviceHostingPrecedences: { [svc]: 'required' } });
  t.equal((await admin.delete(`/services/${svc}`)).status, 200, 'the service is deleted');
  const got = (await admin.get(`/identities/${holder}`)).body.data;
  const put = await admin.put(`/identities/${holder}`, { name: got.name, type: 'User', isAdmin: false, serviceHostingCosts: got.serviceHostingCosts, serviceHostingPrecedences: got.serviceHostingPrecedences });
  t.equal(put.status, 200, `PUT sending back what GET showed still works (${put.status} ${put.body?.error?.cause?.field ?? ''})`);
  const added = await admin.patch(`/identities/${holder}`, { serviceHostingCosts: { ...got.serviceHostingCosts, [MADE_UP]: 1 } });
  t.equal(added.body?.error?.cause?.field, `serviceHostingCosts.${MADE_UP}`, 'adding a key naming no service is refused');
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
  const targets = [...RESOURCES, ...ALIASES].filter((d) => d.operations.create).map((d) => `/${d.path}`).concat('/authenticators');
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
  t.ok(allStatuses.length > 50, `${allStatuses.length} matrix requests`);
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
