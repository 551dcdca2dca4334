/**
 * Posture: posture responses for every check type through the Client API, the
 * session decision (one passing policy suffices; 409 INVALID_POSTURE otherwise), continuous
 * enforcement, posture data and failed service requests — plus the evaluation rules of each check
 * type (OS versions, MFA timeouts, wake/unlock grace) on the posture store itself.
 */
import t from 'tap';
import { startServer, isError, type Client, type Server } from './helpers/server.js';
import { Fixture } from './helpers/policy-fixture.js';
import { sleep } from './helpers/assert.js';
import { PostureStore, isLegacySdk } from '../src/policy/posture.js';
import { satisfies } from '../src/policy/version-range.js';

let srv: Server;
let admin: Client;
let f: Fixture;

t.before(async () => {
  srv = await startServer(t);
  admin = await srv.login();
  f = new Fixture(srv, admin);
});

/** An identity with Dial+Bind on a fresh service through policies requiring checks `#<tag>`. */
async function setup(tag: string) {
  const u = await f.user(`${tag}-user`, [`${tag}-id`]);
  const S = await f.svc(`${tag}-s`, [`${tag}-svc`]);
  await f.router(`${tag}-r`, [`${tag}-r`]);
  await f.erp(`${tag}-erp`, [`#${tag}-id`], [`#${tag}-r`]);
  await f.serp(`${tag}-serp`, [`#${tag}-svc`], [`#${tag}-r`]);
  const dial = await f.sp(`${tag}-dial`, 'Dial', [`#${tag}-id`], [`#${tag}-svc`], { postureCheckRoles: [`#${tag}-pc`] });
  const bind = await f.sp(`${tag}-bind`, 'Bind', [`#${tag}-id`], [`#${tag}-svc`], { postureCheckRoles: [`#${tag}-pc`] });
  return { u, S, dial, bind };
}

t.test('domain check flow', async (t) => {
  const { u, S, dial } = await setup('dom');
  const D = await f.mk('/posture-checks', { typeId: 'DOMAIN', name: 'dom-check', domains: ['domain1'], roleAttributes: ['dom-pc'] });
  const svc = (await u.client.get(`/services/${S}`)).body.data;
  t.equal(svc.postureQueries.length, 2, 'one set per granting policy');
  for (const set of svc.postureQueries) {
    t.equal(set.isPassing, false, `${set.policyType} set failing`);
    t.equal(set.postureQueries.length, 1);
    t.equal(set.postureQueries[0].id, D);
    t.equal(set.postureQueries[0].queryType, 'DOMAIN');
    t.equal(set.postureQueries[0].isPassing, false);
    t.equal(set.postureQueries[0].timeout, -1);
  }
  const fail = await u.client.post('/sessions', { serviceId: S });
  t.ok(isError(fail, 409, 'INVALID_POSTURE'), `failing posture → 409 (${fail.status} ${fail.text.slice(0, 300)})`);
  t.equal(fail.body.error.cause.data.policyFailures[0].policyId, dial, 'cause names the failing policy');
  t.equal(fail.body.error.cause.data.policyFailures[0].checks[0].postureCheckId, D, 'and the failing check');
  const fsr = (await admin.get(`/identities/${u.id}/failed-service-requests`)).body.data;
  t.equal(fsr.length, 1, 'failure recorded');
  t.equal(fsr[0].serviceId, S);
  t.equal(fsr[0].sessionType, 'Dial');

  const before = (await u.client.get('/current-api-session/service-updates')).body.data.lastChangeAt;
  const pr = await u.client.post('/posture-response', { id: D, typeId: 'DOMAIN', domain: 'DOMAIN1' });
  t.equal(pr.status, 201, 'posture response → 201');
  t.same(pr.body.data, { services: [] });
  t.ok((await u.client.get('/current-api-session/service-updates')).body.data.lastChangeAt > before, 'service updates advanced');
  t.ok((await u.client.get(`/services/${S}`)).body.data.postureQueries.every((q: any) => q.isPassing), 'passing (case-insensitive)');
  const s = await u.client.post('/sessions', { serviceId: S });
  t.equal(s.status, 201, 'session → 201');
  // Posture data is per identity: another API session of the identity passes too.
  const other = await u.login();
  t.equal((await other.post('/sessions', { serviceId: S, type: 'Bind' })).status, 201, 'other API session passes');
  const pd = (await admin.get(`/identities/${u.id}/posture-data`)).body.data;
  t.equal(pd.domain.domain, 'DOMAIN1', 'posture data: domain');
  t.equal(pd.domain.postureCheckId, D);
  t.ok(Object.keys(pd.apiSessionPostureData).length >= 2, 'per API session data');
  // A failing response removes the session.
  const bulk = await u.client.post('/posture-response-bulk', [{ id: D, typeId: 'DOMAIN', domain: 'elsewhere' }]);
  t.equal(bulk.status, 201, 'bulk → 201');
  t.ok(isError(await u.client.get(`/sessions/${s.body.data.id}`), 404, 'NOT_FOUND'), 'session removed when posture fails');
  for (let i = 0; i < 50 && (await admin.get(`/sessions/${s.body.data.id}`)).status !== 404; i++) await sleep(20);
  t.ok(isError(await admin.get(`/sessions/${s.body.data.id}`), 404, 'NOT_FOUND'), 'deleted from the store');
  t.ok(isError(await u.client.post('/sessions', { serviceId: S }), 409, 'INVALID_POSTURE'), 'new session refused');
  // One passing policy is enough: add a Dial policy without checks.
  await f.sp('dom-open', 'Dial', ['#dom-id'], ['#dom-svc']);
  t.equal((await u.client.post('/sessions', { serviceId: S })).status, 201, 'a policy without checks grants');
});

