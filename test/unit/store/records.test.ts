/**
 * The record types (src/store/records.ts) are those scripts/generate-record-types.ts writes from
 * the resource families, the management spec and src/store/stored-fields.ts.
 */
import t from 'tap';
import fs from 'node:fs';
import { recordTypesPath, recordTypesSource } from '../../../scripts/generate-record-types.js';
import { createRegistry } from '../../../src/resources/index.js';

t.test('the generated record types are current', async (t) => {
  t.equal(fs.readFileSync(recordTypesPath(), 'utf8'), recordTypesSource(), 'run scripts/generate-record-types.ts after changing a family or stored-fields.ts');
});

t.test('every store collection has a record type', async (t) => {
  const source = recordTypesSource();
  for (const { name } of createRegistry().collectionSpecs()) t.match(source, new RegExp(`^  ${name}: \\w+Record;$`, 'm'), name);
});
