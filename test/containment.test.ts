/**
 * Containment (docs/auth.md, "Containment"): no permission reaches further than it names. For
 * every permission string, an identity holding just that one walks every path toward the Default
 * Admin and toward a more-privileged identity (every permission string, no admin) that would give
 * it a credential for them, a way to log in as them, or lock them out or end their sessions: the
 * trust anchors (external JWT signers, CAs, auth policies, controller settings), the identity
 * itself (`externalId`, `authPolicyId`, `permissions`, `isAdmin`, delete), enrollments,
 * authenticators, MFA, disable, API sessions and sessions. Each is refused with 401 and changes
 * nothing; the same path then works for a full admin, and the rule still lets a holder reach the
 * identities it dominates. One real server for the whole file; each caller logs in once.
 */
import crypto from 'node:crypto';
import t from 'tap';
import { SignJWT } from 'jose';
import { ALL_PERMISSIONS } from '../src/auth/permissions.js';
import { Client, isError, sessionIdOf, startServer, type Res, type Server } from './helpers/server.js';
import { createUser } from './helpers/users.js';
import { newCa, verificationCert } from './helpers/pki.js';
import { Fixture } from './helpers/policy-fixture.js';
import { buildOperations } from '../src/api/operations.js';
import { createRegistry } from '../src/resources/index.js';

const PASSWORD = 'containment-pw-1';
const PERMS = [...ALL_PERMISSIONS].sort();
const future = () => new Date(Date.now() + 3600_000).toISOString();

let srv: Server;
let admin: Client;
let f: Fixture;

/** An identity a caller walks toward, with a record of each kind that reaches it. */
interface Target {
  label: string;
  id: string;
  client: Client;
  enrollmentId: string;
  authenticatorId: string;
  apiSessionId: string;
  sessionId: string;
}

/** Records the trust-anchor paths write; made by the admin. */
const anchor = {
  signer: '', jwksSigner: '', ca: '', unverifiedCa: '', caVerifyCert: '', policy: '',
};
const attacker = newCa('attacker-signer'); // its certificate as a signer's, its key signs tokens
const attackerCa = newCa('attacker-ca');
const adminSignerCert = newCa('admin-signer').cert;

let ADMIN: Target;
let PRIV: Target;
/** A non-admin identity holding no permission: every identity-path caller dominates it. */
let plain = '';
let service = '';
/** A tunneler-enabled edge router whose own identity the admin made an admin. */
const adminRouter = { id: '', identityId: '' };
const callers = new Map<string, Client>();

/** A path as a request: method, Management path, body (`raw` for PEM text). */
interface Step {
  what: string;
  method: 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  body?: unknown;
  raw?: string;
  /** Sent on the fabric API instead of the Management API. */
  fabric?: boolean;
}

function send(c: Client, s: Step): Promise<Res> {
  if (s.fabric) c = new Client(srv, '/fabric/v1', c.token);
  if (s.raw !== undefined) return c.request(s.method, s.path, undefined, { raw: s.raw, headers: { 'content-type': 'text/plain' } });
  return c.request(s.method, s.path, s.body);
}

/** A whole auth policy: every login method allowed, no secondary factor. */
function policyBody(name: string) {
  return {
    name,
    primary: { cert: { allowed: true, allowExpiredCerts: true }, extJwt: { allowed: true, allowedSigners: [] as string[] }, updb: { allowed: true, minPasswordLength: 5, maxAttempts: 0, lockoutDurationMinutes: 0, requireMixedCase: false, requireNumberChar: false, requireSpecialChar: false } },
    secondary: { requireTotp: false, requireExtJwtSigner: null },
  };
}

