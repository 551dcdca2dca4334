/**
 * Moving in and out of a cluster with the real commands: a single node's data directory imported
 * into an empty prefix of a real etcd, a controller started on it in cluster mode, then the
 * cluster exported back to a new data directory a single node starts from.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { startEtcd } from '../bench/lib/etcd.js';
import { startServer } from './helpers/server.js';

// Real etcd members and controllers start, die and restart here: more than the default file timeout
// on a loaded machine (about a minute alone on a busy 2-core one).
t.setTimeout(300_000);

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SCRIPT = path.join(ROOT, 'dist', 'scripts', 'cluster-transfer.js');

function transfer(args: string[], env: Record<string, string>): Promise<{ code: number; out: string }> {
  return new Promise((resolve) =>
    execFile(process.execPath, [SCRIPT, ...args], { env: { PATH: process.env.PATH ?? '', ...env } }, (err, stdout, stderr) =>
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
    ),
  );
}

t.test('import a single node into a cluster, export it back', async (t) => {
  const etcd = await startEtcd(t, 3);
  const env = { MESH_CLUSTER_ETCD: etcd.endpoints.join(','), MESH_CLUSTER_PREFIX: '/moved' };

  // A single node with some model, stopped.
  const single = await startServer(t, { keepData: true });
  t.teardown(() => fs.rmSync(single.dataDir, { recursive: true, force: true }));
  const admin = await single.login();
  const id = (await admin.post('/identities', { name: 'moved-1', type: 'User', isAdmin: false, roleAttributes: ['a'] })).body.data.id;
  t.equal((await admin.post('/services', { name: 'moved-svc', encryptionRequired: true, roleAttributes: ['s'] })).status, 201);
  t.equal((await admin.post('/service-policies', { name: 'moved-sp', type: 'Dial', semantic: 'AnyOf', identityRoles: ['#a'], serviceRoles: ['#s'] })).status, 201);
  const ca = single.ca;
  t.equal(await single.stop(), 0);

  const imp = await transfer(['import', '--data-dir', single.dataDir], env);
  t.equal(imp.code, 0, imp.out);
  t.match(imp.out, /import: \d+ records into \/moved/);
  const again = await transfer(['import', '--data-dir', single.dataDir], env);
  t.not(again.code, 0, 'a second import into the same prefix is refused');
  t.match(again.out, /already holds records/);

  // A controller with an empty data directory joins and serves the imported model, with its CA.
  const member = await startServer(t, { env });
  t.equal(member.ca, ca, 'the single node CA became the cluster CA');
  const cadmin = await member.login();
  t.equal((await cadmin.get(`/identities/${id}`)).body.data.name, 'moved-1');
  t.same(((await cadmin.get(`/identities/${id}/services`)).body.data as { name: string }[]).map((s) => s.name), ['moved-svc'], 'policies work on the imported model');
  const dup = await cadmin.post('/identities', { name: 'moved-1', type: 'User', isAdmin: false });
  t.equal(dup.status, 400, 'imported unique names are guarded in the cluster');
  t.equal((await cadmin.post('/identities', { name: 'made-in-cluster', type: 'User', isAdmin: false })).status, 201);

  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-export-'));
  t.teardown(() => fs.rmSync(out, { recursive: true, force: true }));
  const exp = await transfer(['export', '--data-dir', out], env);
  t.equal(exp.code, 0, exp.out);
  const back = await startServer(t, { dataDir: out, keepData: true });
  const badmin = await back.login();
  const names = ((await badmin.get('/identities?limit=100')).body.data as { name: string }[]).map((i) => i.name);
  t.ok(names.includes('moved-1') && names.includes('made-in-cluster'), `the single node has the cluster's identities (${names.join(', ')})`);
  t.equal(back.ca, ca, 'and the same CA');
});
