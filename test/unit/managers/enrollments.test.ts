/**
 * src/managers/enrollments.ts without HTTP, on a real store, PKI and worker pool: what an
 * enrollment holds at rest and what its JWT says, the management rules (one outstanding
 * enrollment per method, refresh kills the old token, re-enrolling an authenticator ends it and
 * its sessions), that a token is used once, even by two uses at the same time, and that identity
 * and router creates store the enrollment their `beforeCreate` made.
 */
import crypto from 'node:crypto';
import t from 'tap';
import { Enrollments } from '../../../src/managers/enrollments.js';
import { Issuing } from '../../../src/managers/issuing.js';
import { enrollmentSecrets } from '../../../src/resources/enrollments.js';
import { decodeJwt } from '../../../src/pki/jwt.js';
import { checkPassword, hashPassword } from '../../../src/auth/passwords.js';
import type { App } from '../../../src/api/context.js';
import type { Writer } from '../../../src/resources/types.js';
import { createRegistry } from '../../../src/resources/index.js';
import { createRecord } from '../../../src/resources/write.js';
import { newCsr } from '../../helpers/pki.js';
import { codeOf, parts, seed, type Seed } from './pki-parts.js';

const { store, pki, pool } = await parts(t);
const issuing = new Issuing({ store, pool, pki });
// What checkPassword and hashPassword read of the application: the store (auth policy) and the argon2 settings.
const app = { store, pool, config: { argon2MemoryKiB: 1024, argon2Iterations: 1, argon2Parallelism: 1 } } as unknown as App;
const enrollments = new Enrollments({
  store, pki, issuing,
  issuer: () => ({ url: 'https://ctrl-a:1281', controllers: ['https://ctrl-a:1281', 'https://ctrl-b:1281'] }),
  lifetimeMs: 60 * 60_000,
  passwords: { check: (identity, password) => checkPassword(app, identity, password), hash: (password) => hashPassword(app, password) },
});

const identity = (id: string): Seed => ['identities', { id, name: id, typeId: 'Default', isAdmin: false, authPolicyId: 'default', roleAttributes: [] }];
await seed(store, [identity('id-a'), identity('id-b'), identity('id-c'), identity('id-d')]);
const hour = () => Date.now() + 60 * 60_000;

t.test('an enrollment at rest and its JWT', async (t) => {
  const expiresAt = hour();
  const rec = await enrollments.create({ method: 'ott', identityId: 'id-a', expiresAt });
  const stored = store.get('enrollments', rec.id)!;
  const { token, jwt } = enrollmentSecrets(store, stored, true);
  t.not(stored.token, token, 'the token is stored as its digest');
  t.notOk(stored.jwt.includes(jwt.split('.')[1]), 'the JWT is stored sealed');
  const { header, claims } = decodeJwt(jwt);
  t.equal(header.kid, pki.serverCertSha1Hex, 'signed with the server key');
  t.ok(crypto.verify(header.alg === 'RS256' ? 'sha256' : `sha${header.alg.slice(2)}`, Buffer.from(jwt.split('.').slice(0, 2).join('.')),
    header.alg === 'RS256' ? pki.serverKey : { key: pki.serverKey, dsaEncoding: 'ieee-p1363' }, Buffer.from(jwt.split('.')[2], 'base64url')), 'the signature verifies');
  t.match(claims, { em: 'ott', sub: 'id-a', jti: token, iss: 'https://ctrl-a:1281', exp: Math.floor(expiresAt / 1000), ctrls: ['https://ctrl-a:1281', 'https://ctrl-b:1281'] });
  t.equal(enrollments.outstanding(token, ['ott']).id, rec.id, 'found by its token');
  t.equal(await codeOf(() => enrollments.outstanding(token, ['updb'])), 'INVALID_ENROLL_METHOD');
  t.equal(await codeOf(() => enrollments.outstanding('no-such-token')), 'INVALID_ENROLLMENT_TOKEN');
});

