/** Sub-lists that follow plain references: a config type's configs, a service's configs and terminators, … */
import type { Ctx, Entry, Handler } from '../context.js';
import { listRecords } from '../../resources/list.js';
import { mustGet, type Registry } from '../../resources/registry.js';
import type { Rec, CollectionName } from '../../store/store.js';

export function referenceListEntries(reg: Registry): Entry[] {
  const sub = (parent: CollectionName, child: CollectionName, where: (ctx: Ctx) => (r: Rec) => boolean, candidates?: (ctx: Ctx) => string[]): Handler => (ctx) => {
    mustGet(ctx.app.store, reg.def(parent), ctx.params.id);
    return listRecords(reg, reg.def(child), ctx, { where: where(ctx), candidates: candidates?.(ctx) });
  };

  return [
    { api: 'management', operationId: 'listConfigsForConfigType', auth: 'admin', permission: { family: 'config', action: 'read' },
      handler: sub('configTypes', 'configs', () => () => true, (ctx) => ctx.app.store.idsByIndex('configs', 'configTypeId', ctx.params.id)) },
    { api: 'management', operationId: 'listConfigServices', auth: 'admin', permission: { family: 'service', action: 'read' },
      handler: sub('configs', 'services', () => () => true, (ctx) => ctx.app.store.idsByIndex('services', 'configs', ctx.params.id)) },
    { api: 'management', operationId: 'listServiceConfig', auth: 'admin', permission: { family: 'config', action: 'read' },
      handler: sub('services', 'configs', () => () => true, (ctx) => ctx.app.store.get('services', ctx.params.id)?.configs ?? []) },
    { api: 'management', operationId: 'getIdentityAuthenticators', auth: 'admin', permission: { family: 'authenticator', action: 'read' },
      handler: sub('identities', 'authenticators', () => () => true, (ctx) => ctx.app.store.idsByIndex('authenticators', 'identityId', ctx.params.id)) },
    { api: 'management', operationId: 'getIdentityEnrollments', auth: 'admin', permission: { family: 'enrollment', action: 'read' },
      handler: sub('identities', 'enrollments', () => () => true, (ctx) => ctx.app.store.idsByIndex('enrollments', 'identityId', ctx.params.id)) },
    { api: 'management', operationId: 'listServiceTerminators', auth: 'admin', permission: { family: 'terminator', action: 'read' },
      handler: sub('services', 'terminators', () => () => true, (ctx) => ctx.app.store.idsByIndex('terminators', 'serviceId', ctx.params.id)) },
  ];
}