/** Every trust-anchor write (no target: whoever writes one can become anyone). */
function anchorSteps(n: string): Step[] {
  const s = `/external-jwt-signers/${anchor.signer}`;
  const j = `/external-jwt-signers/${anchor.jwksSigner}`;
  const ca = `/cas/${anchor.ca}`;
  const ap = `/auth-policies/${anchor.policy}`;
  const signerBody = { name: `evil-signer-${n}`, certPem: attacker.cert, kid: `evil-${n}`, issuer: `https://evil-${n}.example`, audience: 'evil', enabled: true, claimsProperty: 'sub', useExternalId: false };
  const signerPatches: Record<string, unknown> = {
    certPem: attacker.cert, kid: 'evil-kid', issuer: 'https://evil.example', audience: 'evil', claimsProperty: 'email', useExternalId: true,
    enabled: false, externalAuthUrl: 'https://evil.example/auth', clientId: 'evil', scopes: ['openid'], targetToken: 'ID',
    enrollToCertEnabled: true, enrollToTokenEnabled: true, enrollAuthPolicyId: 'default', enrollNameClaimsSelector: '/name',
    enrollAttributeClaimsSelector: '/groups', name: 'renamed-signer', tags: { owned: true },
  };
  const caPatches: Record<string, unknown> = {
    isAuthEnabled: true, externalIdClaim: { location: 'SAN_URI', matcher: 'ALL', parser: 'NONE', index: 0 }, isAutoCaEnrollmentEnabled: true,
    isOttCaEnrollmentEnabled: true, identityRoles: ['all-the-things'], identityNameFormat: '[commonName]', name: 'renamed-ca', tags: { owned: true },
  };
  const evilPolicy = { ...policyBody(`evil-policy-${n}`), primary: { ...policyBody('').primary, updb: { ...policyBody('').primary.updb, allowed: false } } };
  return [
    { what: 'create ext-jwt signer', method: 'POST', path: '/external-jwt-signers', body: signerBody },
    ...Object.entries(signerPatches).map(([k, v]): Step => ({ what: `patch signer ${k}`, method: 'PATCH', path: s, body: { [k]: v } })),
    { what: 'patch signer jwksEndpoint', method: 'PATCH', path: j, body: { jwksEndpoint: 'https://evil.example/jwks' } },
    { what: 'update signer', method: 'PUT', path: s, body: { ...signerBody, name: 'put-signer' } },
    { what: 'delete signer', method: 'DELETE', path: s },
    { what: 'create CA', method: 'POST', path: '/cas', body: { name: `evil-ca-${n}`, certPem: attackerCa.cert, isAutoCaEnrollmentEnabled: true, isOttCaEnrollmentEnabled: true, isAuthEnabled: true, identityRoles: [], externalIdClaim: caPatches.externalIdClaim } },
    ...Object.entries(caPatches).map(([k, v]): Step => ({ what: `patch CA ${k}`, method: 'PATCH', path: ca, body: { [k]: v } })),
    { what: 'update CA', method: 'PUT', path: ca, body: { name: 'put-ca', isAutoCaEnrollmentEnabled: true, isOttCaEnrollmentEnabled: true, isAuthEnabled: true, identityRoles: [], identityNameFormat: '[commonName]' } },
    { what: 'verify CA', method: 'POST', path: `/cas/${anchor.unverifiedCa}/verify`, raw: anchor.caVerifyCert },
    { what: 'delete CA', method: 'DELETE', path: ca },
    { what: 'create auth policy', method: 'POST', path: '/auth-policies', body: evilPolicy },
    { what: 'patch default auth policy: no passwords', method: 'PATCH', path: '/auth-policies/default', body: { primary: { updb: { allowed: false } } } },
    { what: 'patch auth policy signers', method: 'PATCH', path: ap, body: { primary: { extJwt: { allowed: true, allowedSigners: [anchor.signer] } } } },
    { what: 'patch auth policy secondary', method: 'PATCH', path: ap, body: { secondary: { requireTotp: true } } },
    { what: 'update auth policy', method: 'PUT', path: ap, body: { ...evilPolicy, name: 'put-policy' } },
    { what: 'delete auth policy', method: 'DELETE', path: ap },
    { what: 'create controller setting', method: 'POST', path: '/controller-settings', body: { controllerId: `evil-${n}`, oidc: { redirectUris: ['https://evil.example/cb'] } } },
    { what: 'patch oidc redirectUris', method: 'PATCH', path: '/controller-settings/global/effective', body: { oidc: { redirectUris: ['https://evil.example/cb'] } } },
    { what: 'patch oidc postLogoutUris', method: 'PATCH', path: '/controller-settings/global/effective', body: { oidc: { postLogoutUris: ['https://evil.example/bye'] } } },
    { what: 'update controller setting', method: 'PUT', path: '/controller-settings/global/effective', body: { oidc: { redirectUris: ['https://evil.example/cb'] } } },
    { what: 'delete controller setting', method: 'DELETE', path: '/controller-settings/global/effective' },
  ];
}