t.test('create: one outstanding enrollment per method, references checked', async (t) => {
  t.equal(await codeOf(enrollments.create({ method: 'ott', identityId: 'id-a', expiresAt: hour() })), 'ENROLLMENT_EXISTS');
  t.equal(await codeOf(enrollments.create({ method: 'ott', identityId: 'nobody', expiresAt: hour() })), 'COULD_NOT_VALIDATE');
  t.equal(await codeOf(enrollments.create({ method: 'ottca', identityId: 'id-a', expiresAt: hour() })), 'COULD_NOT_VALIDATE', 'ottca needs a caId');
  t.equal(await codeOf(enrollments.create({ method: 'ottca', identityId: 'id-a', caId: 'no-ca', expiresAt: hour() })), 'COULD_NOT_VALIDATE');
  t.equal(await codeOf(enrollments.create({ method: 'magic', identityId: 'id-a', expiresAt: hour() })), 'COULD_NOT_VALIDATE');
  const updb = await enrollments.create({ method: 'updb', identityId: 'id-a', username: 'alice', expiresAt: hour() });
  t.equal(updb.username, 'alice');
  t.equal(store.idsByIndex('enrollments', 'identityId', 'id-a').length, 2, 'ott and updb side by side');
});

t.test('refresh: a new token, JWT and expiry; the old token dies', async (t) => {
  const rec = await enrollments.create({ method: 'ott', identityId: 'id-b', expiresAt: hour() });
  const before = enrollmentSecrets(store, store.get('enrollments', rec.id)!, true);
  const later = hour() + 60_000;
  await enrollments.refresh(rec.id, later);
  const after = enrollmentSecrets(store, store.get('enrollments', rec.id)!, true);
  t.not(after.token, before.token);
  t.equal(decodeJwt(after.jwt).claims.exp, Math.floor(later / 1000));
  t.equal(store.get('enrollments', rec.id)!.expiresAt, later);
  t.equal(await codeOf(() => enrollments.outstanding(before.token)), 'INVALID_ENROLLMENT_TOKEN');
  t.equal(enrollments.outstanding(after.token).id, rec.id);
  t.equal(await codeOf(enrollments.refresh('no-such-enrollment', later)), 'NOT_FOUND');
});

t.test('ott: the CSR becomes a certificate authenticator; the token is used once, even twice at once', async (t) => {
  const rec = await enrollments.create({ method: 'ott', identityId: 'id-c', expiresAt: hour() });
  const { token } = enrollmentSecrets(store, store.get('enrollments', rec.id)!, true);
  const e = enrollments.outstanding(token, ['ott']);
  const results = await Promise.allSettled([enrollments.enrollOtt(e, newCsr('c-1').csr), enrollments.enrollOtt(e, newCsr('c-2').csr)]);
  const won = results.filter((r) => r.status === 'fulfilled');
  t.equal(won.length, 1, 'one use wins');
  t.equal(await codeOf(Promise.reject((results.find((r) => r.status === 'rejected') as PromiseRejectedResult).reason)), 'INVALID_ENROLLMENT_TOKEN', 'the other finds the token gone');
  const cert = (won[0] as PromiseFulfilledResult<{ fingerprint: string }>).value;
  const auths = store.idsByIndex('authenticators', 'identityId', 'id-c').map((id) => store.get('authenticators', id)!);
  t.match(auths, [{ method: 'cert', fingerprint: cert.fingerprint, isIssuedByNetwork: true }]);
  t.notOk(store.has('enrollments', rec.id), 'consumed');
  t.equal(await codeOf(() => enrollments.outstanding(token)), 'INVALID_ENROLLMENT_TOKEN');
});

t.test('an expired enrollment is refused', async (t) => {
  const rec = await enrollments.create({ method: 'ott', identityId: 'id-d', expiresAt: hour() });
  const { token } = enrollmentSecrets(store, store.get('enrollments', rec.id)!, true);
  await store.write((tx) => tx.put('enrollments', { ...tx.get('enrollments', rec.id)!, expiresAt: Date.now() - 1 }));
  t.equal(await codeOf(() => enrollments.outstanding(token)), 'ENROLLMENT_EXPIRED');
});

t.test('updb: the password is checked against the auth policy and hashed in the pool', async (t) => {
  const rec = await enrollments.create({ method: 'updb', identityId: 'id-b', username: 'bob-user', expiresAt: hour() });
  const e = store.get('enrollments', rec.id)!;
  t.equal(await codeOf(enrollments.enrollUpdb(e, undefined, 'abc')), 'COULD_NOT_VALIDATE', 'too short for the default policy');
  t.ok(store.has('enrollments', rec.id), 'a refused password leaves the enrollment');
  t.equal(await enrollments.enrollUpdb(e, 'ignored', 'a good password'), 'bob-user', "the enrollment's username wins");
  const auth = store.findUnique('authenticators', 'username', 'bob-user')!;
  t.match(auth, { method: 'updb', identityId: 'id-b' });
  t.match(auth.passwordHash, /^\$argon2id\$/);
});

