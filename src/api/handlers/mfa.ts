/**
 * Multi-factor authentication: the caller's TOTP enrollment (enroll, detail, QR code, verify,
 * recovery codes, delete), `authenticate/mfa`, TOTP tokens for posture responses, and an
 * administrator removing an identity's MFA.
 */
import crypto from 'node:crypto';
import type { Ctx, Entry } from '../../core/context.js';
import { errors } from '../../core/errors.js';
import { created, empty, ok } from '../../core/envelope.js';
import { write } from '../../resources/write.js';
import type { Tx, IdentityRecord } from '../../store/store.js';
import { signJwt } from '../../pki/jwt.js';
import {
  checkCodeInTx, dropMfaInTx, isValidTotp, passMfaInTx, totpIssuer, mfaErrors, mfaRecoveryCodes, mfaSecret, newMfaRecord, newSealedRecoveryCodes, provisioningUrl, qrPng, type MfaRecord,
} from '../../auth/mfa.js';

/** Lifetime of a TOTP token (proof of a TOTP check at a point in time, for posture responses). */
const TOTP_TOKEN_SECONDS = 5 * 60;

/** The caller's identity as committed now (inside a write: as the write sees it). */
function currentIdentity(ctx: Ctx, tx?: Tx): IdentityRecord {
  const rec = (tx ?? ctx.app.store).get('identities', ctx.identity!.id);
  if (!rec) throw errors.unauthorized();
  return rec;
}

/** The code of a request: JSON body `{code}` or header `mfa-validation-code`. */
function codeOf(ctx: Ctx, from: 'body' | 'header' | 'either'): string {
  const body = from !== 'header' && typeof ctx.body?.code === 'string' ? ctx.body.code : undefined;
  const header = from !== 'body' ? ctx.req.headers['mfa-validation-code'] : undefined;
  return (body ?? header ?? '').trim();
}

function mfaLinks() {
  return {
    self: { href: './current-identity/mfa' },
    'qr-code': { href: './current-identity/mfa/qr-code' },
    'recovery-codes': { href: './current-identity/mfa/recovery-codes' },
    verify: { href: './current-identity/mfa/verify' },
  };
}

function mfaBase(mfa: MfaRecord) {
  return { id: mfa.id, createdAt: new Date(mfa.createdAt).toISOString(), updatedAt: new Date(mfa.updatedAt).toISOString(), tags: {}, _links: mfaLinks() };
}

/** A code check of the caller under its brute-force brake (MfaThrottle.guard). */
const guarded = <T>(ctx: Ctx, fn: () => T | Promise<T>) => ctx.app.auth.mfaThrottle.guard(ctx.identity!.id, fn);

