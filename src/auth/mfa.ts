/**
 * TOTP MFA: the secret, codes, recovery codes and the record kept on the identity.
 *
 * The record lives in the identity's hidden `mfa` field:
 *   { id, createdAt, updatedAt, secret, isVerified, recoveryCodes: string[] }
 * with `secret` and each recovery code sealed at rest (src/store/sealed.ts): the secret must be
 * read to check codes, and the codes are shown again on request, so neither can be a hash.
 * One record per identity; `isVerified` flips on the first good code; the identity's
 * `isMfaEnabled` is `mfa.isVerified`.
 *
 * Choices: secrets are 20 random bytes (32 base32 characters, RFC 4226's recommended length,
 * which otplib also insists on) rather than upstream's 10; codes are RFC 6238 (SHA-1, 6 digits,
 * 30 s) accepted within ±2 steps; recovery codes are 20 × 6 base32 characters, each usable once.
 */
import crypto from 'node:crypto';
import { generateSecret, generateSync, verifySync } from 'otplib';
import QRCode from 'qrcode';
import { ApiError } from '../core/errors.js';
import { shortId } from '../store/ids.js';
import type { Store, Tx, IdentityRecord } from '../store/store.js';
import { splitHostPort } from '../config.js';
import { policyOf } from './login-policy.js';
import type { Sealer } from '../store/sealed.js';

const RECOVERY_CODE_COUNT = 20;
const RECOVERY_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
/** ±2 time steps of 30 s. */
const EPOCH_TOLERANCE_S = 60;

/** An identity's TOTP enrollment, kept on the identity record (src/store/stored-fields.ts). */
export type MfaRecord = NonNullable<IdentityRecord['mfa']>;

/** New recovery codes, sealed for the record. */
export function newSealedRecoveryCodes(sealer: Sealer): string[] {
  return newRecoveryCodes().map((c) => sealer.seal(c));
}

/** The record's TOTP secret, opened. */
export function mfaSecret(sealer: Sealer, mfa: MfaRecord): string {
  return sealer.open(mfa.secret);
}

/** The record's unused recovery codes, opened. */
export function mfaRecoveryCodes(sealer: Sealer, mfa: MfaRecord): string[] {
  return mfa.recoveryCodes.map((c) => sealer.open(c));
}

export function newRecoveryCodes(): string[] {
  const out = new Set<string>();
  while (out.size < RECOVERY_CODE_COUNT) {
    const bytes = crypto.randomBytes(6);
    let code = '';
    for (const b of bytes) code += RECOVERY_ALPHABET[b & 31];
    out.add(code);
  }
  return [...out];
}

/** A new record, sealed for storage. */
export function newMfaRecord(sealer: Sealer, now = Date.now()): MfaRecord {
  return { id: shortId(10), createdAt: now, updatedAt: now, secret: sealer.seal(generateSecret({ length: 20 })), isVerified: false, recoveryCodes: newSealedRecoveryCodes(sealer) };
}

/** A current TOTP code (tests and tools; the server only verifies). */
export function totpCode(secret: string, epochSeconds = Math.floor(Date.now() / 1000)): string {
  return generateSync({ secret, epoch: epochSeconds });
}

/** Constant-time TOTP check within ±2 steps; anything that is not 6 digits is simply wrong. */
export function isValidTotp(secret: string, code: unknown): boolean {
  if (typeof code !== 'string' || !/^\d{6}$/.test(code)) return false;
  try {
    return verifySync({ secret, token: code, epochTolerance: EPOCH_TOLERANCE_S }).valid === true;
  } catch {
    return false;
  }
}

/** Index of a matching unused recovery code, compared in constant time per code; -1 if none. */
function recoveryCodeIndex(sealer: Sealer, mfa: MfaRecord, code: unknown): number {
  if (typeof code !== 'string' || code.length === 0) return -1;
  const wanted = Buffer.from(code.trim().toUpperCase());
  let found = -1;
  mfaRecoveryCodes(sealer, mfa).forEach((c, i) => {
    const have = Buffer.from(c);
    if (have.length === wanted.length && crypto.timingSafeEqual(have, wanted)) found = i;
  });
  return found;
}

/** `otpauth://totp/<issuer>:<name>?secret=<secret>&issuer=<issuer>`. */
export function provisioningUrl(issuer: string, identityName: string, secret: string): string {
  const i = encodeURIComponent(issuer);
  return `otpauth://totp/${i}:${encodeURIComponent(identityName)}?secret=${secret}&issuer=${i}`;
}