/** Every write that reaches identity `x`. */
function identitySteps(x: Target, n: string): Step[] {
  const i = `/identities/${x.id}`;
  const a = `/authenticators/${x.authenticatorId}`;
  return [
    { what: 'patch externalId', method: 'PATCH', path: i, body: { externalId: `stolen-${n}-${x.label}` } },
    { what: 'patch externalId null', method: 'PATCH', path: i, body: { externalId: null } },
    { what: 'patch authPolicyId', method: 'PATCH', path: i, body: { authPolicyId: anchor.policy } },
    { what: 'patch permissions', method: 'PATCH', path: i, body: { permissions: [] } },
    { what: 'patch isAdmin', method: 'PATCH', path: i, body: { isAdmin: false } },
    { what: 'patch name', method: 'PATCH', path: i, body: { name: `renamed-${n}-${x.label}` } },
    { what: 'update identity', method: 'PUT', path: i, body: { name: `put-${n}-${x.label}`, type: 'User', isAdmin: false, externalId: `put-${n}` } },
    { what: 'delete identity', method: 'DELETE', path: i },
    { what: 'create updb enrollment', method: 'POST', path: '/enrollments', body: { method: 'updb', identityId: x.id, username: `stolen-${n}-${x.label}`, expiresAt: future() } },
    { what: 'create ott enrollment', method: 'POST', path: '/enrollments', body: { method: 'ott', identityId: x.id, expiresAt: future() } },
    { what: 'create ottca enrollment', method: 'POST', path: '/enrollments', body: { method: 'ottca', identityId: x.id, caId: anchor.ca, expiresAt: future() } },
    { what: 'refresh enrollment', method: 'POST', path: `/enrollments/${x.enrollmentId}/refresh`, body: { expiresAt: future() } },
    { what: 'delete enrollment', method: 'DELETE', path: `/enrollments/${x.enrollmentId}` },
    { what: 'create authenticator', method: 'POST', path: '/authenticators', body: { method: 'updb', identityId: x.id, username: `auth-${n}-${x.label}`, password: PASSWORD } },
    { what: 'patch authenticator', method: 'PATCH', path: a, body: { password: 'changed-pw-1' } },
    { what: 'update authenticator', method: 'PUT', path: a, body: { username: `upd-${n}-${x.label}`, password: 'changed-pw-1' } },
    { what: 'delete authenticator', method: 'DELETE', path: a },
    { what: 're-enroll authenticator', method: 'POST', path: `${a}/re-enroll`, body: { expiresAt: future() } },
    { what: 'request authenticator extension', method: 'POST', path: `${a}/request-extend`, body: { rollKeys: true } },
    { what: 'reset MFA', method: 'DELETE', path: `${i}/mfa` },
    { what: 'disable', method: 'POST', path: `${i}/disable`, body: { durationMinutes: 0 } },
    { what: 'enable', method: 'POST', path: `${i}/enable` },
    { what: 'trace', method: 'PUT', path: `${i}/trace`, body: { enabled: true, duration: '1m' } },
    { what: 'associate service configs', method: 'POST', path: `${i}/service-configs`, body: [] },
    { what: 'disassociate service configs', method: 'DELETE', path: `${i}/service-configs`, body: [] },
    { what: 'delete API session', method: 'DELETE', path: `/api-sessions/${x.apiSessionId}` },
    { what: 'delete session', method: 'DELETE', path: `/sessions/${x.sessionId}` },
  ];
}

/** Every write that reaches an edge router's own identity (its certificate logs in as it). */
function routerSteps(n: string): Step[] {
  const r = `/edge-routers/${adminRouter.id}`;
  return [
    { what: 'patch edge router', method: 'PATCH', path: r, body: { name: `router-${n}` } },
    { what: 'patch edge router: tunneling off', method: 'PATCH', path: r, body: { isTunnelerEnabled: false } },
    { what: 'update edge router', method: 'PUT', path: r, body: { name: `router-put-${n}`, isTunnelerEnabled: true, roleAttributes: [] } },
    { what: 'delete edge router', method: 'DELETE', path: r },
    { what: 're-enroll edge router', method: 'POST', path: `${r}/re-enroll` },
    { what: 'fabric: patch router', method: 'PATCH', path: `/routers/${adminRouter.id}`, body: { name: `fabric-router-${n}` }, fabric: true },
    { what: 'fabric: update router', method: 'PUT', path: `/routers/${adminRouter.id}`, body: { name: `fabric-put-${n}`, fingerprint: 'ab', cost: 1, noTraversal: false, disabled: false }, fabric: true },
    { what: 'fabric: delete router', method: 'DELETE', path: `/routers/${adminRouter.id}`, fabric: true },
  ];
}

/** Giving what the caller lacks: `isAdmin`, or every permission string, on create and on a dominated identity. */
function givingSteps(n: string): Step[] {
  return [
    { what: 'create an admin', method: 'POST', path: '/identities', body: { name: `give-admin-${n}`, type: 'User', isAdmin: true } },
    { what: 'create with more permissions', method: 'POST', path: '/identities', body: { name: `give-perms-${n}`, type: 'User', isAdmin: false, permissions: PERMS, enrollment: { updb: `give-perms-${n}` } } },
    { what: 'make a dominated identity an admin', method: 'PATCH', path: `/identities/${plain}`, body: { isAdmin: true } },
    { what: 'give a dominated identity more permissions', method: 'PATCH', path: `/identities/${plain}`, body: { permissions: PERMS } },
  ];
}

