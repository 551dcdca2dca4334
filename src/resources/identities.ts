/** Identities and identity types. */
import type { ManagementIdentityCreate } from '../core/bodies.js';
import { errors } from '../core/errors.js';
import { ALL_PERMISSIONS, dominates } from '../auth/permissions.js';
import { isDisabledAt } from '../auth/login-policy.js';
import type { IdentityRecord, Rec, Tx } from '../store/store.js';
import { crud, type ResourceDef, type View } from './types.js';
import { enrollmentKeysOf, enrollmentSecrets, newEnrollment, putNewEnrollment, type EnrollmentSpec } from './enrollments.js';

export const IDENTITY_TYPES = ['Default', 'Router'] as const;

export const identities: ResourceDef<'identities'> = {
  collection: 'identities',
  path: 'identities',
  family: 'identity',
  operations: crud('Identity', 'Identities'),
  // Non-admin identity managers may only PATCH: a PUT could reset `isAdmin` and `permissions`.
  permissions: { update: null },
  owner: 'id',
  rendersSecrets: true,
  links: [
    'edge-router-policies', 'edge-routers', 'service-policies', 'services', 'posture-data',
    'failed-service-requests', 'authenticators', 'enrollments', 'service-configs',
  ],
  fields: {
    name: { unique: true, filter: 'string', nullKeeps: true },
    typeId: { readOnly: true, filter: 'string' },
    isAdmin: { filter: 'bool', nullKeeps: true, default: () => false },
    isDefaultAdmin: { readOnly: true, filter: 'bool' },
    roleAttributes: { attributes: true, filter: 'set' },
    authPolicyId: {
      filter: 'string',
      default: () => 'default',
      ref: { collection: 'authPolicies', onDelete: 'restrict', entityRef: 'authPolicy' },
    },
    externalId: { unique: true, filter: 'string', nullClears: true },
    defaultHostingCost: { default: () => 0 },
    defaultHostingPrecedence: { default: () => 'default' },
    serviceHostingCosts: { default: () => ({}) },
    serviceHostingPrecedences: { default: () => ({}) },
    // Upstream renders an unset appData as `{}`; strict clients refuse `null`.
    appData: { default: () => ({}) },
    permissions: {},
    envInfo: { readOnly: true },
    sdkInfo: { readOnly: true },
    disabledAt: { readOnly: true, datetime: true },
    disabledUntil: { readOnly: true, datetime: true },
    /** Set for the identity that stands for a tunneler-enabled edge router. */
    edgeRouterId: { readOnly: true, index: true, hidden: true },
    /** Per-identity service config overrides: [{serviceId, configId}]. */
    serviceConfigs: { readOnly: true, hidden: true },
    /** The config ids of `serviceConfigs`, indexed so a config delete finds its overrides. */
    overrideConfigIds: { readOnly: true, hidden: true, index: true },
    mfa: { readOnly: true, hidden: true },
    trace: { readOnly: true, hidden: true },
    /** `trace.until` of an enabled trace, indexed so a start reads only the traced identities (src/control/traces.ts). */
    traceUntil: { readOnly: true, hidden: true, index: true },
  },
  symbols: {
    type: { type: 'string', get: (r: Rec) => r.typeId },
    disabled: { type: 'bool', get: (r: Rec) => isDisabled(r) },
  },
  prepare(rec, { mode, body, before, tx, writer }) {
    rec.typeId = before?.typeId ?? (body?.type === 'Router' ? 'Router' : 'Default');
    if (rec.isDefaultAdmin === undefined) rec.isDefaultAdmin = false;
    if (rec.permissions !== undefined && rec.permissions !== null) {
      const perms = [...new Set(rec.permissions as string[])];
      for (const p of perms) if (!ALL_PERMISSIONS.has(p)) throw errors.field('permissions', `unknown permission ${p}`, p);
      rec.permissions = perms.length ? perms.sort() : undefined;
    }
    // Containment (docs/auth.md): the router checked the identity as it was (`reaches`); as this
    // write leaves it, it must be one the caller dominates too, so no caller gives `isAdmin` or a
    // permission it lacks. (Identities made by signer or CA enrollment are written directly, not here.)
    if (writer.identity && !dominates(writer.identity, rec)) throw errors.unauthorized();
    if (before?.edgeRouterId && rec.name !== before.name) throw errors.field('name', 'the name of a router identity can not be changed', rec.name);
    for (const field of ['serviceHostingCosts', 'serviceHostingPrecedences'] as const) checkServiceKeys(tx, field, rec[field], before?.[field]);
    if (mode === 'create' && body?.enrollment) {
      const e = body.enrollment as { ott?: boolean; ottca?: string; updb?: string };
      const kinds = [e.ott ? 'ott' : undefined, e.ottca ? 'ottca' : undefined, e.updb ? 'updb' : undefined].filter(Boolean);
      if (kinds.length > 1) throw errors.field('enrollment', 'only one of ott, ottca and updb may be given', e);
      if (e.ottca !== undefined && e.ottca !== null && (typeof e.ottca !== 'string' || !tx.exists('cas', e.ottca)))
        throw errors.field('enrollment.ottca', 'no ca found with the given id', e.ottca);
      if (e.updb !== undefined && e.updb !== null && (typeof e.updb !== 'string' || e.updb.length === 0))
        throw errors.field('enrollment.updb', 'must be a non-empty username', e.updb);
    }
  },
  // The enrollment asked for in the create body is signed and sealed before the write and put in
  // the same write as the identity.
  beforeCreate(id, body, writer) {
    const spec = enrollmentSpec(id, body);
    return spec && newEnrollment(enrollmentKeysOf(writer), spec);
  },
  afterWrite(rec, wctx) {
    const spec = wctx.mode === 'create' ? enrollmentSpec(rec.id, wctx.body) : undefined;
    if (spec) putNewEnrollment(wctx, spec);
  },
  protect(rec, mode) {
    if (mode !== 'delete') return;
    if (rec.isDefaultAdmin) throw errors.cannotDelete('the default admin identity can not be deleted');
    if (rec.edgeRouterId) throw errors.cannotDelete('a router identity is deleted with its edge router');
  },
  render(rec, view, secrets) {
    // Records written without it (older data, the identities of tunneler-enabled routers).
    return { appData: rec.appData ?? {}, ...renderIdentityExtras(rec, view, secrets) };
  },
  // What renderIdentityExtras reads besides the record; `disabled` turns false when disabledUntil passes.
  renderCache: {
    byField: [['authenticators', 'identityId'], ['enrollments', 'identityId'], ['apiSessions', 'identityId']],
    any: ['authPolicies', 'cas'],
    cacheable: (rec) => rec.disabledUntil === undefined || rec.disabledUntil === null,
  },
};

