/**
 * src/managers/sessions.ts without HTTP, over a real store, role index and signing keys: the
 * reference's check order of a service-session create (input, visibility, permission, common edge
 * router), and idempotency per (API session, service, type): concurrent creates share one record,
 * a later one answers it again with a fresh token.
 */
import t from 'tap';
import type { Rec } from '../../../src/store/store.js';
import { ApiError } from '../../../src/core/errors.js';
import { PolicyEngine } from '../../../src/policy/engine.js';
import { SESSION_TOKEN } from '../../../src/auth/tokens.js';
import { ServiceSessions } from '../../../src/managers/sessions.js';
import { managerStore } from './setup.js';

const { store, keys, sessions } = await managerStore(t);
const policy = new PolicyEngine(store);
t.teardown(() => policy.close());
const serviceSessions = new ServiceSessions({ store, policy, keys, sessions, issuer: () => 'https://ctrl.test' });

const now = Date.now();
const base = (id: string) => ({ id, name: id, createdAt: now, updatedAt: now, tags: {} });
await store.write((tx) => {
  tx.put('identities', { ...base('dialer'), type: 'User', isAdmin: false, roleAttributes: ['dialers'] } as Rec);
  tx.put('identities', { ...base('stranger'), type: 'User', isAdmin: false, roleAttributes: [] } as Rec);
  tx.put('services', { ...base('web'), roleAttributes: ['web'], configs: [] } as Rec);
  tx.put('services', { ...base('island'), roleAttributes: ['island'], configs: [] } as Rec);
  tx.put('edgeRouters', { ...base('er1'), roleAttributes: ['edge'] } as Rec);
  tx.put('servicePolicies', { ...base('dial-all'), type: 'Dial', semantic: 'AnyOf', identityRoles: ['#dialers'], serviceRoles: ['#web', '#island'], postureCheckRoles: [] } as Rec);
  tx.put('edgeRouterPolicies', { ...base('erp'), semantic: 'AnyOf', identityRoles: ['#dialers'], edgeRouterRoles: ['#edge'] } as Rec);
  // Only `web` may use the router: `island` has access but no common edge router.
  tx.put('serviceEdgeRouterPolicies', { ...base('serp'), semantic: 'AnyOf', serviceRoles: ['#web'], edgeRouterRoles: ['#edge'] } as Rec);
});

async function caller(identityId: string) {
  const { session } = await sessions.create({ identityId, authenticatorId: 'a', method: 'password', ipAddress: '::1', configTypes: [], isMfaRequired: false });
  return { identity: store.get('identities', identityId)!, apiSessionId: session.id };
}
const fail = (p: Promise<unknown>) => p.then(() => 'created', (e) => (e instanceof ApiError ? e.code : String(e)));

t.test('the checks, in order', async (t) => {
  const dialer = await caller('dialer');
  t.equal(await fail(serviceSessions.create(dialer, {})), 'COULD_NOT_VALIDATE', 'no serviceId');
  t.equal(await fail(serviceSessions.create(dialer, { serviceId: 'web', type: 'Sideways' })), 'COULD_NOT_VALIDATE', 'unknown type');
  t.equal(await fail(serviceSessions.create(dialer, { serviceId: 'nope' })), 'NOT_FOUND', 'unknown service');
  t.equal(await fail(serviceSessions.create(await caller('stranger'), { serviceId: 'web' })), 'NOT_FOUND', 'a service the caller cannot see');
  t.equal(await fail(serviceSessions.create(dialer, { serviceId: 'web', type: 'Bind' })), 'COULD_NOT_VALIDATE', 'visible, but no Bind permission');
  t.equal(await fail(serviceSessions.create(dialer, { serviceId: 'island' })), 'NO_EDGE_ROUTERS_AVAILABLE', 'no common edge router');
  const { rec, token } = await serviceSessions.create(dialer, { serviceId: 'web' });
  t.match(rec, { type: 'Dial', serviceId: 'web', identityId: 'dialer', apiSessionId: dialer.apiSessionId, servicePolicyIds: ['dial-all'] });
  t.same(store.get('sessions', rec.id)?.serviceId, 'web', 'written');
  t.equal(keys.verify(token, SESSION_TOKEN)?.jti, rec.id, 'the token names the session');
});

t.test('idempotent per (API session, service, type)', async (t) => {
  const dialer = await caller('dialer');
  const [a, b] = await Promise.all([serviceSessions.create(dialer, { serviceId: 'web' }), serviceSessions.create(dialer, { serviceId: 'web', type: 'Dial' })]);
  t.equal(a.rec.id, b.rec.id, 'concurrent creates share one record');
  t.equal(a.token, b.token, 'and one token');
  const again = await serviceSessions.create(dialer, { serviceId: 'web' });
  t.equal(again.rec.id, a.rec.id, 'a later create answers the same session');
  t.equal(keys.verify(again.token, SESSION_TOKEN)?.jti, a.rec.id, 'with a valid token');
  const other = await serviceSessions.create(await caller('dialer'), { serviceId: 'web' });
  t.not(other.rec.id, a.rec.id, 'another API session gets its own');
});

t.test('an API session that has ended gets no session: the write checks it', async (t) => {
  const dialer = await caller('dialer');
  await sessions.delete(dialer.apiSessionId);
  t.equal(await fail(serviceSessions.create(dialer, { serviceId: 'web' })), 'UNAUTHORIZED');
  t.equal(policy.sessions.find(dialer.apiSessionId, 'web', 'Dial'), undefined, 'nothing written');
});
