/**
 * The families that decide how identities prove who they are: auth policies, external JWT
 * signers, certificate authorities, authenticators and API-session certificates. The login flows
 * that read them are in src/auth; enrollment and CA verification in src/managers/enrollments.ts and issuing.ts.
 */
import crypto from 'node:crypto';
import { ApiError, errors } from '../core/errors.js';
import { parseCert } from '../pki/certs.js';
import type { AuthPolicyRecord, Rec, Tx } from '../store/store.js';
import { crud, type ResourceDef } from './types.js';
import { ApiSessions } from '../auth/api-sessions.js';

export const DEFAULT_AUTH_POLICY_ID = 'default';

export function defaultAuthPolicy(now = Date.now()): AuthPolicyRecord {
  return {
    id: DEFAULT_AUTH_POLICY_ID,
    createdAt: now,
    updatedAt: now,
    tags: {},
    isSystem: false,
    name: 'Default',
    primary: {
      cert: { allowed: true, allowExpiredCerts: true },
      extJwt: { allowed: true, allowedSigners: [] },
      updb: {
        allowed: true,
        minPasswordLength: 5,
        maxAttempts: 0,
        lockoutDurationMinutes: 0,
        requireMixedCase: false,
        requireNumberChar: false,
        requireSpecialChar: false,
      },
    },
    secondary: { requireTotp: false, requireExtJwtSigner: null },
  };
}

/** Unknown signer ids are a 404, not a field error. */
function checkSigners(tx: Tx, rec: AuthPolicyRecord) {
  const allowed = rec.primary?.extJwt?.allowedSigners ?? [];
  for (const id of allowed) if (!tx.exists('externalJwtSigners', id)) throw errors.notFound('external-jwt-signer', String(id));
  const second = rec.secondary?.requireExtJwtSigner;
  if (second !== undefined && second !== null && !tx.exists('externalJwtSigners', second)) throw errors.notFound('external-jwt-signer', String(second));
  if (rec.primary?.extJwt) rec.primary.extJwt.allowedSigners = [...new Set(allowed as string[])];
  if (rec.secondary && rec.secondary.requireExtJwtSigner === undefined) rec.secondary.requireExtJwtSigner = null;
}

/**
 * Deep-merge a PATCH body into the stored value: objects merge, everything else replaces. The
 * patch was validated against the schema the stored value has, so the merge has its type.
 */
function merge<T>(base: T, patch: unknown): T {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch) || base === null || typeof base !== 'object') return patch as T;
  const out: Record<string, unknown> = { ...(base as object) };
  for (const [k, v] of Object.entries(patch)) out[k] = v === undefined ? out[k] : merge(out[k], v);
  return out as T;
}

export const authPolicies: ResourceDef<'authPolicies'> = {
  collection: 'authPolicies',
  path: 'auth-policies',
  family: 'auth-policy',
  operations: crud('AuthPolicy', 'AuthPolicies'),
  fields: {
    name: { unique: true, filter: 'string', nullKeeps: true },
    primary: { nullKeeps: true },
    secondary: { nullKeeps: true },
  },
  prepare(rec, { mode, before, body }) {
    if (mode === 'patch') {
      if (body?.primary) rec.primary = merge(before!.primary, body.primary);
      if (body?.secondary) rec.secondary = merge(before!.secondary, body.secondary);
    }
    const d = defaultAuthPolicy();
    rec.primary = merge(d.primary, rec.primary ?? {});
    rec.secondary = merge(d.secondary, rec.secondary ?? {});
    // Out-of-range numbers mean "the default": unlimited attempts, the minimum length, locked indefinitely.
    const updb = rec.primary.updb;
    if (!(updb.maxAttempts >= 0)) updb.maxAttempts = 0;
    if (!(updb.minPasswordLength >= 5)) updb.minPasswordLength = 5;
    if (!(updb.lockoutDurationMinutes >= 0)) updb.lockoutDurationMinutes = 0;
  },
  afterWrite(rec, { tx }) {
    checkSigners(tx, rec);
    tx.put('authPolicies', rec);
  },
  beforeDelete(rec, { tx }) {
    // Signers that enroll new identities under this policy keep it alive too (identities are a `restrict` ref).
    const users = [...tx.scan('externalJwtSigners')].filter((s) => s.enrollAuthPolicyId === rec.id).map((s) => s.id);
    if (users.length) throw errors.referenced('id', `entity type auth-policies referenced by external-jwt-signers: [${users.join(', ')}]`, rec.id);
  },
  protect(rec, mode) {
    if (mode === 'delete' && rec.id === DEFAULT_AUTH_POLICY_ID)
      throw new ApiError('CAN_NOT_DELETE_REFERENCED_ENTITY', 'the default auth policy is the system default and can not be deleted');
  },
};

