/**
 * src/auth/mfa.ts `mfaStateNow` on a real LMDB store: the MFA state an API session's copy keeps
 * when the identity's MFA may have been removed where the copy did not see it (cluster mode).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { Store, type AuthPolicyRecord, type IdentityRecord } from '../../../src/store/store.js';
import { createRegistry } from '../../../src/resources/index.js';
import { mfaStateNow, type MfaState } from '../../../src/auth/mfa.js';

const reg = createRegistry();
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-mfa-state-'));
const store = new Store(dir, reg.collectionSpecs());
t.teardown(async () => {
  await store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

const identity = (mfa?: { createdAt: number; isVerified: boolean }, authPolicyId?: string): IdentityRecord =>
  ({ id: 'i1', createdAt: 0, updatedAt: 0, tags: {}, name: 'i1', ...(authPolicyId ? { authPolicyId } : {}), ...(mfa ? { mfa: { id: `m${mfa.createdAt}`, updatedAt: mfa.createdAt, secret: '', recoveryCodes: [], ...mfa } } : {}) }) as IdentityRecord;
const passed = (at: number): MfaState => ({ isMfaRequired: true, isMfaComplete: true, mfaPassedAt: at });
const pending: MfaState = { isMfaRequired: true, isMfaComplete: false };
const dropped: MfaState = { isMfaRequired: false, isMfaComplete: false };

t.before(async () => {
  await store.write((tx) => tx.put('authPolicies', { id: 'totp', createdAt: 0, updatedAt: 0, tags: {}, name: 'totp', primary: {}, secondary: { requireTotp: true } } as AuthPolicyRecord));
});

t.test('the MFA the state was made with is still there: unchanged', async (t) => {
  const mfa = { createdAt: 500, isVerified: true };
  t.same(mfaStateNow(store, identity(mfa), passed(2_000)), passed(2_000), 'a pass made after the record was created holds');
  t.same(mfaStateNow(store, identity(mfa), pending), pending, 'a copy waiting for TOTP keeps waiting');
  t.same(mfaStateNow(store, identity(mfa), dropped), dropped, 'a copy that needs no TOTP stays so');
});

t.test('MFA removed: no pass, and TOTP required only where the auth policy requires it', async (t) => {
  t.same(mfaStateNow(store, identity(), passed(2_000)), dropped, 'the pass is gone');
  t.same(mfaStateNow(store, identity(), pending), dropped, 'a copy waiting for TOTP is fully authenticated again');
  t.same(mfaStateNow(store, identity(undefined, 'totp'), passed(2_000)), pending, 'under a policy requiring TOTP it waits for it');
  t.same(mfaStateNow(store, identity(), dropped), dropped, 'nothing to drop');
});

t.test('MFA removed and enrolled again', async (t) => {
  const again = { createdAt: 3_000, isVerified: true };
  t.same(mfaStateNow(store, identity(again), passed(2_000)), dropped, 'a pass made with the removed MFA is gone');
  t.same(mfaStateNow(store, identity(again), passed(3_500)), passed(3_500), 'a pass made with the new one holds');
  t.same(mfaStateNow(store, identity({ createdAt: 3_000, isVerified: false }), passed(2_000)), dropped, 'also while the new one is not verified yet');
  t.same(mfaStateNow(store, identity(again), pending), pending, 'no pass and a record newer than the login: TOTP stays required (fails closed)');
});
