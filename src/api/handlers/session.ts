/**
 * Login and the caller's own session and identity: `POST /authenticate` (password here; cert in
 * issue #5, ext-jwt in issue #6), `GET/DELETE /current-api-session`, `GET /current-identity`.
 */
import type { Ctx } from '../context.js';
import type { Reply } from '../operation.js';
import { errors } from '../errors.js';
import { ok, empty } from '../envelope.js';
import { renderRecord, write } from '../../resources/define.js';
import type { Registry } from '../../resources/define.js';
import { isDisabled } from '../../resources/identities.js';
import { checkUsername } from '../../auth/passwords.js';
import type { ApiSession } from '../../auth/api-sessions.js';
import { certLogin, extJwtLogin, type LoginMethod } from './login.js';

/** A fixed argon2id hash verified when the username is unknown, so timing does not reveal users. */
const DUMMY_HASH = '$argon2id$v=19$m=19456,t=2,p=1$po9sLlQvImQ7KY3cvEszbg$2+plzrBD7uKWdcIktUFYoH7R3KgUKPXWiI5Vw/07wI0';

export function renderCurrentApiSession(reg: Registry, ctx: Ctx, s: ApiSession) {
  const def = reg.def('apiSessions');
  const out = renderRecord(reg, def, s, { store: ctx.app.store, ctx });
  out.lastActivityAt = new Date(s.lastActivityAt).toISOString();
  out.cachedLastActivityAt = out.lastActivityAt;
  out.expiresAt = new Date(ctx.app.sessions.expiresAt(s)).toISOString();
  out.expirationSeconds = ctx.app.sessions.timeoutSeconds;
  out.authQueries = s.isMfaRequired && !s.isMfaComplete ? [{ typeId: 'MFA', provider: 'mesh', format: 'numeric', httpMethod: 'POST', httpUrl: './authenticate/mfa', minLength: 4, maxLength: 6 }] : [];
  return out;
}

/** Config types requested at login: names or ids; unknown ones are dropped; `all` stays. */
function resolveConfigTypes(ctx: Ctx, wanted: unknown): string[] {
  if (!Array.isArray(wanted)) return [];
  const out = new Set<string>();
  for (const w of wanted) {
    if (typeof w !== 'string') continue;
    if (w === 'all') out.add('all');
    else if (ctx.app.store.get('configTypes', w)) out.add(w);
    else {
      const byName = ctx.app.store.findUnique('configTypes', 'name', w);
      if (byName) out.add(byName.id);
    }
  }
  return [...out];
}

const passwordLogin: LoginMethod = async (ctx) => {
  const body = ctx.body ?? {};
  const { username, password } = body;
  // Missing or out-of-range fields are a validation error (behaviors §2.1), not a failed login.
  checkUsername(username);
  if (typeof password !== 'string' || password.length === 0) throw errors.field('password', 'password is required', password ?? null);
  if (password.length < 5 || password.length > 100) throw errors.field('password', 'password must be 5 to 100 characters long', undefined);
  const auth = ctx.app.store.findUnique('authenticators', 'username', username);
  const hash = auth?.method === 'updb' ? (auth.passwordHash as string) : DUMMY_HASH;
  const good = await ctx.app.pool.run('verifyPassword', { hash, password });
  if (!good || !auth) throw errors.invalidAuth();
  const identity = ctx.app.store.get('identities', auth.identityId);
  if (!identity || isDisabled(identity)) throw errors.invalidAuth();
  const policy = ctx.app.store.get('authPolicies', identity.authPolicyId ?? 'default');
  if (policy && policy.primary?.updb?.allowed === false) throw errors.invalidAuth();
  return { identity, authenticatorId: auth.id };
};

const LOGIN_METHODS: Record<string, LoginMethod> = { password: passwordLogin, cert: certLogin, 'ext-jwt': extJwtLogin };

export function sessionHandlers(reg: Registry): Record<string, (ctx: Ctx) => Reply | Promise<Reply>> {
  return {
    authenticate: async (ctx) => {
      const method = ctx.req.query.get('method') ?? '';
      const login = Object.hasOwn(LOGIN_METHODS, method) ? LOGIN_METHODS[method] : undefined;
      if (!login) throw errors.field('method', 'must be one of password, cert, ext-jwt', method);
      const { identity, authenticatorId, sessionFields, headers: loginHeaders } = await login(ctx);
      const body = ctx.body ?? {};
      if (body.envInfo || body.sdkInfo) {
        await write(ctx.app.store, (tx) => {
          const cur = tx.get('identities', identity.id);
          if (!cur) throw errors.invalidAuth();
          tx.put('identities', { ...cur, envInfo: body.envInfo ?? cur.envInfo, sdkInfo: body.sdkInfo ?? cur.sdkInfo });
        });
      }
      const s = await ctx.app.sessions.create({
        identityId: identity.id,
        authenticatorId,
        ipAddress: ctx.req.remoteAddress,
        configTypes: resolveConfigTypes(ctx, body.configTypes),
        isMfaRequired: identity.mfa?.isVerified === true,
        ...sessionFields,
      });
      ctx.session = s;
      ctx.identity = identity;
      const reply = ok(renderCurrentApiSession(reg, ctx, s));
      reply.headers = { ...loginHeaders, 'zt-session': s.token };
      return reply;
    },
    getCurrentAPISession: (ctx) => ok(renderCurrentApiSession(reg, ctx, ctx.session!)),
    deleteCurrentAPISession: async (ctx) => {
      await ctx.app.sessions.delete(ctx.session!.id);
      return empty();
    },
    getCurrentIdentity: (ctx) => ok(renderRecord(reg, reg.def('identities'), ctx.identity!, { store: ctx.app.store, ctx })),
  };
}