export const externalJwtSigners: ResourceDef<'externalJwtSigners'> = {
  collection: 'externalJwtSigners',
  path: 'external-jwt-signers',
  family: 'external-jwt-signer',
  operations: crud('ExternalJwtSigner', 'ExternalJwtSigners'),
  fields: {
    name: { unique: true, filter: 'string', nullKeeps: true },
    issuer: { unique: true, filter: 'string', nullKeeps: true },
    audience: { filter: 'string' },
    certPem: {},
    jwksEndpoint: {},
    kid: { filter: 'string', unique: true },
    enabled: { filter: 'bool', nullKeeps: true, default: () => true },
    claimsProperty: { default: () => 'sub' },
    useExternalId: { default: () => false },
    externalAuthUrl: { filter: 'string' },
    clientId: {},
    scopes: { default: () => [] },
    targetToken: { default: () => 'ACCESS' },
    enrollToCertEnabled: { default: () => false },
    enrollToTokenEnabled: { default: () => false },
    enrollNameClaimsSelector: { default: () => '' },
    enrollAttributeClaimsSelector: { default: () => '' },
    enrollAuthPolicyId: { default: () => '', optional: true },
    fingerprint: { readOnly: true, unique: true },
    commonName: { readOnly: true },
    notBefore: { readOnly: true, datetime: true },
    notAfter: { readOnly: true, datetime: true },
  },
  prepare(rec, { tx }) {
    const hasCert = typeof rec.certPem === 'string' && rec.certPem.trim() !== '';
    const hasJwks = typeof rec.jwksEndpoint === 'string' && rec.jwksEndpoint.trim() !== '';
    if (hasCert === hasJwks) throw errors.field('certPem', 'exactly one of certPem and jwksEndpoint must be provided', rec.certPem ?? null);
    if (rec.audience === '') throw errors.field('audience', 'audience must be at least 1 character long', rec.audience);
    if (hasCert) {
      const info = parseCert(rec.certPem!, 'certPem');
      const holder = tx.findUnique('externalJwtSigners', 'fingerprint', info.fingerprint);
      if (holder && holder.id !== rec.id) throw errors.field('certPem', 'the certificate is already used by another external jwt signer', info.fingerprint);
      rec.fingerprint = info.fingerprint;
      rec.commonName = info.commonName;
      rec.notBefore = info.notBefore;
      rec.notAfter = info.notAfter;
      rec.jwksEndpoint = undefined;
      // The kid is how tokens pick this certificate (required with a certificate).
      if (typeof rec.kid !== 'string' || rec.kid.trim() === '') throw errors.field('kid', 'kid is required when certPem is provided', rec.kid ?? null);
    } else {
      if (!/^https?:\/\/[^\s]+$/i.test(rec.jwksEndpoint!)) throw errors.field('jwksEndpoint', 'must be an http(s) URL', rec.jwksEndpoint);
      for (const k of ['certPem', 'fingerprint', 'commonName', 'notBefore', 'notAfter'] as const) rec[k] = undefined;
    }
    if (rec.enrollAuthPolicyId && !tx.exists('authPolicies', rec.enrollAuthPolicyId))
      throw errors.field('enrollAuthPolicyId', 'no auth policy found with the given id', rec.enrollAuthPolicyId);
    const t = rec.targetToken;
    if (t !== null && t !== 'ACCESS' && t !== 'ID') throw errors.field('targetToken', 'must be one of ACCESS, ID', t);
  },
  beforeDelete(rec, { tx }) {
    const users: string[] = [];
    for (const p of tx.scan('authPolicies')) {
      if ((p.primary?.extJwt?.allowedSigners ?? []).includes(rec.id) || p.secondary?.requireExtJwtSigner === rec.id) users.push(p.id);
    }
    if (users.length) throw errors.referenced('id', `entity type external-jwt-signers referenced by auth-policies: [${users.join(', ')}]`, rec.id);
  },
  render(rec) {
    // Required, non-nullable strings on the wire even for JWKS signers: empty, and Go's zero time.
    const zero = '0001-01-01T00:00:00.000Z';
    return {
      certPem: rec.certPem ?? null,
      jwksEndpoint: rec.jwksEndpoint ?? null,
      fingerprint: rec.fingerprint ?? '',
      kid: rec.kid ?? '',
      commonName: rec.commonName ?? '',
      notBefore: rec.notBefore ? new Date(rec.notBefore).toISOString() : zero,
      notAfter: rec.notAfter ? new Date(rec.notAfter).toISOString() : zero,
      // Required URL: without one of its own, the issuer (an IdP's issuer is its base URL).
      externalAuthUrl: rec.externalAuthUrl ?? (/^https?:\/\/\S+$/i.test(rec.issuer ?? '') ? rec.issuer : ''),
      clientId: rec.clientId ?? '',
      audience: rec.audience ?? null,
    };
  },
};

