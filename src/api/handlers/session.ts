/**
 * Login and the caller's own session and identity: `POST /authenticate` (password here; certificate and ext-jwt in
 * login.ts), `GET/DELETE /current-api-session`, `GET /current-identity`.
 *
 * The common login path: the method identifies the caller (login.ts), then — for every method —
 * a disabled identity is refused, the auth policy must allow the primary method (and the signer,
 * and an expired certificate), wrong passwords count towards the lockout, and the policy plus the
 * identity's verified MFA decide the secondary factors (`authQueries`) of the new API session.
 */
import type { Ctx, Entry } from '../context.js';
import type { Reply } from '../../core/operation.js';
import { errors } from '../../core/errors.js';
import { ok, empty } from '../../core/envelope.js';
import { renderRecord } from '../../resources/render.js';
import { write } from '../../resources/write.js';
import type { Registry } from '../../resources/registry.js';
import { checkUsername, dummyPasswordHash } from '../../auth/passwords.js';
import type { ApiSession } from '../../auth/api-sessions.js';
import { checkPrimary, secondaryFactors, type PrimaryMethod } from '../../auth/login-policy.js';
import { clearFailedPasswords, recordFailedPassword } from '../../auth/disable.js';
import { isDisabledAt } from '../../auth/login-policy.js';
import { certLogin, extJwtLogin, type LoginMethod } from './login.js';

/** A fixed argon2id hash verified when the username is unknown, so timing does not reveal users. */

/** The outstanding secondary factors of a session, as upstream's `authQueries`. */
export function authQueries(ctx: Ctx, s: ApiSession, extJwtSatisfied: boolean): Record<string, unknown>[] {
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
export async function extJwtSatisfied(ctx: Ctx, s: ApiSession): Promise<boolean> {
  if (!s.extJwtSignerId) return true;
  return ctx.app.auth.extJwt.satisfiesSecondary(ctx.req.headers['authorization'], s.extJwtSignerId, s.identityId);
}

export function renderCurrentApiSession(reg: Registry, ctx: Ctx, s: ApiSession, satisfied = true) {
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
  // Missing or out-of-range fields are a validation error, not a failed login.
  checkUsername(username);
  if (typeof password !== 'string' || password.length === 0) throw errors.field('password', 'password is required', password ?? null);
  if (password.length < 5 || password.length > 100) throw errors.field('password', 'password must be 5 to 100 characters long', undefined);
  const auth = ctx.app.store.findUnique('authenticators', 'username', username);
  const hash = auth?.method === 'updb' ? (auth.passwordHash as string) : await dummyPasswordHash(ctx.app);
  const good = await ctx.app.pool.run('verifyPassword', { hash, password });
  const identity = auth?.method === 'updb' ? ctx.app.store.get('identities', auth.identityId) : undefined;
  if (!auth || !identity) {
    await ctx.app.store.commitMark();
    throw errors.invalidAuth();
  }
  if (!good) {
    // Attempts against a disabled (e.g. already locked) identity are not counted again; they,
    // like unknown usernames above, wait for a commit all the same: a wrong password's answer
    // waits for its count to be durable, and a faster refusal would tell which usernames exist.
    if (!isDisabledAt(identity)) await recordFailedPassword(ctx.app.store, auth.id);
    else await ctx.app.store.commitMark();
    throw errors.invalidAuth();
  }
  return { identity, authenticatorId: auth.id };
};

const LOGIN_METHODS: Record<string, LoginMethod> = { password: passwordLogin, cert: certLogin, 'ext-jwt': extJwtLogin };

/**
 * The primary step of every login (`/authenticate` and the OIDC login steps): the method
 * identifies the caller, then the disabled-identity and auth-policy rules apply and a good
 * password clears the failure count. `ctx.body` holds the method's fields.
 */
export async function primaryLogin(ctx: Ctx, method: string) {
  const login = Object.hasOwn(LOGIN_METHODS, method) ? LOGIN_METHODS[method] : undefined;
  if (!login) throw errors.field('method', 'must be one of password, cert, ext-jwt', method);
  const result = await login(ctx);
  // Re-read: a lockout or disable may have landed while the method was verifying.
  const identity = ctx.app.store.get('identities', result.identity.id);
  if (!identity) throw errors.invalidAuth();
  checkPrimary(ctx.app.store, {
    method: method as PrimaryMethod,
    identity,
    signerId: result.externalJwtSignerId,
    certExpired: result.certExpired,
  });
  if (method === 'password') await clearFailedPasswords(ctx.app.store, result.authenticatorId);
  return { identity, result };
}

/** Config types requested at login (names or ids), as stored on the API session. */
export { resolveConfigTypes };

export function sessionEntries(reg: Registry): Entry[] {
  return [
    { api: 'both', operationId: 'authenticate', auth: 'none', limit: 'auth',
      handler: async (ctx) => {
        const method = ctx.req.query.get('method') ?? '';
        const { identity, result } = await primaryLogin(ctx, method);
        const body = ctx.body ?? {};
        if (body.envInfo || body.sdkInfo) {
          await write(ctx.app.store, (tx) => {
            const cur = tx.get('identities', identity.id);
            if (!cur) throw errors.invalidAuth();
            tx.put('identities', { ...cur, envInfo: body.envInfo ?? cur.envInfo, sdkInfo: body.sdkInfo ?? cur.sdkInfo });
          });
        }
        const secondary = secondaryFactors(ctx.app.store, identity);
        const { session: s, token } = await ctx.app.sessions.create({
          identityId: identity.id,
          authenticatorId: result.authenticatorId,
          method,
          primarySignerId: result.externalJwtSignerId,
          ipAddress: ctx.req.remoteAddress,
          configTypes: resolveConfigTypes(ctx, body.configTypes),
          isMfaRequired: secondary.isMfaRequired,
          extJwtSignerId: secondary.extJwtSignerId,
          extra: result.sessionFields,
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
