/**
 * The from-scratch check of the role index (src/policy/verify.ts): it agrees with a correct index
 * built at start-up and kept current by change events, it reports a wrong one, and a controller
 * killed (-9) during its start starts cleanly afterwards with an index that passes it.
 */
import t from 'tap';
import type { Test } from 'tap';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PolicyEngine } from '../../../src/policy/engine.js';
import { checkIndex, sampleIds, selects } from '../../../src/policy/verify.js';
import { ROLE_INDEX_SNAPSHOT } from '../../../src/policy/index-snapshot.js';
import { Store, type CollectionName, type Rec } from '../../../src/store/store.js';
import { createRegistry } from '../../../src/resources/index.js';
import { ADMIN_PASSWORD, startServer } from '../../helpers/server.js';
import { SHAPES, writeModelToStore } from '../../../scripts/lib/model.js';

const MAIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'dist', 'src', 'main.js');

/** A small model: identities with one of a few attribute sets, every kind of role list. */
async function writeModel(store: Store, identities: number) {
  const now = Date.now();
  const base = (id: string) => ({ id, name: `n-${id}`, createdAt: now, updatedAt: now, tags: {} });
  const ATTRS = [['a'], ['a', 'b'], ['b', 'c'], [], ['c']];
  await store.write((tx) => {
    for (let i = 0; i < identities; i++) tx.put<CollectionName>('identities', { ...base(`I${String(i).padStart(4, '0')}`), roleAttributes: ATTRS[i % ATTRS.length] } as Rec);
    for (let i = 0; i < 6; i++) tx.put<CollectionName>('services', { ...base(`S${i}`), roleAttributes: [`s${i % 3}`], configs: [] } as Rec);
    for (let i = 0; i < 4; i++) tx.put<CollectionName>('edgeRouters', { ...base(`R${i}`), roleAttributes: [i % 2 ? 'east' : 'west'] } as Rec);
    const sp = (id: string, type: string, semantic: string, identityRoles: string[], serviceRoles: string[]) =>
      tx.put<CollectionName>('servicePolicies', { ...base(id), type, semantic, identityRoles, serviceRoles, postureCheckRoles: [] } as Rec);
    sp('P1', 'Dial', 'AnyOf', ['#a'], ['#s0']);
    sp('P2', 'Bind', 'AllOf', ['#b', '#c'], ['#s1', '#s2']);
    sp('P3', 'Dial', 'AnyOf', ['#all'], ['@S5']);
    sp('P4', 'Dial', 'AllOf', ['@I0003', '#c'], ['#all']);
    sp('P5', 'Dial', 'AnyOf', [], ['#s2']);
    tx.put<CollectionName>('edgeRouterPolicies', { ...base('E1'), semantic: 'AnyOf', identityRoles: ['#a', '#c'], edgeRouterRoles: ['#east'] } as Rec);
    tx.put<CollectionName>('edgeRouterPolicies', { ...base('E2'), semantic: 'AllOf', identityRoles: ['#all'], edgeRouterRoles: ['@R0'] } as Rec);
    tx.put<CollectionName>('serviceEdgeRouterPolicies', { ...base('X1'), semantic: 'AnyOf', serviceRoles: ['#all'], edgeRouterRoles: ['#west'] } as Rec);
  });
}

