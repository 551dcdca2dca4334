/**
 * The operation table: every operation of the three APIs is one entry, written out by the module that
 * serves it (src/api/handlers/*.ts) or made from a resource family's declaration
 * (`standardEntries`). `buildOperations` joins the entries with the embedded specs, which add the
 * method, the path and the body's schema; starting fails unless every spec operation has exactly
 * one entry and every entry names a spec operation.
 */
import type { Entry, Handler, Op } from './context.js';
import type { ApiName, HttpMethod } from '../core/operation.js';
import { upstreamDocument, upstreamOperations, type UpstreamOp } from './spec/index.js';
import { type Registry } from '../resources/registry.js';
import { standardEntries } from '../resources/standard.js';
import { ALIASES, RESOURCES } from '../resources/index.js';
import { informationalEntries } from './handlers/informational.js';
import { sessionEntries } from './handlers/session.js';
import { authenticatorEntries } from './handlers/authenticators.js';
import { referenceListEntries } from './handlers/reference-lists.js';
import { policyViewEntries } from './handlers/policy-views.js';
import { policyClientEntries } from './handlers/policy-client.js';
import { enrollFlowEntries } from './handlers/enroll-flows.js';
import { enrollAdminEntries } from './handlers/enroll-admin.js';
import { enrollCertEntries } from './handlers/enroll-certs.js';
import { enrollTokenEntries } from './handlers/enroll-token.js';
import { mfaEntries } from './handlers/mfa.js';
import { identityDisableEntries } from './handlers/identity-disable.js';
import { externalJwtSignerListEntries } from './handlers/external-jwt-signer-list.js';
import { controllerEntries } from './handlers/controllers.js';
import { datastoreEntries } from './handlers/datastore.js';
import { fabricEntries } from './handlers/fabric.js';

/** Every entry of the three APIs. `ops` is the finished table, for the handlers that serve the specs. */
export function operationEntries(reg: Registry, ops: () => Op[]): Entry[] {
  return [
    ...[...RESOURCES, ...ALIASES].flatMap((def) => standardEntries(reg, def)),
    ...informationalEntries(ops),
    ...sessionEntries(reg),
    ...authenticatorEntries(reg),
    ...referenceListEntries(reg),
    ...policyViewEntries(reg),
    ...policyClientEntries(reg),
    ...enrollFlowEntries(),
    ...enrollAdminEntries(reg),
    ...enrollCertEntries(reg),
    ...enrollTokenEntries(),
    ...mfaEntries(),
    ...identityDisableEntries(),
    ...externalJwtSignerListEntries(reg),
    ...controllerEntries(reg),
    ...datastoreEntries(reg),
    ...fabricEntries(reg),
  ];
}

export class OperationTableError extends Error {
  constructor(readonly problems: string[]) {
    super(`operation table and specs disagree:\n  ${problems.join('\n  ')}`);
  }
}

const apisOf = (e: Entry): ApiName[] => (e.api === 'both' ? ['client', 'management'] : [e.api]);

/**
 * The checked join of entries and spec operations, in spec order. Throws OperationTableError
 * listing every spec operation without an entry, every entry without a spec operation and every
 * operation with two entries.
 */
export function joinOperations(entries: Entry[], specs: Record<ApiName, readonly UpstreamOp[]>): Op[] {
  const byKey = new Map<string, Entry>();
  const problems: string[] = [];
  for (const e of entries) {
    for (const api of apisOf(e)) {
      const key = `${api}:${e.operationId}`;
      if (byKey.has(key)) problems.push(`${key}: two entries`);
      else byKey.set(key, e);
    }
  }
  const ops: Op[] = [];
  const joined = new Set<string>();
  for (const api of ['client', 'management', 'fabric'] as const) {
    for (const u of specs[api]) {
      const key = `${api}:${u.operationId}`;
      const e = byKey.get(key);
      if (!e) {
        problems.push(`${key}: no entry`);
        continue;
      }
      joined.add(key);
      ops.push(operation(api, u, e));
    }
  }
  for (const key of byKey.keys()) if (!joined.has(key)) problems.push(`${key}: no such operation in the ${key.split(':')[0]} spec`);
  if (problems.length) throw new OperationTableError(problems);
  return ops;
}

function operation(api: ApiName, u: UpstreamOp, e: Entry): Op {
  const { limit } = e;
  // The one place a handler typed with its operation's body (OperationEntry) is called with the
  // context the router gives every operation: its parseBody validated `ctx.body` against this
  // operation's body schema, which is what that type says (src/core/bodies.ts).
  const handler = e.handler as Handler;
  const run: Handler = limit ? (ctx) => ctx.app.auth.limits[limit].run(() => handler(ctx)) : handler;
  return {
    api,
    method: u.method.toLowerCase() as HttpMethod,
    path: u.path,
    operationId: u.operationId,
    auth: e.auth,
    permission: e.permission ?? undefined,
    reaches: e.reaches,
    spec: upstreamDocument(api).paths[u.path][u.method.toLowerCase() as HttpMethod]!,
    bodyDefinition: u.bodyDefinition,
    bodyIsArray: u.bodyIsArray,
    bodyRequired: (e.body ?? 'spec') === 'spec' ? u.bodyRequired : false,
    bodySchema: e.body === 'raw' ? undefined : u.bodySchema,
    handler: run,
  };
}

/** The table the controller serves. */
export function buildOperations(reg: Registry): Op[] {
  const ops: Op[] = [];
  const specs = { client: upstreamOperations('client'), management: upstreamOperations('management'), fabric: upstreamOperations('fabric') };
  ops.push(...joinOperations(operationEntries(reg, () => ops), specs));
  return ops;
}
