/**
 * The Management API permission matrix, generated from the operation table: every
 * implemented admin-level operation is tried with no permission, with `admin_readonly`, with its
 * family and each `family.action`, and with an unrelated family. A refusal must be 401
 * UNAUTHORIZED decided before any lookup (made-up ids), an allowance anything but 401. The table's
 * own family/action tags are checked against an explicit list written from upstream's permission rules, admins pass
 * everywhere, and an admin whose MFA is still pending is refused everywhere.
 */
import t from 'tap';
import { generateSync } from 'otplib';
import { buildOperations } from '../src/api/operations.js';
import { createRegistry } from '../src/resources/index.js';
import { ALL_PERMISSIONS, PERMISSION_FAMILIES } from '../src/auth/permissions.js';
import { startServer, isError, type Client, type Server } from './helpers/server.js';
import { createUser } from './helpers/users.js';

const OPS = buildOperations(createRegistry()).filter((o) => o.api === 'management' && o.auth === 'admin');
const LIVE = OPS;
const FAMILIES = [...PERMISSION_FAMILIES, 'ops'];

/** The permission rules written out independently of the table: operationId → `family.action`, or `admin` (admins only). */
const EXPECTED: Record<string, string> = {
  listIdentities: 'identity.read', createIdentity: 'identity.create', patchIdentity: 'identity.update', deleteIdentity: 'identity.delete',
  updateIdentity: 'admin', detailIdentity: 'identity.read',
  disableIdentity: 'identity.update', enableIdentity: 'identity.update', removeIdentityMfa: 'identity.update',
  associateIdentitysServiceConfigs: 'identity.update', disassociateIdentitysServiceConfigs: 'identity.update',
  listIdentityEdgeRouters: 'router.read', listIdentityServicePolicies: 'service-policy.read', listIdentityServices: 'service.read',
  getIdentityPolicyAdvice: 'service.read', listIdentitysEdgeRouterPolicies: 'edge-router-policy.read',
  getIdentityEnrollments: 'enrollment.read', listIdentityTypes: 'identity.read',
  listServices: 'service.read', createService: 'service.create', updateService: 'service.update', deleteService: 'service.delete',
  listServiceConfig: 'config.read', listServiceTerminators: 'terminator.read', listServiceEdgeRouters: 'router.read',
  listConfigs: 'config.read', createConfig: 'config.create', listConfigTypes: 'config-type.read', deleteConfigType: 'config-type.delete',
  listServicePolicies: 'service-policy.read', createEdgeRouterPolicy: 'edge-router-policy.create',
  patchServiceEdgeRouterPolicy: 'service-edge-router-policy.update', listPostureChecks: 'posture-check.read',
  listPostureCheckTypes: 'posture-check.read', createEdgeRouter: 'router.create', listTransitRouters: 'router.read',
  deleteRouter: 'router.delete', listTerminators: 'terminator.read', createCa: 'ca.create', verifyCa: 'ca.update',
  getCaJwt: 'ca.read', listAuthPolicies: 'auth-policy.read', deleteAuthPolicy: 'auth-policy.delete',
  createExternalJwtSigner: 'external-jwt-signer.create', listEnrollments: 'enrollment.read', createEnrollment: 'enrollment.create',
  refreshEnrollment: 'enrollment.update', listAPISessions: 'ops.read', deleteAPISessions: 'ops.delete', listSessions: 'ops.read',
  deleteSession: 'ops.delete', listControllers: 'ops.read', listControllerSettings: 'ops.read',
  createControllerSetting: 'controller-setting.create', patchControllerSetting: 'controller-setting.update',
  deleteControllerSetting: 'controller-setting.delete',
  listAuthenticators: 'authenticator.read', detailAuthenticator: 'authenticator.read',
  createAuthenticator: 'admin', updateAuthenticator: 'admin', patchAuthenticator: 'admin', deleteAuthenticator: 'admin',
  reEnrollAuthenticator: 'admin', checkDataIntegrity: 'admin', fixDataIntegrity: 'admin', dataIntegrityResults: 'admin', createDatabaseSnapshot: 'admin',
};

/** Written out here too: every write of these is a full admin's alone (docs/auth.md, containment). */
const TRUST_ANCHORS = ['auth-policy', 'ca', 'controller-setting', 'external-jwt-signer'];