/** A target: an identity with a password, logged in, with a pending enrollment and a dial session. */
async function target(label: string, id: string, client: Client, service: string): Promise<Target> {
  const auths = (await admin.get(`/authenticators?filter=identity="${id}"`)).body.data;
  const enrollmentId = await admin.create('/enrollments', { method: 'ott', identityId: id, expiresAt: future() });
  const dial = new Client(srv, '/edge/client/v1', client.token);
  const s = await dial.post('/sessions', { serviceId: service });
  if (s.status !== 201) throw new Error(`session for ${label}: ${s.status} ${s.text}`);
  return { label, id, client, enrollmentId, authenticatorId: auths[0].id, apiSessionId: sessionIdOf(client.token!), sessionId: s.body.data.id };
}

/** What the walk must leave as it was: the targets and the anchors, as the admin reads them. */
async function snapshot(): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  const paths = [
    ...[ADMIN, PRIV].flatMap((x) => [`/identities/${x.id}`, `/enrollments/${x.enrollmentId}`, `/authenticators/${x.authenticatorId}`, `/api-sessions/${x.apiSessionId}`, `/sessions/${x.sessionId}`]),
    `/identities/${plain}`, `/identities/${adminRouter.identityId}`, `/edge-routers/${adminRouter.id}`,
    `/external-jwt-signers/${anchor.signer}`, `/external-jwt-signers/${anchor.jwksSigner}`, `/cas/${anchor.ca}`, `/cas/${anchor.unverifiedCa}`,
    '/auth-policies/default', `/auth-policies/${anchor.policy}`, '/controller-settings/global',
    '/external-jwt-signers?limit=-1', '/cas?limit=-1', '/auth-policies?limit=-1', '/controller-settings?limit=-1',
  ];
  for (const p of paths) {
    const r = await admin.get(p);
    const data = r.body?.data;
    // Reading an identity is not writing it; its API-session activity time moves with every request.
    if (data && typeof data === 'object' && !Array.isArray(data)) for (const k of ['lastActivityAt', 'cachedLastActivityAt']) delete data[k];
    out[p] = [r.status, data];
  }
  return out;
}

t.before(async () => {
  srv = await startServer(t);
  admin = await srv.login();
  f = new Fixture(srv, admin);
  const adminId = (await admin.get('/current-identity')).body.data.id;

  // Anchors the walk aims at.
  anchor.signer = await admin.create('/external-jwt-signers', { name: 'admin-signer', certPem: adminSignerCert, kid: 'admin-kid', issuer: 'https://idp.example', audience: 'mesh', enabled: true });
  anchor.jwksSigner = await admin.create('/external-jwt-signers', { name: 'admin-jwks', jwksEndpoint: 'https://idp2.example/jwks', issuer: 'https://idp2.example', audience: 'mesh', enabled: true });
  anchor.ca = await admin.create('/cas', { name: 'admin-ca', certPem: newCa('admin-ca').cert, isAutoCaEnrollmentEnabled: false, isOttCaEnrollmentEnabled: true, isAuthEnabled: false, identityRoles: [] });
  const pending = newCa('pending-ca');
  anchor.unverifiedCa = await admin.create('/cas', { name: 'pending-ca', certPem: pending.cert, isAutoCaEnrollmentEnabled: false, isOttCaEnrollmentEnabled: false, isAuthEnabled: false, identityRoles: [] });
  anchor.caVerifyCert = verificationCert(pending, (await admin.get(`/cas/${anchor.unverifiedCa}`)).body.data.verificationToken);
  anchor.policy = await admin.create('/auth-policies', policyBody('admin-policy'));

  // A service both targets dial, so each has a session to end.
  service = await f.svc('contained-svc', ['contained']);
  await f.router('contained-router', ['contained']);
  const privId = await createUser(admin, 'priv-target', PASSWORD, { permissions: PERMS, roleAttributes: ['contained'] });
  await f.sp('contained-dial', 'Dial', [`@${adminId}`, '#contained'], ['#contained'], { semantic: 'AnyOf' });
  await f.erp('contained-erp', [`@${adminId}`, '#contained'], ['#contained'], 'AnyOf');
  await f.serp('contained-serp', ['#contained'], ['#contained']);
  ADMIN = await target('admin', adminId, admin, service);
  PRIV = await target('priv', privId, await srv.login('priv-target', PASSWORD), service);
  plain = await createUser(admin, 'plain-target');
  adminRouter.id = await admin.create('/edge-routers', { name: 'admin-router', isTunnelerEnabled: true, roleAttributes: [] });
  adminRouter.identityId = (await admin.get('/identities?filter=name="admin-router"')).body.data[0].id;
  const promoted = await admin.patch(`/identities/${adminRouter.identityId}`, { isAdmin: true });
  if (promoted.status !== 200) throw new Error(`promote the router identity: ${promoted.status} ${promoted.text}`);

  // One caller per permission string, logged in once.
  for (const p of PERMS) {
    const name = `holder-${p}`;
    await createUser(admin, name, PASSWORD, { permissions: [p] });
    callers.set(p, await srv.login(name, PASSWORD));
  }
});

