/**
 * Login and the caller's own session and identity: `POST /authenticate` (every method, through
 * the login manager: src/managers/logins.ts), `GET/DELETE /current-api-session`, `GET /current-identity`.
 */
import type { Ctx, Entry } from '../context.js';
import { ok, empty } from '../../core/envelope.js';
import { renderRecord } from '../../resources/render.js';
import type { Registry } from '../../resources/registry.js';
import type { ApiSession } from '../../auth/api-sessions.js';

/** The outstanding secondary factors of a session, as upstream's `authQueries`. */
function authQueries(ctx: Ctx, s: ApiSession, extJwtSatisfied: boolean): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  if (s.isMfaRequired && !s.isMfaComplete) {
    const identity = ctx.app.store.get('identities', s.identityId);
    out.push({
      typeId: 'MFA', provider: 'mesh', format: 'alphaNumeric', httpMethod: 'POST', httpUrl: './authenticate/mfa',
      minLength: 4, maxLength: 6, isTotpEnrolled: identity?.mfa?.isVerified === true,
    });
  }
  if (s.extJwtSignerId && !extJwtSatisfied) {
    const signer = ctx.app.store.get('externalJwtSigners', s.extJwtSignerId);
    const url = signer?.externalAuthUrl ?? (/^https?:\/\/\S+$/i.test(signer?.issuer ?? '') ? signer!.issuer : '');
    out.push({ typeId: 'EXT-JWT', provider: 'url', httpUrl: url, clientId: signer?.clientId ?? '', scopes: signer?.scopes ?? [], id: s.extJwtSignerId });
  }
  return out;
}

/** Does this request carry the secondary ext-JWT its session requires (or need none)? */
const extJwtSatisfied = (ctx: Ctx, s: ApiSession) => ctx.app.logins.extJwtSatisfied(ctx.req.headers['authorization'], s);

function renderCurrentApiSession(reg: Registry, ctx: Ctx, s: ApiSession, satisfied = true) {
  const def = reg.def('apiSessions');
  const out = renderRecord(reg, def, s, { store: ctx.app.store, ctx });
  out.lastActivityAt = new Date(s.lastActivityAt).toISOString();
  out.cachedLastActivityAt = out.lastActivityAt;
  out.expiresAt = new Date(ctx.app.sessions.expiresAt(s)).toISOString();
  out.expirationSeconds = ctx.app.sessions.timeoutSeconds;
  out.authQueries = authQueries(ctx, s, satisfied);
  // The caller's own token as it presented it (the record keeps only a digest).
  if (ctx.token) out.token = ctx.token;
  return out;
}

export function sessionEntries(reg: Registry): Entry[] {
  return [
    { api: 'both', operationId: 'authenticate', auth: 'none', limit: 'auth',
      handler: async (ctx) => {
        const body = ctx.body ?? {};
        const { identity, result, session: s, token } = await ctx.app.logins.login({
          method: ctx.req.query.get('method') ?? '',
          fields: body,
          req: ctx.req,
          configTypes: body.configTypes,
          envInfo: body.envInfo ?? undefined,
          sdkInfo: body.sdkInfo ?? undefined,
        });
        ctx.session = s;
        ctx.identity = identity;
        ctx.token = token;
        const reply = ok(renderCurrentApiSession(reg, ctx, s, await extJwtSatisfied(ctx, s)));
        reply.headers = { ...result.headers, 'zt-session': token };
        return reply;
      } },
    { api: 'both', operationId: 'getCurrentAPISession', auth: 'partial',
      handler: async (ctx) => ok(renderCurrentApiSession(reg, ctx, ctx.session!, await extJwtSatisfied(ctx, ctx.session!))) },
    { api: 'both', operationId: 'deleteCurrentAPISession', auth: 'partial',
      handler: async (ctx) => {
        await ctx.app.sessions.delete(ctx.session!.id);
        return empty();
      } },
    { api: 'both', operationId: 'getCurrentIdentity', auth: 'session',
      handler: (ctx) => ok(renderRecord(reg, reg.def('identities'), ctx.identity!, { store: ctx.app.store, ctx })) },
  ];
}
