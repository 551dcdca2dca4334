import t from 'tap';
import { upstreamOperations, upstreamDocument } from '../../../src/api/spec/index.js';
import { BodyValidator, NAME_MAX_LENGTH } from '../../../src/api/validate.js';
import { buildServedSpec, specSummaries, specDetail } from '../../../src/api/openapi.js';
import { ApiError } from '../../../src/core/errors.js';
import { validationCause } from '../../helpers/assert.js';

const mgmt = new BodyValidator('management');
const client = new BodyValidator('client');

const cause = validationCause;

const identity = () => ({ name: 'alice', type: 'User', isAdmin: false });

t.test('upstream operations', async (t) => {
  const c = upstreamOperations('client');
  const m = upstreamOperations('management');
  t.equal(c.length, 59);
  t.equal(m.length, 196);
  t.equal(new Set(m.map((o) => o.operationId)).size, 196, 'operationIds unique');
  const auth = m.find((o) => o.operationId === 'authenticate')!;
  t.equal(auth.secured, false);
  t.equal(auth.method, 'POST');
  t.same(auth.queryParams, ['method']);
  t.equal(auth.bodyRequired, false);
  t.equal(c.find((o) => o.operationId === 'authenticate')!.secured, false);
  const list = m.find((o) => o.operationId === 'listIdentities')!;
  t.equal(list.secured, true);
  t.ok(list.queryParams.includes('limit') && list.queryParams.includes('filter'));
  const create = m.find((o) => o.operationId === 'createIdentity')!;
  t.equal(create.bodyDefinition, 'identityCreate');
  t.equal(create.bodyRequired, true);
  t.notOk(create.bodyIsArray);
  t.equal(create.path, '/identities');
  const detail = m.find((o) => o.operationId === 'detailSpec')!;
  t.equal(detail.path, '/specs/{id}');
  t.equal(detail.secured, false);
  const bulk = c.find((o) => o.operationId === 'createPostureResponseBulk')!;
  t.equal(bulk.bodyDefinition, 'postureResponseCreate');
  t.equal(bulk.bodyIsArray, true);
  const updb = c.find((o) => o.operationId === 'enrollUpdb')!;
  t.equal(updb.bodyDefinition, undefined);
  t.ok(updb.bodySchema, 'inline body schema exposed');
  t.equal(upstreamDocument('client').basePath, '/edge/client/v1');
});

t.test('identityCreate', async (t) => {
  const good = identity();
  t.equal(mgmt.validate('identityCreate', good), good, 'returns the value');
  t.doesNotThrow(() =>
    mgmt.validate('identityCreate', { ...identity(), roleAttributes: ['a'], tags: { k: 'v', b: true, n: null }, authPolicyId: null }),
  );
  t.doesNotThrow(() => mgmt.validate('identityCreate', { ...identity(), roleAttributes: null, tags: null, defaultHostingCost: null }), 'null for optional fields');

  t.same(cause(() => mgmt.validate('identityCreate', { type: 'User', isAdmin: false })), { field: 'name', reason: 'name is required', value: '' });
  let c = cause(() => mgmt.validate('identityCreate', { ...identity(), name: '' }));
  t.equal(c.field, 'name');
  t.match(c.reason, /at least 1 character/);
  c = cause(() => mgmt.validate('identityCreate', { ...identity(), isAdmin: 'yes' }));
  t.same(c, { field: 'isAdmin', reason: 'isAdmin must be a boolean', value: 'yes' });
  c = cause(() => mgmt.validate('identityCreate', { ...identity(), name: null }));
  t.equal(c.field, 'name');
  t.equal(c.reason, 'name is required');
  c = cause(() => mgmt.validate('identityCreate', { ...identity(), isAdmin: null }));
  t.equal(c.field, 'isAdmin');
  c = cause(() => mgmt.validate('identityCreate', { ...identity(), name: 'x'.repeat(NAME_MAX_LENGTH + 1) }));
  t.equal(c.field, 'name');
  t.match(c.reason, /at most 1024 characters/);
  c = cause(() => mgmt.validate('identityCreate', { ...identity(), type: 'Robot' }));
  t.equal(c.field, 'type');
  t.equal(c.value, 'Robot');
  c = cause(() => mgmt.validate('identityCreate', { ...identity(), defaultHostingCost: 70000 }));
  t.equal(c.field, 'defaultHostingCost');
  c = cause(() => mgmt.validate('identityCreate', { ...identity(), roleAttributes: ['ok', 5] }));
  t.equal(c.field, 'roleAttributes.1');
  c = cause(() => mgmt.validate('identityCreate', { ...identity(), tags: { k: { nested: 1 } } }));
  t.equal(c.field, 'tags.k');
  c = cause(() => mgmt.validate('identityCreate', { ...identity(), serviceHostingCosts: { svc: -1 } }));
  t.equal(c.field, 'serviceHostingCosts.svc');
  c = cause(() => mgmt.validate('identityCreate', 'not an object'));
  t.equal(c.field, '(root)');
  c = cause(() => mgmt.validate('identityCreate', undefined));
  t.equal(c.field, '(root)');
  c = cause(() => mgmt.validate('identityCreate', [identity()]));
  t.equal(c.field, '(root)');
  t.doesNotThrow(() => mgmt.validate('identityPatch', { name: null, isAdmin: null }), 'patch: nullable fields');
  t.doesNotThrow(() => mgmt.validate('identityCreate', { ...identity(), extra: 1 }), 'unknown properties ignored');
});

