/**
 * The one operation table. Every operation of both upstream specs becomes exactly one entry; its
 * auth level and permission are derived here from the spec (secured or not) and the path (the
 * family it exposes), and its handler comes from the resource definitions or a handler module.
 * Starting fails if an upstream operation has no handler.
 */
import type { Ctx, Op } from './context.js';
import type { ApiName, AuthLevel, HttpMethod, Permission, PermissionAction, Reply } from './operation.js';
import type { LimitKind } from '../auth/services.js';
import { upstreamDocument, upstreamOperations, type UpstreamOp } from './spec/index.js';
import { standardHandlers, type Registry } from '../resources/define.js';
import { ALIASES, RESOURCES } from '../resources/index.js';
import { metaHandlers } from './handlers/meta.js';
import { sessionHandlers } from './handlers/session.js';
import { adminHandlers } from './handlers/admin.js';
import { policyHandlers } from './handlers/policy.js';
import { enrollHandlers } from './handlers/enroll.js';
import { authHandlers } from './handlers/auth.js';
import { opsHandlers } from './handlers/ops.js';
import { dataHandlers } from './handlers/data.js';

type Handler = (ctx: Ctx) => Reply | Promise<Reply>;

/** Path segment → permission family (semantics §14); sub-resources use the family they expose. */
const FAMILY_BY_SEGMENT: Record<string, string> = {
  identities: 'identity', 'identity-role-attributes': 'identity', 'identity-types': 'identity',
  enrollments: 'enrollment', authenticators: 'authenticator',
  services: 'service', 'service-role-attributes': 'service', configs: 'config', 'config-types': 'config-type',
  'service-configs': 'identity',
  'service-policies': 'service-policy', 'edge-router-policies': 'edge-router-policy',
  'service-edge-router-policies': 'service-edge-router-policy',
  'posture-checks': 'posture-check', 'posture-check-types': 'posture-check', 'posture-check-role-attributes': 'posture-check',
  'posture-data': 'identity', 'failed-service-requests': 'identity',
  'edge-routers': 'router', 'edge-router-role-attributes': 'router', routers: 'router', 'transit-routers': 'router',
  terminators: 'terminator', cas: 'ca', 'auth-policies': 'auth-policy', 'external-jwt-signers': 'external-jwt-signer',
  'api-sessions': 'ops', sessions: 'ops', 'route-path': 'ops', 'controller-settings': 'ops', controllers: 'ops',
};

/** Bodies accepted empty although the spec marks them required (#5): ottca with its token in the
 *  query and an empty `text/plain` body; CA verify, which reports an empty body itself (400
 *  COULD_NOT_PARSE_BODY, behaviors §6); token enrollment without a CSR (token credentials). */
const OPTIONAL_BODY = new Set(['enrollOttCa', 'verifyCa', 'enrollToken']);

/** Text bodies the handler reads itself from `req.body`, after its 404/409 checks (#5: CA verify). */
const RAW_BODY = new Set(['verifyCa']);

const ACTION: Record<HttpMethod, PermissionAction> = { get: 'read', post: 'create', put: 'update', patch: 'update', delete: 'delete' };

/**
 * Operations only a full admin may call, whatever permissions the caller holds (semantics §14):
 * authenticator writes, the datastore, and PUT on identities (non-admin identity managers may
 * only PATCH: a PUT could reset `isAdmin`/`permissions`).
 */
const ADMIN_ONLY = new Set([
  'createAuthenticator', 'updateAuthenticator', 'patchAuthenticator', 'deleteAuthenticator', 'reEnrollAuthenticator',
  'requestExtendAuthenticator', 'checkDataIntegrity', 'dataIntegrityResults', 'fixDataIntegrity', 'createDatabaseSnapshot',
  'updateIdentity',
]);

/** Authenticator reads: admins and `admin_readonly` (`authenticator` is no grantable family). */
const AUTHENTICATOR_READS = new Set(['listAuthenticators', 'detailAuthenticator', 'getIdentityAuthenticators']);

/** Management operations open to any fully authenticated session (decisions §3: summary counts what the caller may read). */
const ANY_SESSION = new Set(['listSummary']);

/** Operations that change an identity in place (disable, MFA removal, service configs, tracing) need `identity.update`. */
const IDENTITY_UPDATES = new Set([
  'disableIdentity', 'enableIdentity', 'removeIdentityMfa', 'associateIdentitysServiceConfigs',
  'disassociateIdentitysServiceConfigs', 'updateIdentityTracing',
]);

/** Session-level operations open while a secondary factor is still pending (api-reference §8.2). */
const PARTIAL = new Set([
  'getCurrentAPISession', 'deleteCurrentAPISession', 'authenticateMfa',
  'detailMfa', 'enrollMfa', 'verifyMfa', 'detailMfaQrCode',
]);

/**
 * Expensive operations go through a bounded queue (src/auth/limiter.ts): logins and code checks
 * through `auth`, signing/hashing/rendering through `heavy`. A full queue answers 429 RATE_LIMITED.
 */
