/**
 * Response conformance: every response body the controller sends must validate against the
 * response schema the upstream edge API v0.28.0 Swagger 2.0 documents declare for the returned
 * status (`paths[path][method].responses[status].schema`), the way a schema-validating proxy
 * (prism) or a generated go-swagger client would check it.
 *
 * The Swagger definitions are converted here (independently of src/api/validate.ts) into one
 * draft-07 document per API:
 * - `x-nullable: true` (on a property, a `$ref`, or a definition) allows JSON null; nothing else does,
 *   so a required, non-nullable field sent as null (or missing) fails;
 * - `discriminator` definitions (postureCheckDetail…) dispatch on the discriminator value to the
 *   subtype whose `x-class` matches, and reject unknown values (go-swagger unmarshalling does);
 * - `additionalProperties: {type: object}` without further structure is read as "any value" (go-swagger
 *   generates `map[string]interface{}` for it, e.g. `subTags`);
 * - `format: uri` is checked as `uri-reference` (go-openapi parses it with url.Parse, relative links are fine);
 * - extra properties are allowed; nothing is coerced, no defaults applied.
 */
import path from 'node:path';
import t, { type Test } from 'tap';
import { Ajv } from 'ajv';
import type { ErrorObject, ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { startServer, sessionIdOf, Client, type Res, type Server } from './helpers/server.js';
import { selfSignedCert } from './helpers/pki.js';
import { authPolicyBody } from './helpers/bodies.js';
import clientDoc from '../src/api/spec/client.json' with { type: 'json' };
import managementDoc from '../src/api/spec/management.json' with { type: 'json' };

const addFormats: any = (addFormatsModule as any).default ?? addFormatsModule;

type Api = 'management' | 'client';
type Schema = Record<string, any>;
const DOCS: Record<Api, any> = { management: managementDoc, client: clientDoc };
const DEF = '#/definitions/';
const KNOWN_FORMATS = new Set(['date-time', 'uuid', 'uri', 'url', 'byte', 'int32', 'int64']);
const COPIED = [
  'type', 'enum', 'minLength', 'maxLength', 'pattern', 'minimum', 'maximum', 'multipleOf',
  'minItems', 'maxItems', 'uniqueItems', 'minProperties', 'maxProperties', 'required',
];

const refName = (s: any): string | undefined =>
  typeof s?.$ref === 'string' && s.$ref.startsWith(DEF) ? s.$ref.slice(DEF.length) : undefined;

const orNull = (s: Schema): Schema => ({ anyOf: [s, { type: 'null' }] });

/** Swagger 2.0 definitions → one JSON Schema document with `$id` = rootId. */
function convertDocument(doc: any, rootId: string): Schema {
  const defs: Record<string, any> = doc.definitions ?? {};
  // discriminated base → (x-class value → subtype)
  const subtypes = new Map<string, { prop: string; byValue: Map<string, string> }>();
  for (const [name, def] of Object.entries<any>(defs)) {
    if (typeof def?.discriminator !== 'string') continue;
    const byValue = new Map<string, string>();
    for (const [sub, sdef] of Object.entries<any>(defs)) {
      if (Array.isArray(sdef?.allOf) && sdef.allOf.some((p: any) => refName(p) === name)) {
        byValue.set(typeof sdef['x-class'] === 'string' ? sdef['x-class'] : sub, sub);
      }
    }
    subtypes.set(name, { prop: def.discriminator, byValue });
  }
  const ref = (name: string): Schema => ({ $ref: `${rootId}${DEF}${name}` });

  const conv = (s: any): Schema => {
    if (!s || typeof s !== 'object') return {};
    const r = refName(s);
    if (r) return s['x-nullable'] === true ? orNull(ref(r)) : ref(r);
    const out: Schema = {};
    for (const k of COPIED) if (s[k] !== undefined) out[k] = s[k];
    if (s.type === 'file') delete out.type;
    // go-openapi strfmt `uri` accepts what url.Parse accepts, relative references included (upstream
    // links are `./identities/<id>`); ajv-formats `uri` demands an absolute URI, so use `uri-reference`.
    if (typeof s.format === 'string' && KNOWN_FORMATS.has(s.format)) out.format = s.format === 'uri' ? 'uri-reference' : s.format;
    if (s.exclusiveMinimum === true && s.minimum !== undefined) { out.exclusiveMinimum = s.minimum; delete out.minimum; }
    if (s.exclusiveMaximum === true && s.maximum !== undefined) { out.exclusiveMaximum = s.maximum; delete out.maximum; }
    if (Array.isArray(s.allOf)) {
      out.allOf = s.allOf.map((part: any) => {
        const pr = refName(part);
        // a subtype's reference to its discriminated base must not re-enter the dispatch
        if (pr && subtypes.has(pr)) return ref(pr + '__base');
        return conv(part);
      });
    }
    if (s.items) out.items = conv(s.items);
    if (s.additionalProperties !== undefined) {
      const ap = s.additionalProperties;
      if (typeof ap === 'boolean') out.additionalProperties = ap;
      else if (ap && typeof ap === 'object') {
        const free = ap.type === 'object' && !ap.properties && !ap.additionalProperties && !ap.allOf && !ap.$ref;
        out.additionalProperties = free ? true : conv(ap);
      }
    }
    if (s.properties && typeof s.properties === 'object') {
      if (out.type === undefined) out.type = 'object';
      out.properties = {};
      for (const [k, v] of Object.entries<any>(s.properties)) out.properties[k] = conv(v);
    }
    return s['x-nullable'] === true ? orNull(out) : out;
  };

  const definitions: Schema = {};
  for (const [name, def] of Object.entries<any>(defs)) {
    const disc = subtypes.get(name);
    if (!disc) {
      definitions[name] = conv(def);
      continue;
    }
    const plain = { ...def };
    delete plain.discriminator;
    definitions[name + '__base'] = conv(plain);
    const values = [...disc.byValue.keys()];
    definitions[name] = {
      allOf: [
        ref(name + '__base'),
        { properties: { [disc.prop]: { enum: values } } },
        ...[...disc.byValue].map(([value, sub]) => ({
          if: { properties: { [disc.prop]: { const: value } }, required: [disc.prop] },
          then: ref(sub),
        })),
      ],
    };
  }
  return { $id: rootId, definitions };
}

// ---------------------------------------------------------------------------------------------
// Operation index and validators

interface OpInfo { api: Api; operationId: string; method: string; path: string; responses: Record<string, any> }
const OPS = new Map<string, OpInfo>();
for (const api of ['management', 'client'] as const) {
  for (const [p, item] of Object.entries<any>(DOCS[api].paths)) {
    for (const [m, op] of Object.entries<any>(item)) {
      if (!['get', 'post', 'put', 'patch', 'delete'].includes(m)) continue;
      OPS.set(`${api}:${op.operationId}`, { api, operationId: op.operationId, method: m.toUpperCase(), path: p, responses: op.responses ?? {} });
    }
  }
}

const ajv = new Ajv({ strict: false, allErrors: true, coerceTypes: false, useDefaults: false, removeAdditional: false });
addFormats(ajv);
for (const api of ['management', 'client'] as const) ajv.addSchema(convertDocument(DOCS[api], `resp-${api}`));
const compiled = new Map<string, ValidateFunction>();
function validatorFor(api: Api, def: string): ValidateFunction {
  const key = `${api}:${def}`;
  let v = compiled.get(key);
  if (!v) {
    v = ajv.compile({ $ref: `resp-${api}${DEF}${def}` });
    compiled.set(key, v);
  }
  return v;
}

function valueAt(root: unknown, pointer: string): unknown {
  let v: any = root;
  for (const seg of pointer.split('/').slice(1).map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))) {
    if (v === null || typeof v !== 'object') return undefined;
    v = v[seg];
  }
  return v;
}
function short(v: unknown): string {
  const s = v === undefined ? 'undefined' : JSON.stringify(v);
  return s.length > 80 ? s.slice(0, 77) + '...' : s;
}
function describe(errs: ErrorObject[] | null | undefined, body: unknown): string {
  if (!errs?.length) return '';
  // the dispatch wrappers (if/anyOf) only repeat what the specific errors say
  const specific = errs.filter((e) => e.keyword !== 'if' && e.keyword !== 'anyOf');
  const seen = new Set<string>();
  const lines: string[] = [];
  for (const e of specific.length ? specific : errs) {
    const where = e.instancePath || '(root)';
    const extra = e.keyword === 'required' ? '' : ` (actual ${short(valueAt(body, e.instancePath))})`;
    const line = `${where} ${e.message}${e.keyword === 'enum' ? ' ' + JSON.stringify((e.params as any).allowedValues) : ''}${extra}`;
    if (seen.has(line)) continue;
    seen.add(line);
    lines.push(line);
    if (lines.length >= 6) break;
  }
  return lines.join('; ');
}

