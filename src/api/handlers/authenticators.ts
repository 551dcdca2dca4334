/**
 * Authenticator writes (passwords hashed in the worker pool, certificates parsed) and the caller's
 * own authenticators; their list, detail and delete are the family's standard operations.
 */
import type { Ctx, Entry } from '../../core/context.js';
import type { Reply } from '../../core/operation.js';
import { ApiError, errors } from '../../core/errors.js';
import { created, empty, ok } from '../../core/envelope.js';
import { listRecords } from '../../resources/list.js';
import { mustGet, type Registry } from '../../resources/registry.js';
import { renderRecord } from '../../resources/render.js';
import { createRecord, write } from '../../resources/write.js';
import { checkPassword, checkUsername, hashPassword } from '../../auth/passwords.js';
import { parseCert } from '../../pki/certs.js';
import { issued, x509 } from '../../pki/chain.js';

export function authenticatorEntries(reg: Registry): Entry[] {
  const authDef = reg.def('authenticators');
  const view = (ctx: Ctx) => ({ store: ctx.app.store, ctx });

  /** Shared by admin and current-identity authenticator updates. */
  async function updateAuthenticator(ctx: Ctx, id: string, mode: 'put' | 'patch', ownerId?: string): Promise<Reply> {
    const before = mustGet(ctx.app.store, authDef, id);
    if (ownerId && before.identityId !== ownerId) throw errors.notFound();
    const body = ctx.body ?? {};
    if (ownerId) {
      // The caller proves knowledge of the current password.
      if (before.method !== 'updb') throw new ApiError('CAN_NOT_UPDATE_AUTHENTICATOR', 'only updb authenticators have a password to change');
      const good = await ctx.app.pool.run('verifyPassword', { hash: before.passwordHash!, password: String(body.currentPassword ?? '') });
      if (!good) throw errors.unauthorized();
    }
    if (before.method !== 'updb' && (body.username !== undefined || body.password !== undefined))
      throw new ApiError('CAN_NOT_UPDATE_AUTHENTICATOR', 'only updb authenticators have a username and password');
    const identity = mustGet(ctx.app.store, reg.def('identities'), before.identityId);
    const changes: Record<string, unknown> = {};
    if (mode === 'put' || (body.username !== undefined && body.username !== null)) {
      changes.username = checkUsername(body.username);
    }
    if (mode === 'put' || (body.password !== undefined && body.password !== null)) {
      changes.passwordHash = await hashPassword(ctx.app, checkPassword(ctx.app, identity, body.password));
    }
    if (mode === 'put') changes.tags = body.tags ?? {};
    else if (body.tags !== undefined && body.tags !== null) changes.tags = body.tags;
    await write(ctx.app.store, (tx) => {
      const cur = tx.get('authenticators', id);
      if (!cur) throw errors.notFound();
      tx.put('authenticators', { ...cur, ...changes, updatedAt: Date.now() });
    });
    return empty();
  }

  return [
    { api: 'management', operationId: 'createAuthenticator', auth: 'admin', permission: null, reaches: { from: 'body', field: 'identityId' }, limit: 'heavy',
      handler: async (ctx) => {
        const body = ctx.body ?? {};
        const identity = ctx.app.store.get('identities', body.identityId);
        if (!identity) throw errors.field('identityId', 'no identity found with the given id', body.identityId);
        const method = body.method;
        let extra: Record<string, unknown>;
        if (method === 'updb') {
          const username = checkUsername(body.username);
          const passwordHash = await hashPassword(ctx.app, checkPassword(ctx.app, identity, body.password));
          extra = { method, username, passwordHash };
        } else if (method === 'cert') {
          const info = parseCert(body.certPem, 'certPem');
          // Signed by the controller's signing CA → a network certificate (extendable, re-enrolls as ott).
          const network = issued(info.cert, x509(ctx.app.pki.signingCertPem));
          extra = { method, certPem: body.certPem, fingerprint: info.fingerprint, certNotAfter: info.notAfter, isIssuedByNetwork: network, isExtendRequested: false, isKeyRollRequested: false };
        } else throw errors.field('method', 'must be one of updb, cert', method);
        const rec = await createRecord(reg, authDef, ctx, { tags: body.tags }, (r, tx) => {
          if (!tx.exists('identities', identity.id)) throw errors.field('identityId', 'no identity found with the given id', identity.id);
          for (const aid of tx.idsByIndex('authenticators', 'identityId', identity.id)) {
            if (tx.get('authenticators', aid)?.method === method)
              throw new ApiError('MAX_AUTHENTICATOR_METHODS_REACHED', `the identity already has a ${method} authenticator`);
          }
          Object.assign(r, extra, { identityId: identity.id });
        });
        return created(rec.id, `./authenticators/${rec.id}`);
      } },
    { api: 'management', operationId: 'updateAuthenticator', auth: 'admin', permission: null, reaches: { from: 'record', collection: 'authenticators', field: 'identityId' }, limit: 'heavy',
      handler: (ctx) => updateAuthenticator(ctx, ctx.params.id, 'put') },
    { api: 'management', operationId: 'patchAuthenticator', auth: 'admin', permission: null, reaches: { from: 'record', collection: 'authenticators', field: 'identityId' }, limit: 'heavy',
      handler: (ctx) => updateAuthenticator(ctx, ctx.params.id, 'patch') },

    { api: 'both', operationId: 'listCurrentIdentityAuthenticators', auth: 'session',
      handler: (ctx) => listRecords(reg, authDef, ctx, { candidates: ctx.app.store.idsByIndex('authenticators', 'identityId', ctx.identity!.id) }) },
    { api: 'both', operationId: 'detailCurrentIdentityAuthenticator', auth: 'session',
      handler: (ctx) => {
        const rec = mustGet(ctx.app.store, authDef, ctx.params.id);
        if (rec.identityId !== ctx.identity!.id) throw errors.notFound();
        return ok(renderRecord(reg, authDef, rec, view(ctx)));
      } },
    { api: 'both', operationId: 'updateCurrentIdentityAuthenticator', auth: 'session', limit: 'heavy',
      handler: (ctx) => updateAuthenticator(ctx, ctx.params.id, 'put', ctx.identity!.id) },
    { api: 'both', operationId: 'patchCurrentIdentityAuthenticator', auth: 'session', limit: 'heavy',
      handler: (ctx) => updateAuthenticator(ctx, ctx.params.id, 'patch', ctx.identity!.id) },
  ];
}