t.test('explicit string limits and formats', async (t) => {
  let c = cause(() => client.validate('authenticate', { username: 'abc', password: 'secret' }));
  t.equal(c.field, 'username');
  t.match(c.reason, /at least 4 characters/);
  c = cause(() => client.validate('authenticate', { username: 'admin', password: 'x'.repeat(101) }));
  t.equal(c.field, 'password');
  c = cause(() => client.validate('authenticate', { envInfo: { arch: 'x'.repeat(256) } }));
  t.equal(c.field, 'envInfo.arch');
  t.equal(client.validate('authenticate', undefined), undefined, 'optional body may be absent');
  t.doesNotThrow(() => client.validate('authenticate', { envInfo: { arch: 'amd64', extra: 'x' }, sdkInfo: {} }));
  t.doesNotThrow(() => mgmt.validate('enrollmentCreate', { identityId: 'i', method: 'ott', expiresAt: '2030-01-01T00:00:00Z' }));
  c = cause(() => mgmt.validate('enrollmentCreate', { identityId: 'i', method: 'ott', expiresAt: 'tomorrow' }));
  t.equal(c.field, 'expiresAt');
  t.match(c.reason, /date-time/);
  t.doesNotThrow(() => client.validate('mfaCode', { code: '' }), 'empty MFA code left to the handler');
  c = cause(() => mgmt.validate('configCreate', { name: 'c', configTypeId: 't', data: 'invalid' }));
  t.equal(c.field, 'data');
});

t.test('discriminator: posture checks', async (t) => {
  const os = {
    name: 'os-check',
    typeId: 'OS',
    operatingSystems: [{ type: 'Windows', versions: ['10.0.19041'] }],
  };
  t.doesNotThrow(() => mgmt.validate('postureCheckCreate', os));
  const dom = { name: 'd', typeId: 'DOMAIN', domains: ['example.com'] };
  t.doesNotThrow(() => mgmt.validate('postureCheckCreate', dom));
  t.doesNotThrow(() => mgmt.validate('postureCheckCreate', { name: 'mfa', typeId: 'MFA', timeoutSeconds: 10 }));

  let c = cause(() => mgmt.validate('postureCheckCreate', { name: 'bad', typeId: 'NOPE' }));
  t.equal(c.field, 'typeId');
  t.equal(c.value, 'NOPE');
  t.match(c.reason, /DOMAIN/);
  t.notMatch(c.reason, /postureCheckDomainCreate/);
  c = cause(() => mgmt.validate('postureCheckCreate', { name: 'd', typeId: 'DOMAIN', domains: [] }));
  t.equal(c.field, 'domains');
  c = cause(() => mgmt.validate('postureCheckCreate', { name: 'd', typeId: 'DOMAIN' }));
  t.equal(c.field, 'domains');
  c = cause(() => mgmt.validate('postureCheckCreate', { ...os, operatingSystems: [{ type: 'BeOS', versions: [] }] }));
  t.equal(c.field, 'operatingSystems.0.type');
  c = cause(() => mgmt.validate('postureCheckCreate', { typeId: 'DOMAIN', domains: ['a'] }));
  t.equal(c.field, 'name');
  c = cause(() => mgmt.validate('postureCheckPatch', { domains: ['a'] }));
  t.equal(c.field, 'typeId');

  const seedName = { name: 'd', typeId: 'postureCheckDomainCreate', domains: ['example.com'] };
  mgmt.validate('postureCheckCreate', seedName);
  t.equal(seedName.typeId, 'DOMAIN', 'seed alias rewritten to the wire value');
  t.doesNotThrow(() => mgmt.validate('postureCheckUpdate', { name: 'd', domains: ['x'] }), 'update without typeId');
  t.doesNotThrow(() => mgmt.validate('postureCheckUpdate', { name: 'd', typeId: null }), 'optional typeId may be null');
});