t.test('every permission string × every path toward the admin and a more-privileged identity → 401', async (t) => {
  const before = await snapshot();
  let tried = 0;
  for (const [i, p] of PERMS.entries()) {
    const c = callers.get(p)!;
    const steps = [...anchorSteps(String(i)), ...identitySteps(ADMIN, String(i)), ...identitySteps(PRIV, String(i)), ...routerSteps(String(i)), ...givingSteps(String(i))];
    const answers = await Promise.all(steps.map((s) => send(c, s)));
    const leaks = steps.flatMap((s, k) => (isError(answers[k], 401, 'UNAUTHORIZED') ? [] : [`${s.what} (${s.method} ${s.path}) → ${answers[k].status} ${answers[k].body?.error?.code ?? ''}`]));
    t.same(leaks, [], `[${p}]: all ${steps.length} paths refused with 401`);
    tried += steps.length;
  }
  t.ok(tried >= PERMS.length * 100, `${tried} refusals over ${PERMS.length} permission strings`);
  t.same(await snapshot(), before, 'nothing the walk aimed at changed');
  t.equal((await admin.get('/current-identity')).status, 200, "the admin's API session still works");
  t.equal((await PRIV.client.get('/current-identity')).status, 200, "the more-privileged identity's API session still works");
});

t.test('ext-jwt: a signer holder cannot log in as the admin', async (t) => {
  const adminId = ADMIN.id;
  const jwt = (kid: string, iss: string) =>
    new SignJWT({ sub: adminId }).setProtectedHeader({ alg: 'ES256', kid }).setIssuer(iss).setAudience('evil').setIssuedAt().setExpirationTime('5m')
      .sign(crypto.createPrivateKey(attacker.key));
  const extLogin = (token: string) => srv.mgmt.post('/authenticate?method=ext-jwt', undefined, { headers: { authorization: `Bearer ${token}` } });
  const holder = callers.get('external-jwt-signer')!;
  const made = await holder.post('/external-jwt-signers', { name: 'own-signer', certPem: attacker.cert, kid: 'own-kid', issuer: 'https://own.example', audience: 'evil', enabled: true });
  t.ok(isError(made, 401, 'UNAUTHORIZED'), 'creating a signer with its own key → 401');
  t.ok(isError(await extLogin(await jwt('own-kid', 'https://own.example')), 401, 'INVALID_AUTH'), 'a token with sub = the admin, signed with that key → 401');
  const rekey = await callers.get('external-jwt-signer.update')!.patch(`/external-jwt-signers/${anchor.signer}`, { certPem: attacker.cert, kid: 'rekeyed', issuer: 'https://rekeyed.example', audience: 'evil' });
  t.ok(isError(rekey, 401, 'UNAUTHORIZED'), "re-keying the admin's signer → 401");
  t.ok(isError(await extLogin(await jwt('rekeyed', 'https://rekeyed.example')), 401, 'INVALID_AUTH'), 'and its token logs in as nobody');

  // The same path, taken by a full admin, is live: this is what the refusals withhold.
  t.equal((await admin.post('/external-jwt-signers', { name: 'admin-made', certPem: attacker.cert, kid: 'admin-made', issuer: 'https://admin-made.example', audience: 'evil', enabled: true })).status, 201, 'admin creates the signer → 201');
  const r = await extLogin(await jwt('admin-made', 'https://admin-made.example'));
  t.equal(r.status, 200, `its token logs in (${r.status})`);
  const as = new Client(srv, '/edge/management/v1', r.body?.data?.token);
  t.equal((await as.get('/current-identity')).body?.data?.isAdmin, true, 'as the admin');
});

