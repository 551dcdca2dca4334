/**
 * An identity's TOTP MFA: enrollment, its verification, the login's TOTP step, recovery codes,
 * removal (by the identity or an administrator) and TOTP tokens for posture responses. The
 * Client/Management API handlers (`/current-identity/mfa`, `/authenticate/mfa`) and the OIDC login
 * steps (`/oidc/login/totp…`) call the same methods; the record format is src/auth/mfa.ts.
 *
 * Every method that checks a code runs under the identity's brute-force brake (MfaThrottle).
 *
 * Example: `await mfa.pass(identityId, apiSessionId, '123456')` passes the session's TOTP step or
 * throws MFA_INVALID_TOKEN.
 */
import crypto from 'node:crypto';
import { errors } from '../core/errors.js';
import type { IdentityRecord, Store, Tx } from '../store/store.js';
import type { Pki } from '../pki/bootstrap.js';
import { signJwt } from '../pki/jwt.js';
import type { ApiSession } from '../auth/api-sessions.js';
import type { MfaThrottle } from '../auth/mfa-throttle.js';
import {
  checkCodeInTx, dropMfaInTx, isValidTotp, mfaErrors, mfaRecoveryCodes, mfaSecret, newMfaRecord, newSealedRecoveryCodes, passMfaInTx, provisioningUrl, qrPng, type MfaRecord,
} from '../auth/mfa.js';
import { write } from '../resources/write.js';


/** Lifetime of a TOTP token (proof of a TOTP check at a point in time, for posture responses). */
const TOTP_TOKEN_SECONDS = 5 * 60;

export interface MfaDeps {
  store: Store;
  throttle: MfaThrottle;
  /** The controller's server key signs TOTP tokens. */
  pki: Pick<Pki, 'serverKey' | 'serverCertSha1Hex'>;
  /** `iss` of TOTP tokens: the controller's base URL (known once the listener is bound). */
  issuer: () => string;
  /** The issuer named in provisioning URLs (auth/mfa.ts `totpIssuer`: the advertised host, known once the listener is bound). */
  totpIssuer: () => string;
}

export class Mfa {
  constructor(private readonly deps: MfaDeps) {}

  /** The identity's MFA record, as committed now. */
  of(identityId: string): MfaRecord | undefined {
    return this.deps.store.get('identities', identityId)?.mfa as MfaRecord | undefined;
  }

  /** What an unverified enrollment shows: the secret's `otpauth://` URL and the recovery codes. */
  provisioning(identityName: string, mfa: MfaRecord): { provisioningUrl: string; recoveryCodes: string[] } {
    return { provisioningUrl: this.secretUrl(identityName, mfa), recoveryCodes: this.recoveryCodes(mfa) };
  }

  /** The QR code (PNG) of the secret's URL. */
  qrCode(identityName: string, mfa: MfaRecord): Promise<Buffer> {
    return qrPng(this.secretUrl(identityName, mfa));
  }

  recoveryCodes(mfa: MfaRecord): string[] {
    return mfaRecoveryCodes(this.deps.store.sealer, mfa);
  }

  /** Starts an enrollment (MFA_EXISTS if the identity has one); returns the new record. */
  async enroll(identityId: string): Promise<MfaRecord> {
    // Sealed before the write: nothing slow runs inside its callback.
    const mfa = newMfaRecord(this.deps.store.sealer);
    await write(this.deps.store, (tx) => {
      const cur = identityIn(tx, identityId);
      if (cur.mfa) throw mfaErrors.exists();
      tx.put('identities', { ...cur, mfa });
    });
    return mfa;
  }

  /**
   * Verifies a pending enrollment with a TOTP code of its secret (a recovery code proves nothing
   * about the authenticator app) and passes the API session's TOTP step in the same write.
   */
  verify(identityId: string, apiSessionId: string, code: unknown): Promise<void> {
    return this.guard(identityId, async () => {
      const now = Date.now();
      await write(this.deps.store, (tx) => {
        const cur = identityIn(tx, identityId);
        const mfa = cur.mfa as MfaRecord | undefined;
        if (!mfa || mfa.isVerified) throw errors.notFound();
        if (!isValidTotp(mfaSecret(this.deps.store.sealer, mfa), code)) throw mfaErrors.invalidToken();
        tx.put('identities', { ...cur, mfa: { ...mfa, isVerified: true, updatedAt: now } });
        passMfaInTx(tx, apiSessionId, now);
      });
    });
  }

  /**
   * The login's TOTP step: a TOTP code or an unused recovery code (then used up) passes the API
   * session's MFA. `notEnrolled` is the error without a verified enrollment (the OIDC step answers
   * it in OAuth's shape).
   */
  pass(identityId: string, apiSessionId: string, code: string, notEnrolled: () => Error = mfaErrors.notEnrolled): Promise<void> {
    return this.guard(identityId, async () => {
      const now = Date.now();
      await write(this.deps.store, (tx) => {
        const cur = identityIn(tx, identityId);
        if (!(cur.mfa as MfaRecord | undefined)?.isVerified) throw notEnrolled();
        if (code === '') throw mfaErrors.invalidToken();
        checkCodeInTx(this.deps.store.sealer, tx, cur, code, { allowRecovery: true });
        passMfaInTx(tx, apiSessionId, now);
      });
    });
  }

