/** Every resource family, in one list: the registry, store collections and standard operations come from it. */
import { Registry } from './registry.js';
import { identities } from './identities.js';
import { enrollments } from './enrollments.js';
import { services, configs, configTypes, terminators } from './services.js';
import { servicePolicies, edgeRouterPolicies, serviceEdgeRouterPolicies } from './policies.js';
import { postureChecks } from './posture.js';
import { edgeRouters, routers, transitRouters } from './routers.js';
import { authPolicies, externalJwtSigners, cas, authenticators, apiSessionCertificates } from './credentials.js';
import { apiSessions, sessions, controllerSettings } from './sessions.js';
import type { ResourceDef } from './types.js';

/** One definition per store collection. */
export const RESOURCES: ResourceDef[] = [
  identities, enrollments, authenticators, apiSessions, sessions,
  services, configs, configTypes, terminators,
  servicePolicies, edgeRouterPolicies, serviceEdgeRouterPolicies, postureChecks,
  edgeRouters, routers,
  authPolicies, externalJwtSigners, cas, controllerSettings, apiSessionCertificates,
];

/** Definitions that only add operations over a collection defined above. */
export const ALIASES: ResourceDef[] = [transitRouters];

export function createRegistry(): Registry {
  return new Registry(RESOURCES);
}