t.test('the rule still reaches what the caller dominates', async (t) => {
  const mgr = callers.get('identity')!;
  const upd = callers.get('identity.update')!;
  t.equal((await mgr.patch(`/identities/${plain}`, { externalId: 'plain-ext' })).status, 200, 'identity: patch externalId of an identity holding nothing → 200');
  t.equal((await admin.get(`/identities/${plain}`)).body.data.externalId, 'plain-ext', 'set');
  t.equal((await mgr.patch(`/identities/${plain}`, { externalId: null })).status, 200, 'PATCH externalId: null → 200');
  t.equal((await admin.get(`/identities/${plain}`)).body.data.externalId, null, 'and cleared');
  t.equal((await mgr.patch(`/identities/${plain}`, { permissions: ['identity.read'] })).status, 200, 'identity gives identity.read (it holds the family) → 200');
  t.ok(isError(await mgr.patch(`/identities/${plain}`, { permissions: ['identity.read', 'service.read'] }), 401, 'UNAUTHORIZED'), 'but not service.read → 401');
  t.ok(isError(await upd.patch(`/identities/${plain}`, { externalId: 'x' }), 401, 'UNAUTHORIZED'), 'identity.update ↛ a holder of identity.read');
  const peer = await createUser(admin, 'peer-of-update', undefined, { permissions: ['identity.update'] });
  t.equal((await upd.patch(`/identities/${peer}`, { externalId: 'peer-ext' })).status, 200, 'identity.update → its peer (same permissions) → 200');
  const created = await mgr.post('/identities', { name: 'made-by-mgr', type: 'User', isAdmin: false, permissions: ['identity.update'] });
  t.equal(created.status, 201, 'identity creates an identity holding identity.update → 201');
  t.equal((await mgr.post(`/identities/${plain}/disable`, { durationMinutes: 0 })).status, 200, 'disable a dominated identity → 200');
  t.equal((await mgr.post(`/identities/${plain}/enable`)).status, 200, 'enable it → 200');

  const enr = callers.get('enrollment')!;
  const lesser = await createUser(admin, 'lesser-target');
  const e = await enr.post('/enrollments', { method: 'updb', identityId: lesser, username: 'lesser-updb', expiresAt: future() });
  t.equal(e.status, 201, `enrollment: updb enrollment for an identity holding nothing → 201 (${e.status})`);
  t.equal((await enr.post(`/enrollments/${e.body.data.id}/refresh`, { expiresAt: future() })).status, 200, 'refresh it → 200');
  t.equal((await enr.delete(`/enrollments/${e.body.data.id}`)).status, 200, 'delete it → 200');

  const lesserId = await createUser(admin, 'lesser-session', PASSWORD);
  const lesserClient = await srv.login('lesser-session', PASSWORD);
  t.equal((await callers.get('ops')!.delete(`/api-sessions/${sessionIdOf(lesserClient.token!)}`)).status, 200, "ops: delete a dominated identity's API session → 200");
  t.equal((await lesserClient.get('/current-identity')).status, 401, 'it has ended');
  t.equal((await callers.get('identity.delete')!.delete(`/identities/${lesserId}`)).status, 200, 'identity.delete: delete a dominated identity → 200');

  const tunneler = await admin.create('/edge-routers', { name: 'plain-tunneler', isTunnelerEnabled: true, roleAttributes: [] });
  const routerMgr = callers.get('router')!;
  t.equal((await routerMgr.patch(`/edge-routers/${tunneler}`, { name: 'plain-tunneler-2' })).status, 200, 'router: patch a tunneler router whose identity holds nothing → 200');
  t.equal((await routerMgr.post(`/edge-routers/${tunneler}/re-enroll`)).status, 200, 're-enroll it → 200');
  t.equal((await routerMgr.delete(`/edge-routers/${tunneler}`)).status, 200, 'delete it → 200');
});