t.test('array body: posture responses', async (t) => {
  const body = [
    { id: 'pc1', typeId: 'DOMAIN', domain: 'example.com' },
    { id: 'pc2', typeId: 'OS', type: 'Linux', version: '6.1' },
    { id: 'pc3', typeId: 'ENDPOINT_STATE', unlocked: true },
  ];
  t.equal(client.validate('postureResponseCreate', body, true), body);
  let c = cause(() => client.validate('postureResponseCreate', [body[0], { id: 'pc2', typeId: 'DOMAIN' }], true));
  t.equal(c.field, '1.domain');
  c = cause(() => client.validate('postureResponseCreate', body[0], true));
  t.equal(c.field, '(root)');
  t.match(c.reason, /array/);
  c = cause(() => client.validate('postureResponseCreate', [{ id: 'x', typeId: 'BAD' }], true));
  t.equal(c.field, '0.typeId');
  const alias = [{ id: 'pc1', typeId: 'postureResponseDomainCreate', domain: 'example.com' }];
  client.validate('postureResponseCreate', alias, true);
  t.equal(alias[0]!.typeId, 'DOMAIN');
  t.doesNotThrow(() => mgmt.validate('serviceConfigsAssignList', [{ serviceId: 's', configId: 'c' }]));
  c = cause(() => mgmt.validate('serviceConfigsAssignList', [{ serviceId: 's' }]));
  t.equal(c.field, '0.configId');
});

t.test('inline body schema', async (t) => {
  const updb = upstreamOperations('client').find((o) => o.operationId === 'enrollUpdb')!;
  t.doesNotThrow(() => client.validateSchema(updb.bodySchema!, { username: 'user1', password: 'secret1' }));
  const c = cause(() => client.validateSchema(updb.bodySchema!, { username: 'u', password: 'secret1' }));
  t.equal(c.field, 'username');
});

t.test('every body definition compiles', async (t) => {
  for (const api of ['client', 'management'] as const) {
    const v = api === 'client' ? client : mgmt;
    for (const op of upstreamOperations(api)) {
      if (!op.bodyDefinition) continue;
      try {
        v.validate(op.bodyDefinition, op.bodyIsArray ? [{}] : {}, op.bodyIsArray);
      } catch (e) {
        if (!(e instanceof ApiError)) t.fail(`${api} ${op.operationId}: ${(e as Error).message}`);
      }
    }
  }
  t.pass('compiled');
});

t.test('served spec', async (t) => {
  for (const api of ['client', 'management'] as const) {
    const ops = upstreamOperations(api).map((o) => ({ method: o.method.toLowerCase(), path: o.path, operationId: o.operationId }));
    const doc = buildServedSpec(api, ops) as any;
    const up = upstreamDocument(api);
    t.equal(doc.info.version, '0.28.0');
    t.equal(doc.host, undefined);
    t.equal(doc.basePath, up.basePath);
    t.equal(Object.keys(doc.paths).length, Object.keys(up.paths).length);
    t.same(Object.keys(doc.paths), Object.keys(up.paths), 'same order');
    t.not(doc.definitions, up.definitions, 'deep copy');
    t.equal(buildServedSpec(api, ops), doc, 'cached');
    const partial = buildServedSpec(api, ops.slice(1)) as any;
    const first = ops[0]!;
    t.notOk(partial.paths[first.path]?.[first.method], 'restricted to the ops passed');
  }
  const extra = buildServedSpec('client', [{ method: 'get', path: '/ours', operationId: 'ours' }]) as any;
  t.same(Object.keys(extra.paths), ['/ours']);
  t.equal(extra.paths['/ours'].get.operationId, 'ours');

  const list = specSummaries('.') as any[];
  t.same(list.map((s) => s.id), ['edge-client', 'edge-management', 'fabric']);
  t.equal(list[0].name, 'edge-client');
  t.equal(list[0]._links.self.href, './specs/edge-client');
  t.equal(list[0]._links.spec.href, './specs/edge-client/spec');
  t.ok(list[0].createdAt && list[0].updatedAt);
  t.equal((specDetail('edge-management', '.') as any).id, 'edge-management');
  t.equal(specDetail('nope', '.'), undefined);
});