/** `externalIdClaim`: a location is required, and the SCHEME matcher only reads SAN URIs. */
function checkExternalIdClaim(c: Record<string, unknown> | null | undefined) {
  if (c === null || c === undefined) return;
  const enums: Record<string, string[]> = {
    location: ['COMMON_NAME', 'SAN_URI', 'SAN_EMAIL'],
    matcher: ['ALL', 'PREFIX', 'SUFFIX', 'SCHEME'],
    parser: ['NONE', 'SPLIT'],
  };
  if (!c.location) throw errors.field('externalIdClaim.location', 'location is required', c.location ?? null);
  for (const [k, values] of Object.entries(enums)) {
    const v = c[k];
    if (v !== undefined && v !== null && !(typeof v === 'string' && values.includes(v))) throw errors.field(`externalIdClaim.${k}`, `must be one of ${values.join(', ')}`, v);
  }
  if (c.matcher === 'SCHEME' && c.location !== 'SAN_URI') throw errors.field('externalIdClaim.matcher', 'the SCHEME matcher requires the SAN_URI location', c.matcher);
  if (c.index !== undefined && c.index !== null && (typeof c.index !== 'number' || !Number.isInteger(c.index) || c.index < 0)) throw errors.field('externalIdClaim.index', 'must be a non-negative integer', c.index);
}

export const cas: ResourceDef<'cas'> = {
  collection: 'cas',
  path: 'cas',
  family: 'ca',
  operations: crud('Ca', 'Cas'),
  fields: {
    name: { unique: true, filter: 'string', nullKeeps: true },
    certPem: { immutable: true },
    fingerprint: { readOnly: true, unique: true, filter: 'string' },
    identityRoles: { attributes: true },
    identityNameFormat: { default: () => '[caName]-[commonName]' },
    isAutoCaEnrollmentEnabled: { filter: 'bool', nullKeeps: true, default: () => false },
    isOttCaEnrollmentEnabled: { filter: 'bool', nullKeeps: true, default: () => false },
    isAuthEnabled: { filter: 'bool', nullKeeps: true, default: () => false },
    externalIdClaim: { default: () => null, optional: true },
    isVerified: { readOnly: true, filter: 'bool' },
    verificationToken: { readOnly: true, filter: 'string' },
  },
  prepare(rec, { mode, before, body, tx }) {
    if (mode === 'create') {
      const info = parseCert(rec.certPem, 'certPem');
      if (!info.isCa) throw new ApiError('CERTIFICATE_IS_NOT_CA', 'the certificate is not a CA certificate', { field: 'certPem', reason: 'the certificate is not a CA certificate', value: info.fingerprint });
      const sameName = tx.findUnique('cas', 'name', rec.name);
      if (sameName) throw errors.field('name', `duplicate value '${rec.name}' in unique index on cas store`, rec.name);
      if (tx.findUnique('cas', 'fingerprint', info.fingerprint)) throw errors.field('certPem', 'certificate already used as CA', info.fingerprint);
      rec.fingerprint = info.fingerprint;
      rec.isVerified = false;
      rec.verificationToken = crypto.randomUUID();
    }
    if (mode === 'patch' && body?.externalIdClaim && before!.externalIdClaim) rec.externalIdClaim = { ...before!.externalIdClaim, ...body.externalIdClaim };
    // An update that empties the format would leave auto-enrolled identities without a name rule.
    const format = body?.identityNameFormat;
    if (mode !== 'create' && typeof format === 'string' && format.trim() === '') throw errors.field('identityNameFormat', 'must not be empty', format);
    if (rec.identityNameFormat === '' || rec.identityNameFormat === null) rec.identityNameFormat = '[caName]-[commonName]';
    checkExternalIdClaim(rec.externalIdClaim);
  },
};

