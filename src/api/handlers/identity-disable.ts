/** Identity disable and enable by an administrator (the lockout that also disables: src/auth/disable.ts). */
import type { Entry } from '../context.js';
import { errors } from '../../core/errors.js';
import { empty } from '../../core/envelope.js';
import { write } from '../../resources/write.js';
import { MAX_DISABLE_MINUTES, disableIdentityInTx, enableIdentityInTx } from '../../auth/disable.js';

export function identityDisableEntries(): Entry[] {
  return [
    { api: 'management', operationId: 'disableIdentity', auth: 'admin', permission: { family: 'identity', action: 'update' }, reaches: { from: 'path' },
      handler: async (ctx) => {
        const minutes = ctx.body?.durationMinutes;
        if (!Number.isInteger(minutes) || minutes < 0 || minutes > MAX_DISABLE_MINUTES)
          throw errors.field('durationMinutes', `must be an integer from 0 (indefinitely) to ${MAX_DISABLE_MINUTES}`, minutes);
        await write(ctx.app.store, (tx) => {
          const cur = tx.get('identities', ctx.params.id);
          if (!cur) throw errors.notFound();
          disableIdentityInTx(tx, cur, minutes);
        });
        return empty();
      } },

    { api: 'management', operationId: 'enableIdentity', auth: 'admin', permission: { family: 'identity', action: 'update' }, reaches: { from: 'path' },
      handler: async (ctx) => {
        await write(ctx.app.store, (tx) => {
          const cur = tx.get('identities', ctx.params.id);
          if (!cur) throw errors.notFound();
          enableIdentityInTx(tx, cur);
        });
        return empty();
      } },
  ];
}