t.test('MAC, OS, PROCESS and PROCESS_MULTI checks', async (t) => {
  const { u, S } = await setup('mix');
  const mac = await f.mk('/posture-checks', { typeId: 'MAC', name: 'mix-mac', macAddresses: ['AA:BB:CC:DD:EE:FF'], roleAttributes: ['mix-pc'] });
  const os = await f.mk('/posture-checks', {
    typeId: 'OS', name: 'mix-os', roleAttributes: ['mix-pc'],
    operatingSystems: [{ type: 'Windows', versions: ['>=10.0.19041'] }, { type: 'Linux', versions: [] }],
  });
  const proc = await f.mk('/posture-checks', {
    typeId: 'PROCESS', name: 'mix-proc', roleAttributes: ['mix-pc'],
    process: { osType: 'Windows', path: 'C:\\agent.exe', hashes: ['ABC123'], signerFingerprint: 'F1' },
  });
  const multi = await f.mk('/posture-checks', {
    typeId: 'PROCESS_MULTI', name: 'mix-multi', roleAttributes: ['mix-pc'], semantic: 'AnyOf',
    processes: [{ osType: 'Linux', path: '/usr/bin/a' }, { osType: 'Linux', path: '/usr/bin/b' }],
  });
  const failing = async () => {
    const sets = (await u.client.get(`/services/${S}`)).body.data.postureQueries;
    return sets[0].postureQueries.filter((q: any) => !q.isPassing).map((q: any) => q.queryType).sort();
  };
  t.same(await failing(), ['MAC', 'OS', 'PROCESS', 'PROCESS_MULTI'], 'all failing at first');
  const post = (b: any) => u.client.post('/posture-response', b);
  t.equal((await post({ id: mac, typeId: 'MAC', macAddresses: ['11:22:33:44:55:66', 'aa-bb-cc-dd-ee-ff'] })).status, 201);
  t.same(await failing(), ['OS', 'PROCESS', 'PROCESS_MULTI'], 'MAC passes (any address, normalised)');
  t.equal((await post({ id: os, typeId: 'OS', type: 'windows', version: '10.0.17763', build: 'x' })).status, 201);
  t.ok((await failing()).includes('OS'), 'OS version below range fails');
  await post({ id: os, typeId: 'OS', type: 'Windows', version: '10.0.19044' });
  t.same(await failing(), ['PROCESS', 'PROCESS_MULTI'], 'OS version in range passes');
  await post({ id: os, typeId: 'OS', type: 'Linux', version: 'anything' });
  t.ok(!(await failing()).includes('OS'), 'OS without versions: any version');
  const pr = await post({ id: proc, typeId: 'PROCESS', path: 'C:\\agent.exe', isRunning: true, hash: 'abc123', signerFingerprints: ['zz', 'f1'] });
  t.equal(pr.status, 201, `process response (${pr.text.slice(0, 200)})`);
  t.same(await failing(), ['PROCESS_MULTI'], 'PROCESS passes (hash and signer, case-insensitive)');
  await post({ id: proc, typeId: 'PROCESS', path: 'C:\\agent.exe', isRunning: true, hash: 'other', signerFingerprints: ['f1'] });
  t.ok((await failing()).includes('PROCESS'), 'wrong hash fails');
  await post({ id: proc, typeId: 'PROCESS', path: 'C:\\agent.exe', isRunning: true, hash: 'abc123', signerFingerprints: ['f1'] });
  await post({ id: multi, typeId: 'PROCESS', path: '/usr/bin/b', isRunning: true });
  t.same(await failing(), [], 'PROCESS_MULTI AnyOf passes with one process');
  t.equal((await u.client.post('/sessions', { serviceId: S })).status, 201, 'session with every check passing');
  const pd = (await admin.get(`/identities/${u.id}/posture-data`)).body.data;
  t.same(pd.mac.addresses, ['11:22:33:44:55:66', 'aa-bb-cc-dd-ee-ff'], 'posture data: mac');
  t.equal(pd.os.type, 'Linux', 'posture data: os');
  t.equal(pd.processes.length, 2, 'posture data: processes');
  t.ok(isError(await admin.get('/identities/nope/posture-data'), 404, 'NOT_FOUND'), 'unknown identity → 404');
});

