/**
 * The request body types (src/core/bodies.ts) are those scripts/generate-body-types.ts writes from
 * the embedded specs, and an operation table entry's handler sees its operation's body with them.
 */
import t from 'tap';
import fs from 'node:fs';
import { bodyTypesPath, bodyTypesSource } from '../../../scripts/generate-body-types.js';
import { upstreamOperations } from '../../../src/api/spec/index.js';
import { empty } from '../../../src/core/envelope.js';
import type { Entry } from '../../../src/api/context.js';

t.test('the generated body types are current', async (t) => {
  t.equal(fs.readFileSync(bodyTypesPath(), 'utf8'), bodyTypesSource(), 'run scripts/generate-body-types.ts after changing the specs');
});

t.test('every operation with a body has a body type', async (t) => {
  const source = bodyTypesSource();
  for (const api of ['client', 'management', 'fabric'] as const) {
    const map = source.slice(source.indexOf(`export interface ${api[0].toUpperCase()}${api.slice(1)}Bodies {`));
    for (const op of upstreamOperations(api)) {
      if (op.bodyDefinition || op.bodySchema) t.match(map, new RegExp(`^  ${op.operationId}: .+;$`, 'm'), `${api} ${op.operationId}`);
    }
  }
});

/**
 * What the compiler refuses (checked by the build: each `@ts-expect-error` line must fail to
 * compile, or the build fails). Never called.
 */
export function refusedByTheCompiler(): Entry[] {
  return [
    { api: 'management', operationId: 'createIdentity', auth: 'admin', permission: null,
      handler: (ctx) => {
        const name: string = ctx.body.name;
        // @ts-expect-error a field identity create bodies do not have
        void ctx.body.nmae;
        // @ts-expect-error an optional field may be absent or null
        const externalId: string = ctx.body.externalId;
        // @ts-expect-error an enum field holds one of its values
        ctx.body.type = 'Robot';
        return empty(name.length + externalId.length);
      } },
    { api: 'client', operationId: 'enrollToken', auth: 'none', body: 'optional',
      handler: (ctx) => {
        // @ts-expect-error a body the entry accepts empty may be undefined
        void ctx.body.clientCsr;
        return empty();
      } },
    { api: 'management', operationId: 'detailIdentity', auth: 'admin', permission: null,
      handler: (ctx) => {
        // @ts-expect-error an operation without a body has none
        void ctx.body.name;
        return empty();
      } },
    { api: 'fabric', operationId: 'createRouter', auth: 'admin', permission: null,
      handler: (ctx) => {
        // @ts-expect-error the fabric API's router has no edge router fields
        void ctx.body.isTunnelerEnabled;
        return empty(ctx.body.cost);
      } },
  ];
}