t.test('every path works for a full admin', async (t) => {
  const ok = (r: Res, what: string, status = 200) => t.equal(r.status, status, `admin: ${what} → ${status} (${r.status} ${r.body?.error?.code ?? ''})`);
  // Trust anchors.
  const s = `/external-jwt-signers/${anchor.signer}`;
  const spare = newCa('spare-signer').cert;
  const signerPatches: [string, unknown][] = [
    ['certPem', spare], ['kid', 'admin-kid-2'], ['issuer', 'https://idp-2.example'], ['audience', 'mesh-2'], ['claimsProperty', 'email'],
    ['useExternalId', true], ['enabled', false], ['externalAuthUrl', 'https://idp-2.example/auth'], ['clientId', 'cid'], ['scopes', ['openid']],
    ['targetToken', 'ID'], ['enrollToCertEnabled', true], ['enrollToTokenEnabled', true], ['enrollAuthPolicyId', anchor.policy],
    ['enrollNameClaimsSelector', '/name'], ['enrollAttributeClaimsSelector', '/groups'], ['name', 'admin-signer-2'], ['tags', { a: 'b' }],
  ];
  for (const [k, v] of signerPatches) ok(await admin.patch(s, { [k]: v }), `patch signer ${k}`);
  ok(await admin.patch(`/external-jwt-signers/${anchor.jwksSigner}`, { jwksEndpoint: 'https://idp3.example/jwks' }), 'patch signer jwksEndpoint');
  ok(await admin.put(s, { name: 'admin-signer-3', certPem: adminSignerCert, kid: 'admin-kid-3', issuer: 'https://idp-3.example', audience: 'mesh', enabled: true }), 'update signer');
  const doomedSigner = await admin.create('/external-jwt-signers', { name: 'doomed', jwksEndpoint: 'https://doomed.example/jwks', issuer: 'https://doomed.example', audience: 'mesh', enabled: true });
  ok(await admin.delete(`/external-jwt-signers/${doomedSigner}`), 'delete signer');

  const ca = `/cas/${anchor.ca}`;
  const caPatches: [string, unknown][] = [
    ['isAuthEnabled', true], ['externalIdClaim', { location: 'SAN_URI', matcher: 'ALL', parser: 'NONE', index: 0 }], ['isAutoCaEnrollmentEnabled', true],
    ['isOttCaEnrollmentEnabled', true], ['identityRoles', ['auto']], ['identityNameFormat', '[commonName]'], ['name', 'admin-ca-2'], ['tags', { a: 'b' }],
  ];
  for (const [k, v] of caPatches) ok(await admin.patch(ca, { [k]: v }), `patch CA ${k}`);
  ok(await admin.put(ca, { name: 'admin-ca-3', isAutoCaEnrollmentEnabled: false, isOttCaEnrollmentEnabled: true, isAuthEnabled: false, identityRoles: [], identityNameFormat: '[caName]-[commonName]' }), 'update CA');
  ok(await admin.post(`/cas/${anchor.unverifiedCa}/verify`, undefined, { raw: anchor.caVerifyCert, headers: { 'content-type': 'text/plain' } }), 'verify CA');
  const doomedCa = await admin.create('/cas', { name: 'doomed-ca', certPem: attackerCa.cert, isAutoCaEnrollmentEnabled: true, isOttCaEnrollmentEnabled: true, isAuthEnabled: true, identityRoles: [] });
  ok(await admin.delete(`/cas/${doomedCa}`), 'create and delete CA');

  const ap = `/auth-policies/${anchor.policy}`;
  ok(await admin.patch(ap, { primary: { extJwt: { allowed: true, allowedSigners: [anchor.signer] } } }), 'patch auth policy signers');
  ok(await admin.patch(ap, { secondary: { requireTotp: true } }), 'patch auth policy secondary');
  ok(await admin.put(ap, { ...policyBody('admin-policy-2'), secondary: { requireTotp: true, requireExtJwtSigner: null } }), 'update auth policy');
  const doomedPolicy = await admin.create('/auth-policies', policyBody('doomed-policy'));
  ok(await admin.delete(`/auth-policies/${doomedPolicy}`), 'create and delete auth policy');

  ok(await admin.post('/controller-settings', { controllerId: 'peer-admin', oidc: { redirectUris: ['https://app.example/cb'] } }), 'create controller setting', 201);
  ok(await admin.patch('/controller-settings/global/effective', { oidc: { redirectUris: ['https://app.example/cb'] } }), 'patch oidc redirectUris');
  ok(await admin.patch('/controller-settings/global/effective', { oidc: { postLogoutUris: ['https://app.example/bye'] } }), 'patch oidc postLogoutUris');
  ok(await admin.put('/controller-settings/global/effective', { oidc: { redirectUris: ['https://app.example/cb'] } }), 'update controller setting');
  ok(await admin.delete('/controller-settings/peer-admin/effective'), 'delete controller setting');

  // Identity paths, on the more-privileged identity.
  const x = PRIV;
  const i = `/identities/${x.id}`;
  const a = `/authenticators/${x.authenticatorId}`;
  ok(await admin.patch(i, { externalId: 'priv-ext' }), 'patch externalId');
  ok(await admin.patch(i, { externalId: null }), 'patch externalId null');
  t.equal((await admin.get(i)).body.data.externalId, null, 'externalId cleared');
  ok(await admin.patch(i, { authPolicyId: 'default' }), 'patch authPolicyId');
  ok(await admin.patch(i, { permissions: ['service'] }), 'patch permissions');
  ok(await admin.patch(i, { isAdmin: true }), 'patch isAdmin');
  ok(await admin.patch(i, { isAdmin: false, name: 'priv-renamed' }), 'patch isAdmin back, name');
  ok(await admin.put(i, { name: 'priv-put', type: 'User', isAdmin: false, permissions: PERMS, roleAttributes: ['contained'] }), 'update identity');
  const e = await admin.post('/enrollments', { method: 'updb', identityId: x.id, username: 'priv-updb-2', expiresAt: future() });
  ok(e, 'create updb enrollment', 201);
  ok(await admin.post(`/enrollments/${x.enrollmentId}/refresh`, { expiresAt: future() }), 'refresh enrollment');
  ok(await admin.delete(`/enrollments/${x.enrollmentId}`), 'delete enrollment');
  const cert = attackerCa.sign('priv-cert').cert;
  const certAuth = await admin.post('/authenticators', { method: 'cert', identityId: x.id, certPem: cert });
  ok(certAuth, 'create authenticator', 201);
  ok(await admin.post(`/authenticators/${certAuth.body.data.id}/request-extend`, { rollKeys: true }), 'request authenticator extension');
  ok(await admin.delete(`/authenticators/${certAuth.body.data.id}`), 'delete authenticator');
  ok(await admin.patch(a, { password: 'changed-pw-1' }), 'patch authenticator');
  ok(await admin.put(a, { username: 'priv-target-2', password: 'changed-pw-2' }), 'update authenticator');
  ok(await admin.delete(`${i}/mfa`), 'reset MFA');
  ok(await admin.post(`${i}/disable`, { durationMinutes: 0 }), 'disable');
  ok(await admin.post(`${i}/enable`), 'enable');
  ok(await admin.put(`${i}/trace`, { enabled: true, duration: '1m' }), 'trace');
  ok(await admin.post(`${i}/service-configs`, []), 'associate service configs');
  ok(await admin.delete(`${i}/service-configs`, []), 'disassociate service configs');
  const fresh = await srv.login('priv-target-2', 'changed-pw-2', 'client');
  const dial = await fresh.post('/sessions', { serviceId: service });
  ok(await admin.delete(`/sessions/${dial.body.data.id}`), 'delete session');
  ok(await admin.delete(`/api-sessions/${sessionIdOf(fresh.token!)}`), 'delete API session');
  ok(await admin.post(`${a}/re-enroll`, { expiresAt: future() }), 're-enroll authenticator', 201);
  ok(await admin.delete(i), 'delete identity');

  const r = `/edge-routers/${adminRouter.id}`;
  ok(await admin.patch(r, { name: 'admin-router-2' }), 'patch edge router');
  ok(await admin.put(r, { name: 'admin-router-3', isTunnelerEnabled: true, roleAttributes: [] }), 'update edge router');
  ok(await new Client(srv, '/fabric/v1', admin.token).patch(`/routers/${adminRouter.id}`, { cost: 7 }), 'fabric: patch router');
  ok(await admin.post(`${r}/re-enroll`), 're-enroll edge router');
  ok(await admin.delete(r), 'delete edge router');
});

