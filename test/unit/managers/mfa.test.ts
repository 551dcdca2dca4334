/**
 * src/managers/mfa.ts without HTTP, with real TOTP codes and sealed secrets on a real store:
 * enrollment and its verification (which passes the API session's TOTP step), the login's TOTP
 * step with a recovery code used up, the brute-force brake, removal by the identity and by an
 * administrator, and TOTP tokens only for OIDC-backed sessions.
 */
import t from 'tap';
import crypto from 'node:crypto';
import type { CollectionName, Rec } from '../../../src/store/store.js';
import { ApiError } from '../../../src/core/errors.js';
import { MfaThrottle } from '../../../src/auth/mfa-throttle.js';
import { mfaSecret, totpCode } from '../../../src/auth/mfa.js';
import { Mfa } from '../../../src/managers/mfa.js';
import { managerStore } from './fixture.js';

const { store, sessions } = await managerStore(t);
const { privateKey, publicKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
const mfa = new Mfa({
  store,
  throttle: new MfaThrottle(3, 60_000),
  pki: { serverKey: privateKey, serverCertSha1Hex: 'ab'.repeat(20) },
  issuer: () => 'https://ctrl.test',
  totpIssuer: () => 'ctrl.test',
});

let n = 0;
/** A new identity and an API session of it, as a login would make. */
async function login(isMfaRequired = false) {
  const id = `ident-${++n}`;
  await store.write((tx) => tx.put<CollectionName>('identities', { id, createdAt: 0, updatedAt: 0, tags: {}, name: id, type: 'User', isAdmin: false, roleAttributes: [] } as Rec));
  const { session } = await sessions.create({ identityId: id, authenticatorId: 'a', method: 'password', ipAddress: '::1', configTypes: [], isMfaRequired });
  return { id, session };
}
const codeOf = (identityId: string) => totpCode(mfaSecret(store.sealer, mfa.of(identityId)!));
const errCode = (e: unknown) => (e instanceof ApiError ? e.code : String(e));

t.test('enroll, then verify with a TOTP code: verified, and the session passed TOTP', async (t) => {
  const { id, session } = await login();
  const rec = await mfa.enroll(id);
  t.equal(rec.isVerified, false);
  await t.rejects(mfa.enroll(id), { code: 'MFA_EXISTS' }, 'one enrollment per identity');
  const shown = mfa.provisioning(id, rec);
  t.match(shown.provisioningUrl, /^otpauth:\/\/totp\/ctrl\.test:/);
  t.equal(shown.recoveryCodes.length, 20);
  await t.rejects(mfa.verify(id, session.id, shown.recoveryCodes[0]), { code: 'MFA_INVALID_TOKEN' }, 'a recovery code proves nothing about the app');
  await mfa.verify(id, session.id, codeOf(id));
  t.equal(mfa.of(id)?.isVerified, true);
  const s = store.get('apiSessions', session.id)!;
  t.equal(s.isMfaComplete, true);
  await t.rejects(mfa.verify(id, session.id, codeOf(id)), { code: 'NOT_FOUND' }, 'nothing left to verify');
});

t.test('the TOTP step: a recovery code passes once; no code and no enrollment are refused', async (t) => {
  const { id, session } = await login(true);
  await t.rejects(mfa.pass(id, session.id, '123456'), { code: 'MFA_NOT_ENROLLED' });
  const rec = await mfa.enroll(id);
  const first = await login();
  await mfa.verify(id, first.session.id, codeOf(id));
  await t.rejects(mfa.pass(id, session.id, ''), { code: 'MFA_INVALID_TOKEN' });
  const recovery = mfa.recoveryCodes(rec)[0];
  await mfa.pass(id, session.id, recovery);
  t.equal(store.get('apiSessions', session.id)?.isMfaComplete, true);
  t.notOk(mfa.recoveryCodes(mfa.of(id)!).includes(recovery), 'used up');
  await t.rejects(mfa.pass(id, session.id, recovery), { code: 'MFA_INVALID_TOKEN' }, 'not twice');
});

t.test('wrong codes brake the identity: 429 after the limit, also for a good code', async (t) => {
  const { id, session } = await login();
  await mfa.enroll(id);
  await mfa.verify(id, session.id, codeOf(id));
  for (let i = 0; i < 3; i++) t.equal(errCode(await mfa.pass(id, session.id, '000000').catch((e) => e)), 'MFA_INVALID_TOKEN');
  t.equal(errCode(await mfa.pass(id, session.id, codeOf(id)).catch((e) => e)), 'RATE_LIMITED');
});

t.test('recovery codes: shown for a TOTP code only, renewed for any code', async (t) => {
  const { id, session } = await login();
  const rec = await mfa.enroll(id);
  await mfa.verify(id, session.id, codeOf(id));
  const old = mfa.recoveryCodes(rec);
  await t.rejects(mfa.showRecoveryCodes(id, old[0]), { code: 'MFA_INVALID_TOKEN' }, 'a recovery code does not reveal the others');
  t.same(mfa.recoveryCodes(await mfa.showRecoveryCodes(id, codeOf(id))), old);
  await mfa.newRecoveryCodes(id, old[1]);
  const renewed = mfa.recoveryCodes(mfa.of(id)!);
  t.equal(renewed.length, 20);
  t.notOk(renewed.some((c) => old.includes(c)), 'all new');
});

t.test('removal: a verified enrollment needs a code; its sessions lose the pass; an admin needs none', async (t) => {
  const { id, session } = await login();
  await mfa.enroll(id);
  await mfa.verify(id, session.id, codeOf(id));
  await t.rejects(mfa.remove(id, ''), { code: 'MFA_INVALID_TOKEN' });
  await mfa.remove(id, codeOf(id));
  t.equal(mfa.of(id), undefined);
  t.equal(store.get('apiSessions', session.id)?.isMfaComplete, false, 'the pass is gone');
  await t.rejects(mfa.remove(id, ''), { code: 'NOT_FOUND' });

  await mfa.enroll(id);
  await mfa.verify(id, session.id, codeOf(id));
  await mfa.removeByAdmin(id);
  t.equal(mfa.of(id), undefined);
  await mfa.removeByAdmin(id);
  t.pass('removing nothing is no error');
  await t.rejects(mfa.removeByAdmin('no-such-identity'), { code: 'NOT_FOUND' });
});

t.test('TOTP tokens: only for an OIDC-backed session, signed by the server key', async (t) => {
  const { id, session } = await login();
  await mfa.enroll(id);
  await mfa.verify(id, session.id, codeOf(id));
  await t.rejects(mfa.totpToken(session, codeOf(id)), { code: 'INVALID_BACKING_TOKEN_TYPE' });
  const oidc = { ...session, oidc: { clientId: 'openziti', refreshJti: 'r', scopes: ['openid'] } };
  const { token } = await mfa.totpToken(oidc, codeOf(id));
  const claims = JSON.parse(Buffer.from(token.split('.')[1], 'base64url').toString());
  t.match(claims, { iss: 'https://ctrl.test', sub: id, z_t: 'totp', z_asid: session.id });
  const [h, p, sig] = token.split('.');
  t.ok(crypto.verify('sha256', Buffer.from(`${h}.${p}`), { key: publicKey, dsaEncoding: 'ieee-p1363' }, Buffer.from(sig, 'base64url')), 'the signature verifies');
});