t.test('re-enrolling an authenticator: it and its sessions end, a prior enrollment of its method is replaced', async (t) => {
  await seed(store, [
    identity('id-e'),
    ['authenticators', { id: 'auth-e', method: 'updb', identityId: 'id-e', username: 'erin-user', passwordHash: 'x' }],
    ['apiSessions', { id: 'sess-e', identityId: 'id-e', authenticatorId: 'auth-e' }],
  ]);
  const prior = await enrollments.create({ method: 'ott', identityId: 'id-e', expiresAt: hour() });
  const rec = await enrollments.reEnrollAuthenticator('auth-e', hour());
  t.match(store.get('enrollments', rec.id), { method: 'updb', identityId: 'id-e', username: 'erin-user' });
  t.notOk(store.has('authenticators', 'auth-e'), 'the authenticator is gone');
  t.notOk(store.has('apiSessions', 'sess-e'), 'its API session ended');
  t.ok(store.has('enrollments', prior.id), 'an enrollment of another method stays');
  t.equal(await codeOf(enrollments.reEnrollAuthenticator('auth-e', hour())), 'NOT_FOUND');
});

t.test('re-enrolling an edge router: certificate removed, a new erott enrollment', async (t) => {
  await seed(store, [['edgeRouters', { id: 'er-1', name: 'er-1', isVerified: true, fingerprint: 'ab', certPem: 'pem' }]]);
  await enrollments.reEnrollEdgeRouter('er-1');
  const er = store.get('edgeRouters', 'er-1')!;
  t.match(er, { isVerified: false });
  t.notOk('fingerprint' in er || 'certPem' in er, 'its certificate is forgotten');
  const [eid] = store.idsByIndex('enrollments', 'edgeRouterId', 'er-1');
  const { jwt } = enrollmentSecrets(store, store.get('enrollments', eid)!, true);
  t.match(decodeJwt(jwt).claims, { em: 'erott', sub: 'er-1' });
  t.equal(await codeOf(enrollments.reEnrollEdgeRouter('no-router')), 'NOT_FOUND');
});

t.test('identity and router creates: the enrollment made before the write is the one stored, in the same write', async (t) => {
  const reg = createRegistry();
  await seed(store, [['authPolicies', { id: 'default', name: 'Default' }]]);
  // A writer with no acting identity, and the keys the resource hooks make an enrollment with.
  const writer: Writer = { store, enrollments: { store, pki, issuer: () => ({ url: 'https://ctrl-a:1281', controllers: [] }), lifetimeMs: 30 * 60_000 } };
  const made = await createRecord(reg, reg.def('identities'), writer, { name: 'with-ott', type: 'Default', isAdmin: false, enrollment: { ott: true } });
  const [eid] = store.idsByIndex('enrollments', 'identityId', made.id);
  const e = store.get('enrollments', eid)!;
  t.match(decodeJwt(enrollmentSecrets(store, e, true).jwt).claims, { em: 'ott', sub: made.id, iss: 'https://ctrl-a:1281' });
  t.ok(e.createdAt >= made.createdAt && e.expiresAt - e.createdAt === 30 * 60_000, 'the default lifetime');
  t.equal(await codeOf(createRecord(reg, reg.def('identities'), writer, { name: 'two-kinds', type: 'Default', isAdmin: false, enrollment: { ott: true, updb: 'two-kinds' } })), 'COULD_NOT_VALIDATE');
  t.notOk(store.findUnique('identities', 'name', 'two-kinds'), 'a refused create stores neither');
  // A writer that chooses the id inside the write (fabric's createRouter) still gets an enrollment for that id.
  const router = await createRecord(reg, reg.def('routers'), writer, { name: 'fabric-router' }, (r) => {
    r.id = 'fabric-router-id';
  });
  const [rid] = store.idsByIndex('enrollments', 'transitRouterId', router.id);
  t.match(decodeJwt(enrollmentSecrets(store, store.get('enrollments', rid)!, true).jwt).claims, { em: 'trott', sub: 'fabric-router-id' });
});