const checked = new Set<string>();
const failures: string[] = [];

interface Call {
  /** Expected statuses; anything else is reported (it means the request did not do what it was meant to). */
  expect?: number[];
  /** Do not validate the body (non-JSON or raw documents). */
  skipBody?: boolean;
}

/**
 * Sends the request for `operationId` and validates the response body against the schema the spec
 * declares for the returned status.
 */
async function call(tt: Test, c: Client, api: Api, operationId: string, url: string, body?: unknown, opts: Call = {}): Promise<Res> {
  const op = OPS.get(`${api}:${operationId}`);
  if (!op) throw new Error(`no operation ${api}:${operationId}`);
  const res = await c.request(op.method, url, body);
  checked.add(`${api}:${operationId}`);
  const label = `${api}:${operationId} ${op.method} ${url.slice(0, 80)} → ${res.status}`;
  if (opts.expect && !opts.expect.includes(res.status)) {
    tt.fail(`${label}: expected status ${opts.expect.join('/')} (${res.text.slice(0, 200)})`);
  }
  if (opts.skipBody) return res;
  const declared = op.responses[String(res.status)];
  let def: string | undefined;
  if (declared) {
    def = refName(declared.schema);
    if (!def) {
      if (declared.schema) tt.fail(`${label}: inline response schema not supported by this test`);
      else tt.comment(`${label}: spec declares no schema for this status`);
      return res;
    }
  } else if (res.status >= 400) {
    tt.comment(`${label}: status not declared by the spec; validated against apiErrorEnvelope`);
    def = 'apiErrorEnvelope';
  } else {
    const msg = `${label}: status ${res.status} not declared by the spec (declared: ${Object.keys(op.responses).join(',')})`;
    failures.push(msg);
    tt.fail(msg);
    return res;
  }
  if (res.body === undefined) {
    const msg = `${label}: body is not JSON (${def}) — ${res.text.slice(0, 120)}`;
    failures.push(msg);
    tt.fail(msg);
    return res;
  }
  const v = validatorFor(api, def);
  const ok = v(res.body) as boolean;
  const msg = `${label} conforms to ${def}${ok ? '' : ': ' + describe(v.errors, res.body)}`;
  if (!ok) failures.push(msg);
  tt.ok(ok, msg);
  return res;
}