/** 256×256 PNG of the provisioning URL. */
export function qrPng(url: string): Promise<Buffer> {
  return QRCode.toBuffer(url, { type: 'png', width: 256, margin: 2, errorCorrectionLevel: 'M' });
}

export const mfaErrors = {
  invalidToken: () => new ApiError('MFA_INVALID_TOKEN'),
  notEnrolled: () => new ApiError('MFA_NOT_ENROLLED'),
  exists: () => new ApiError('MFA_EXISTS'),
  /** TOTP tokens are minted for OIDC-backed API sessions only, as upstream does. */
  invalidBackingTokenType: () => new ApiError('INVALID_BACKING_TOKEN_TYPE'),
};

/**
 * Check a "code or recovery code" for a verified record inside a write; a recovery code is
 * consumed (the identity record is rewritten without it). Throws MFA_INVALID_TOKEN.
 */
export function checkCodeInTx(sealer: Sealer, tx: Tx, identity: IdentityRecord, code: unknown, opts: { allowRecovery: boolean }): void {
  const mfa = identity.mfa as MfaRecord;
  if (isValidTotp(mfaSecret(sealer, mfa), code)) return;
  if (opts.allowRecovery) {
    const i = recoveryCodeIndex(sealer, mfa, code);
    if (i >= 0) {
      const recoveryCodes = mfa.recoveryCodes.filter((_, j) => j !== i);
      tx.put('identities', { ...identity, mfa: { ...mfa, recoveryCodes, updatedAt: Date.now() } });
      return;
    }
  }
  throw mfaErrors.invalidToken();
}

/** The TOTP issuer: the controller's advertised host name. */
export function totpIssuer(advertisedAddress: string | undefined): string {
  return advertisedAddress ? splitHostPort(advertisedAddress).host : 'mesh';
}

/** Mark an API session as having passed TOTP now (authenticate/mfa, enrollment verify, the OIDC TOTP step). */
export function passMfaInTx(tx: Tx, apiSessionId: string, now: number) {
  const s = tx.get('apiSessions', apiSessionId);
  if (s) tx.put('apiSessions', { ...s, isMfaRequired: true, isMfaComplete: true, mfaPassedAt: now });
}

/** The MFA state of an API session (as its record and the cluster's `~as` news carry it). */
export interface MfaState {
  isMfaRequired: boolean;
  isMfaComplete: boolean;
  mfaPassedAt?: number;
}

/** What an API session's MFA state becomes when the identity's MFA is removed. */
function droppedState(store: Store, identity: IdentityRecord): MfaState {
  return { isMfaRequired: policyOf(store, identity)?.secondary?.requireTotp === true, isMfaComplete: false };
}

/**
 * MFA removed from an identity: its API sessions lose their MFA pass (MFA posture checks fail);
 * they stay fully authenticated unless the auth policy itself requires TOTP.
 */
export function dropMfaInTx(store: Store, tx: Tx, identity: IdentityRecord) {
  const dropped = droppedState(store, identity);
  for (const id of tx.idsByIndex('apiSessions', 'identityId', identity.id)) {
    const s = tx.get('apiSessions', id);
    if (!s) continue;
    const { mfaPassedAt: _p, ...rest } = s;
    tx.put('apiSessions', { ...rest, ...dropped });
  }
}

/**
 * An API session's MFA state as the identity's MFA now allows it: `dropMfaInTx`'s outcome when
 * the MFA was removed since the state was made, else the state unchanged. For a copy that did not
 * see the removal's write (cluster mode: a controller holding a copy of an API session another
 * controller made or took on, or one taking it on later from its token and the MFA news).
 *
 * - No MFA record: any pass is gone, and TOTP is required only if the auth policy says so.
 * - A pass made before the current record was created was made with an MFA since removed.
 * - No pass, and a record created after the login: the login's MFA may have been removed and
 *   enrolled again, or the record may be new and the clocks of two controllers apart; the state is
 *   kept (TOTP stays required: it fails closed, and the new record can pass it).
 */
export function mfaStateNow(store: Store, identity: IdentityRecord, s: MfaState): MfaState {
  const mfa = identity.mfa as MfaRecord | undefined;
  const passed = s.isMfaComplete || s.mfaPassedAt !== undefined;
  if (mfa && (!passed || s.mfaPassedAt === undefined || mfa.createdAt <= s.mfaPassedAt)) return s;
  if (!mfa && !passed && !s.isMfaRequired) return s;
  return droppedState(store, identity);
}

/** Whether two MFA states are the same. */
export const sameMfaState = (a: MfaState, b: MfaState) => a.isMfaRequired === b.isMfaRequired && a.isMfaComplete === b.isMfaComplete && a.mfaPassedAt === b.mfaPassedAt;
