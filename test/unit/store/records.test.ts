/**
 * The record types (src/store/records.ts) are those scripts/generate-record-types.ts writes from
 * the resource families, the management spec and src/store/stored-fields.ts.
 */
import t from 'tap';
import fs from 'node:fs';
import { recordTypesPath, recordTypesSource } from '../../../scripts/generate-record-types.js';
import { createRegistry } from '../../../src/resources/index.js';
import type { Store, Tx } from '../../../src/store/store.js';

t.test('the generated record types are current', async (t) => {
  t.equal(fs.readFileSync(recordTypesPath(), 'utf8'), recordTypesSource(), 'run scripts/generate-record-types.ts after changing a family or stored-fields.ts');
});

t.test('every store collection has a record type', async (t) => {
  const source = recordTypesSource();
  for (const { name } of createRegistry().collectionSpecs()) t.match(source, new RegExp(`^  ${name}: \\w+Record;$`, 'm'), name);
});

/**
 * What the compiler refuses (checked by the build: each `@ts-expect-error` line must fail to
 * compile, or the build fails). Never called.
 */
export function refusedByTheCompiler(store: Store, tx: Tx) {
  // @ts-expect-error a collection that does not exist
  store.get('identitys', 'id');
  // @ts-expect-error a field identity records do not have
  store.get('identities', 'id')?.nmae;
  // @ts-expect-error an index on a field the collection does not have
  store.idsByIndex('identities', 'roleAttribute', 'x');
  // @ts-expect-error a record of another collection
  tx.put('services', { id: 'x', createdAt: 0, updatedAt: 0, name: 'x', isAdmin: true, authPolicyId: 'default', defaultHostingCost: 0, defaultHostingPrecedence: 'default', serviceHostingCosts: {}, serviceHostingPrecedences: {} });
  const name: string = store.get('identities', 'id')!.name;
  return name;
}
