/**
 * Authenticator operations: the writes (src/managers/authenticators.ts) and the caller's own
 * authenticators; their list, detail and delete are the family's standard operations.
 */
import type { Ctx, Entry } from '../context.js';
import { errors } from '../../core/errors.js';
import { created, empty, ok } from '../../core/envelope.js';
import { listRecords } from '../../resources/list.js';
import { mustGet, type Registry } from '../../resources/registry.js';
import { renderRecord } from '../../resources/render.js';

export function authenticatorEntries(reg: Registry): Entry[] {
  const authDef = reg.def('authenticators');
  const view = (ctx: Ctx) => ({ store: ctx.app.store, ctx });

  return [
    { api: 'management', operationId: 'createAuthenticator', auth: 'admin', permission: null, reaches: { from: 'body', field: 'identityId' }, limit: 'heavy',
      handler: async (ctx) => {
        const rec = await ctx.app.authenticators.create(ctx.body);
        return created(rec.id, `./authenticators/${rec.id}`);
      } },
    { api: 'management', operationId: 'updateAuthenticator', auth: 'admin', permission: null, reaches: { from: 'record', collection: 'authenticators', field: 'identityId' }, limit: 'heavy',
      handler: async (ctx) => {
        await ctx.app.authenticators.update(ctx.params.id, 'put', ctx.body);
        return empty();
      } },
    { api: 'management', operationId: 'patchAuthenticator', auth: 'admin', permission: null, reaches: { from: 'record', collection: 'authenticators', field: 'identityId' }, limit: 'heavy',
      handler: async (ctx) => {
        await ctx.app.authenticators.update(ctx.params.id, 'patch', ctx.body);
        return empty();
      } },

    { api: 'both', operationId: 'listCurrentIdentityAuthenticators', auth: 'session',
      handler: (ctx) => listRecords(reg, authDef, ctx, { candidates: ctx.app.store.idsByIndex('authenticators', 'identityId', ctx.identity!.id) }) },
    { api: 'both', operationId: 'detailCurrentIdentityAuthenticator', auth: 'session',
      handler: (ctx) => {
        const rec = mustGet(ctx.app.store, authDef, ctx.params.id);
        if (rec.identityId !== ctx.identity!.id) throw errors.notFound();
        return ok(renderRecord(reg, authDef, rec, view(ctx)));
      } },
    { api: 'both', operationId: 'updateCurrentIdentityAuthenticator', auth: 'session', limit: 'heavy',
      handler: async (ctx) => {
        await ctx.app.authenticators.updateOwn(ctx.identity!.id, ctx.params.id, 'put', ctx.body, ctx.body.currentPassword);
        return empty();
      } },
    { api: 'both', operationId: 'patchCurrentIdentityAuthenticator', auth: 'session', limit: 'heavy',
      handler: async (ctx) => {
        await ctx.app.authenticators.updateOwn(ctx.identity!.id, ctx.params.id, 'patch', ctx.body, ctx.body.currentPassword);
        return empty();
      } },
  ];
}
