/**
 * Coverage: every operationId of the three upstream specs is exercised through the checking
 * proxy by a compatibility suite — it has a row in the management table (management.test.ts), the
 * client table (client.test.ts) or the fabric table (fabric.test.ts), and those suites fail unless
 * each row had a clean exchange. An operation without a row fails here until one is added.
 */
import t from 'tap';
import SwaggerClient from 'swagger-client';
import { ZitiBrowzerEdgeClient } from '@openziti/ziti-browzer-edge-client';
import { APIS, patchedSpec, specOperations, type Api } from './lib/upstream-spec.js';
import { State } from './lib/exerciser.js';
import { BodyValidator } from '../../src/api/validate.js';
import { upstreamOperations } from '../../src/api/spec/index.js';

const validators = { client: new BodyValidator('client'), management: new BodyValidator('management'), fabric: new BodyValidator('fabric') };
import { managementRows } from './lib/management-table.js';
import { clientRows } from './lib/client-table.js';
import { fabricRows } from './lib/fabric-table.js';

const tabled: Record<Api, Set<string>> = {
  management: new Set(managementRows().map((r) => r.op)),
  client: new Set(clientRows().map((s) => ('swagger' in s ? s.swagger.op : s.op))),
  fabric: new Set(fabricRows().map((r) => r.op)),
};

t.test('every upstream operation is exercised through the proxy', async (t) => {
  let covered = 0;
  for (const api of APIS) {
    const ops = specOperations(api);
    t.ok(ops.length > 30, `${api}: ${ops.length} operations in the upstream spec`);
    for (const op of ops) {
      const has = tabled[api].has(op.operationId);
      if (has) covered++;
      t.ok(has, `${api}:${op.operationId} (${op.method} ${op.path}) is exercised through the checking proxy${has ? '' : ' — add a row to test/compat/lib/' + api + '-table.ts'}`);
    }
  }
  t.comment(`covered through the proxy: ${covered}`);
});

t.test('the tables name only real operations', async (t) => {
  for (const api of APIS) {
    const ids = new Set(specOperations(api).map((o) => o.operationId));
    for (const op of tabled[api]) t.ok(ids.has(op), `${api} table row ${op} is an upstream operation`);
  }
});

/** State that answers any name with a placeholder: rows can be built without running earlier rows. */
class Placeholders extends State {
  override get(name: string): string {
    return name === 'mfaSecret' ? 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP' : `placeholder-${name}`;
  }
}

t.test('every row makes a request its client accepts', async (t) => {
  const s = new Placeholders();
  for (const api of APIS) {
    const spec = patchedSpec(api).doc;
    const rows = api === 'management' ? managementRows() : api === 'fabric' ? fabricRows() : clientRows().flatMap((x) => ('swagger' in x ? [x.swagger] : []));
    for (const row of rows) {
      const op = specOperations(api).find((o) => o.operationId === row.op);
      const params: Record<string, unknown> = { ...(row.params?.(s) ?? {}) };
      if (row.body) {
        const b = [...(spec.paths[op!.path].parameters ?? []), ...(spec.paths[op!.path][op!.method.toLowerCase()].parameters ?? [])].find((p: any) => p.in === 'body');
        t.ok(b, `${api}:${row.op} takes a body`);
        const body = row.body(s);
        if (b) params[b.name] = body;
        // the body is one the controller's own validator (built from the same upstream schemas) accepts;
        // a non-JSON media type the operation consumes (a raw PEM CSR) reaches the handler as text
        const u = upstreamOperations(api).find((o) => o.operationId === row.op)!;
        const media = row.contentType?.split(';')[0].trim().toLowerCase();
        const consumes: string[] = spec.paths[op!.path][op!.method.toLowerCase()].consumes ?? spec.consumes ?? ['application/json'];
        if (media && media !== 'application/json' && !media.endsWith('+json')) {
          t.ok(consumes.includes(media) && typeof body === 'string', `${api}:${row.op}${row.note ? ` (${row.note})` : ''} sends a text body as ${media}, which it consumes`);
        } else {
          try {
            if (u.bodyDefinition) validators[api].validate(u.bodyDefinition, body, u.bodyIsArray, u.bodyRequired);
            else if (u.bodySchema) validators[api].validateSchema(u.bodySchema, body, u.bodyRequired ?? false);
            t.pass(`${api}:${row.op}${row.note ? ` (${row.note})` : ''} body is valid`);
          } catch (e: any) {
            t.fail(`${api}:${row.op}${row.note ? ` (${row.note})` : ''} body is invalid: ${e?.message} ${JSON.stringify(e?.cause ?? '')}`);
          }
        }
      }
      // The fabric spec names shared parameters by reference (`#/parameters/limit`).
      const deref = (p: any) => (typeof p?.$ref === 'string' ? spec.parameters?.[p.$ref.replace('#/parameters/', '')] ?? p : p);
      const declared = [...(spec.paths[op!.path].parameters ?? []), ...(spec.paths[op!.path][op!.method.toLowerCase()].parameters ?? [])].map(deref);
      for (const name of Object.keys(params)) t.ok(declared.some((p: any) => p.name === name), `${api}:${row.op}: parameter ${name} is declared`);
      for (const p of declared) if (p.required && p.in !== 'body') t.ok(p.name in params, `${api}:${row.op}: required ${p.in} parameter ${p.name} is given`);
      let built: any;
      try {
        built = SwaggerClient.buildRequest({ spec, operationId: row.op, parameters: params });
      } catch (e) {
        t.fail(`${api}:${row.op}: swagger-client cannot build the request: ${(e as Error).message}`);
        continue;
      }
      t.equal(built.method, op!.method, `${api}:${row.op}${row.note ? ` (${row.note})` : ''} builds ${built.method} ${String(built.url).replace(/^https?:\/\/[^/]+/, '')}`);
    }
  }
  // browzer rows: the method they call exists on the upstream client
  const called: string[] = [];
  const fake = new Proxy({}, { get: (_o, name) => (..._args: unknown[]) => (called.push(String(name)), Promise.resolve(undefined)) });
  for (const step of clientRows()) {
    if ('swagger' in step) continue;
    called.length = 0;
    await step.call(fake as any, s);
    t.equal(called.length, 1, `browzer row ${step.op} makes one call`);
    for (const m of called) t.equal(typeof (ZitiBrowzerEdgeClient.prototype as any)[m], 'function', `browzer row ${step.op}: ZitiBrowzerEdgeClient#${m} exists`);
  }
});