// ---------------------------------------------------------------------------------------------
// Fixtures

const genCaCert = (cn: string) => selfSignedCert(cn, true);

const authPolicy = (name: string) => ({ ...authPolicyBody(name, { maxAttempts: 5 }), tags: { p: name } });

const POSTURE: Record<string, any> = {
  OS: { operatingSystems: [{ type: 'Windows', versions: ['10'] }, { type: 'Linux', versions: [] }] },
  PROCESS: { process: { osType: 'Windows', path: 'C:\\a.exe', hashes: ['abc'], signerFingerprint: 'ff' } },
  PROCESS_MULTI: { semantic: 'AnyOf', processes: [{ osType: 'Linux', path: '/usr/bin/x', hashes: [] }] },
  DOMAIN: { domains: ['corp.example'] },
  MAC: { macAddresses: ['00:11:22:33:44:55'] },
  MFA: { timeoutSeconds: 300, promptOnWake: true, promptOnUnlock: false, ignoreLegacyEndpoints: true },
};

let srv: Server;
let admin: Client;

t.before(async () => {
  srv = await startServer(t);
  admin = await srv.login();
});

t.test('every response conforms to the upstream response schemas', async (tt) => {
  const M: Api = 'management';
  const C: Api = 'client';
  const id = (r: Res) => r.body?.data?.id as string;
  const list = (o: string, u: string) => call(tt, admin, M, o, u, undefined, { expect: [200] });
  const detail = list;
  const empty = (o: string, u: string, b?: unknown) => call(tt, admin, M, o, u, b, { expect: [200] });
  const create = (o: string, u: string, b: unknown) => call(tt, admin, M, o, u, b, { expect: [201] });

  // ---- meta
  for (const [api, c] of [[M, srv.mgmt], [C, srv.client]] as const) {
    await call(tt, c, api, 'listRoot', '/', undefined, { expect: [200] });
    await call(tt, c, api, 'listVersion', '/version', undefined, { expect: [200] });
    await call(tt, c, api, 'listEnumeratedCapabilities', '/enumerated-capabilities', undefined, { expect: [200] });
    const specs = await call(tt, c, api, 'listSpecs', '/specs', undefined, { expect: [200] });
    for (const s of specs.body?.data ?? []) {
      await call(tt, c, api, 'detailSpec', `/specs/${s.id}`, undefined, { expect: [200] });
      await call(tt, c, api, 'detailSpecBody', `/specs/${s.id}/spec`, undefined, { expect: [200], skipBody: true });
    }
    await call(tt, c, api, 'listWellKnownCas', '/.well-known/est/cacerts', undefined, { expect: [200], skipBody: true });
  }
  await call(tt, srv.client, C, 'listProtocols', '/protocols', undefined, { expect: [200] });

  // ---- seed: identities, authenticators, enrollments
  const user = id(await create('createIdentity', '/identities', { name: 'rs-user', type: 'User', isAdmin: false, roleAttributes: ['users'], tags: { k: 'v' } }));
  const ott = id(await create('createIdentity', '/identities', { name: 'rs-ott', type: 'Device', isAdmin: false, enrollment: { ott: true } }));
  const spare = id(await create('createIdentity', '/identities', { name: 'rs-spare', type: 'User', isAdmin: false }));
  const auth = id(await create('createAuthenticator', '/authenticators', { method: 'updb', identityId: user, username: 'rs-user', password: 'rs-pass-1' }));
  const auth2 = id(await create('createAuthenticator', '/authenticators', { method: 'updb', identityId: spare, username: 'rs-spare', password: 'rs-pass-2' }));

  // ---- config types, configs, services
  const ct = id(await create('createConfigType', '/config-types', { name: 'rs-ct', schema: { type: 'object', properties: { port: { type: 'integer' } } }, tags: { a: 'b' } }));
  const ct2 = id(await create('createConfigType', '/config-types', { name: 'rs-ct2' }));
  const cfg = id(await create('createConfig', '/configs', { name: 'rs-cfg', configTypeId: ct, data: { port: 22 }, tags: { env: 'prod' } }));
  const cfg2 = id(await create('createConfig', '/configs', { name: 'rs-cfg2', configTypeId: ct2, data: {} }));
  const svc = id(await create('createService', '/services', { name: 'rs-svc', encryptionRequired: true, roleAttributes: ['web'], configs: [cfg], terminatorStrategy: 'smartrouting' }));
  const svc2 = id(await create('createService', '/services', { name: 'rs-svc2', encryptionRequired: false }));

  // ---- routers
  const er = id(await create('createEdgeRouter', '/edge-routers', { name: 'rs-er', roleAttributes: ['east'], cost: 5, tags: { z: 'y' } }));
  const erTun = id(await create('createEdgeRouter', '/edge-routers', { name: 'rs-er-tun', isTunnelerEnabled: true }));
  const rt = id(await create('createRouter', '/routers', { name: 'rs-rt', cost: 7, noTraversal: true, tags: { k: 'v' } }));
  const trt = id(await create('createTransitRouter', '/transit-routers', { name: 'rs-trt' }));
  const term = id(await create('createTerminator', '/terminators', { service: svc, router: er, binding: 'transport', address: 'tcp:localhost:22', tags: { t: 'x' } }));

  // ---- policies, posture checks
  const pcs: Record<string, string> = {};
  for (const [typeId, extra] of Object.entries(POSTURE)) {
    pcs[typeId] = id(await create('createPostureCheck', '/posture-checks', { typeId, name: `rs-pc-${typeId}`, roleAttributes: ['pc'], tags: { t: typeId }, ...extra }));
  }
  const sp = id(await create('createServicePolicy', '/service-policies', { name: 'rs-sp', type: 'Dial', semantic: 'AnyOf', identityRoles: ['#users', `@${user}`], serviceRoles: ['#web'], postureCheckRoles: [`@${pcs.DOMAIN}`] }));
  const sp2 = id(await create('createServicePolicy', '/service-policies', { name: 'rs-sp2', type: 'Bind', semantic: 'AllOf', identityRoles: [`@${ott}`], serviceRoles: [`@${svc}`] }));
  const erp = id(await create('createEdgeRouterPolicy', '/edge-router-policies', { name: 'rs-erp', semantic: 'AnyOf', identityRoles: ['#all'], edgeRouterRoles: ['#east', `@${erTun}`] }));
  const serp = id(await create('createServiceEdgeRouterPolicy', '/service-edge-router-policies', { name: 'rs-serp', semantic: 'AllOf', serviceRoles: ['#all'], edgeRouterRoles: ['#all'] }));

  // ---- CA, auth policy, external JWT signer, controller settings
  const ca = id(await create('createCa', '/cas', {
    name: 'rs-ca', certPem: genCaCert('rs root'), identityRoles: ['ca'], isAuthEnabled: true, isAutoCaEnrollmentEnabled: true,
    isOttCaEnrollmentEnabled: true, identityNameFormat: '[caName]-[commonName]', tags: { src: 'test' },
    externalIdClaim: { location: 'SAN_URI', matcher: 'SCHEME', matcherCriteria: 'spiffe', parser: 'SPLIT', parserCriteria: '/', index: 1 },
  }));
  const ap = id(await create('createAuthPolicy', '/auth-policies', authPolicy('rs-ap')));
  const ejs = id(await create('createExternalJwtSigner', '/external-jwt-signers', {
    name: 'rs-ejs', issuer: 'https://rs-issuer.example', audience: 'rs-aud', enabled: true, jwksEndpoint: 'https://rs-issuer.example/jwks.json',
    externalAuthUrl: 'https://rs-issuer.example/auth', clientId: 'rs-client', scopes: ['openid'], claimsProperty: 'sub', useExternalId: false, targetToken: 'ACCESS',
  }));
  const cs = id(await create('createControllerSetting', '/controller-settings', { controllerId: 'rs-ctrl', oidc: { redirectUris: ['https://a.example/cb'], postLogoutUris: ['https://a.example/out'] }, tags: { site: 'a' } }));

  // ---- lists and details (management)
  await list('listIdentities', '/identities');
  for (const x of [user, ott, spare]) await detail('detailIdentity', `/identities/${x}`);
  await list('getIdentityAuthenticators', `/identities/${user}/authenticators`);
  await list('getIdentityEnrollments', `/identities/${ott}/enrollments`);
  const types = await list('listIdentityTypes', '/identity-types');
  for (const x of types.body?.data ?? []) await detail('detailIdentityType', `/identity-types/${x.id}`);
  await list('listAuthenticators', '/authenticators');
  for (const x of [auth, auth2]) await detail('detailAuthenticator', `/authenticators/${x}`);
  const enrollments = await list('listEnrollments', '/enrollments');
  for (const x of enrollments.body?.data ?? []) await detail('detailEnrollment', `/enrollments/${x.id}`);
  await list('listConfigTypes', '/config-types');
  for (const x of [ct, ct2]) await detail('detailConfigType', `/config-types/${x}`);
  await list('listConfigsForConfigType', `/config-types/${ct}/configs`);
  await list('listConfigs', '/configs');
  for (const x of [cfg, cfg2]) await detail('detailConfig', `/configs/${x}`);
  await list('listConfigServices', `/configs/${cfg}/services`);
  await list('listServices', '/services');
  for (const x of [svc, svc2]) await detail('detailService', `/services/${x}`);
  await list('listServiceConfig', `/services/${svc}/configs`);
  await list('listServiceTerminators', `/services/${svc}/terminators`);
  await list('listEdgeRouters', '/edge-routers');
  for (const x of [er, erTun]) await detail('detailEdgeRouter', `/edge-routers/${x}`);
  await list('listRouters', '/routers');
  for (const x of [rt, trt]) await detail('detailRouter', `/routers/${x}`);
  await list('listTransitRouters', '/transit-routers');
  for (const x of [rt, trt]) await detail('detailTransitRouter', `/transit-routers/${x}`);
  await list('listTerminators', '/terminators');
  await detail('detailTerminator', `/terminators/${term}`);
  await list('listPostureChecks', '/posture-checks');
  for (const x of Object.values(pcs)) await detail('detailPostureCheck', `/posture-checks/${x}`);
  const pct = await list('listPostureCheckTypes', '/posture-check-types');
  for (const x of pct.body?.data ?? []) await detail('detailPostureCheckType', `/posture-check-types/${x.id}`);
  await list('listServicePolicies', '/service-policies');
  for (const x of [sp, sp2]) await detail('detailServicePolicy', `/service-policies/${x}`);
  await list('listEdgeRouterPolicies', '/edge-router-policies');
  const erps = await list('listEdgeRouterPolicies', '/edge-router-policies?limit=-1');
  for (const x of erps.body?.data ?? []) await detail('detailEdgeRouterPolicy', `/edge-router-policies/${x.id}`);
  await list('listServiceEdgeRouterPolicies', '/service-edge-router-policies');
  await detail('detailServiceEdgeRouterPolicy', `/service-edge-router-policies/${serp}`);
  await list('listCas', '/cas');
  await detail('detailCa', `/cas/${ca}`);
  await list('listAuthPolicies', '/auth-policies');
  for (const x of ['default', ap]) await detail('detailAuthPolicy', `/auth-policies/${x}`);
  await list('listExternalJwtSigners', '/external-jwt-signers');
  await detail('detailExternalJwtSigner', `/external-jwt-signers/${ejs}`);
  await list('listControllerSettings', '/controller-settings');
  await detail('detailControllerSetting', `/controller-settings/${cs}`);
  for (const x of [cs, 'global']) await detail('detailControllerSettingEffective', `/controller-settings/${x}/effective`);
  await list('listControllers', '/controllers');
  await list('listSessions', '/sessions');
  await list('listAPISessions', '/api-sessions');
  const sessions = await list('listAPISessions', '/api-sessions?limit=-1');
  for (const x of sessions.body?.data ?? []) await detail('detailAPISessions', `/api-sessions/${x.id}`);
  await call(tt, admin, M, 'updateIdentityTracing', `/identities/${user}/trace`, { enabled: true, duration: '5m', traceId: 'rs-trace', channels: ['ch'] }, { expect: [200] });

  // ---- current session / identity on both APIs
  const userMgmt = await srv.login('rs-user', 'rs-pass-1', 'management');
  const userClient = await srv.login('rs-user', 'rs-pass-1', 'client');
  for (const [api, c] of [[M, admin], [M, userMgmt], [C, userClient]] as const) {
    await call(tt, c, api, 'getCurrentAPISession', '/current-api-session', undefined, { expect: [200] });
    await call(tt, c, api, 'getCurrentIdentity', '/current-identity', undefined, { expect: [200] });
    const mine = await call(tt, c, api, 'listCurrentIdentityAuthenticators', '/current-identity/authenticators', undefined, { expect: [200] });
    for (const x of mine.body?.data ?? []) {
      await call(tt, c, api, 'detailCurrentIdentityAuthenticator', `/current-identity/authenticators/${x.id}`, undefined, { expect: [200] });
    }
    if (api === C) await call(tt, c, api, 'listControllers', '/controllers', undefined, { expect: [200] });
  }
  await call(tt, userClient, C, 'updateCurrentIdentityAuthenticator', `/current-identity/authenticators/${auth}`, { username: 'rs-user', password: 'rs-pass-2', currentPassword: 'rs-pass-1' }, { expect: [200] });
  await call(tt, userClient, C, 'patchCurrentIdentityAuthenticator', `/current-identity/authenticators/${auth}`, { password: 'rs-pass-3', currentPassword: 'rs-pass-2' }, { expect: [200] });
  await call(tt, userMgmt, M, 'patchCurrentIdentityAuthenticator', `/current-identity/authenticators/${auth}`, { password: 'rs-pass-4', currentPassword: 'rs-pass-3' }, { expect: [200] });
  await call(tt, userMgmt, M, 'updateCurrentIdentityAuthenticator', `/current-identity/authenticators/${auth}`, { username: 'rs-user', password: 'rs-pass-5', currentPassword: 'rs-pass-4' }, { expect: [200] });

  // ---- authenticate (both APIs): success and errors
  for (const [api, c] of [[M, srv.mgmt], [C, srv.client]] as const) {
    await call(tt, c, api, 'authenticate', '/authenticate?method=password', { username: 'rs-spare', password: 'rs-pass-2' }, { expect: [200] });
    await call(tt, c, api, 'authenticate', '/authenticate?method=password', { username: 'rs-spare', password: 'wrong-password' }, { expect: [401] });
    await call(tt, c, api, 'authenticate', '/authenticate?method=password', { username: 'rs-spare' }, { expect: [400] });
    // unauthenticated → 401
    await call(tt, c, api, 'getCurrentIdentity', '/current-identity', undefined, { expect: [401] });
    await call(tt, c, api, 'getCurrentAPISession', '/current-api-session', undefined, { expect: [401] });
  }
  await call(tt, srv.mgmt, M, 'listIdentities', '/identities', undefined, { expect: [401] });
  await call(tt, userMgmt, M, 'listIdentities', '/identities', undefined, { expect: [401, 403] });

  // ---- other errors: 404, 400, 409
  await call(tt, admin, M, 'detailIdentity', '/identities/no-such-id', undefined, { expect: [404] });
  await call(tt, admin, M, 'detailService', '/services/no-such-id', undefined, { expect: [404] });
  await call(tt, admin, M, 'detailCa', '/cas/no-such-id', undefined, { expect: [404] });
  await call(tt, admin, M, 'detailAPISessions', '/api-sessions/no-such-id', undefined, { expect: [404] });
  await call(tt, admin, M, 'detailSession', '/sessions/no-such-id', undefined, { expect: [404] });
  await call(tt, admin, M, 'deleteSession', '/sessions/no-such-id', undefined, { expect: [404] });
  await call(tt, admin, M, 'detailSpec', '/specs/no-such-spec', undefined, { expect: [404] });
  await call(tt, admin, M, 'deleteConfig', '/configs/no-such-id', undefined, { expect: [404] });
  await call(tt, admin, M, 'patchEdgeRouter', '/edge-routers/no-such-id', { name: 'x' }, { expect: [404] });
  await call(tt, admin, M, 'updateIdentity', '/identities/no-such-id', { name: 'x', type: 'User', isAdmin: false }, { expect: [404] });
  await call(tt, admin, M, 'detailControllerSettingEffective', '/controller-settings/no-such/effective', undefined, { expect: [404] });
  await call(tt, admin, M, 'createIdentity', '/identities', { type: 'User', isAdmin: false }, { expect: [400] });
  await call(tt, admin, M, 'createService', '/services', { name: 'rs-svc', encryptionRequired: true }, { expect: [400] });
  await call(tt, admin, M, 'listServices', '/services?filter=bogus ===', undefined, { expect: [400] });
  await call(tt, admin, M, 'createPostureCheck', '/posture-checks', { typeId: 'DOMAIN', name: 'rs-pc-bad', domains: [] }, { expect: [400] });
  await call(tt, admin, M, 'deleteConfigType', `/config-types/${ct}`, undefined, { expect: [400, 409] });
  await call(tt, srv.client, C, 'detailSpec', '/specs/no-such-spec', undefined, { expect: [404] });

  // ---- updates and patches
  await empty('updateIdentity', `/identities/${spare}`, { name: 'rs-spare', type: 'User', isAdmin: false, roleAttributes: ['x'], authPolicyId: ap });
  await empty('patchIdentity', `/identities/${spare}`, { tags: { p: true } });
  await empty('updateAuthenticator', `/authenticators/${auth2}`, { username: 'rs-spare', password: 'rs-pass-6' });
  await empty('patchAuthenticator', `/authenticators/${auth2}`, { tags: { a: 'b' } });
  await empty('updateConfigType', `/config-types/${ct2}`, { name: 'rs-ct2b' });
  await empty('patchConfigType', `/config-types/${ct2}`, { tags: { x: 'y' } });
  await empty('updateConfig', `/configs/${cfg2}`, { name: 'rs-cfg2b', data: { a: 1 } });
  await empty('patchConfig', `/configs/${cfg2}`, { tags: { x: 'y' } });
  await empty('updateService', `/services/${svc2}`, { name: 'rs-svc2b', encryptionRequired: true });
  await empty('patchService', `/services/${svc2}`, { roleAttributes: ['other'] });
  await empty('updateEdgeRouter', `/edge-routers/${erTun}`, { name: 'rs-er-tun', isTunnelerEnabled: true, roleAttributes: ['west'] });
  await empty('patchEdgeRouter', `/edge-routers/${er}`, { cost: 9 });
  await empty('updateRouter', `/routers/${rt}`, { name: 'rs-rt', cost: 3 });
  await empty('patchRouter', `/routers/${rt}`, { noTraversal: false });
  await empty('updateTransitRouter', `/transit-routers/${trt}`, { name: 'rs-trt-b' });
  await empty('patchTransitRouter', `/transit-routers/${trt}`, { cost: 2 });
  await empty('updateTerminator', `/terminators/${term}`, { service: svc, router: er, binding: 'transport', address: 'tcp:localhost:23' });
  await empty('patchTerminator', `/terminators/${term}`, { cost: 10 });
  await empty('updatePostureCheck', `/posture-checks/${pcs.MAC}`, { typeId: 'MAC', name: 'rs-pc-MAC', macAddresses: ['00:11:22:33:44:66'] });
  await empty('patchPostureCheck', `/posture-checks/${pcs.DOMAIN}`, { typeId: 'DOMAIN', domains: ['lab.example'] });
  await empty('updateServicePolicy', `/service-policies/${sp2}`, { name: 'rs-sp2', type: 'Bind', semantic: 'AnyOf', identityRoles: ['#all'], serviceRoles: ['#all'] });
  await empty('patchServicePolicy', `/service-policies/${sp2}`, { tags: { x: 'y' } });
  await empty('updateEdgeRouterPolicy', `/edge-router-policies/${erp}`, { name: 'rs-erp', semantic: 'AllOf', identityRoles: ['#users'], edgeRouterRoles: ['#all'] });
  await empty('patchEdgeRouterPolicy', `/edge-router-policies/${erp}`, { tags: { x: 'y' } });
  await empty('updateServiceEdgeRouterPolicy', `/service-edge-router-policies/${serp}`, { name: 'rs-serp', semantic: 'AnyOf', serviceRoles: ['#web'], edgeRouterRoles: ['#east'] });
  await empty('patchServiceEdgeRouterPolicy', `/service-edge-router-policies/${serp}`, { tags: { x: 'y' } });
  await empty('updateCa', `/cas/${ca}`, { name: 'rs-ca', identityRoles: [], isAuthEnabled: true, isAutoCaEnrollmentEnabled: false, isOttCaEnrollmentEnabled: false, identityNameFormat: '[commonName]' });
  await empty('patchCa', `/cas/${ca}`, { tags: { x: 'y' } });
  await empty('updateAuthPolicy', `/auth-policies/${ap}`, authPolicy('rs-ap'));
  await empty('patchAuthPolicy', `/auth-policies/${ap}`, { name: 'rs-ap-b' });
  await empty('updateExternalJwtSigner', `/external-jwt-signers/${ejs}`, { name: 'rs-ejs', issuer: 'https://rs-issuer.example', audience: 'rs-aud', enabled: false, jwksEndpoint: 'https://rs-issuer.example/jwks2.json' });
  await empty('patchExternalJwtSigner', `/external-jwt-signers/${ejs}`, { enabled: true });
  await empty('updateControllerSetting', `/controller-settings/${cs}/effective`, { oidc: { redirectUris: ['https://b.example/cb'] } });
  await empty('patchControllerSetting', `/controller-settings/${cs}/effective`, { oidc: { postLogoutUris: ['https://b.example/out'] } });
  // re-read after updates (values written through PUT/PATCH)
  for (const x of [spare]) await detail('detailIdentity', `/identities/${x}`);
  await detail('detailEdgeRouter', `/edge-routers/${erTun}`);
  await detail('detailTerminator', `/terminators/${term}`);
  await detail('detailPostureCheck', `/posture-checks/${pcs.DOMAIN}`);
  await detail('detailCa', `/cas/${ca}`);
  await detail('detailExternalJwtSigner', `/external-jwt-signers/${ejs}`);
  await detail('detailControllerSetting', `/controller-settings/${cs}`);

  // ---- session deletions
  const throwaway = await srv.login();
  await call(tt, throwaway, M, 'deleteCurrentAPISession', '/current-api-session', undefined, { expect: [200] });
  const throwawayClient = await srv.login('rs-user', 'rs-pass-5', 'client');
  await call(tt, throwawayClient, C, 'deleteCurrentAPISession', '/current-api-session', undefined, { expect: [200] });
  const victim = await srv.login();
  const all = (await admin.get('/api-sessions?limit=-1')).body?.data ?? [];
  const victimId = all.find((x: any) => x.id === sessionIdOf(victim.token!))?.id ?? 'missing';
  await empty('deleteAPISessions', `/api-sessions/${victimId}`);

  // ---- deletes
  const enr = (await admin.get(`/identities/${ott}/enrollments`)).body?.data?.[0]?.id ?? 'missing';
  await empty('deleteEnrollment', `/enrollments/${enr}`);
  await empty('deleteTerminator', `/terminators/${term}`);
  await empty('deleteServiceEdgeRouterPolicy', `/service-edge-router-policies/${serp}`);
  await empty('deleteEdgeRouterPolicy', `/edge-router-policies/${erp}`);
  await empty('deleteServicePolicy', `/service-policies/${sp2}`);
  await empty('deleteServicePolicy', `/service-policies/${sp}`);
  await empty('deleteService', `/services/${svc2}`);
  await empty('deleteService', `/services/${svc}`);
  await empty('deleteConfig', `/configs/${cfg}`);
  await empty('deleteConfig', `/configs/${cfg2}`);
  await empty('deleteConfigType', `/config-types/${ct}`);
  await empty('deleteConfigType', `/config-types/${ct2}`);
  for (const x of Object.values(pcs)) await empty('deletePostureCheck', `/posture-checks/${x}`);
  await empty('deleteEdgeRouter', `/edge-routers/${erTun}`);
  await empty('deleteEdgeRouter', `/edge-routers/${er}`);
  await empty('deleteRouter', `/routers/${rt}`);
  await empty('deleteTransitRouter', `/transit-routers/${trt}`);
  await empty('deleteCa', `/cas/${ca}`);
  await empty('deleteAuthenticator', `/authenticators/${auth2}`);
  await empty('deleteIdentity', `/identities/${spare}`);
  await empty('deleteAuthPolicy', `/auth-policies/${ap}`);
  await empty('deleteExternalJwtSigner', `/external-jwt-signers/${ejs}`);
  await empty('deleteControllerSetting', `/controller-settings/${cs}/effective`);
  await empty('deleteIdentity', `/identities/${ott}`);
  // deleting again → 404
  await call(tt, admin, M, 'deleteIdentity', `/identities/${ott}`, undefined, { expect: [404] });
  await call(tt, admin, M, 'deleteService', `/services/${svc}`, undefined, { expect: [404] });

  // ---- coverage report
  const unchecked: string[] = [];
  for (const key of OPS.keys()) {
    if (!checked.has(key)) unchecked.push(key);
  }
  tt.comment(`operations checked: ${checked.size} (management ${[...checked].filter((k) => k.startsWith('management:')).length}, client ${[...checked].filter((k) => k.startsWith('client:')).length})`);
  if (unchecked.length) tt.comment(`operations not exercised: ${unchecked.join(', ')}`);
  if (failures.length) tt.comment(`FAILURES (${failures.length}):\n  ${failures.join('\n  ')}`);
});