export function mfaEntries(): Entry[] {
  return [
    { api: 'both', operationId: 'enrollMfa', auth: 'partial', limit: 'heavy',
      handler: async (ctx) => {
        const mfa = newMfaRecord(ctx.app.store.sealer);
        await write(ctx.app.store, (tx) => {
          const cur = currentIdentity(ctx, tx);
          if (cur.mfa) throw mfaErrors.exists();
          tx.put('identities', { ...cur, mfa });
        });
        return created(mfa.id, './current-identity/mfa');
      } },

    { api: 'both', operationId: 'detailMfa', auth: 'partial',
      handler: (ctx) => {
        const mfa = currentIdentity(ctx).mfa as MfaRecord | undefined;
        if (!mfa) throw errors.notFound();
        if (mfa.isVerified) return ok({ ...mfaBase(mfa), isVerified: true, recoveryCodes: null });
        return ok({
          ...mfaBase(mfa),
          isVerified: false,
          provisioningUrl: provisioningUrl(totpIssuer(ctx.app.config.advertisedAddress), ctx.identity!.name, mfaSecret(ctx.app.store.sealer, mfa)),
          recoveryCodes: mfaRecoveryCodes(ctx.app.store.sealer, mfa),
        });
      } },

    { api: 'both', operationId: 'detailMfaQrCode', auth: 'partial', limit: 'heavy',
      handler: async (ctx) => {
        const mfa = currentIdentity(ctx).mfa as MfaRecord | undefined;
        // Only while enrollment is pending: once verified the secret is never shown again.
        if (!mfa || mfa.isVerified) throw errors.notFound();
        const png = await qrPng(provisioningUrl(totpIssuer(ctx.app.config.advertisedAddress), ctx.identity!.name, mfaSecret(ctx.app.store.sealer, mfa)));
        return { status: 200, body: png, contentType: 'image/png', headers: { 'cache-control': 'no-store' } };
      } },

    { api: 'both', operationId: 'verifyMfa', auth: 'partial', limit: 'auth',
      handler: (ctx) => guarded(ctx, async () => {
        const code = codeOf(ctx, 'body');
        const now = Date.now();
        await write(ctx.app.store, (tx) => {
          const cur = currentIdentity(ctx, tx);
          const mfa = cur.mfa as MfaRecord | undefined;
          if (!mfa || mfa.isVerified) throw errors.notFound();
          // Enrollment is verified with a TOTP code only: it proves the authenticator app works.
          if (!isValidTotp(mfaSecret(ctx.app.store.sealer, mfa), code)) throw mfaErrors.invalidToken();
          tx.put('identities', { ...cur, mfa: { ...mfa, isVerified: true, updatedAt: now } });
          passMfaInTx(tx, ctx.session!.id, now);
        });
        return empty();
      }) },

    { api: 'both', operationId: 'authenticateMfa', auth: 'partial', limit: 'auth',
      handler: (ctx) => guarded(ctx, async () => {
        const code = codeOf(ctx, 'body');
        const now = Date.now();
        await write(ctx.app.store, (tx) => {
          const cur = currentIdentity(ctx, tx);
          if (!(cur.mfa as MfaRecord | undefined)?.isVerified) throw mfaErrors.notEnrolled();
          if (code === '') throw mfaErrors.invalidToken();
          checkCodeInTx(ctx.app.store.sealer, tx, cur, code, { allowRecovery: true });
          passMfaInTx(tx, ctx.session!.id, now);
        });
        return empty();
      }) },

    { api: 'both', operationId: 'detailMfaRecoveryCodes', auth: 'session', limit: 'auth',
      handler: (ctx) => guarded(ctx, () => {
        const mfa = currentIdentity(ctx).mfa as MfaRecord | undefined;
        if (!mfa?.isVerified) throw errors.notFound();
        // Showing the codes needs a TOTP code: a recovery code must not reveal the others.
        if (!isValidTotp(mfaSecret(ctx.app.store.sealer, mfa), codeOf(ctx, 'either'))) throw mfaErrors.invalidToken();
        return ok({ ...mfaBase(mfa), recoveryCodes: mfaRecoveryCodes(ctx.app.store.sealer, mfa) });
      }) },

    { api: 'both', operationId: 'createMfaRecoveryCodes', auth: 'session', limit: 'auth',
      handler: (ctx) => guarded(ctx, async () => {
        const code = codeOf(ctx, 'body');
        await write(ctx.app.store, (tx) => {
          const cur = currentIdentity(ctx, tx);
          if (!(cur.mfa as MfaRecord | undefined)?.isVerified) throw errors.notFound();
          checkCodeInTx(ctx.app.store.sealer, tx, cur, code, { allowRecovery: true });
          const latest = currentIdentity(ctx, tx);
          tx.put('identities', { ...latest, mfa: { ...latest.mfa!, recoveryCodes: newSealedRecoveryCodes(ctx.app.store.sealer), updatedAt: Date.now() } });
        });
        return empty();
      }) },

    { api: 'both', operationId: 'deleteMfa', auth: 'session', limit: 'auth',
      handler: (ctx) => guarded(ctx, async () => {
        const code = codeOf(ctx, 'header');
        await write(ctx.app.store, (tx) => {
          const cur = currentIdentity(ctx, tx);
          const mfa = cur.mfa as MfaRecord | undefined;
          if (!mfa) throw errors.notFound();
          // A never-verified enrollment can be dropped without a code (there may be no app yet).
          if (mfa.isVerified) checkCodeInTx(ctx.app.store.sealer, tx, cur, code, { allowRecovery: true });
          const { mfa: _m, ...rest } = currentIdentity(ctx, tx);
          tx.put('identities', rest);
          dropMfaInTx(ctx.app.store, tx, cur);
        });
        return empty();
      }) },

    { api: 'both', operationId: 'createTotpToken', auth: 'session', limit: 'auth',
      handler: (ctx) => guarded(ctx, async () => {
        // Upstream mints TOTP tokens only for sessions backed by an OIDC access token; a legacy
        // zt-session token is refused before anything else is looked at.
        if (!ctx.session!.oidc) throw mfaErrors.invalidBackingTokenType();
        const mfa = currentIdentity(ctx).mfa as MfaRecord | undefined;
        if (!mfa?.isVerified) throw mfaErrors.notEnrolled();
        if (!isValidTotp(mfaSecret(ctx.app.store.sealer, mfa), codeOf(ctx, 'body'))) throw mfaErrors.invalidToken();
        const iat = Math.floor(Date.now() / 1000);
        const pki = ctx.app.pki;
        // A controller-signed proof that this identity passed TOTP at `iat` in this API session.
        const token = signJwt(pki.serverKey, pki.serverCertSha1Hex, {
          iss: ctx.app.baseUrl, sub: ctx.identity!.id, aud: ['mesh'], iat, exp: iat + TOTP_TOKEN_SECONDS,
          jti: crypto.randomUUID(), z_t: 'totp', z_asid: ctx.session!.id,
        });
        return ok({ token, issuedAt: new Date(iat * 1000).toISOString() });
      }) },

    { api: 'management', operationId: 'removeIdentityMfa', auth: 'admin', permission: { family: 'identity', action: 'update' }, reaches: { from: 'path' },
      handler: async (ctx) => {
        await write(ctx.app.store, (tx) => {
          const cur = tx.get('identities', ctx.params.id);
          if (!cur) throw errors.notFound();
          if (!cur.mfa) return;
          const { mfa: _m, ...rest } = cur;
          tx.put('identities', { ...rest, updatedAt: Math.max(Date.now(), cur.updatedAt + 1) });
          dropMfaInTx(ctx.app.store, tx, cur);
        });
        return empty();
      } },
  ];
}
