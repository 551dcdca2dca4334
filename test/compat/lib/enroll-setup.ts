/**
 * Set-up for the enrollment and certificate rows, made directly on the controller (not
 * through the checking proxy): identities with outstanding enrollments, a verified third-party CA
 * with leaf certificates, an edge router to enroll, an external JWT signer with signed tokens, and
 * the keys and CSRs the rows send. Everything lands in the State under the names the rows read;
 * a certificate and its key are stored as `<name>.cert` / `<name>.key` (see `credential`).
 */
import crypto from 'node:crypto';
import * as jose from 'jose';
import type { Client, Server } from '../../helpers/server.js';
import { newCa, newCsr } from '../../helpers/pki.js';
import type { State } from './exerciser.js';

/** A certificate and key saved by `saveCredential`, as a row's `cert`. */
export const credential = (name: string) => (s: State) => ({ cert: s.get(`${name}.cert`), key: s.get(`${name}.key`) });

export function saveCredential(s: State, name: string, cert: string, key: string) {
  s.set(`${name}.cert`, cert);
  s.set(`${name}.key`, key);
}

/** A new key and CSR: the CSR under `<name>.csr`, the key under `<name>.key`. */
export function saveCsr(s: State, name: string, cn: string) {
  const { key, csr } = newCsr(cn);
  s.set(`${name}.csr`, csr);
  s.set(`${name}.key`, key);
}

async function must(p: Promise<{ status: number; text: string; body: any }>, what: string): Promise<any> {
  const r = await p;
  if (r.status >= 300) throw new Error(`enrollment set-up, ${what}: ${r.status} ${r.text.slice(0, 300)}`);
  return r.body?.data;
}

/** An identity with an enrollment; returns its token. */
async function enrollee(admin: Client, name: string, enrollment: Record<string, unknown>): Promise<{ id: string; token: string }> {
  const id = (await must(admin.post('/identities', { name, type: 'Device', isAdmin: false, enrollment }), `identity ${name}`)).id;
  const e = (await must(admin.get(`/identities/${id}/enrollments`), `enrollments of ${name}`))[0];
  return { id, token: e.token };
}

/**
 * Client API rows: ott (dedicated endpoint and legacy `/enroll`), ottca and CA auto-enrollment
 * with leaves of a verified CA, an edge router (erott, then extension), token enrollment.
 */