/**
 * Ephemeral certificates of an API session (`/current-api-session/certificates`): issued from a
 * CSR, short-lived, deleted with their API session. Served by src/api/handlers/enroll.ts.
 */
export const apiSessionCertificates: ResourceDef<'apiSessionCertificates'> = {
  collection: 'apiSessionCertificates',
  path: 'current-api-session/certificates',
  family: 'ops',
  operations: {},
  fields: {
    apiSessionId: { readOnly: true, hidden: true, ref: { collection: 'apiSessions', onDelete: 'cascade' } },
    identityId: { readOnly: true, hidden: true, index: true },
    certificate: { readOnly: true },
    fingerprint: { readOnly: true, unique: true, filter: 'string' },
    subject: { readOnly: true, filter: 'string' },
    validFrom: { readOnly: true, datetime: true, filter: 'datetime' },
    validTo: { readOnly: true, datetime: true, filter: 'datetime' },
  },
};

export const authenticators: ResourceDef<'authenticators'> = {
  collection: 'authenticators',
  path: 'authenticators',
  family: 'identity',
  // Writes (create, update, patch: src/api/handlers/authenticators.ts) are for full admins alone; reads for
  // admins and `admin_readonly` (`authenticator` is no grantable family).
  operations: { list: 'listAuthenticators', detail: 'detailAuthenticator', delete: 'deleteAuthenticator' },
  permissions: { list: { family: 'authenticator', action: 'read' }, detail: { family: 'authenticator', action: 'read' }, delete: null },
  owner: 'identityId',
  fields: {
    method: { readOnly: true, filter: 'string' },
    identityId: { readOnly: true, filter: 'string', ref: { collection: 'identities', onDelete: 'cascade', entityRef: 'identity' } },
    username: { readOnly: true, unique: true, filter: 'string', optional: true },
    fingerprint: { readOnly: true, unique: true, filter: 'string', optional: true },
    certPem: { readOnly: true, optional: true },
    isIssuedByNetwork: { readOnly: true, optional: true },
    isExtendRequested: { readOnly: true, optional: true },
    isKeyRollRequested: { readOnly: true, optional: true },
    extendRequestedAt: { readOnly: true, datetime: true, optional: true },
    lastAuthResolvedToRoot: { readOnly: true, optional: true },
    lastExtendRolledKeys: { readOnly: true, optional: true },
    passwordHash: { readOnly: true, hidden: true },
    /** Cert authenticators from a third-party CA (ottca, CA auto-enrollment): deleting the CA deletes them. */
    caId: { readOnly: true, hidden: true, ref: { collection: 'cas', onDelete: 'cascade' } },
    /** notAfter of `certPem` (epoch ms), so certificate login never parses the PEM. */
    certNotAfter: { readOnly: true, hidden: true },
    /** Extension issued but not yet verified: the new certificate and its fingerprint. */
    pendingCertPem: { readOnly: true, hidden: true },
    pendingFingerprint: { readOnly: true, hidden: true },
  },
  // The API sessions opened with an authenticator end with it (their tokens are refused at once).
  beforeDelete(rec, { tx }) {
    ApiSessions.deleteInTx(tx, tx.idsByIndex('apiSessions', 'identityId', rec.identityId).filter((id) => tx.get('apiSessions', id)?.authenticatorId === rec.id));
  },
  symbols: {
    identity: { type: 'string', get: (r: Rec) => r.identityId },
    certFingerprint: { type: 'string', get: (r: Rec) => r.fingerprint },
    updbUsername: { type: 'string', get: (r: Rec) => r.username },
  },
};