export const RATE_LIMITED: Record<string, LimitKind> = {
  authenticate: 'auth', authenticateMfa: 'auth', verifyMfa: 'auth', createTotpToken: 'auth', deleteMfa: 'auth',
  detailMfaRecoveryCodes: 'auth', createMfaRecoveryCodes: 'auth',
  detailMfaQrCode: 'heavy', enrollMfa: 'heavy',
  createAuthenticator: 'heavy', updateAuthenticator: 'heavy', patchAuthenticator: 'heavy',
  updateCurrentIdentityAuthenticator: 'heavy', patchCurrentIdentityAuthenticator: 'heavy',
  enroll: 'heavy', enrollCa: 'heavy', enrollOtt: 'heavy', enrollOttCa: 'heavy', enrollUpdb: 'heavy', enrollErOtt: 'heavy',
  enrollToken: 'heavy', extendRouterEnrollment: 'heavy', enrollmentChallenge: 'heavy',
  extendCurrentIdentityAuthenticator: 'heavy', extendVerifyCurrentIdentityAuthenticator: 'heavy',
  createCurrentApiSessionCertificate: 'heavy',
};

/**
 * The permission an admin-level Management operation needs (semantics §14): undefined = admins
 * only. The family is what the path exposes (its last literal segment with a family:
 * `identities/{id}/edge-routers` → `router`); reads of sub-lists are reads; a POST action on an
 * existing entity (`cas/{id}/verify`, `enrollments/{id}/refresh`) changes it: `update`.
 */
export function permissionFor(op: { operationId: string; path: string }, method: HttpMethod): Permission | undefined {
  if (AUTHENTICATOR_READS.has(op.operationId)) return { family: 'authenticator', action: 'read' };
  if (ADMIN_ONLY.has(op.operationId)) return undefined;
  if (IDENTITY_UPDATES.has(op.operationId)) return { family: 'identity', action: 'update' };
  if (op.operationId === 'getIdentityPolicyAdvice') return { family: 'service', action: 'read' };
  const literal = op.path.split('/').filter((s) => s && !s.startsWith('{'));
  for (let i = literal.length - 1; i >= 0; i--) {
    const family = FAMILY_BY_SEGMENT[literal[i]];
    if (!family) continue;
    if (method === 'get' || i > 0) return { family, action: 'read' };
    if (method === 'post' && literal.length > 1 && op.path.includes('{')) return { family, action: 'update' };
    return { family, action: ACTION[method] };
  }
  return undefined;
}

function authFor(op: UpstreamOp): AuthLevel {
  if (!op.secured) return 'none';
  if (PARTIAL.has(op.operationId)) return 'partial';
  if (ANY_SESSION.has(op.operationId)) return 'session';
  if (op.api === 'client') return 'session';
  if (op.path.startsWith('/current-')) return 'session';
  return 'admin';
}

function specOf(api: ApiName, op: UpstreamOp) {
  return upstreamDocument(api).paths[op.path][op.method.toLowerCase()];
}

export function buildOperations(reg: Registry): Op[] {
  const ops: Op[] = [];
  const shared: Record<string, Handler | undefined> = {
    ...metaHandlers(() => ops),
    ...sessionHandlers(reg),
  };
  const management: Record<string, Handler | undefined> = {
    ...Object.assign({}, ...[...RESOURCES, ...ALIASES].map((def) => standardHandlers(reg, def))),
    ...adminHandlers(reg),
  };
  // Handler modules of the later issues: `<api>:<operationId>` or a bare operationId (both APIs).
  const special: Record<string, Handler | undefined> = {
    ...policyHandlers(reg),
    ...enrollHandlers(reg),
    ...authHandlers(reg),
    ...opsHandlers(reg),
    ...dataHandlers(reg),
  };
  for (const api of ['client', 'management'] as const) {
    for (const u of upstreamOperations(api)) {
      const key = `${api}:${u.operationId}`;
      const method = u.method.toLowerCase() as HttpMethod;
      const handler: Handler | undefined =
        special[key] ??
        special[u.operationId] ??
        management[key] ??
        shared[u.operationId] ??
        // The caller's own resources (`/current-…`) are served alike on both APIs.
        (api === 'management' || u.path.startsWith('/current-') ? management[u.operationId] : undefined);
      if (!handler) throw new Error(`operation ${key} has no handler`);
      const limit = RATE_LIMITED[u.operationId];
      const run: Handler = limit ? (ctx) => ctx.app.auth.limits[limit].run(() => handler(ctx)) : handler;
      const auth = authFor(u);
      ops.push({
        api,
        method,
        path: u.path,
        operationId: u.operationId,
        auth,
        permission: auth === 'admin' ? permissionFor(u, method) : undefined,
        spec: specOf(api, u),
        bodyDefinition: u.bodyDefinition,
        bodyIsArray: u.bodyIsArray,
        bodyRequired: OPTIONAL_BODY.has(u.operationId) ? false : u.bodyRequired,
        bodySchema: RAW_BODY.has(u.operationId) ? undefined : u.bodySchema,
        handler: run,
      });
    }
  }
  return ops;
}
