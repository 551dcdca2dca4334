/** Service policies, edge router policies and service edge router policies. */
import { errors } from '../core/errors.js';
import type { Rec } from '../store/store.js';
import { crud, type FieldDef, type ResourceDef } from './types.js';

const name: FieldDef = { unique: true, filter: 'string', nullKeeps: true };
const semantic: FieldDef = { filter: 'string', default: () => 'AllOf' };

/** Semantic is compared case-insensitively upstream; we store the canonical spelling. */
function normalizeSemantic(rec: Rec) {
  const s = String(rec.semantic ?? 'AllOf').toLowerCase();
  if (s !== 'allof' && s !== 'anyof') throw errors.field('semantic', 'must be one of AllOf, AnyOf', rec.semantic);
  rec.semantic = s === 'allof' ? 'AllOf' : 'AnyOf';
}

export const servicePolicies: ResourceDef<'servicePolicies'> = {
  collection: 'servicePolicies',
  path: 'service-policies',
  family: 'service-policy',
  operations: crud('ServicePolicy', 'ServicePolicies'),
  links: ['services', 'identities', 'posture-checks'],
  fields: {
    name,
    type: { nullKeeps: true },
    semantic,
    identityRoles: { roles: 'identities', filter: 'set' },
    serviceRoles: { roles: 'services', filter: 'set' },
    postureCheckRoles: { roles: 'postureChecks', filter: 'set' },
  },
  // Stored as Dial=1, Bind=2 upstream, so filters say `type = 1`.
  symbols: { type: { type: 'number', get: (r: Rec) => (r.type === 'Dial' ? 1 : 2) } },
  prepare(rec) {
    normalizeSemantic(rec);
    if (rec.type !== 'Dial' && rec.type !== 'Bind') throw errors.field('type', 'must be one of Dial, Bind', rec.type);
  },
};

export const edgeRouterPolicies: ResourceDef<'edgeRouterPolicies'> = {
  collection: 'edgeRouterPolicies',
  path: 'edge-router-policies',
  family: 'edge-router-policy',
  operations: crud('EdgeRouterPolicy', 'EdgeRouterPolicies'),
  links: ['edge-routers', 'identities'],
  fields: {
    name,
    semantic,
    identityRoles: { roles: 'identities', filter: 'set' },
    edgeRouterRoles: { roles: 'edgeRouters', filter: 'set' },
    isSystem: { readOnly: true },
    /** The edge router a system policy belongs to. */
    systemFor: { readOnly: true, hidden: true, index: true },
  },
  prepare(rec) {
    normalizeSemantic(rec);
    rec.isSystem = rec.isSystem === true;
  },
  protect(rec, mode) {
    if (!rec.isSystem) return;
    if (mode === 'delete') throw errors.cannotDelete('system edge router policies are managed with their edge router');
    throw errors.cannotUpdate('system edge router policies are managed with their edge router');
  },
};

export const serviceEdgeRouterPolicies: ResourceDef<'serviceEdgeRouterPolicies'> = {
  collection: 'serviceEdgeRouterPolicies',
  path: 'service-edge-router-policies',
  family: 'service-edge-router-policy',
  operations: crud('ServiceEdgeRouterPolicy', 'ServiceEdgeRouterPolicies'),
  links: ['edge-routers', 'services'],
  fields: {
    name,
    semantic,
    serviceRoles: { roles: 'services', filter: 'set' },
    edgeRouterRoles: { roles: 'edgeRouters', filter: 'set' },
  },
  prepare(rec) {
    normalizeSemantic(rec);
  },
};
