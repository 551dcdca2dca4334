/**
 * The Client API driven by a real upstream client, @openziti/ziti-browzer-edge-client, through a
 * prism proxy that checks every exchange against the upstream v0.28.0 client.yml: log in, the
 * current API session and identity, authenticators, services and sessions, MFA, enrollment, log
 * out. Operations that client has no method for go through swagger-client by operationId in the
 * same sequence. Set-up data (identities, services, policies) is created on the fly as admin.
 */
import t from 'tap';
import { ZitiBrowzerEdgeClient } from '@openziti/ziti-browzer-edge-client';
import { ADMIN_PASSWORD, ADMIN_USER, startServer } from '../helpers/server.js';
import { startPrism } from './lib/prism.js';
import { ExchangeLog } from './lib/exchanges.js';
import { checkExchanges, exerciser, Missing, State, successStatus } from './lib/exerciser.js';
import { clientRows, MFA_USER, USER, type Browzer } from './lib/client-table.js';
import { clientEnrollmentSetup } from './lib/enroll-setup.js';

const quiet = { trace() {}, debug() {}, info() {}, warn() {}, error() {} };

t.test('client API with the upstream browzer edge client, through the checking proxy', async (t) => {
  const srv = await startServer(t);
  const proxy = await startPrism(t, srv, 'client', { clientCerts: true });
  const state = new State();

  // ---- set-up as admin (management API, directly): a user who may dial a service over a router
  const admin = await srv.login();
  const must = async (p: Promise<{ status: number; text: string; body: any }>, what: string) => {
    const r = await p;
    if (r.status >= 300) throw new Error(`set-up ${what}: ${r.status} ${r.text}`);
    return r.body?.data;
  };
  const user = (await must(admin.post('/identities', { name: 'bz-user', type: 'User', isAdmin: false, roleAttributes: ['bz'] }), 'user')).id;
  await must(admin.post('/authenticators', { method: 'updb', identityId: user, ...USER }), 'user authenticator');
  const mfa = (await must(admin.post('/identities', { name: 'bz-mfa', type: 'User', isAdmin: false }), 'mfa user')).id;
  await must(admin.post('/authenticators', { method: 'updb', identityId: mfa, ...MFA_USER }), 'mfa authenticator');
  const enrollee = (await must(admin.post('/identities', { name: 'bz-enrollee', type: 'User', isAdmin: false, enrollment: { updb: 'bz-enrollee' } }), 'enrollee')).id;
  const enrollment = (await must(admin.get(`/identities/${enrollee}/enrollments`), 'enrollments'))?.[0];
  if (enrollment?.token) state.set('updbToken', enrollment.token);
  const er = (await must(admin.post('/edge-routers', { name: 'bz-er', roleAttributes: ['bz-er'] }), 'edge router')).id;
  const pc = (await must(admin.post('/posture-checks', { typeId: 'DOMAIN', name: 'bz-pc', domains: ['corp.example'] }), 'posture check')).id;
  state.set('pcDomain', pc);
  const svc = (await must(admin.post('/services', { name: 'bz-svc', encryptionRequired: true, roleAttributes: ['bz-svc'] }), 'service')).id;
  state.set('svc', svc);
  state.set('svcSpare', (await must(admin.post('/services', { name: 'bz-spare', encryptionRequired: false }), 'spare service')).id);
  await must(admin.post('/service-policies', { name: 'bz-dial', type: 'Dial', semantic: 'AnyOf', identityRoles: ['#bz'], serviceRoles: ['#bz-svc'] }), 'service policy');
  await must(admin.post('/edge-router-policies', { name: 'bz-erp', semantic: 'AnyOf', identityRoles: ['#bz'], edgeRouterRoles: ['#bz-er'] }), 'edge router policy');
  await must(admin.post('/service-edge-router-policies', { name: 'bz-serp', semantic: 'AnyOf', serviceRoles: ['#bz-svc'], edgeRouterRoles: ['#bz-er'] }), 'service edge router policy');
  await must(admin.post('/terminators', { service: svc, router: er, binding: 'transport', address: 'tcp:localhost:8080' }), 'terminator');
  state.srv = srv;
  state.sessions.admin = (await srv.login(ADMIN_USER, ADMIN_PASSWORD, 'client')).token;
  await clientEnrollmentSetup(srv, admin, state);

  // ---- the browzer client uses `_ziti_realFetch` when defined: route it through the checking log
  const log = new ExchangeLog(proxy);
  (globalThis as any)._ziti_realFetch = log.fetch;
  t.teardown(() => delete (globalThis as any)._ziti_realFetch);
  const swagger = await exerciser(proxy, state, log);
  const browzer = (as: string): Browzer => {
    const token = as === 'none' ? undefined : state.sessions[as];
    return new ZitiBrowzerEdgeClient({
      domain: proxy.base,
      logger: quiet,
      ...(token ? { token: { value: token, headerOrQueryName: 'zt-session', isQuery: false } } : {}),
    }) as unknown as Browzer;
  };

  const live = new Set<string>();
  for (const step of clientRows()) {
    if ('swagger' in step) {
      live.add(`client:${step.swagger.op}`);
      await swagger.run(t, step.swagger);
      continue;
    }
    const row = step;
    const label = `client:${row.op}${row.note ? ` (${row.note})` : ''} [browzer]`;
    live.add(`client:${row.op}`);
    const as = row.as ?? 'user';
    if (as !== 'none' && !state.sessions[as]) {
      t.fail(`${label}: no session "${as}"`);
      continue;
    }
    const first = log.exchanges.length;
    let body: any;
    try {
      body = await row.call(browzer(as), state);
    } catch (e) {
      if (e instanceof Missing) {
        t.fail(`${label}: needs "${e.message}", which the set-up or an earlier row did not produce`);
        continue;
      }
      // The client parses every response as JSON: a non-JSON body (the PKCS7 CA store, a QR code
      // PNG) rejects here; the exchange itself is still checked below.
      body = undefined;
    }
    checkExchanges(t, log, first, row.op, label);
    const x = log.exchanges[log.exchanges.length - 1];
    const expected = row.status ?? successStatus(proxy.spec.doc, row.op);
    const ok = x !== undefined && x.status === expected;
    t.ok(ok, `${label} → ${x?.status}${ok ? '' : ` (expected ${expected}): ${JSON.stringify(x?.body)?.slice(0, 300)}`}`);
    const data = body && typeof body === 'object' && 'data' in body ? body.data : body;
    if (ok && row.verify) {
      const [holds, what] = row.verify(data, state);
      t.ok(holds, `${label}: ${what}`);
    }
    if (ok && row.save) row.save(data, state, body);
  }

  const clean = log.cleanOps();
  const missing = [...live].filter((k) => !clean.has(k));
  t.same(missing, [], 'every operation of the table had a clean exchange through the proxy');
  t.comment(`exercised cleanly: ${clean.size} client operations`);
});
