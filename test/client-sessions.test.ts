/**
 * Service sessions and the service-update timestamp against the
 * real controller: the create check order and error codes, idempotence, visibility, removal on
 * logout and on loss of access, and exactly which changes move `lastChangeAt`.
 */
import t from 'tap';
import { startServer, isError, type Client, type Server } from './helpers/server.js';
import fs from 'node:fs';
import path from 'node:path';
import { createLocalJWKSet, importPKCS8 } from 'jose';
import { signSessionToken, verifySessionToken } from './helpers/session-tokens.js';
import { Fixture, ids } from './helpers/policy-fixture.js';
import { sleep } from './helpers/assert.js';

let srv: Server;
let admin: Client;
let f: Fixture;

t.before(async () => {
  srv = await startServer(t);
  admin = await srv.login();
  f = new Fixture(srv, admin);
});

t.test('session create: check order, errors, idempotence', async (t) => {
  const u = await f.user('ss-user', ['ss-id']);
  const S = await f.svc('ss-s', ['ss-svc']);
  const hidden = await f.svc('ss-hidden');
  await f.router('ss-r1', ['ss-r']);
  const dial = await f.sp('ss-dial', 'Dial', ['#ss-id'], ['#ss-svc']);
  t.ok(isError(await u.client.post('/sessions', { serviceId: hidden }), 404, 'NOT_FOUND'), 'invisible service → 404');
  t.ok(isError(await u.client.post('/sessions', { serviceId: 'made-up' }), 404, 'NOT_FOUND'), 'unknown service → 404');
  const wrong = await u.client.post('/sessions', { serviceId: S, type: 'Bind' });
  t.ok(isError(wrong, 400, 'COULD_NOT_VALIDATE'), 'Bind with only Dial → 400');
  t.equal(wrong.body?.error?.cause?.field, 'ServiceId', 'cause field ServiceId');
  t.ok(isError(await u.client.post('/sessions', { serviceId: S }), 400, 'NO_EDGE_ROUTERS_AVAILABLE'), 'no shared router → 400');
  await f.erp('ss-erp', ['#ss-id'], ['#ss-r']);
  t.ok(isError(await u.client.post('/sessions', { serviceId: S }), 400, 'NO_EDGE_ROUTERS_AVAILABLE'), 'identity routers only → still 400');
  await f.serp('ss-serp', ['#ss-svc'], ['#ss-r']);
  const r = await u.client.post('/sessions', { serviceId: S });
  t.equal(r.status, 201, `create → 201 (${r.text.slice(0, 200)})`);
  const s = r.body.data;
  t.equal(s.type, 'Dial', 'type defaults to Dial');
  t.equal(s.serviceId, S);
  t.equal(s.identityId, u.id);
  t.type(s.apiSessionId, 'string');
  t.match(s.token, /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+~[A-Za-z0-9_-]+~[A-Za-z0-9_-]+$/, 'token is a batch JWS, claims and proof');
  const jwks = createLocalJWKSet((await srv.raw('GET', '/oidc/keys')).body);
  const payload = await verifySessionToken(s.token, jwks);
  t.match(payload, { sub: u.id, jti: s.id, z_t: 'session', z_asid: s.apiSessionId, z_svc: S, z_st: 'Dial' }, 'signed claims a router needs, verified with the JWKS');
  t.type(payload.exp, 'number', 'the token carries exp');
  t.equal(payload.exp! - payload.iat!, Number(r.headers['expiration-seconds']), 'it lives as long as an idle API session');
  const listed = await u.client.get(`/sessions/${s.id}`);
  t.equal(listed.body.data.token, '', 'nothing of the token is stored or listed');
  t.same(s.edgeRouters, [], 'no router is connected');
  const again = await u.client.post('/sessions', { serviceId: S, type: 'Dial' });
  t.equal(again.status, 201, 'repeat → 201');
  t.equal(again.body.data.id, s.id, 'same session');
  t.match(await verifySessionToken(again.body.data.token, jwks), { jti: s.id, z_asid: s.apiSessionId, z_svc: S, z_st: 'Dial' }, 'a valid token naming it');
  // Concurrent creates share one session.
  const other = await u.login();
  const many = await Promise.all(Array.from({ length: 8 }, () => other.post('/sessions', { serviceId: S })));
  t.equal(new Set(many.map((m) => m.body?.data?.id)).size, 1, 'concurrent creates → one session');
  t.not(many[0].body.data.id, s.id, 'another API session gets its own');
  // A session-token of the caller's API session is accepted on the service edge router list.
  t.equal((await u.client.get(`/services/${S}/edge-routers`, { headers: { 'session-token': s.token } })).status, 200, 'own session token');
  t.ok(isError(await other.get(`/services/${S}/edge-routers`, { headers: { 'session-token': s.token } }), 401, 'UNAUTHORIZED'), 'another API session token → 401');
  // The two kinds of token are not interchangeable, and a tampered one is refused.
  t.ok(isError(await u.client.get('/current-identity', { headers: { 'zt-session': s.token } }), 401, 'UNAUTHORIZED'), 'a session token as zt-session → 401');
  t.ok(isError(await u.client.get(`/services/${S}/edge-routers`, { headers: { 'session-token': u.client.token! } }), 401, 'UNAUTHORIZED'), 'an API-session token as session-token → 401');
  const [batch, claims, proof] = s.token.split('~');
  const [bh, bp] = batch.split('.');
  const forged = Buffer.from(JSON.stringify({ ...payload, z_svc: 'another-service' })).toString('base64url');
  const refused = async (token: string) => isError(await u.client.get(`/services/${S}/edge-routers`, { headers: { 'session-token': token } }), 401, 'UNAUTHORIZED');
  t.ok(await refused(`${batch}~${forged}~${proof}`), 'tampered claims → 401');
  t.ok(await refused(`${bh}.${bp}.~${claims}~${proof}`), 'unsigned batch → 401');
  const wrongIndex = Buffer.from(proof, 'base64url');
  wrongIndex.writeUInt32BE(wrongIndex.readUInt32BE(0) + 1);
  t.ok(await refused(`${batch}~${claims}~${wrongIndex.toString('base64url')}`), 'a proof for another leaf → 401');
  t.ok(await refused(`${batch}~${claims}`), 'no proof → 401');
  t.ok(await refused(batch), 'the batch JWS alone → 401');
  t.ok(await refused('garbage'), 'malformed session token → 401');
  // The same claims re-signed with the controller's own key, but expired: refused.
  const kid = JSON.parse(Buffer.from(bh, 'base64url').toString()).kid;
  const ownKey = await importPKCS8(fs.readFileSync(path.join(srv.dataDir, 'signing-keys', `${kid}.pem`), 'utf8'), 'ES256');
  const nowS = Math.floor(Date.now() / 1000);
  t.equal((await u.client.get(`/services/${S}/edge-routers`, { headers: { 'session-token': await signSessionToken(ownKey, kid, { ...payload, iat: nowS, exp: nowS + 60 }) } })).status, 200, 'unexpired re-signed claims → 200 (the check is the signature and the live session)');
  t.ok(await refused(await signSessionToken(ownKey, kid, { ...payload, iat: nowS - 120, exp: nowS - 60 })), 'expired session token → 401');
  // Bind.
  await f.sp('ss-bind', 'Bind', ['#ss-id'], ['#ss-svc']);
  const b = await u.client.post('/sessions', { serviceId: S, type: 'Bind' });
  t.equal(b.status, 201, 'Bind → 201');
  t.equal(b.body.data.type, 'Bind');
  t.not(b.body.data.id, s.id, 'Bind is a distinct session');
  t.ok(isError(await u.client.post('/sessions', { serviceId: S, type: 'Sideways' }), 400, 'COULD_NOT_VALIDATE'), 'bad type → 400');
  t.ok(isError(await u.client.post('/sessions', {}), 400, 'COULD_NOT_VALIDATE'), 'no serviceId → 400');
  // Listing and visibility.
  const mine = await u.client.get('/sessions?limit=-1');
  t.same(ids(mine), [s.id, b.body.data.id, many[0].body.data.id].sort(), "the identity's sessions (all its API sessions)");
  const v = await f.user('ss-viewer', ['ss-id']);
  t.same(ids(await v.client.get('/sessions')), [], 'another identity sees none');
  t.ok(isError(await v.client.get(`/sessions/${s.id}`), 404, 'NOT_FOUND'), 'other identity detail → 404');
  t.ok(isError(await v.client.delete(`/sessions/${s.id}`), 404, 'NOT_FOUND'), 'other identity delete → 404');
  t.equal((await u.client.get(`/sessions/${s.id}`)).status, 200, 'own detail');
  const md = (await admin.get(`/sessions/${s.id}`)).body.data;
  t.same(md.servicePolicies.map((p: any) => p.id), [dial], 'management detail: granting policies');
  t.equal(md.service.id, S);
  // API sessions have no name: upstream's entityRef carries name "" (a string, never null).
  const apiRef = { _links: { self: { href: `./api-sessions/${s.apiSessionId}` } }, entity: 'api-sessions', id: s.apiSessionId, name: '' };
  t.same(md.apiSession, apiRef, 'management detail: apiSession entityRef with an empty name');
  t.same(s.apiSession, apiRef, 'create answer: apiSession entityRef with an empty name');
  t.same((await u.client.get(`/sessions/${s.id}`)).body.data.apiSession, apiRef, 'client detail: apiSession entityRef');
  t.equal((await admin.get(`/sessions/${s.id}/route-path`)).status, 200, 'route path');
  const ac = await srv.login('admin', undefined, 'client');
  t.ok(ids(await ac.get('/sessions?limit=-1')).includes(s.id), 'admin sees all sessions');
  t.equal((await u.client.delete(`/sessions/${b.body.data.id}`)).status, 200, 'delete own');
  t.ok(isError(await u.client.get(`/sessions/${b.body.data.id}`), 404, 'NOT_FOUND'), 'deleted');
  t.ok(isError(await u.client.get(`/services/${S}/edge-routers`, { headers: { 'session-token': b.body.data.token } }), 401, 'UNAUTHORIZED'), "a deleted session's token → 401");
  t.equal((await u.client.get(`/services/${S}/edge-routers`, { headers: { 'session-token': s.token } })).status, 200, 'the remaining session token still works');
  // Logout removes the API session's sessions.
  const o = many[0].body.data.id;
  t.equal((await other.delete('/current-api-session')).status, 200, 'logout');
  t.ok(isError(await admin.get(`/sessions/${o}`), 404, 'NOT_FOUND'), 'its sessions are gone');
  // Losing access removes sessions.
  t.equal((await admin.patch(`/identities/${u.id}`, { roleAttributes: [] })).status, 200);
  t.ok(isError(await u.client.get(`/sessions/${s.id}`), 404, 'NOT_FOUND'), 'session gone with the access');
  for (let i = 0; i < 50 && (await admin.get(`/sessions/${s.id}`)).status !== 404; i++) await sleep(20);
  t.ok(isError(await admin.get(`/sessions/${s.id}`), 404, 'NOT_FOUND'), 'and deleted from the store');
});

