/**
 * Auth policies applied where they matter: password rules on every password set (admin create,
 * admin PUT/PATCH, self-service), primary method allowance at login, and policy changes taking
 * effect on the next login.
 */
import t from 'tap';
import { startServer, isError, type Client, type Server } from './helpers/server.js';
import { fieldError } from './helpers/assert.js';

let srv: Server;
let admin: Client;

t.before(async () => {
  srv = await startServer(t);
  admin = await srv.login();
});

const updb = (over: Record<string, unknown>) => ({
  allowed: true, minPasswordLength: 5, maxAttempts: 0, lockoutDurationMinutes: 0, requireMixedCase: false, requireNumberChar: false, requireSpecialChar: false, ...over,
});
async function policy(name: string, updbOver: Record<string, unknown>): Promise<string> {
  const r = await admin.post('/auth-policies', {
    name,
    primary: { cert: { allowed: true, allowExpiredCerts: true }, extJwt: { allowed: true, allowedSigners: [] }, updb: updb(updbOver) },
    secondary: { requireTotp: false },
  });
  if (r.status !== 201) throw new Error(`policy ${name}: ${r.status} ${r.text}`);
  return r.body.data.id;
}

t.test('password rules on every password set', async (t) => {
  const strict = await policy('strict-passwords', { minPasswordLength: 10, requireMixedCase: true, requireNumberChar: true, requireSpecialChar: true });
  const id = (await admin.post('/identities', { name: 'strict-user', type: 'User', isAdmin: false, authPolicyId: strict })).body.data.id;
  const weak: Array<[string, string]> = [
    ['too short', 'Ab1!xyz'],
    ['no upper case', 'abcdefgh1!'],
    ['no lower case', 'ABCDEFGH1!'],
    ['no number', 'Abcdefghi!'],
    ['no special character', 'Abcdefghi1'],
  ];
  for (const [label, password] of weak) {
    const r = await admin.post('/authenticators', { method: 'updb', identityId: id, username: 'strict-user', password });
    fieldError(t, r, 'password', `create: ${label}`);
    t.notOk(r.text.includes(password), `${label}: the password is not echoed`);
  }
  const c = await admin.post('/authenticators', { method: 'updb', identityId: id, username: 'strict-user', password: 'Abcdefgh1!' });
  t.equal(c.status, 201, `a password meeting every rule → 201 ${c.text.slice(0, 120)}`);
  const authId = c.body.data.id;
  fieldError(t, await admin.patch(`/authenticators/${authId}`, { password: 'abcdefgh1!' }), 'password', 'admin PATCH: weak');
  fieldError(t, await admin.put(`/authenticators/${authId}`, { username: 'strict-user', password: 'short' }), 'password', 'admin PUT: weak');
  const user = await srv.login('strict-user', 'Abcdefgh1!', 'client');
  fieldError(t, await user.patch(`/current-identity/authenticators/${authId}`, { password: 'Abcdefghij', currentPassword: 'Abcdefgh1!' }), 'password', 'self-service PATCH: weak');
  t.equal((await user.patch(`/current-identity/authenticators/${authId}`, { password: 'Zyxwvuts9#', currentPassword: 'Abcdefgh1!' })).status, 200, 'self-service PATCH: strong → 200');
  t.equal((await srv.client.post('/authenticate?method=password', { username: 'strict-user', password: 'Zyxwvuts9#' })).status, 200, 'new password logs in');

  // Moving the identity to a lax policy relaxes the rules for the next password set.
  t.equal((await admin.patch(`/identities/${id}`, { authPolicyId: 'default' })).status, 200);
  t.equal((await admin.patch(`/authenticators/${authId}`, { password: 'simple' })).status, 200, 'default policy: 5 characters are enough');
});

t.test('primary updb allowance is applied at login and follows policy changes', async (t) => {
  const noUpdb = await policy('no-passwords', { allowed: false });
  const id = (await admin.post('/identities', { name: 'no-updb-user', type: 'User', isAdmin: false })).body.data.id;
  t.equal((await admin.post('/authenticators', { method: 'updb', identityId: id, username: 'no-updb-user', password: 'right-password' })).status, 201);
  t.equal((await srv.client.post('/authenticate?method=password', { username: 'no-updb-user', password: 'right-password' })).status, 200, 'default policy → 200');
  t.equal((await admin.patch(`/identities/${id}`, { authPolicyId: noUpdb })).status, 200);
  const r = await srv.client.post('/authenticate?method=password', { username: 'no-updb-user', password: 'right-password' });
  t.ok(isError(r, 401, 'INVALID_AUTH'), 'updb not allowed → 401 INVALID_AUTH');
  t.notOk(r.headers['zt-session'], 'no session header');
  t.ok(isError(await srv.client.post('/authenticate?method=password', { username: 'no-updb-user', password: 'wrong-password' }), 401, 'INVALID_AUTH'), 'wrong password: same answer');
  t.equal((await admin.patch(`/auth-policies/${noUpdb}`, { primary: { updb: { allowed: true } } })).status, 200, 'policy patched');
  t.equal((await srv.client.post('/authenticate?method=password', { username: 'no-updb-user', password: 'right-password' })).status, 200, 'allowed again → 200');
  t.ok(isError(await admin.delete(`/auth-policies/${noUpdb}`), 409, 'CAN_NOT_DELETE_REFERENCED_ENTITY'), 'policy in use → 409');
  t.equal((await admin.patch(`/identities/${id}`, { authPolicyId: 'default' })).status, 200);
  t.equal((await admin.delete(`/auth-policies/${noUpdb}`)).status, 200, 'unused → deleted');
});

t.test('a signer that enrolls under a policy keeps the policy', async (t) => {
  const pol = await policy('enroll-policy', {});
  const s = await admin.post('/external-jwt-signers', { name: 'enroll-signer', issuer: 'https://enroll.example.test', audience: 'a', enabled: true, jwksEndpoint: 'https://enroll.example.test/jwks', enrollAuthPolicyId: pol });
  t.equal(s.status, 201, `signer ${s.text.slice(0, 120)}`);
  t.ok(isError(await admin.delete(`/auth-policies/${pol}`), 409, 'CAN_NOT_DELETE_REFERENCED_ENTITY'), 'referenced by a signer → 409');
  t.equal((await admin.delete(`/external-jwt-signers/${s.body.data.id}`)).status, 200);
  t.equal((await admin.delete(`/auth-policies/${pol}`)).status, 200, 'then deletable');
});