function allowed(held: string[], perm: { family: string; action: string } | undefined): boolean {
  if (!perm) return false;
  if (perm.action !== 'read' && TRUST_ANCHORS.includes(perm.family)) return false;
  if (perm.action === 'read' && held.includes('admin_readonly')) return true;
  return held.includes(perm.family) || held.includes(`${perm.family}.${perm.action}`);
}

/** Permission sets relevant to an operation. */
function relevant(perm: { family: string; action: string } | undefined): string[][] {
  const out: string[][] = [[], ['admin_readonly']];
  // Controller settings are read with `ops.read`: `ops` is the family whose holders once wrote them.
  const family = perm && FAMILIES.includes(perm.family) ? perm.family : perm?.family === 'controller-setting' ? 'ops' : 'identity';
  out.push([family]);
  for (const a of ['read', 'create', 'update', 'delete']) if (ALL_PERMISSIONS.has(`${family}.${a}`)) out.push([`${family}.${a}`]);
  const other = FAMILIES[(FAMILIES.indexOf(family) + 1) % FAMILIES.length];
  out.push([other], [`${other}.read`]);
  return out;
}

const pathOf = (p: string) => p.replace(/\{[^}]+\}/g, 'made-up-id-0001');
const bodyOf = (method: string) => (['post', 'put', 'patch'].includes(method) ? {} : undefined);

let srv: Server;
let admin: Client;
const clients = new Map<string, Client>();

async function clientFor(perms: string[]): Promise<Client> {
  const key = perms.join(',') || '(none)';
  const have = clients.get(key);
  if (have) return have;
  const name = `perm-${key.replace(/[^a-z.-]/gi, '_')}`.slice(0, 90);
  await createUser(admin, name, 'perm-password-1', { permissions: perms });
  const c = await srv.login(name, 'perm-password-1');
  clients.set(key, c);
  return c;
}

t.before(async () => {
  srv = await startServer(t);
  admin = await srv.login();
});

t.test('the table tags operations as the permission rules say', async (t) => {
  const byId = new Map(OPS.map((o) => [o.operationId, o]));
  for (const [id, want] of Object.entries(EXPECTED)) {
    const op = byId.get(id);
    t.ok(op, `${id} is an admin-level management operation`);
    if (!op) continue;
    const got = op.permission ? `${op.permission.family}.${op.permission.action}` : 'admin';
    t.equal(got, want, `${id}: ${want}`);
  }
  for (const op of OPS) {
    if (!op.permission) continue;
    // `controller-setting` names no permission string: its writes are admin-only, its reads `ops.read`.
    const family = op.permission.family;
    t.ok(family === 'authenticator' || (family === 'controller-setting' && op.method !== 'get') || FAMILIES.includes(family), `${op.operationId}: family ${family} is grantable`);
    if (op.method === 'get') t.equal(op.permission.action, 'read', `${op.operationId}: GET is a read`);
  }
  const summary = buildOperations(createRegistry()).find((o) => o.api === 'management' && o.operationId === 'listSummary');
  t.equal(summary?.auth, 'session', 'summary: any fully authenticated session');
});

t.test('every operation × every relevant permission', async (t) => {
  let checked = 0;
  for (const op of LIVE) {
    for (const perms of relevant(op.permission)) {
      const c = await clientFor(perms);
      const r = await c.request(op.method.toUpperCase(), pathOf(op.path), bodyOf(op.method));
      const label = `${op.method.toUpperCase()} ${op.path} (${op.operationId}) with [${perms.join(', ')}]`;
      if (allowed(perms, op.permission)) t.not(r.status, 401, `${label} → allowed (${r.status} ${r.body?.error?.code ?? ''})`);
      else t.ok(isError(r, 401, 'UNAUTHORIZED'), `${label} → 401 (${r.status})`);
      t.ok(r.status < 500, `${label}: no 5xx`);
      checked++;
    }
  }
  t.ok(checked > LIVE.length * 5, `${checked} combinations checked over ${LIVE.length} operations`);
});

t.test('admins pass every permission check', async (t) => {
  for (const op of LIVE) {
    const r = await admin.request(op.method.toUpperCase(), pathOf(op.path), bodyOf(op.method));
    t.not(r.status, 401, `admin ${op.operationId} → ${r.status}`);
    t.ok(r.status < 500, `admin ${op.operationId}: no 5xx`);
  }
});