t.test('the operations that reach an identity, as declared in the table', async (t) => {
  const path = { from: 'path' };
  const record = (collection: string) => ({ from: 'record', collection, field: 'identityId' });
  const router = { from: 'referrer', field: 'edgeRouterId' };
  const want: Record<string, unknown> = {
    patchIdentity: path, updateIdentity: path, deleteIdentity: path, disableIdentity: path, enableIdentity: path, removeIdentityMfa: path,
    updateIdentityTracing: path, associateIdentitysServiceConfigs: path, disassociateIdentitysServiceConfigs: path,
    createEnrollment: { from: 'body', field: 'identityId' }, refreshEnrollment: record('enrollments'), deleteEnrollment: record('enrollments'),
    createAuthenticator: { from: 'body', field: 'identityId' }, updateAuthenticator: record('authenticators'), patchAuthenticator: record('authenticators'),
    deleteAuthenticator: record('authenticators'), reEnrollAuthenticator: record('authenticators'), requestExtendAuthenticator: record('authenticators'),
    deleteAPISessions: record('apiSessions'), deleteSession: record('sessions'),
    updateEdgeRouter: router, patchEdgeRouter: router, deleteEdgeRouter: router, reEnrollEdgeRouter: router,
    'fabric:updateRouter': router, 'fabric:patchRouter': router, 'fabric:deleteRouter': router,
  };
  const got: Record<string, unknown> = {};
  for (const op of buildOperations(createRegistry())) if (op.reaches) got[op.api === 'fabric' ? `fabric:${op.operationId}` : op.operationId] = op.reaches;
  t.same(got, want, 'every write that reaches an identity declares it, and nothing else does');
});