t.test('MFA check without MFA: 409; endpoint state answers', async (t) => {
  const { u, S } = await setup('mfa');
  await f.mk('/posture-checks', { typeId: 'MFA', name: 'mfa-check', roleAttributes: ['mfa-pc'], timeoutSeconds: 600, promptOnWake: true, promptOnUnlock: true });
  const q = (await u.client.get(`/services/${S}`)).body.data.postureQueries[0].postureQueries[0];
  t.equal(q.queryType, 'MFA');
  t.equal(q.isPassing, false);
  t.equal(q.promptOnWake, true);
  t.equal(q.timeout, 600);
  t.ok(isError(await u.client.post('/sessions', { serviceId: S }), 409, 'INVALID_POSTURE'), 'no MFA → 409');
  const es = await u.client.post('/posture-response', { id: '6a3c7ad1-1d89-4a3f-9f23-2b9b9e0c4a11', typeId: 'ENDPOINT_STATE', woken: true });
  t.equal(es.status, 201, 'endpoint state → 201');
  t.same(es.body.data.services.map((s: any) => [s.id, s.postureQueryType, s.timeout]), [[S, 'MFA', 600]], 'services with wake prompts');
  const pd = (await admin.get(`/identities/${u.id}/posture-data`)).body.data;
  const mine = Object.values(pd.apiSessionPostureData) as any[];
  t.ok(mine.some((s) => s.endpointState.wokenAt !== null), 'woken recorded per API session');
  t.ok(mine.every((s) => s.mfa.passedMfa === false), 'no MFA pass');
});

