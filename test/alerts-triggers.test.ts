/**
 * What starts an alert scan (src/events/alerts.ts). Found by the fleet benchmark on the "large"
 * model: every certificate login (which records the identity's envInfo/sdkInfo), every enrollment
 * used and every router enrollment started a full structural or time-based scan — seconds of CPU
 * each at 100,000 identities — and a stream of policy changes kept one running back to back, so
 * the controller spent over half its CPU on alert scans and API requests timed out. Now only
 * changes a check can see start one, and scans are spaced by a multiple of their own duration.
 * The positive side is checked end to end: a role attribute change still raises its alert.
 */
import t from 'tap';
import type { ChangeEvent } from '../src/store/store.js';
import { affectedChecks, nextScanDelay } from '../src/events/alerts.js';
import { loadConfig } from '../src/config.js';
import { startServer, type Res, type Server } from './helpers/server.js';
import { sleep } from './helpers/assert.js';

const ident = { id: 'i1', name: 'device-1', roleAttributes: ['dialers'], envInfo: { os: 'linux' }, sdkInfo: { version: '1' } };
const ev = (collection: string, type: ChangeEvent['type'], before?: Record<string, unknown>, after?: Record<string, unknown>): ChangeEvent =>
  ({ collection, type, id: String((after ?? before)?.id ?? 'x'), before, after }) as ChangeEvent;
const none = { structural: false, timeBased: false };

t.test('changes no check can see start no scan', async (t) => {
  t.same(affectedChecks([ev('identities', 'update', ident, { ...ident, envInfo: { os: 'darwin' }, sdkInfo: { version: '2' } })]), none, 'a login recording envInfo/sdkInfo');
  t.same(affectedChecks([ev('identities', 'update', ident, { ...ident, name: 'renamed' })]), none, 'a rename (names are only in messages)');
  t.same(affectedChecks([ev('edgeRouters', 'update', { id: 'r1', roleAttributes: ['a'] }, { id: 'r1', roleAttributes: ['a'], fingerprint: 'ab', isVerified: true })]), none, 'a router enrollment');
  t.same(affectedChecks([ev('enrollments', 'delete', { id: 'e1', expiresAt: 1 })]), none, 'an enrollment used (deleted)');
  t.same(affectedChecks([ev('authenticators', 'create', undefined, { id: 'a1' }), ev('apiSessions', 'create', undefined, { id: 's1' }), ev('sessions', 'create', undefined, { id: 'x1' })]), none, 'authenticators, API sessions, sessions');
  t.same(affectedChecks([ev('terminators', 'update', { id: 't1', serviceId: 's' }, { id: 't1', serviceId: 's', cost: 3 })]), none, 'a terminator updated on the same service');
});

t.test('changes a check can see start the right scan', async (t) => {
  t.same(affectedChecks([ev('identities', 'update', ident, { ...ident, roleAttributes: ['dialers', 'ops'] })]), { structural: true, timeBased: false }, 'new role attributes');
  for (const c of ['identities', 'services', 'edgeRouters', 'terminators']) {
    t.same(affectedChecks([ev(c, 'create', undefined, { id: 'n' })]), { structural: true, timeBased: false }, `${c} created`);
    t.same(affectedChecks([ev(c, 'delete', { id: 'n' })]), { structural: true, timeBased: false }, `${c} deleted`);
  }
  t.same(affectedChecks([ev('terminators', 'update', { id: 't1', serviceId: 's' }, { id: 't1', serviceId: 's2' })]), { structural: true, timeBased: false }, 'a terminator moved to another service');
  for (const c of ['servicePolicies', 'edgeRouterPolicies', 'serviceEdgeRouterPolicies']) {
    t.same(affectedChecks([ev(c, 'update', { id: 'p', tags: {} }, { id: 'p', tags: { a: '1' } })]), { structural: true, timeBased: false }, `${c} changed`);
  }
  t.same(affectedChecks([ev('cas', 'create', undefined, { id: 'c' })]), { structural: false, timeBased: true }, 'a CA');
  t.same(affectedChecks([ev('enrollments', 'create', undefined, { id: 'e', expiresAt: 5 })]), { structural: false, timeBased: true }, 'an enrollment created');
  t.same(affectedChecks([ev('enrollments', 'update', { id: 'e', expiresAt: 5 }, { id: 'e', expiresAt: 6 })]), { structural: false, timeBased: true }, 'an enrollment given another expiry');
  t.same(
    affectedChecks([ev('identities', 'update', ident, { ...ident, envInfo: {} }), ev('cas', 'delete', { id: 'c' }), ev('servicePolicies', 'delete', { id: 'p' })]),
    { structural: true, timeBased: true },
    'one commit with several changes',
  );
});

t.test('scans are spaced by a multiple of their duration', async (t) => {
  const spacing = loadConfig({}).alertScanSpacing;
  t.equal(nextScanDelay(2000, 0, spacing), 2000, 'first scan: the debounce');
  t.equal(nextScanDelay(2000, 100, spacing), 2000, 'a quick scan: the debounce');
  t.equal(nextScanDelay(2000, 3000, spacing), 3000 * spacing, 'a long scan: a multiple of its duration');
  t.ok(spacing >= 1, 'scans take at most half the time');
  t.throws(() => loadConfig({ MESH_ALERT_SCAN_SPACING: '0' }), /alertScanSpacing/, 'also when configured: a spacing under 1 is refused');
});

t.test('through the API: a role attribute change of an existing identity still raises its alert', async (t) => {
  const srv: Server = await startServer(t, { env: { MESH_ALERT_DEBOUNCE_MS: '50' } });
  const admin = await srv.login();
  const auth = 'Basic ' + Buffer.from('admin:admin-test-password').toString('base64');
  const search = (body: unknown): Promise<Res> => srv.raw('GET', '/search/mesh.alert*/_search', Buffer.from(JSON.stringify(body)), { authorization: auth, 'content-type': 'application/json' });
  const pairAlerts = async (serviceId: string) =>
    (await search({ query: { bool: { filter: [{ term: { 'alert_type.keyword': 'service.no-shared-edge-router' } }, { term: { 'event_source_id.keyword': serviceId } }] } }, size: 10 })).body?.hits?.total?.value;

  const svc = (await admin.post('/services', { name: 'web-svc', encryptionRequired: true, roleAttributes: ['web'] })).body.data.id;
  t.equal((await admin.post('/service-policies', { name: 'dial-web', type: 'Dial', semantic: 'AnyOf', identityRoles: ['#dialers'], serviceRoles: ['#web'] })).status, 201);
  const later = (await admin.post('/identities', { name: 'later-dialer', type: 'User', isAdmin: false, roleAttributes: [] })).body.data.id;
  await sleep(400);
  t.equal(await pairAlerts(svc), 0, 'no dialer yet: no alert');

  // Only the role attributes change (an update event of an existing identity).
  t.equal((await admin.patch(`/identities/${later}`, { roleAttributes: ['dialers'] })).status, 200);
  let n = 0;
  for (let i = 0; i < 200 && n === 0; i++) {
    await sleep(50);
    n = await pairAlerts(svc);
  }
  t.equal(n, 1, 'the new dialer sharing no edge router with the service is alerted (on the service)');
  const doc = (await search({ query: { term: { 'event_source_id.keyword': svc } }, size: 10 })).body.hits.hits.find((h: { _source: { alert_type: string } }) => h._source.alert_type === 'service.no-shared-edge-router')._source;
  t.match(doc.logs[1], /later-dialer/, 'the dialer is named');
});
