/** Identity disable and enable by an administrator (the rules: src/managers/identities.ts). */
import type { Entry } from '../context.js';
import { empty } from '../../core/envelope.js';

export function identityDisableEntries(): Entry[] {
  return [
    { api: 'management', operationId: 'disableIdentity', auth: 'admin', permission: { family: 'identity', action: 'update' }, reaches: { from: 'path' },
      handler: async (ctx) => {
        await ctx.app.identities.disable(ctx.params.id, ctx.body?.durationMinutes);
        return empty();
      } },

    { api: 'management', operationId: 'enableIdentity', auth: 'admin', permission: { family: 'identity', action: 'update' }, reaches: { from: 'path' },
      handler: async (ctx) => {
        await ctx.app.identities.enable(ctx.params.id);
        return empty();
      } },
  ];
}
