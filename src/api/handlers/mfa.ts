/**
 * Multi-factor authentication: the caller's TOTP enrollment (enroll, detail, QR code, verify,
 * recovery codes, delete), `authenticate/mfa`, TOTP tokens for posture responses, and an
 * administrator removing an identity's MFA. The rules and writes are the MFA manager's
 * (src/managers/mfa.ts); these translate HTTP.
 */
import type { Ctx, Entry } from '../context.js';
import { errors } from '../../core/errors.js';
import { created, empty, ok } from '../../core/envelope.js';
import type { MfaRecord } from '../../auth/mfa.js';
import type { WithBody } from '../../core/operation.js';

/** The code of a request: JSON body `{code}` or header `mfa-validation-code`. */
function codeOf(ctx: WithBody<Ctx, { code?: unknown } | undefined>, from: 'body' | 'header' | 'either'): string {
  const body = from !== 'header' && typeof ctx.body?.code === 'string' ? ctx.body.code : undefined;
  const header = from !== 'body' ? ctx.req.headers['mfa-validation-code'] : undefined;
  return (body ?? header ?? '').trim();
}

/** The caller's MFA record as committed now. */
function callerMfa(ctx: Ctx): MfaRecord | undefined {
  if (!ctx.app.store.has('identities', ctx.identity!.id)) throw errors.unauthorized();
  return ctx.app.mfa.of(ctx.identity!.id);
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

export function mfaEntries(): Entry[] {
  return [
    { api: 'both', operationId: 'enrollMfa', auth: 'partial', limit: 'heavy',
      handler: async (ctx) => {
        const mfa = await ctx.app.mfa.enroll(ctx.identity!.id);
        return created(mfa.id, './current-identity/mfa');
      } },

    { api: 'both', operationId: 'detailMfa', auth: 'partial',
      handler: (ctx) => {
        const mfa = callerMfa(ctx);
        if (!mfa) throw errors.notFound();
        if (mfa.isVerified) return ok({ ...mfaBase(mfa), isVerified: true, recoveryCodes: null });
        return ok({ ...mfaBase(mfa), isVerified: false, ...ctx.app.mfa.provisioning(ctx.identity!.name, mfa) });
      } },

    { api: 'both', operationId: 'detailMfaQrCode', auth: 'partial', limit: 'heavy',
      handler: async (ctx) => {
        const mfa = callerMfa(ctx);
        // Only while enrollment is pending: once verified the secret is never shown again.
        if (!mfa || mfa.isVerified) throw errors.notFound();
        const png = await ctx.app.mfa.qrCode(ctx.identity!.name, mfa);
        return { status: 200, body: png, contentType: 'image/png', headers: { 'cache-control': 'no-store' } };
      } },

    { api: 'both', operationId: 'verifyMfa', auth: 'partial', limit: 'auth',
      handler: async (ctx) => {
        await ctx.app.mfa.verify(ctx.identity!.id, ctx.session!.id, codeOf(ctx, 'body'));
        return empty();
      } },

    { api: 'both', operationId: 'authenticateMfa', auth: 'partial', limit: 'auth',
      handler: async (ctx) => {
        await ctx.app.mfa.pass(ctx.identity!.id, ctx.session!.id, codeOf(ctx, 'body'));
        return empty();
      } },

    { api: 'both', operationId: 'detailMfaRecoveryCodes', auth: 'session', limit: 'auth',
      handler: async (ctx) => {
        const mfa = await ctx.app.mfa.showRecoveryCodes(ctx.identity!.id, codeOf(ctx, 'either'));
        return ok({ ...mfaBase(mfa), recoveryCodes: ctx.app.mfa.recoveryCodes(mfa) });
      } },

    { api: 'both', operationId: 'createMfaRecoveryCodes', auth: 'session', limit: 'auth',
      handler: async (ctx) => {
        await ctx.app.mfa.newRecoveryCodes(ctx.identity!.id, codeOf(ctx, 'body'));
        return empty();
      } },

    { api: 'both', operationId: 'deleteMfa', auth: 'session', limit: 'auth',
      handler: async (ctx) => {
        await ctx.app.mfa.remove(ctx.identity!.id, codeOf(ctx, 'header'));
        return empty();
      } },

    { api: 'both', operationId: 'createTotpToken', auth: 'session', limit: 'auth',
      handler: async (ctx) => {
        const { token, issuedAt } = await ctx.app.mfa.totpToken(ctx.session!, codeOf(ctx, 'body'));
        return ok({ token, issuedAt: new Date(issuedAt).toISOString() });
      } },

    { api: 'management', operationId: 'removeIdentityMfa', auth: 'admin', permission: { family: 'identity', action: 'update' }, reaches: { from: 'path' },
      handler: async (ctx) => {
        await ctx.app.mfa.removeByAdmin(ctx.params.id);
        return empty();
      } },
  ];
}