t.test('admin rights need a fully authenticated session', async (t) => {
  const r = await admin.post('/identities', { name: 'mfa-admin', type: 'User', isAdmin: true });
  await admin.post('/authenticators', { method: 'updb', identityId: r.body.data.id, username: 'mfa-admin', password: 'mfa-admin-password' });
  const first = await srv.login('mfa-admin', 'mfa-admin-password');
  t.equal((await first.post('/current-identity/mfa')).status, 201);
  const secret = /secret=([A-Z2-7]+)/.exec((await first.get('/current-identity/mfa')).body.data.provisioningUrl)![1];
  t.equal((await first.post('/current-identity/mfa/verify', { code: generateSync({ secret }) })).status, 200);
  const partial = await srv.login('mfa-admin', 'mfa-admin-password');
  t.equal((await partial.get('/current-api-session')).body.data.authQueries.length, 1, 'MFA pending');
  for (const op of OPS) {
    const res = await partial.request(op.method.toUpperCase(), pathOf(op.path), bodyOf(op.method));
    t.ok(isError(res, 401, 'UNAUTHORIZED'), `pending MFA: ${op.operationId} → 401 (${res.status})`);
  }
  t.ok(isError(await partial.get('/summary'), 401, 'UNAUTHORIZED'), 'pending MFA: summary → 401');
  t.equal((await partial.post('/authenticate/mfa', { code: generateSync({ secret }) })).status, 200, 'MFA passed');
  t.equal((await partial.get('/identities')).status, 200, 'now an admin');
});

t.test('non-admin identity managers', async (t) => {
  const mgr = await clientFor(['identity']);
  const target = (await admin.post('/identities', { name: 'managed-target', type: 'User', isAdmin: false })).body.data.id;
  const adminTarget = (await admin.post('/identities', { name: 'managed-admin', type: 'User', isAdmin: true })).body.data.id;
  t.ok(isError(await mgr.post('/identities', { name: 'mgr-admin', type: 'User', isAdmin: true }), 401, 'UNAUTHORIZED'), 'create an admin → 401');
  t.ok(isError(await mgr.post('/identities', { name: 'mgr-perm', type: 'User', isAdmin: false, permissions: ['service'] }), 401, 'UNAUTHORIZED'), 'create with permissions → 401');
  t.equal((await mgr.post('/identities', { name: 'mgr-plain', type: 'User', isAdmin: false })).status, 201, 'create a plain identity → 201');
  t.ok(isError(await mgr.patch(`/identities/${adminTarget}`, { name: 'renamed-admin' }), 401, 'UNAUTHORIZED'), 'patch an admin → 401');
  t.ok(isError(await mgr.delete(`/identities/${adminTarget}`), 401, 'UNAUTHORIZED'), 'delete an admin → 401');
  t.ok(isError(await mgr.patch(`/identities/${target}`, { permissions: ['service'] }), 401, 'UNAUTHORIZED'), 'patch permissions → 401');
  t.ok(isError(await mgr.patch(`/identities/${target}`, { isAdmin: true }), 401, 'UNAUTHORIZED'), 'patch isAdmin → 401');
  t.ok(isError(await mgr.put(`/identities/${target}`, { name: 'put-name', type: 'User', isAdmin: false }), 401, 'UNAUTHORIZED'), 'PUT → 401');
  t.ok(isError(await mgr.put('/identities/made-up-id', { name: 'x', type: 'User', isAdmin: false }), 401, 'UNAUTHORIZED'), 'PUT decided before lookup');
  t.ok(isError(await mgr.delete(`/identities/${adminTarget}/mfa`), 401, 'UNAUTHORIZED'), 'remove an admin\'s MFA → 401');
  t.equal((await mgr.patch(`/identities/${target}`, { name: 'managed-renamed' })).status, 200, 'patch a plain identity → 200');
  t.equal((await admin.get(`/identities/${target}`)).body.data.name, 'managed-renamed', 'renamed');
  t.equal((await mgr.delete(`/identities/${target}`)).status, 200, 'delete a plain identity → 200');
  t.equal((await admin.get(`/identities/${adminTarget}`)).body.data.name, 'managed-admin', 'admin untouched');
  const bad = await admin.post('/identities', { name: 'bad-perm-x', type: 'User', isAdmin: false, permissions: ['identity.frobnicate'] });
  t.ok(isError(bad, 400, 'COULD_NOT_VALIDATE'), 'unknown permission string → 400');
});
