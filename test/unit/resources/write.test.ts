/**
 * src/resources/write.ts on a real LMDB store with the real declarations: role lists and role
 * attributes (canonical order, refusals), and the field rules every family's writes share —
 * defaults on create, PATCH keeps what it does not name (and what it sets to null), PUT resets to
 * the defaults, `nullKeeps` keeps a name, `immutable` survives updates, unique values and missing
 * references become the field error (or the 404 the declaration asks for), and a refused write
 * leaves the store as it was.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { Store, type CollectionName } from '../../../src/store/store.js';
import { createRegistry } from '../../../src/resources/index.js';
import { checkAttributes, checkRoles, createRecord, updateRecord } from '../../../src/resources/write.js';
import { ApiError } from '../../../src/core/errors.js';
import type { Writer } from '../../../src/resources/types.js';

const reg = createRegistry();
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-write-'));
const store = new Store(dir, reg.collectionSpecs());
t.teardown(async () => {
  await store.close();
  fs.rmSync(dir, { recursive: true, force: true });
});
// The writes read only the store from their context (an admin caller: no identity-manager rules).
const writer: Writer = { store };
const def = (c: CollectionName) => reg.def(c);

/** The ApiError `fn` throws: code and cause field. */
async function refusal(fn: () => unknown): Promise<{ code?: string; field?: string }> {
  try {
    await fn();
  } catch (e) {
    if (e instanceof ApiError) return { code: e.code, field: (e.errorCause as { field?: string } | undefined)?.field };
    throw e;
  }
  return {};
}

t.test('role attributes: sorted, without duplicates; # and @ and empty refused', async (t) => {
  t.same(checkAttributes('roleAttributes', ['b', 'a', 'b']), ['a', 'b']);
  t.same(checkAttributes('roleAttributes', null), []);
  for (const bad of [['#a'], ['@a'], [''], [7], 'a']) {
    t.same(await refusal(() => checkAttributes('roleAttributes', bad)), { code: 'COULD_NOT_VALIDATE', field: 'roleAttributes' }, `${JSON.stringify(bad)} refused`);
  }
});

t.test('role lists: #attr, #all alone, @ of an existing id', async (t) => {
  const svc = await createRecord(reg, def('services'), writer, { name: 'role-target' });
  await store.write((tx) => {
    t.same(checkRoles(tx, reg, 'serviceRoles', ['#b', `@${svc.id}`, '#a', '#a'], 'services'), ['#a', '#b', `@${svc.id}`].sort(), 'sorted, without duplicates');
    t.same(checkRoles(tx, reg, 'serviceRoles', ['#all'], 'services'), ['#all']);
  });
  for (const bad of [['#all', '#a'], ['plain'], ['#'], ['@no-such-id'], 'x']) {
    const r = await refusal(() => store.write((tx) => checkRoles(tx, reg, 'serviceRoles', bad, 'services')));
    t.same(r, { code: 'COULD_NOT_VALIDATE', field: 'serviceRoles' }, `${JSON.stringify(bad)} refused`);
  }
});

t.test('create defaults; PATCH keeps, PUT resets; nullKeeps and immutable', async (t) => {
  const services = def('services');
  const s = await createRecord(reg, services, writer, { name: 'svc-a', encryptionRequired: false, roleAttributes: ['z', 'y'], tags: { k: 'v' } });
  t.match(s, { name: 'svc-a', encryptionRequired: false, roleAttributes: ['y', 'z'], configs: [], terminatorStrategy: 'smartrouting', maxIdleTimeMillis: 0, tags: { k: 'v' } }, 'defaults filled, attributes sorted');
  t.same(store.get('services', s.id), s, 'what was returned is what was stored');

  const patched = await updateRecord(reg, services, writer, s.id, { maxIdleTimeMillis: 5, roleAttributes: null, name: null }, 'patch');
  t.equal(patched.maxIdleTimeMillis, 5, 'PATCH sets what it names');
  t.same(patched.roleAttributes, ['y', 'z'], 'PATCH with null keeps the value');
  t.equal(patched.name, 'svc-a', 'and keeps the name');
  t.same(patched.tags, { k: 'v' }, 'PATCH keeps what it does not name');
  t.ok(patched.updatedAt > s.updatedAt, 'updatedAt moves forward');
  t.equal(patched.createdAt, s.createdAt, 'createdAt stays');

  const put = await updateRecord(reg, services, writer, s.id, { name: null, encryptionRequired: true }, 'put');
  t.equal(put.name, 'svc-a', 'PUT with a null name keeps it (nullKeeps)');
  t.equal(put.encryptionRequired, false, 'immutable: PUT does not change encryptionRequired');
  t.equal(put.maxIdleTimeMillis, 0, 'PUT resets to the default');
  t.same(put.roleAttributes, [], 'PUT resets the attributes');
  t.same(put.tags, {}, 'PUT resets the tags');

  t.same(await refusal(() => updateRecord(reg, services, writer, s.id, { name: '' }, 'patch')), { code: 'COULD_NOT_VALIDATE', field: 'name' }, 'an empty name refused');
  t.same(await refusal(() => updateRecord(reg, services, writer, 'no-such-id', { name: 'x' }, 'patch')), { code: 'NOT_FOUND', field: undefined }, 'unknown id → NOT_FOUND');
});

t.test('unique values and references become field errors; refused writes leave nothing', async (t) => {
  const before = store.count('services');
  await createRecord(reg, def('services'), writer, { name: 'svc-unique' });
  t.same(await refusal(() => createRecord(reg, def('services'), writer, { name: 'svc-unique' })), { code: 'COULD_NOT_VALIDATE', field: 'name' }, 'a duplicate name');
  t.same(await refusal(() => createRecord(reg, def('services'), writer, { name: 'svc-ref', configs: ['no-such-config'] })), { code: 'COULD_NOT_VALIDATE', field: 'configs' }, 'an unknown config');
  t.same(await refusal(() => createRecord(reg, def('configs'), writer, { name: 'cfg', configTypeId: 'no-such-type', data: {} })), { code: 'COULD_NOT_VALIDATE', field: 'type' }, 'an unknown config type is reported as upstream names it');
  t.same(await refusal(() => createRecord(reg, def('terminators'), writer, { service: 'no-such-service', router: 'r', binding: 'b', address: 'a' })), { code: 'NOT_FOUND', field: undefined }, 'an unknown terminator service is a 404, as declared');
  t.equal(store.count('services'), before + 1, 'only the one good create was written');
  t.equal(store.count('configs'), 0);
  t.equal(store.count('terminators'), 0);

  const ct = await createRecord(reg, def('configTypes'), writer, { name: 'ct' });
  const cfg = await createRecord(reg, def('configs'), writer, { name: 'cfg-1', configTypeId: ct.id, data: { a: 1 } });
  const svc = await createRecord(reg, def('services'), writer, { name: 'svc-cfg', configs: [cfg.id, cfg.id] });
  t.same(svc.configs, [cfg.id], 'reference lists are stored without duplicates');
});