function tempStore(t: Test, dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-index-check-'))) {
  const store = new Store(dir, createRegistry().collectionSpecs());
  t.teardown(async () => {
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return store;
}

t.test('the check agrees with an index built at start-up and kept current, and reports a wrong one', async (t) => {
  const store = tempStore(t);
  await writeModel(store, 400);
  const engine = new PolicyEngine(store, { sweepMs: 3_600_000 });
  t.teardown(() => engine.close());
  let r = checkIndex(store, engine, store.ids('identities'));
  t.same(r.mismatches, [], 'built at start-up');
  t.equal(r.identities, 400);
  t.equal(r.policies, 8);

  // Changes through the store: deletes free ordinals that later creates reuse.
  const now = Date.now();
  await store.write((tx) => {
    for (let i = 0; i < 400; i += 3) tx.delete('identities', `I${String(i).padStart(4, '0')}`);
  });
  await store.write((tx) => {
    for (let i = 0; i < 200; i++) tx.put<CollectionName>('identities', { id: `J${i}`, name: `j-${i}`, createdAt: now, updatedAt: now, tags: {}, roleAttributes: i % 2 ? ['c', 'b'] : ['a'] } as Rec);
    tx.put('servicePolicies', { ...tx.get('servicePolicies', 'P2')!, semantic: 'AnyOf', identityRoles: ['#b', '@J7'] });
    tx.put('identities', { ...tx.get('identities', 'I0001')!, roleAttributes: ['c'] });
  });
  r = checkIndex(store, engine, store.ids('identities'));
  t.same(r.mismatches, [], 'after deletes, creates, a policy and an attribute change');
  t.same(checkIndex(store, new PolicyEngine(store, { sweepMs: 3_600_000 }), sampleIds(store, 50)).mismatches, [], 'a fresh build agrees on a sample');
  t.equal(sampleIds(store, 50).length, 50, 'the sample has the size asked for');

  // An index that disagrees with the records is reported.
  engine.index.upsertEntity('identities', 'J0', ['b', 'c']);
  r = checkIndex(store, engine, ['J0']);
  t.ok(r.mismatches.some((m) => m.startsWith('identity J0 servicePolicies')), r.mismatches.join('\n'));
});

t.test('an index restored from the snapshot of a settled store agrees with the records; a write since makes the snapshot stale', async (t) => {
  const store = tempStore(t);
  const file = path.join(store.dir, '..', `snapshot-${path.basename(store.dir)}`);
  t.teardown(() => fs.rmSync(file, { force: true }));
  const opts = { sweepMs: 3_600_000, snapshotFile: file };
  await writeModel(store, 400);
  const first = new PolicyEngine(store, opts);
  t.notOk(first.fromSnapshot, 'no snapshot yet: built from the store');
  // Deletes leave free ordinals and the id table's tombstones; an attribute change a new list.
  const now = Date.now();
  await store.write((tx) => {
    for (let i = 0; i < 400; i += 7) tx.delete('identities', `I${String(i).padStart(4, '0')}`);
    tx.put('identities', { ...tx.get('identities', 'I0001')!, roleAttributes: ['c', 'z'] });
    tx.delete('services', 'S4');
  });
  await store.settled();
  first.saveSnapshot();
  first.close();

  const restored = new PolicyEngine(store, opts);
  t.teardown(() => restored.close());
  t.ok(restored.fromSnapshot, 'the store is as it was at the snapshot: restored from it');
  t.same(checkIndex(store, restored, store.ids('identities')).mismatches, [], 'the restored index agrees with the records');
  // Kept current from there: creates reuse the free ordinals, an attribute moves an identity between sets.
  await store.write((tx) => {
    for (let i = 0; i < 120; i++) tx.put<CollectionName>('identities', { id: `K${i}`, name: `k-${i}`, createdAt: now, updatedAt: now, tags: {}, roleAttributes: i % 2 ? ['a'] : ['b', 'c'] } as Rec);
    tx.put('identities', { ...tx.get('identities', 'I0002')!, roleAttributes: ['a'] });
    tx.delete('identities', 'I0003');
  });
  t.same(checkIndex(store, restored, store.ids('identities')).mismatches, [], 'and after changes made on it');

  const stale = new PolicyEngine(store, opts);
  t.teardown(() => stale.close());
  t.notOk(stale.fromSnapshot, 'a write since the snapshot: built from the store');
  t.same(checkIndex(store, stale, sampleIds(store, 60)).mismatches, [], 'which agrees too');

  await store.settled();
  restored.saveSnapshot();
  fs.truncateSync(file, fs.statSync(file).size - 100);
  const truncated = new PolicyEngine(store, opts);
  t.teardown(() => truncated.close());
  t.notOk(truncated.fromSnapshot, 'a truncated snapshot is not used');
  t.same(checkIndex(store, truncated, sampleIds(store, 60)).mismatches, [], 'the index built instead agrees');
});

t.test('a controller killed (-9) during its start starts cleanly, with a correct index', async (t) => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-index-kill-'));
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const env = { PATH: process.env.PATH ?? '', MESH_DATA_DIR: dataDir, MESH_ADDRESS: '127.0.0.1:0', MESH_CERT_ADDRESS: '127.0.0.1:0', MESH_ADMIN_PASSWORD: ADMIN_PASSWORD, MESH_LOG_LEVEL: 'debug', MESH_WORKERS: '1' };
  await writeModelToStore(dataDir, SHAPES.small, { seed: 2, env });
  // The service policies of sampled identities, by the rule evaluated on the records.
  const expected = new Map<string, string[]>();
  {
    const store = new Store(path.join(dataDir, 'db'), createRegistry().collectionSpecs());
    const policies = [...store.scan('servicePolicies')];
    for (const id of sampleIds(store, 5)) {
      const attrs = store.get('identities', id)?.roleAttributes;
      expected.set(id, policies.filter((p) => selects(p.identityRoles, String(p.semantic).toLowerCase() === 'anyof', id, attrs)).map((p) => p.id).sort());
    }
    await store.close();
  }

  // Killed as soon as it writes anything: its start is under way.
  const killed = await new Promise<NodeJS.Signals | null>((resolve) => {
    const proc = spawn(process.execPath, [MAIN], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const kill = () => proc.kill('SIGKILL');
    proc.stdout!.once('data', kill);
    proc.stderr!.once('data', kill);
    proc.once('exit', (_code, signal) => resolve(signal));
  });
  t.equal(killed, 'SIGKILL', 'killed during its start');

  // Then a clean stop leaves the index's snapshot, and the start after it serves the same answers.
  for (const when of ['after the kill', 'after a clean stop (from the snapshot)']) {
    const srv = await startServer(undefined, { dataDir, keepData: true });
    try {
      const admin = await srv.login();
      for (const [id, want] of expected) {
        const r = await admin.get(`/identities/${id}/service-policies?limit=500`);
        t.same(r.body.data.map((p: { id: string }) => p.id).sort(), want, `service policies of ${id} as served ${when}`);
      }
    } finally {
      await srv.stop();
    }
    t.ok(fs.existsSync(path.join(dataDir, ROLE_INDEX_SNAPSHOT)), `a clean stop ${when} left the snapshot`);
  }
  const store = new Store(path.join(dataDir, 'db'), createRegistry().collectionSpecs());
  const engine = new PolicyEngine(store, { sweepMs: 3_600_000 });
  const check = checkIndex(store, engine, store.ids('identities'));
  engine.close();
  await store.close();
  t.same(check.mismatches, [], `the index built from the restarted store agrees with its records (${check.identities} identities)`);
});
