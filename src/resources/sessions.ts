/** API sessions (logins) and sessions (service dials/binds), management list/detail/delete. */
import type { Rec } from '../store/store.js';
import { iso } from './render.js';
import type { ResourceDef } from './types.js';
import { sessionEdgeRouters } from '../policy/router-view.js';

export const apiSessions: ResourceDef<'apiSessions'> = {
  collection: 'apiSessions',
  path: 'api-sessions',
  family: 'ops',
  operations: { list: 'listAPISessions', detail: 'detailAPISessions', delete: 'deleteAPISessions' },
  owner: 'identityId',
  links: ['sessions'],
  fields: {
    // Tokens are random secrets: an LMDB index of them would put every write on a random page.
    // They are looked up in memory (ApiSessions.byToken, PolicyEngine.sessionOfToken) instead.
    token: { readOnly: true, filter: 'string', secret: true },
    identityId: { readOnly: true, filter: 'string', ref: { collection: 'identities', onDelete: 'cascade', entityRef: 'identity' } },
    authenticatorId: { readOnly: true, filter: 'string' },
    ipAddress: { readOnly: true, filter: 'string' },
    configTypes: { readOnly: true },
    isMfaRequired: { readOnly: true, filter: 'bool' },
    isMfaComplete: { readOnly: true, filter: 'bool' },
    isCertExtendable: { readOnly: true },
    isCertExtendRequested: { readOnly: true },
    isCertKeyRollRequested: { readOnly: true },
    improperClientCertChain: { readOnly: true, filter: 'bool' },
    lastActivityAt: { readOnly: true, datetime: true, filter: 'datetime' },
  },
  symbols: {
    identity: { type: 'string', get: (r: Rec) => r.identityId },
    authenticator: { type: 'string', get: (r: Rec) => r.authenticatorId },
    mfaComplete: { type: 'bool', get: (r: Rec) => r.isMfaComplete === true },
    mfaRequired: { type: 'bool', get: (r: Rec) => r.isMfaRequired === true },
  },
  render(rec) {
    return {
      authQueries: [],
      configTypes: rec.configTypes ?? [],
      isCertExtendable: rec.isCertExtendable === true,
      isCertExtendRequested: rec.isCertExtendRequested === true,
      isCertKeyRollRequested: rec.isCertKeyRollRequested === true,
      improperClientCertChain: rec.improperClientCertChain === true,
      cachedLastActivityAt: iso(rec.lastActivityAt),
    };
  },
};

export const sessions: ResourceDef<'sessions'> = {
  collection: 'sessions',
  path: 'sessions',
  family: 'ops',
  // List and detail hide sessions whose removal is committing (src/api/handlers/policy-client.ts).
  operations: { delete: 'deleteSession' },
  owner: 'identityId',
  // Created at request rates, read by these fields only on a cascade or a filtered list: an LMDB
  // index per reference cost each create three B-tree updates in its commit (docs/benchmarks.md).
  indexesInMemory: true,
  links: ['route-path'],
  fields: {
    token: { readOnly: true, filter: 'string', secret: true },
    type: { readOnly: true, filter: 'string' },
    apiSessionId: { readOnly: true, filter: 'string', ref: { collection: 'apiSessions', onDelete: 'cascade', entityRef: 'apiSession' } },
    serviceId: { readOnly: true, filter: 'string', ref: { collection: 'services', onDelete: 'cascade', entityRef: 'service' } },
    identityId: { readOnly: true, filter: 'string', ref: { collection: 'identities', onDelete: 'cascade' } },
    servicePolicyIds: { readOnly: true, hidden: true },
  },
  symbols: {
    apiSession: { type: 'string', get: (r: Rec) => r.apiSessionId },
    service: { type: 'string', get: (r: Rec) => r.serviceId },
  },
  render(rec, { store, ctx }) {
    return {
      // Nothing of a session's token is stored (it is a signed JWT naming the session): the create
      // answer carries it, lists and details show an empty string in its place.
      token: '',
      // API sessions have no name: upstream renders their entityRef with name "" (ToEntityRef("", ...)),
      // and entityRef.name is a plain string in the spec, so never null while the API session exists.
      apiSession: store.has('apiSessions', rec.apiSessionId as string)
        ? { _links: { self: { href: `./api-sessions/${rec.apiSessionId}` } }, entity: 'api-sessions', id: rec.apiSessionId, name: '' }
        : null,
      // Connected routers both the identity's and the service's policies allow (live, not stored).
      edgeRouters: ctx ? sessionEdgeRouters(ctx.app, rec.identityId, rec.serviceId) : [],
      // The granting policies are a management detail (sessionManagementDetail).
      servicePolicies: (ctx?.op.api === 'client' ? [] : ((rec.servicePolicyIds as string[]) ?? [])).map((id) => ({
        _links: { self: { href: `./service-policies/${id}` } },
        entity: 'service-policies',
        id,
        name: store.nameOf('servicePolicies', id) ?? null,
      })),
    };
  },
};

export const controllerSettings: ResourceDef<'controllerSettings'> = {
  collection: 'controllerSettings',
  path: 'controller-settings',
  family: 'ops',
  operations: { list: 'listControllerSettings', detail: 'detailControllerSetting' },
  fields: {
    oidc: {},
  },
};