  /** The recovery codes of a verified enrollment, for a TOTP code: a recovery code must not reveal the others. */
  showRecoveryCodes(identityId: string, code: string): Promise<MfaRecord> {
    return this.guard(identityId, () => {
      const mfa = this.of(identityId);
      if (!mfa?.isVerified) throw errors.notFound();
      if (!isValidTotp(mfaSecret(this.deps.store.sealer, mfa), code)) throw mfaErrors.invalidToken();
      return mfa;
    });
  }

  /** New recovery codes for a verified enrollment, for a TOTP or recovery code. */
  newRecoveryCodes(identityId: string, code: string): Promise<void> {
    return this.guard(identityId, async () => {
      const { sealer } = this.deps.store;
      const recoveryCodes = newSealedRecoveryCodes(sealer);
      await write(this.deps.store, (tx) => {
        const cur = identityIn(tx, identityId);
        if (!(cur.mfa as MfaRecord | undefined)?.isVerified) throw errors.notFound();
        checkCodeInTx(sealer, tx, cur, code, { allowRecovery: true });
        // Re-read: a recovery code used just now rewrote the record.
        const latest = identityIn(tx, identityId);
        tx.put('identities', { ...latest, mfa: { ...latest.mfa!, recoveryCodes, updatedAt: Date.now() } });
      });
    });
  }

  /**
   * The identity removes its MFA: a verified enrollment only with a TOTP or recovery code, a
   * never-verified one without (there may be no app yet). Its API sessions lose their MFA pass.
   */
  remove(identityId: string, code: string): Promise<void> {
    return this.guard(identityId, async () => {
      await write(this.deps.store, (tx) => {
        const cur = identityIn(tx, identityId);
        const mfa = cur.mfa as MfaRecord | undefined;
        if (!mfa) throw errors.notFound();
        if (mfa.isVerified) checkCodeInTx(this.deps.store.sealer, tx, cur, code, { allowRecovery: true });
        const { mfa: _m, ...rest } = identityIn(tx, identityId);
        tx.put('identities', rest);
        dropMfaInTx(this.deps.store, tx, cur);
      });
    });
  }

  /** An administrator removes an identity's MFA (404 for no such identity; nothing to do without MFA). */
  async removeByAdmin(identityId: string): Promise<void> {
    await write(this.deps.store, (tx) => {
      const cur = tx.get('identities', identityId);
      if (!cur) throw errors.notFound();
      if (!cur.mfa) return;
      const { mfa: _m, ...rest } = cur;
      tx.put('identities', { ...rest, updatedAt: Math.max(Date.now(), cur.updatedAt + 1) });
      dropMfaInTx(this.deps.store, tx, cur);
    });
  }

  /**
   * A controller-signed proof that the identity passed TOTP now in this API session. Upstream
   * mints them only for sessions backed by an OIDC access token: a legacy zt-session token is
   * refused before anything else is looked at.
   */
  totpToken(session: ApiSession, code: string): Promise<{ token: string; issuedAt: number }> {
    return this.guard(session.identityId, () => {
      if (!session.oidc) throw mfaErrors.invalidBackingTokenType();
      const mfa = this.of(session.identityId);
      if (!mfa?.isVerified) throw mfaErrors.notEnrolled();
      if (!isValidTotp(mfaSecret(this.deps.store.sealer, mfa), code)) throw mfaErrors.invalidToken();
      const iat = Math.floor(Date.now() / 1000);
      const { pki } = this.deps;
      const token = signJwt(pki.serverKey, pki.serverCertSha1Hex, {
        iss: this.deps.issuer(), sub: session.identityId, aud: ['mesh'], iat, exp: iat + TOTP_TOKEN_SECONDS,
        jti: crypto.randomUUID(), z_t: 'totp', z_asid: session.id,
      });
      return { token, issuedAt: iat * 1000 };
    });
  }

  private secretUrl(identityName: string, mfa: MfaRecord): string {
    return provisioningUrl(this.deps.totpIssuer(), identityName, mfaSecret(this.deps.store.sealer, mfa));
  }

  private guard<T>(identityId: string, fn: () => T | Promise<T>): Promise<T> {
    return this.deps.throttle.guard(identityId, fn);
  }
}

/** The identity as the write sees it; gone means the caller's credential no longer stands. */
function identityIn(tx: Tx, identityId: string): IdentityRecord {
  const rec = tx.get('identities', identityId);
  if (!rec) throw errors.unauthorized();
  return rec;
}
