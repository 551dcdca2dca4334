/**
 * src/managers/issuing.ts without HTTP, on a real store, PKI and worker pool: CSRs signed in the
 * pool (a bad CSR fails only its own request, even in a shared task), the two steps of a
 * certificate authenticator's extension, an admin's extension request, and API session
 * certificates (made only for a live session, seen and deleted only by it).
 */
import crypto from 'node:crypto';
import t from 'tap';
import { Issuing, certAuthenticator } from '../../../src/managers/issuing.js';
import { newCsr } from '../../helpers/pki.js';
import { codeOf, parts, seed } from './pki-parts.js';

const { store, pki, pool } = await parts(t);
const issuing = new Issuing({ store, pool, pki });
const signing = new crypto.X509Certificate(pki.signingCertPem);

t.test('sign: certificates from the signing CA; a bad CSR fails only its own request', async (t) => {
  const [ok, bad, pair] = await Promise.allSettled([
    issuing.sign([{ csr: newCsr('one').csr, profile: 'client' }]),
    issuing.sign([{ csr: '-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n', profile: 'client', field: 'clientCsr' }]),
    issuing.sign([{ csr: newCsr('r-client').csr, profile: 'client' }, { csr: newCsr('r-server', { sans: 'DNS:router.example' }).csr, profile: 'server' }]),
  ]);
  t.equal(ok.status, 'fulfilled');
  const [cert] = (ok as PromiseFulfilledResult<{ pem: string; fingerprint: string; commonName: string }[]>).value;
  const x = new crypto.X509Certificate(cert.pem);
  t.ok(x.verify(signing.publicKey), 'signed by the signing CA');
  t.equal(cert.commonName, 'one');
  t.equal(cert.fingerprint, crypto.createHash('sha1').update(x.raw).digest('hex'), 'fingerprint: hex SHA-1 of the DER');
  t.equal(issuing.withChain(cert.pem), cert.pem + pki.signingCertPem, 'the chain: leaf + signing CA');
  t.equal(bad.status, 'rejected');
  t.match((bad as PromiseRejectedResult).reason, { code: 'COULD_NOT_PROCESS_CSR', errorCause: { field: 'clientCsr' } });
  t.equal(pair.status, 'fulfilled', 'the requests beside it are signed');
  t.equal((pair as PromiseFulfilledResult<unknown[]>).value.length, 2);
  t.match(await issuing.sign([{ csr: ' ', profile: 'client', field: 'csr' }]).catch((e) => e), { code: 'COULD_NOT_PROCESS_CSR', errorCause: { field: 'csr' } }, 'an empty CSR');
});

t.test('extension: extend with the current certificate, then verify with the new one', async (t) => {
  const [first] = await issuing.sign([{ csr: newCsr('dev').csr, profile: 'client' }]);
  const auth = certAuthenticator('id-x', first.pem, first.fingerprint, first.notAfter);
  await seed(store, [['identities', { id: 'id-x', name: 'id-x' }], ['authenticators', auth]]);
  const leaf = new crypto.X509Certificate(first.pem).raw;
  t.equal(await codeOf(issuing.extend(auth.id, 'someone-else', leaf, newCsr('dev').csr)), 'UNAUTHORIZED', "another identity's authenticator");
  t.equal(await codeOf(issuing.extend(auth.id, 'id-x', undefined, newCsr('dev').csr)), 'UNAUTHORIZED', 'no certificate on the connection');
  t.equal(await codeOf(issuing.verifyExtension(auth.id, 'id-x', first.pem)), 'CAN_NOT_UPDATE_AUTHENTICATOR', 'nothing pending yet');
  const next = await issuing.extend(auth.id, 'id-x', leaf, newCsr('dev').csr);
  t.match(store.get('authenticators', auth.id), { fingerprint: first.fingerprint, pendingFingerprint: next.fingerprint }, 'pending until verified');
  t.equal(await codeOf(issuing.verifyExtension(auth.id, 'id-x', first.pem)), 'INVALID_CLIENT_CERT', 'the old certificate does not verify it');
  await issuing.verifyExtension(auth.id, 'id-x', next.pem);
  const after = store.get('authenticators', auth.id)!;
  t.match(after, { fingerprint: next.fingerprint, certPem: next.pem, lastExtendRolledKeys: true, isExtendRequested: false });
  t.notOk('pendingFingerprint' in after, 'nothing pending');
});

t.test('an admin asks for an extension of certificate authenticators only', async (t) => {
  await seed(store, [['authenticators', { id: 'auth-pw', method: 'updb', identityId: 'id-x', username: 'xavier' }]]);
  t.equal(await codeOf(issuing.requestExtend('auth-pw', false)), 'FORBIDDEN');
  t.equal(await codeOf(issuing.requestExtend('no-such', false)), 'NOT_FOUND');
  const [id] = store.idsByIndex('authenticators', 'identityId', 'id-x').filter((a) => store.get('authenticators', a)!.method === 'cert');
  await issuing.requestExtend(id, true);
  t.match(store.get('authenticators', id), { isExtendRequested: true, isKeyRollRequested: true });
});

t.test('API session certificates: for a live session, its own only', async (t) => {
  t.equal(await codeOf(issuing.createSessionCertificate('no-session', 'id-x', newCsr('s').csr)), 'UNAUTHORIZED');
  await seed(store, [['apiSessions', { id: 'sess-1', identityId: 'id-x' }], ['apiSessions', { id: 'sess-2', identityId: 'id-x' }]]);
  const { rec, cert } = await issuing.createSessionCertificate('sess-1', 'id-x', newCsr('session-cert').csr);
  t.match(store.get('apiSessionCertificates', rec.id), { apiSessionId: 'sess-1', fingerprint: cert.fingerprint, subject: 'CN=session-cert' });
  t.equal(await codeOf(() => issuing.ownSessionCertificate(rec.id, 'sess-2')), 'NOT_FOUND', "another session's");
  t.equal(await codeOf(issuing.deleteSessionCertificate(rec.id, 'sess-2')), 'NOT_FOUND');
  await issuing.deleteSessionCertificate(rec.id, 'sess-1');
  t.notOk(store.has('apiSessionCertificates', rec.id));
});
