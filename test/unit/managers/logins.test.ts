/**
 * src/managers/logins.ts without HTTP: a password login over a real store and real argon2id makes
 * the API session with the config types and secondary factors the rules give it; wrong passwords
 * count towards the lockout; a bad method or field is a validation error, not a failed login.
 */
import t from 'tap';
import type { CollectionName, Rec } from '../../../src/store/store.js';
import type { WorkerPool } from '../../../src/pool.js';
import { ApiError } from '../../../src/core/errors.js';
import { ExtJwtVerifier } from '../../../src/auth/ext-jwt.js';
import { verifyPassword } from '../../../src/auth/argon2.js';
import { Logins, type LoginAttempt } from '../../../src/managers/logins.js';
import { authPolicy, managerStore, quickHash, userWithPassword } from './fixture.js';

const { store, sessions } = await managerStore(t);
// The worker's own task, run in this thread.
const pool = { run: ((_name: string, input: { hash: string; password: string }) => verifyPassword(input)) as unknown as WorkerPool['run'] };
const extJwt = new ExtJwtVerifier(store, { jwksCooldownMs: 1000, jwksTimeoutMs: 1000, jwksMaxAgeMs: 60_000, clockToleranceS: 0 });
const dummy = quickHash('nobody knows this one');
const logins = new Logins({ store, pool, extJwt, sessions, dummyHash: () => dummy });

const req = { headers: {}, remoteAddress: '192.0.2.7' };
const password = (username: string, pw: string, more: Partial<LoginAttempt> = {}): LoginAttempt => ({ method: 'password', fields: { username, password: pw }, req, ...more });
const code = (e: unknown) => (e instanceof ApiError ? e.code : String(e));

await store.write((tx) => {
  tx.put<CollectionName>('authPolicies', authPolicy('lock-after-2', { primary: { updb: { allowed: true, maxAttempts: 2, lockoutDurationMinutes: 0 } } }));
  tx.put<CollectionName>('authPolicies', authPolicy('totp', { secondary: { requireTotp: true } }));
  tx.put<CollectionName>('configTypes', { id: 'ct-1', createdAt: 0, updatedAt: 0, tags: {}, name: 'intercept.v1', schema: {} } as Rec);
});

t.test('a good password makes the API session, with the config types and what the client says of itself', async (t) => {
  const identity = await userWithPassword(store, 'alice', 'alice-password');
  const out = await logins.login(password('alice', 'alice-password', { configTypes: ['intercept.v1', 'ct-1', 'nope', 'all'], envInfo: { os: 'linux' } }));
  t.equal(out.identity.id, identity.id);
  t.equal(out.session.identityId, identity.id);
  t.equal(out.session.authenticatorId, 'auth-alice');
  t.same(out.session.configTypes, ['ct-1', 'all'], 'names and ids resolve to ids; unknown ones are dropped; all stays');
  t.equal(out.session.isMfaRequired, false);
  t.equal(out.session.ipAddress, '192.0.2.7');
  t.equal(sessions.resolve(out.token)?.id, out.session.id, 'the token names the new session');
  t.same(store.get('identities', identity.id)?.envInfo, { os: 'linux' }, 'envInfo kept on the identity');
});

t.test('the auth policy decides the secondary factors', async (t) => {
  await userWithPassword(store, 'bob-totp', 'bob-password', { authPolicyId: 'totp' });
  const { session } = await logins.login(password('bob-totp', 'bob-password'));
  t.equal(session.isMfaRequired, true);
  t.equal(session.isMfaComplete, false);
});

t.test('wrong passwords count and lock out; unknown users fail alike', async (t) => {
  const identity = await userWithPassword(store, 'carol', 'carol-password', { authPolicyId: 'lock-after-2' });
  await t.rejects(logins.login(password('carol', 'wrong-password')), { code: 'INVALID_AUTH' });
  t.equal(store.get('authenticators', 'auth-carol')?.failedAttempts, 1, 'counted');
  await t.rejects(logins.login(password('nobody', 'whatever')), { code: 'INVALID_AUTH' }, 'unknown username');
  await t.rejects(logins.login(password('carol', 'wrong-again')), { code: 'INVALID_AUTH' });
  t.ok(store.get('identities', identity.id)?.disabledAt, 'the second failure locks the identity');
  await t.rejects(logins.login(password('carol', 'carol-password')), { code: 'INVALID_AUTH' }, 'the right password no longer opens it');
});

t.test('a good password clears the failure count', async (t) => {
  await userWithPassword(store, 'dave', 'dave-password', { authPolicyId: 'lock-after-2' });
  await t.rejects(logins.login(password('dave', 'wrong-password')));
  t.equal(store.get('authenticators', 'auth-dave')?.failedAttempts, 1);
  await logins.login(password('dave', 'dave-password'));
  t.notOk(store.get('authenticators', 'auth-dave')?.failedAttempts, 'cleared');
});

t.test('bad input is a field error, not a failed login', async (t) => {
  const err = await logins.login({ method: 'magic', fields: {}, req }).catch((e) => e);
  t.equal(code(err), 'COULD_NOT_VALIDATE');
  t.match(JSON.stringify(err.errorCause), /method/);
  t.equal(code(await logins.login(password('eve', 'x')).catch((e) => e)), 'COULD_NOT_VALIDATE', 'username too short');
  t.equal(code(await logins.login(password('eve-long', '1234')).catch((e) => e)), 'COULD_NOT_VALIDATE', 'password too short');
  await t.rejects(logins.login({ method: 'cert', fields: {}, req }), { code: 'INVALID_AUTH' }, 'a certificate login without a certificate');
  await t.rejects(logins.login({ method: 'ext-jwt', fields: {}, req }), { code: 'INVALID_AUTH' }, 'an ext-jwt login without a bearer token');
});
