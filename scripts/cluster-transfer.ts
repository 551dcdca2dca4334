/**
 * scripts/cluster-transfer — move a model into or out of a cluster (docs/cluster.md).
 *
 *   MESH_CLUSTER_ETCD=http://127.0.0.1:2379 npm run cluster:import -- --data-dir ./data
 *   MESH_CLUSTER_ETCD=http://127.0.0.1:2379 npm run cluster:export -- --data-dir ./exported
 *
 * import: every record of a stopped single-node data directory, and its root and signing CA, into
 *         an empty cluster prefix (MESH_CLUSTER_PREFIX, default /mesh); refused if the prefix holds
 *         records. Then start controllers with MESH_CLUSTER_ETCD set.
 * export: the cluster's records, read at one revision, into a new data directory (refused if it
 *         already holds a datastore), with the shared CA; start a single node on it.
 * The etcd TLS and user settings (MESH_CLUSTER_ETCD_CA, …) apply as for the controller.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig } from '../src/config.js';
import { Store } from '../src/store/store.js';
import { createRegistry } from '../src/resources/index.js';
import { connect } from '../src/cluster/replica.js';
import { clusterSettings } from '../src/cluster/join.js';
import { exportDataDir, importDataDir } from '../src/cluster/transfer.js';

const { values: argv, positionals } = parseArgs({ options: { 'data-dir': { type: 'string' }, help: { type: 'boolean' } }, allowPositionals: true });
const command = positionals[0];
if (argv.help || (command !== 'import' && command !== 'export') || !argv['data-dir']) {
  process.stderr.write('usage: cluster-transfer import|export --data-dir DIR   (MESH_CLUSTER_ETCD, MESH_CLUSTER_PREFIX from the environment)\n');
  process.exit(argv.help ? 0 : 2);
}
const dataDir = path.resolve(argv['data-dir']);
const settings = loadConfig({ ...process.env, MESH_DATA_DIR: dataDir });
if (!settings.clusterEtcd) {
  process.stderr.write('cluster-transfer: set MESH_CLUSTER_ETCD to the etcd endpoints\n');
  process.exit(2);
}
const s = clusterSettings(settings);
if (command === 'import' && !fs.existsSync(path.join(dataDir, 'db'))) {
  process.stderr.write(`cluster-transfer: ${dataDir} holds no datastore\n`);
  process.exit(2);
}
if (command === 'export' && fs.existsSync(path.join(dataDir, 'db'))) {
  process.stderr.write(`cluster-transfer: ${dataDir} already holds a datastore; export into a new directory\n`);
  process.exit(2);
}
const client = connect(s);
const store = new Store(path.join(dataDir, 'db'), createRegistry().collectionSpecs());
try {
  const started = Date.now();
  const r = command === 'import' ? await importDataDir(client, s.prefix, store, path.join(dataDir, 'pki')) : await exportDataDir(client, s.prefix, store, path.join(dataDir, 'pki'));
  process.stdout.write(`${command}: ${r.records} records ${command === 'import' ? 'into' : 'from'} ${s.prefix} in ${Date.now() - started} ms\n`);
} catch (e) {
  process.stderr.write(`cluster-transfer: ${(e as Error).message}\n`);
  process.exitCode = 1;
} finally {
  await store.close();
  client.close();
}
