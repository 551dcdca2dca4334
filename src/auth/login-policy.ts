/**
 * What every login method shares once it has identified the caller: the
 * identity must not be disabled, its auth policy must allow the primary method (and, for ext-jwt,
 * the signer; for certificates, an expired one), and the policy plus the identity's verified MFA
 * decide which secondary factors the new API session must still satisfy.
 *
 * Example: `checkPrimary(store, { method: 'password', identity })` throws INVALID_AUTH or returns;
 * `secondaryFactors(store, identity)` → `{ isMfaRequired: true, extJwtSignerId: undefined }`.
 */
import { errors } from '../core/errors.js';
import type { AuthPolicyRecord, IdentityRecord, Rec, Store } from '../store/store.js';

export type PrimaryMethod = 'password' | 'cert' | 'ext-jwt';

/** A disabled identity: `disabledAt` set and `disabledUntil` (if any) still ahead. */
export function isDisabledAt(r: Rec, now = Date.now()): boolean {
  if (!r.disabledAt) return false;
  return r.disabledUntil === undefined || r.disabledUntil === null || Number(r.disabledUntil) > now;
}

export interface PrimaryFacts {
  method: PrimaryMethod;
  identity: IdentityRecord;
  /** ext-jwt: the signer that verified the token. */
  signerId?: string;
  /** cert: the presented certificate is past its notAfter. */
  certExpired?: boolean;
}

export function policyOf(store: Store, identity: IdentityRecord): AuthPolicyRecord | undefined {
  return store.get('authPolicies', identity.authPolicyId ?? 'default') ?? store.get('authPolicies', 'default');
}

/** Throws INVALID_AUTH when the identity may not log in this way now. */
export function checkPrimary(store: Store, facts: PrimaryFacts): void {
  const { identity } = facts;
  if (isDisabledAt(identity)) throw errors.invalidAuth();
  const primary = policyOf(store, identity)?.primary;
  switch (facts.method) {
    case 'password':
      if (primary?.updb?.allowed === false) throw errors.invalidAuth();
      break;
    case 'cert':
      if (primary?.cert?.allowed === false) throw errors.invalidAuth();
      if (facts.certExpired && primary?.cert?.allowExpiredCerts === false) throw errors.invalidAuth();
      break;
    case 'ext-jwt': {
      if (primary?.extJwt?.allowed === false) throw errors.invalidAuth();
      const allowed: string[] = primary?.extJwt?.allowedSigners ?? [];
      if (allowed.length > 0 && (!facts.signerId || !allowed.includes(facts.signerId))) throw errors.invalidAuth();
      break;
    }
  }
}

/** checkPrimary as a yes/no (an existing API session re-checked after a policy change). */
export function allowsPrimary(store: Store, facts: PrimaryFacts): boolean {
  try {
    checkPrimary(store, facts);
    return true;
  } catch {
    return false;
  }
}

export interface SecondaryFactors {
  /** TOTP must be passed (`POST authenticate/mfa`) before the session is fully authenticated. */
  isMfaRequired: boolean;
  /** Every fully authenticated request must carry a valid token of this signer. */
  extJwtSignerId?: string;
}

export function secondaryFactors(store: Store, identity: IdentityRecord): SecondaryFactors {
  const secondary = policyOf(store, identity)?.secondary;
  const signer = typeof secondary?.requireExtJwtSigner === 'string' && secondary.requireExtJwtSigner !== '' ? secondary.requireExtJwtSigner : undefined;
  return {
    isMfaRequired: identity.mfa?.isVerified === true || secondary?.requireTotp === true,
    extJwtSignerId: signer,
  };
}