t.test('a burst of creates: each answer carries its own session\'s token, signed in batches', async (t) => {
  const u = await f.user('burst-user', ['burst-id']);
  const services = await Promise.all(Array.from({ length: 6 }, (_, i) => f.svc(`burst-s${i}`, ['burst-svc'])));
  await f.router('burst-r', ['burst-r']);
  await f.sp('burst-dial', 'Dial', ['#burst-id'], ['#burst-svc']);
  await f.sp('burst-bind', 'Bind', ['#burst-id'], ['#burst-svc']);
  await f.erp('burst-erp', ['#burst-id'], ['#burst-r']);
  await f.serp('burst-serp', ['#burst-svc'], ['#burst-r']);
  const logins = [u.client, ...(await Promise.all(Array.from({ length: 3 }, () => u.login())))];
  const asks = logins.flatMap((c) => services.flatMap((serviceId) => ['Dial', 'Bind'].map((type) => ({ c, serviceId, type }))));
  // Every ask twice at once: the pair shares one session (and one token while the first is in flight).
  const answers = await Promise.all([...asks, ...asks].map(({ c, serviceId, type }) => c.post('/sessions', { serviceId, type })));
  t.ok(answers.every((a) => a.status === 201), `${answers.length} creates → 201`);
  const jwks = createLocalJWKSet((await srv.raw('GET', '/oidc/keys')).body);
  const ids = new Set<string>();
  let matching = 0;
  for (const [i, a] of answers.entries()) {
    const d = a.body.data;
    const payload = await verifySessionToken(d.token, jwks);
    const ask = asks[i % asks.length];
    if (payload.jti === d.id && payload.z_asid === d.apiSessionId && payload.z_svc === ask.serviceId && d.serviceId === ask.serviceId && payload.z_st === ask.type && d.type === ask.type && payload.sub === u.id) matching++;
    ids.add(d.id);
  }
  t.equal(matching, answers.length, 'every token names its own session, API session, service and type');
  t.equal(ids.size, asks.length, 'one session per (API session, service, type)');
  t.same(answers.slice(asks.length).map((a) => a.body.data.id), answers.slice(0, asks.length).map((a) => a.body.data.id), 'concurrent twins answer the same session');
  const again = await logins[1].post('/sessions', { serviceId: services[2], type: 'Bind' });
  const first = answers[asks.findIndex((a) => a.c === logins[1] && a.serviceId === services[2] && a.type === 'Bind')].body.data;
  t.equal(again.body.data.id, first.id, 'a later repeat answers the same session');
  t.match((await verifySessionToken(again.body.data.token, jwks)) as object, { jti: first.id, z_svc: services[2], z_st: 'Bind' }, 'with a fresh token naming it');
  for (const token of [first.token, again.body.data.token]) t.equal((await logins[1].get(`/services/${services[2]}/edge-routers`, { headers: { 'session-token': token } })).status, 200, 'the controller accepts the first token and the fresh one');
  t.notMatch(srv.output, /signing thread failed/, 'signed on the signing thread (no batch fell back to the event loop)');
});

