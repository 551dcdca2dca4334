/** The standard operations of a family (list, create, detail, update, patch, delete) and their table entries. */
import { errors } from '../core/errors.js';
import { created, empty, ok } from '../core/envelope.js';
import type { Entry, Handler } from './context.js';
import { entryOfAnyOperation, type PermissionAction, type Reach } from '../core/operation.js';
import type { ResourceDef, StandardOp } from './types.js';
import { mustGet, type Registry } from './registry.js';
import { renderRecord } from './render.js';
import { createRecord, updateRecord, write, writerOf } from './write.js';
import { listRecords } from './list.js';

/**
 * A standard create or update's body: the router validated it against the family's body schema,
 * an object in every spec; a handler typed for any operation sees it as unknown.
 */
function fields(body: unknown): Record<string, unknown> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw errors.parseBody('the body must be a JSON object');
  return body as Record<string, unknown>;
}

/** The six standard handlers of a family, whichever of them it offers. */
export function standardHandlers(reg: Registry, def: ResourceDef): Record<StandardOp, Handler> {
  return {
    list: (ctx) => listRecords(reg, def, ctx),
    detail: (ctx) => ok(renderRecord(reg, def, mustGet(ctx.app.store, def, ctx.params.id), { store: ctx.app.store, ctx })),
    create: async (ctx) => {
      const rec = await createRecord(reg, def, writerOf(ctx), fields(ctx.body));
      return created(rec.id, `./${def.path}/${rec.id}`);
    },
    update: async (ctx) => {
      await updateRecord(reg, def, writerOf(ctx), ctx.params.id, fields(ctx.body), 'put');
      return empty();
    },
    patch: async (ctx) => {
      await updateRecord(reg, def, writerOf(ctx), ctx.params.id, fields(ctx.body), 'patch');
      return empty();
    },
    delete: async (ctx) => {
      await write(ctx.app.store, (tx) => {
        const rec = tx.get(def.collection, ctx.params.id);
        if (!rec) throw errors.notFound();
        reg.deleteInTx(tx, def, rec);
      });
      return empty();
    },
  };
}

const STANDARD_ACTION: Record<StandardOp, PermissionAction> = {
  list: 'read', detail: 'read', create: 'create', update: 'update', patch: 'update', delete: 'delete',
};

/**
 * The identity an update, patch or delete of a family reaches (containment, docs/auth.md): as
 * declared (`reaches`), else the identity itself or the one the record belongs to (`owner`).
 * Creates of those families are hand-written operations that declare their own (an identity's
 * create is checked as written, in its `prepare`).
 */
function reachOf(def: ResourceDef): Reach | undefined {
  if (def.reaches) return def.reaches;
  if (def.owner === undefined) return undefined;
  return def.owner === 'id' ? { from: 'path' } : { from: 'record', collection: def.collection, field: def.owner };
}

/**
 * A family's operation table entries, from its declaration: Management API, admin level, the
 * permission `<family>.<action>` unless the declaration says otherwise, no rate limit, the body
 * as the spec says; updates, patches and deletes reach the identity the family names (reachOf).
 */
export function standardEntries(reg: Registry, def: ResourceDef): Entry[] {
  const handlers = standardHandlers(reg, def);
  const entries: Entry[] = [];
  const reach = reachOf(def);
  for (const op of Object.keys(STANDARD_ACTION) as StandardOp[]) {
    const operationId = def.operations[op];
    if (!operationId) continue;
    const permission = def.permissions && op in def.permissions ? def.permissions[op] ?? null : { family: def.family, action: STANDARD_ACTION[op] };
    const reaches = reach && (op === 'update' || op === 'patch' || op === 'delete') ? reach : undefined;
    entries.push(entryOfAnyOperation({ api: 'management', operationId, auth: 'admin', permission, reaches, handler: handlers[op] }));
  }
  return entries;
}