t.test('the response validator is not vacuous', async (tt) => {
  const meta = { apiVersion: '0.0.1', apiEnrollmentVersion: '0.0.1' };
  const v = validatorFor('management', 'detailPostureCheckEnvelope');
  const pc = {
    id: 'x', createdAt: '2024-01-01T00:00:00.000Z', updatedAt: '2024-01-01T00:00:00.000Z', tags: {}, _links: { self: { href: './posture-checks/x' } },
    name: 'pc', typeId: 'DOMAIN', version: 1, roleAttributes: [], domains: ['a.example'],
  };
  tt.ok(v({ meta, data: pc }), `well-formed DOMAIN check accepted: ${describe(v.errors, { meta, data: pc })}`);
  tt.notOk(v({ meta, data: { ...pc, domains: 'a.example' } }), 'subtype field of the wrong type rejected (discriminator dispatch)');
  tt.notOk(v({ meta, data: { ...pc, typeId: 'NOPE' } }), 'unknown discriminator value rejected');
  tt.notOk(v({ meta, data: { ...pc, name: null } }), 'null for a required non-nullable field rejected');
  const { name: _n, ...noName } = pc;
  tt.notOk(v({ meta, data: noName }), 'missing required field rejected');
  tt.ok(v({ meta, data: { ...pc, tags: null } }), 'null for an x-nullable field (tags) accepted');
  const e = validatorFor('management', 'apiErrorEnvelope');
  tt.notOk(e({ meta, error: { code: 5 } }), 'error with a numeric code rejected');
});