/** The enrollment a create body asks for (`enrollment: {ott: true}`, `{ottca: caId}` or `{updb: username}`). */
export function enrollmentSpec(identityId: string, body: unknown): EnrollmentSpec | undefined {
  // The router validated it as the create body (identityCreate).
  const e = (body as Pick<ManagementIdentityCreate, 'enrollment'> | undefined)?.enrollment;
  if (e?.ott) return { method: 'ott', identityId };
  if (e?.ottca) return { method: 'ottca', identityId, caId: e.ottca };
  if (e?.updb) return { method: 'updb', identityId, username: e.updb };
  return undefined;
}

/**
 * A hosting cost or precedence is keyed by service id: a key that names no service is refused.
 * Keys the record already had are let through, so a PUT that sends back what a GET showed still
 * works after one of those services was deleted.
 */
function checkServiceKeys(tx: Tx, field: string, map: unknown, before: unknown) {
  if (!map || typeof map !== 'object') return;
  const had = before && typeof before === 'object' ? (before as Record<string, unknown>) : {};
  for (const key of Object.keys(map)) {
    if (!Object.prototype.hasOwnProperty.call(had, key) && !tx.exists('services', key)) throw errors.field(`${field}.${key}`, `${field} names no service with the id ${key}`, key);
  }
}

/** Disabled now: `disabledAt` set and `disabledUntil` null or in the future (src/auth/disable.ts). */
export const isDisabled = isDisabledAt;

/** `secrets`: whether pending enrollment tokens and JWTs are shown (render.ts readsSecrets). */
function renderIdentityExtras(rec: IdentityRecord, { store }: View, secrets: boolean): Record<string, unknown> {
  const authenticators: Record<string, unknown> = {};
  for (const id of store.idsByIndex('authenticators', 'identityId', rec.id)) {
    const a = store.get('authenticators', id);
    if (a?.method === 'cert') authenticators.cert = { id: a.id, fingerprint: a.fingerprint };
    else if (a?.method === 'updb') authenticators.updb = { id: a.id, username: a.username };
  }
  const enrollment: Record<string, unknown> = {};
  for (const id of store.idsByIndex('enrollments', 'identityId', rec.id)) {
    const e = store.get('enrollments', id);
    if (!e) continue;
    const base = { id: e.id, ...enrollmentSecrets(store, e, secrets), expiresAt: new Date(e.expiresAt).toISOString() };
    if (e.method === 'ottca') {
      const ca = e.caId ? store.get('cas', e.caId) : undefined;
      enrollment.ottca = { ...base, caId: e.caId, ca: ca ? { _links: { self: { href: `./cas/${ca.id}` } }, entity: 'cas', id: ca.id, name: ca.name } : null };
    } else enrollment[e.method] = base;
  }
  const disabled = isDisabled(rec);
  return {
    type: { _links: { self: { href: `./identity-types/${rec.typeId}` } }, entity: 'identity-types', id: rec.typeId, name: rec.typeId },
    authenticators,
    enrollment,
    envInfo: rec.envInfo ?? {},
    sdkInfo: rec.sdkInfo ?? {},
    hasApiSession: store.anyByIndex('apiSessions', 'identityId', rec.id),
    isMfaEnabled: rec.mfa?.isVerified === true,
    hasEdgeRouterConnection: false,
    edgeRouterConnectionStatus: 'offline',
    disabled,
    disabledAt: disabled ? new Date(rec.disabledAt!).toISOString() : null,
    disabledUntil: disabled && rec.disabledUntil ? new Date(rec.disabledUntil).toISOString() : null,
    isDefaultAdmin: rec.isDefaultAdmin === true,
  };
}
