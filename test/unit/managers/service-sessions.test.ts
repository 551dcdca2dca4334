/**
 * src/managers/service-sessions.ts on a real store, role index and signing keys: the refusals in
 * the reference's order (shape, visibility, the permission asked for, a shared edge router), one
 * record per (API session, service, type) with a fresh token each time, concurrent creates sharing
 * one write, and delete.
 */
import t from 'tap';
import { ServiceSessions } from '../../../src/managers/service-sessions.js';
import { PolicyEngine } from '../../../src/policy/engine.js';
import { SESSION_TOKEN, SigningKeys } from '../../../src/auth/tokens.js';
import type { ApiSession } from '../../../src/auth/api-sessions.js';
import { openStore, put, refusal } from './fixture.js';

t.test('service sessions', async (t) => {
  const { store, dir } = openStore(t, 'service-sessions');
  const policy = new PolicyEngine(store, { sweepMs: 3_600_000 });
  t.teardown(() => policy.close());
  const keys = new SigningKeys(store, dir, { controllerId: 'ctrl', rotationMs: 3_600_000 });
  await keys.start();
  t.teardown(() => keys.close());
  const sessions = new ServiceSessions({ store, policy, keys, sessions: { timeoutSeconds: 1800 }, issuer: () => 'https://ctrl.test' });

  await put(store, 'identities', { id: 'ann', name: 'ann', type: 'User', roleAttributes: ['users'] }, { id: 'root', name: 'root', type: 'User', isAdmin: true });
  await put(store, 'services', { id: 'web', name: 'web', roleAttributes: ['web'], configs: [] }, { id: 'db', name: 'db', roleAttributes: [], configs: [] }, { id: 'lonely', name: 'lonely', roleAttributes: ['lonely'], configs: [] });
  await put(store, 'edgeRouters', { id: 'er', name: 'er', roleAttributes: ['edge'], isVerified: true });
  await put(store, 'servicePolicies',
    { id: 'dial', name: 'dial', type: 'Dial', semantic: 'AnyOf', identityRoles: ['#users'], serviceRoles: ['#web', '#lonely'], postureCheckRoles: [] });
  await put(store, 'edgeRouterPolicies', { id: 'erp', name: 'erp', semantic: 'AllOf', identityRoles: ['#all'], edgeRouterRoles: ['#edge'] });
  await put(store, 'serviceEdgeRouterPolicies', { id: 'serp', name: 'serp', semantic: 'AllOf', serviceRoles: ['#web'], edgeRouterRoles: ['#edge'] });
  await put(store, 'apiSessions', { id: 'as1', identityId: 'ann', token: 'digest-1' });
  const ann = store.get('identities', 'ann')!;
  const apiSession = store.get('apiSessions', 'as1') as ApiSession;

  t.same(await refusal(() => sessions.create(ann, apiSession, {})), { code: 'COULD_NOT_VALIDATE', status: 400, field: 'serviceId' });
  t.same(await refusal(() => sessions.create(ann, apiSession, { serviceId: 'web', type: 'Both' })), { code: 'COULD_NOT_VALIDATE', status: 400, field: 'type' });
  t.same(await refusal(() => sessions.create(ann, apiSession, { serviceId: 'db' })), { code: 'NOT_FOUND', status: 404 }, 'a service the caller may not see');
  t.same(await refusal(() => sessions.create(ann, apiSession, { serviceId: 'gone' })), { code: 'NOT_FOUND', status: 404 });
  t.same(await refusal(() => sessions.create(ann, apiSession, { serviceId: 'web', type: 'Bind' })), { code: 'COULD_NOT_VALIDATE', status: 400, field: 'ServiceId' }, 'visible, but Bind is not granted');
  t.same(await refusal(() => sessions.create(ann, apiSession, { serviceId: 'lonely' })), { code: 'NO_EDGE_ROUTERS_AVAILABLE', status: 400 }, 'no router serves both');

  const [a, b] = await Promise.all([sessions.create(ann, apiSession, { serviceId: 'web' }), sessions.create(ann, apiSession, { serviceId: 'web', type: 'Dial' })]);
  t.equal(a.rec.id, b.rec.id, 'concurrent creates share one record');
  t.match(store.get('sessions', a.rec.id), { identityId: 'ann', apiSessionId: 'as1', serviceId: 'web', type: 'Dial', servicePolicyIds: ['dial'] });
  const claims = keys.verify(a.token, SESSION_TOKEN);
  t.match(claims, { sub: 'ann', jti: a.rec.id, iss: 'https://ctrl.test', z_svc: 'web', z_st: 'Dial' }, 'the token names the session');
  const again = await sessions.create(ann, apiSession, { serviceId: 'web' });
  t.equal(again.rec.id, a.rec.id, 'the same session again');
  t.ok(keys.verify(again.token, SESSION_TOKEN), 'with a valid token');

  // An admin sees every service; access is still what the policies grant.
  t.same(await refusal(() => sessions.create(store.get('identities', 'root')!, apiSession, { serviceId: 'db' })), { code: 'COULD_NOT_VALIDATE', status: 400, field: 'ServiceId' });

  await sessions.remove(a.rec.id);
  t.notOk(store.has('sessions', a.rec.id));
  t.same(await refusal(() => sessions.remove(a.rec.id)), { code: 'NOT_FOUND', status: 404 });
});