t.test('service-update timestamp moves exactly on relevant changes', async (t) => {
  const u = await f.user('su-user', ['su-id']);
  const last = async () => {
    const r = await u.client.get('/current-api-session/service-updates');
    t.equal(r.status, 200);
    return r.body.data.lastChangeAt as string;
  };
  const cur = (await u.client.get('/current-api-session')).body.data;
  const t0 = await last();
  t.equal(t0, cur.createdAt, 'fresh login: the API session createdAt');
  let prev = t0;
  const moved = async (what: string) => {
    const now = await last();
    t.ok(now > prev, `${what}: advanced (${prev} → ${now})`);
    prev = now;
  };
  const still = async (what: string) => t.equal(await last(), prev, `${what}: unchanged`);

  const S = await f.svc('su-s', ['su-svc']);
  await still('service nobody grants created');
  const other = await f.sp('su-other', 'Dial', ['#someone-else'], ['#su-svc']);
  await still('policy without the identity');
  const P = await f.sp('su-dial', 'Dial', ['#su-id'], ['#su-svc']);
  await moved('matching Dial policy created');
  const P2 = await f.sp('su-dial-2', 'Dial', [`@${u.id}`], [`@${S}`]);
  await still('a second policy granting the same access');
  await admin.delete(`/service-policies/${P2}`);
  await still('deleting the redundant policy');
  await admin.patch(`/services/${S}`, { terminatorStrategy: 'weighted' });
  await moved('accessible service updated');
  const S2 = await f.svc('su-s2', ['su-svc']);
  await moved('matching service created');
  await admin.patch(`/services/${S2}`, { roleAttributes: [] });
  await moved('service attribute change removes access');
  await admin.patch(`/services/${S2}`, { roleAttributes: ['unrelated'] });
  await still('unrelated attribute change of an inaccessible service');
  await admin.patch(`/identities/${u.id}`, { roleAttributes: ['su-id', 'extra'] });
  await still('identity attribute change without access change');
  await admin.patch(`/identities/${u.id}`, { roleAttributes: [] });
  await moved('identity loses access');
  await admin.patch(`/identities/${u.id}`, { roleAttributes: ['su-id'] });
  await moved('identity regains access');
  await admin.patch(`/service-policies/${other}`, { identityRoles: ['#su-id'] });
  await still('second policy now also grants the same service');
  await admin.patch(`/service-policies/${other}`, { identityRoles: ['#someone-else'] });
  await still('and stops again');
  // Configs.
  const ct = await f.mk('/config-types', { name: 'su-ct' });
  const cfg = await f.mk('/configs', { name: 'su-cfg', configTypeId: ct, data: { a: 1 } });
  const loose = await f.mk('/configs', { name: 'su-loose', configTypeId: ct, data: { a: 2 } });
  await still('configs created');
  await admin.patch(`/services/${S}`, { configs: [cfg] });
  await moved('service configs changed');
  await admin.patch(`/configs/${cfg}`, { data: { a: 3 } });
  await moved('config of an accessible service updated');
  await admin.delete(`/configs/${loose}`);
  await still('deleting an unreferenced config');
  await admin.post(`/identities/${u.id}/service-configs`, [{ serviceId: S, configId: loose === cfg ? cfg : cfg }]);
  await moved('override added');
  await admin.delete(`/identities/${u.id}/service-configs`, [{ serviceId: S, configId: cfg }]);
  await moved('override removed');
  await admin.delete(`/configs/${cfg}`);
  await moved('config of an accessible service deleted');
  // Posture checks attached to the granting policy.
  const pc = await f.mk('/posture-checks', { typeId: 'DOMAIN', name: 'su-pc', domains: ['corp'], roleAttributes: ['su-pc'] });
  await still('posture check no policy uses');
  await admin.patch(`/service-policies/${P}`, { postureCheckRoles: ['#su-pc'] });
  await moved('policy posture roles changed');
  await admin.patch(`/posture-checks/${pc}`, { typeId: 'DOMAIN', domains: ['corp', 'corp2'] });
  await moved('attached posture check changed');
  const pc2 = await f.mk('/posture-checks', { typeId: 'DOMAIN', name: 'su-pc2', domains: ['x'], roleAttributes: ['su-pc'] });
  await moved('posture check created into the policy');
  await admin.delete(`/posture-checks/${pc2}`);
  await moved('posture check deleted from the policy');
  const pr = await u.client.post('/posture-response', { id: pc, typeId: 'DOMAIN', domain: 'corp' });
  t.equal(pr.status, 201);
  await moved('posture response');
  // Unrelated: edge routers and their policies.
  await f.router('su-r');
  await f.erp('su-erp', ['#nobody'], ['#all']);
  await still('router and edge router policy');
  await admin.delete(`/services/${S}`);
  await moved('accessible service deleted');
  await admin.delete(`/service-policies/${P}`);
  await still('policy deleted after its services were');
  // A new API session starts from its own creation time.
  const c2 = await u.login();
  const fresh = (await c2.get('/current-api-session/service-updates')).body.data.lastChangeAt;
  t.equal(fresh, (await c2.get('/current-api-session')).body.data.createdAt, 'new API session: its createdAt');
});