export async function clientEnrollmentSetup(srv: Server, admin: Client, s: State, prefix = 'bz') {
  s.set('ottToken', (await enrollee(admin, `${prefix}-ott`, { ott: true })).token);
  saveCsr(s, 'ott', `${prefix}-ott`);
  saveCsr(s, 'ottExt', `${prefix}-ott`);
  s.set('ott2Token', (await enrollee(admin, `${prefix}-ott2`, { ott: true })).token);
  saveCsr(s, 'ott2', `${prefix}-ott2`);
  s.set('ott3Token', (await enrollee(admin, `${prefix}-ott3`, { ott: true })).token);
  saveCsr(s, 'ott3', `${prefix}-ott3`);

  // a verified third-party CA that allows auto-enrollment and ottca
  const ca = newCa(`${prefix} third-party CA`);
  const caId = (await must(admin.post('/cas', {
    name: `${prefix}-ca`, certPem: ca.cert, identityRoles: [`${prefix}-ca`], isAuthEnabled: true, isAutoCaEnrollmentEnabled: true,
    isOttCaEnrollmentEnabled: true, identityNameFormat: '[caName]-[commonName]',
  }), 'CA')).id;
  const token = (await must(admin.get(`/cas/${caId}`), 'CA detail')).verificationToken;
  await must(admin.post(`/cas/${caId}/verify`, undefined, { raw: ca.sign(token).cert, headers: { 'content-type': 'text/plain' } }), 'CA verification');
  const auto = ca.sign(`${prefix}-auto-device`);
  saveCredential(s, 'caAuto', auto.cert, auto.key);
  s.set('ottcaToken', (await enrollee(admin, `${prefix}-ottca`, { ottca: caId })).token);
  const auto2 = ca.sign(`${prefix}-auto-device-2`);
  saveCredential(s, 'caAuto2', auto2.cert, auto2.key);
  const pre = ca.sign(`${prefix}-ottca-device`);
  saveCredential(s, 'ottca', pre.cert, pre.key);

  // an edge router to enroll, then to extend
  const er = (await must(admin.post('/edge-routers', { name: `${prefix}-er-enroll`, isTunnelerEnabled: false }), 'edge router')).id;
  s.set('erToken', (await must(admin.get(`/edge-routers/${er}`), 'edge router detail')).enrollmentToken);
  saveCsr(s, 'erClient', `${prefix}-er-enroll`);
  saveCsr(s, 'erServer', `${prefix}-er-enroll`);
  saveCsr(s, 'erClientExt', `${prefix}-er-enroll`);
  saveCsr(s, 'erServerExt', `${prefix}-er-enroll`);

  // a transit router (enrolls through the legacy endpoint only) and a second updb enrollee
  const tr = (await must(admin.post('/transit-routers', { name: `${prefix}-tr-enroll` }), 'transit router')).id;
  s.set('trToken', (await must(admin.get(`/transit-routers/${tr}`), 'transit router detail')).enrollmentToken);
  saveCsr(s, 'trClient', `${prefix}-tr-enroll`);
  saveCsr(s, 'trServer', `${prefix}-tr-enroll`);
  s.set('updb2Token', (await enrollee(admin, `${prefix}-updb2`, { updb: `${prefix}-updb2` })).token);

  // an external JWT signer that lets its users enroll, and two of its tokens
  const idp = newCa(`${prefix} IdP signing`);
  const issuer = `https://${prefix}-idp.example`;
  const signer = (await must(admin.post('/external-jwt-signers', {
    name: `${prefix}-idp`, issuer, audience: `${prefix}-devices`, enabled: true, certPem: idp.cert, kid: `${prefix}-idp-kid`,
    enrollToCertEnabled: true, enrollToTokenEnabled: true,
  }), 'external JWT signer')).id;
  s.set('idpSigner', signer);
  const key = crypto.createPrivateKey(idp.key);
  const jwt = (sub: string) =>
    new jose.SignJWT({ aud: `${prefix}-devices` }).setProtectedHeader({ alg: 'ES256', kid: `${prefix}-idp-kid` }).setSubject(sub).setIssuer(issuer).setIssuedAt().setExpirationTime('30m').sign(key);
  s.set('idpCertJwt', await jwt(`${prefix}-ext-cert`));
  s.set('idpTokenJwt', await jwt(`${prefix}-ext-token`));
  saveCsr(s, 'tokenCert', `${prefix}-ext-cert`);
}

/**
 * Management API rows: an identity enrolled (ott, on the client API, directly) to a controller
 * certificate — it logs in with it on the management API, extends it and is re-enrolled.
 */
export async function certIdentitySetup(srv: Server, s: State, prefix = 'cx') {
  const admin = await srv.login();
  const { id, token } = await enrollee(admin, `${prefix}-cert`, { ott: true });
  s.set('certIdentity', id);
  const { key, csr } = newCsr(`${prefix}-cert`);
  const d = await must(srv.client.post('/enroll/ott', { token, clientCsr: csr }), 'ott enrollment');
  saveCredential(s, 'mcert', d.cert, key);
  saveCsr(s, 'mcertExt', `${prefix}-cert`);
}

/** Management API: an identity with a password authenticator, to re-enroll (updb → updb). */
export async function updbIdentitySetup(srv: Server, s: State, prefix = 'cx') {
  const admin = await srv.login();
  const id = (await must(admin.post('/identities', { name: `${prefix}-reenroll`, type: 'User', isAdmin: false }), 'identity')).id;
  s.set('reenrollAuth', (await must(admin.post('/authenticators', { method: 'updb', identityId: id, username: `${prefix}-reenroll`, password: 'cx-reenroll-1' }), 'authenticator')).id);
}