t.test('evaluation rules (posture store)', async (t) => {
  const p = new PostureStore();
  const now = 1_000_000_000;
  const check = (extra: Record<string, unknown>) => ({ id: 'c', createdAt: 0, updatedAt: 0, name: 'c', ...extra });
  // Version ranges.
  t.ok(satisfies('10.0.19044', '>=10.0.19041'));
  t.notOk(satisfies('10.0.17763', '>=10.0.19041'));
  t.ok(satisfies('11', '>=10 <12'));
  t.ok(satisfies('3.1', '<2 || >=3'));
  t.notOk(satisfies('2.5', '<2 || >=3'));
  t.ok(satisfies('10.0', '10.0.0'), 'bare version is equality');
  t.notOk(satisfies('x', '>=1'), 'unparsable version fails');
  // MFA: no pass, pass, timeout, wake grace.
  const mfa = check({ typeId: 'MFA', timeoutSeconds: 60, promptOnWake: true, promptOnUnlock: false, ignoreLegacyEndpoints: false });
  t.equal(p.evaluate(mfa, 'I', 'A', undefined, now).passing, false, 'no MFA pass');
  p.session('A').passedMfaAt = now - 10_000;
  let r = p.evaluate(mfa, 'I', 'A', undefined, now);
  t.equal(r.passing, true, 'passed 10 s ago');
  t.equal(r.timeoutRemaining, 50, 'remaining seconds');
  t.equal(p.evaluate(mfa, 'I', 'A', undefined, now + 51_000).passing, false, 'timed out');
  p.session('A').wokenAt = now;
  r = p.evaluate(mfa, 'I', 'A', undefined, now + 1000);
  t.equal(r.passing, true, 'inside the wake grace window');
  t.ok(r.timeoutRemaining <= 49, 'remaining is the lesser of timeout and grace');
  const noTimeout = check({ typeId: 'MFA', timeoutSeconds: -1, promptOnWake: true });
  t.equal(p.evaluate(noTimeout, 'I', 'A', undefined, now + 299_000).passing, true, 'grace of 5 minutes');
  t.equal(p.evaluate(noTimeout, 'I', 'A', undefined, now + 301_000).passing, false, 'grace over');
  t.equal(p.evaluate(check({ typeId: 'MFA', timeoutSeconds: -1 }), 'I', 'A', undefined, now + 10 ** 9).timeoutRemaining, -1, 'no timeout: -1');
  // Legacy endpoints are exempt from the timeout when asked.
  const legacy = check({ typeId: 'MFA', timeoutSeconds: 1, ignoreLegacyEndpoints: true });
  t.equal(p.evaluate(legacy, 'I', 'A', { sdkInfo: { type: 'ziti-sdk-c', version: '0.20.0' } } as any, now + 600_000).passing, true, 'legacy C SDK: no timeout');
  t.equal(p.evaluate(legacy, 'I', 'A', { sdkInfo: { type: 'ziti-sdk-c', version: '0.26.1' } } as any, now + 600_000).passing, false, 'modern C SDK: timeout');
  t.ok(isLegacySdk(undefined), 'unknown SDK is legacy');
  t.notOk(isLegacySdk({ type: 'ziti-sdk-golang', version: '0.20.0' }), 'Go SDK is not');
  // PROCESS_MULTI AllOf.
  const multi = check({ typeId: 'PROCESS_MULTI', semantic: 'AllOf', processes: [{ path: '/a' }, { path: '/b' }] });
  p.report('I', 'A', { id: 'c', typeId: 'PROCESS', path: '/a', isRunning: true });
  t.equal(p.evaluate(multi, 'I', 'A', undefined, now).passing, false, 'AllOf needs both');
  p.report('I', 'A', { id: 'c', typeId: 'PROCESS', path: '/b', isRunning: true });
  t.equal(p.evaluate(multi, 'I', 'A', undefined, now).passing, true, 'AllOf with both');
  p.report('I', 'A', { id: 'c', typeId: 'PROCESS', path: '/b', isRunning: false });
  t.equal(p.evaluate(multi, 'I', 'A', undefined, now).passing, false, 'a stopped process fails');
});
