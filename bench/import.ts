/**
 * bench:import — `mesh import` (src/cli/import.ts) against the disk's pace (issue #35): a JSON-lines
 * file of --identities `POST /identities` bodies, each with an ott enrollment, imported into a
 * stopped controller's fresh data directory, then the ceiling of the same run: raw durable LMDB
 * puts of as many records of the same sizes (an identity and its enrollment per line), in
 * transactions of the same group size, as many committing at once as the import lets.
 * Writes bench/results/import-<ts>.json (and import-latest.json).
 *
 *   npm run bench:import                          # 100,000 identities
 *   npm run bench:import -- --identities 20000 --batch 1000
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { open } from 'lmdb';
import { parseCli, intFlag } from './lib/cli.js';
import { machineInfo, table, fmt, writeResults } from './lib/report.js';
import { writeModelToStore } from '../scripts/lib/model.js';
import { importIdentities } from '../src/cli/import.js';
import { createRegistry } from '../src/resources/index.js';
import { Store } from '../src/store/store.js';

const argv = parseCli({
  name: 'bench:import',
  summary: `mesh import of --identities identities (JSON lines, an ott enrollment each) into a fresh
data directory: identities/s over the whole command (open, validate, sign and seal, write, compact),
CPU per identity (process, every thread) and of it the main thread's (what reads, validates and
writes; the workers sign and seal). Ceiling of
the same run: raw durable LMDB puts (opened as the store opens its own) of as many records of the
same sizes (an identity and its enrollment per line), in transactions of --batch identities, as
many in flight as the import keeps (4). Ratio: the import's rate over the ceiling's.`,
  usage: ['npm run bench:import', 'npm run bench:import -- --identities 20000'],
  flags: {
    identities: { type: 'string', default: '100000', help: 'identities imported' },
    batch: { type: 'string', default: '1000', help: 'identities per write (mesh import --batch)' },
  },
});
const N = intFlag(argv, 'identities', 1, 10_000_000);
const BATCH = intFlag(argv, 'batch', 1, 100_000);
/** BulkWriter's groups in flight (src/cli/import.ts). */
const IN_FLIGHT = 4;

const work = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-bench-import-'));
const dataDir = path.join(work, 'data');
// The enrollment JWTs name these; nothing listens there.
const env = { ...process.env, MESH_ADDRESS: '127.0.0.1:1280', MESH_CERT_ADDRESS: '127.0.0.1:1281', MESH_ADMIN_PASSWORD: 'bench-admin-password' };
const log = (s: string) => process.stderr.write(`${s}\n`);

try {
  // A data directory as after a first start (the built-in records, the default admin) and a model of one of each.
  await writeModelToStore(dataDir, { name: 'one', identities: 1, services: 1, edgeRouters: 1, servicePolicies: 1, edgeRouterPolicies: 1, serviceEdgeRouterPolicies: 1 }, { seed: 1, env });
  const file = path.join(work, 'fleet.jsonl');
  const out = fs.createWriteStream(file);
  for (let i = 0; i < N; i++) {
    const body = { name: `sensor-${String(i).padStart(7, '0')}`, type: 'Default', isAdmin: false, roleAttributes: [`plant-${i % 50}`, 'sensor'], enrollment: { ott: true } };
    if (!out.write(JSON.stringify(body) + '\n')) await new Promise<void>((r) => out.once('drain', () => r()));
  }
  await new Promise<void>((r) => out.end(() => r()));

  log(`importing ${N.toLocaleString('en')} identities in groups of ${BATCH} (load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')})`);
  const cpu0 = process.cpuUsage();
  const main0 = mainThreadCpuSeconds();
  const t0 = performance.now();
  const imported = await importIdentities(file, { dataDir, env, batch: BATCH });
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const mainCpu = mainThreadCpuSeconds() - main0;
  if (imported !== N) throw new Error(`imported ${imported} of ${N}`);

  // What one line became on disk: its identity and its enrollment, as the store encodes them.
  const store = new Store(path.join(dataDir, 'db'), createRegistry().collectionSpecs());
  const identity = store.findUnique('identities', 'name', 'sensor-0000000')!;
  const enrollment = store.get('enrollments', store.idsByIndex('enrollments', 'identityId', identity.id)[0])!;
  const sizes = [identity, enrollment].map((r) => Buffer.byteLength(JSON.stringify(r)));
  await store.close();

  const ceiling = await rawPuts(path.join(work, 'raw'), N, BATCH, sizes);
  const rate = imported / seconds;
  const row = {
    identitiesPerSec: Math.round(rate),
    seconds: Math.round(seconds * 100) / 100,
    cpuUsPerIdentity: Math.round(((cpu.user + cpu.system) / N) * 10) / 10,
    mainThreadCpuUsPerIdentity: Math.round(((mainCpu * 1e6) / N) * 10) / 10,
    ceilingIdentitiesPerSec: Math.round(ceiling.perSec),
    ratio: Math.round((rate / ceiling.perSec) * 1000) / 1000,
  };
  console.log(
    table(
      ['', 'identities/s', 's', 'CPU µs/identity', 'of it main thread', 'ratio'],
      [
        [`mesh import, ${N} identities, groups of ${BATCH}`, row.identitiesPerSec, fmt(row.seconds, 1), fmt(row.cpuUsPerIdentity, 1), fmt(row.mainThreadCpuUsPerIdentity, 1), fmt(row.ratio, 3)],
        [`ceiling: ${ceiling.what}`, row.ceilingIdentitiesPerSec, fmt(ceiling.seconds, 1), '-', '-', '1.000'],
      ],
    ),
  );
  const saved = writeResults('import', { machine: machineInfo(), identities: N, batch: BATCH, recordBytes: sizes, import: row, ceiling });
  log(`results: ${saved}`);
} finally {
  fs.rmSync(work, { recursive: true, force: true });
}

/**
 * CPU seconds of the main thread so far (Linux: utime + stime of /proc/self/task/<pid>/stat, in
 * the kernel's 100 Hz ticks): the machine is shared, so wall time alone says little of the cost.
 */
function mainThreadCpuSeconds(): number {
  const stat = fs.readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/**
 * `count` lines' records (one value of each of `sizes` per line) put durably, `batch` lines per
 * transaction, `IN_FLIGHT` transactions at a time, in an environment opened as the store opens its own.
 */
async function rawPuts(dir: string, count: number, batch: number, sizes: number[]): Promise<{ what: string; perSec: number; seconds: number }> {
  const env = open({ path: dir, maxDbs: 4, mapSize: 2 * 1024 ** 3, compression: false, overlappingSync: false });
  const dbs = sizes.map((_, k) => env.openDB<Buffer, string>({ name: `raw${k}`, encoding: 'binary' }));
  const values = sizes.map((n) => Buffer.alloc(n, 7));
  // Keys that grow with time, as the store's ids do.
  const key = (i: number) => `${Date.now().toString(36).padStart(10, '0')}-${i.toString(36).padStart(8, '0')}`;
  try {
    const t0 = performance.now();
    const inFlight: Promise<unknown>[] = [];
    for (let start = 0; start < count; start += batch) {
      const end = Math.min(count, start + batch);
      inFlight.push(
        env.transaction(() => {
          for (let i = start; i < end; i++) for (let k = 0; k < dbs.length; k++) dbs[k].put(key(i), values[k]);
        }),
      );
      while (inFlight.length >= IN_FLIGHT) await inFlight.shift();
    }
    await Promise.all(inFlight);
    const seconds = (performance.now() - t0) / 1000;
    return { what: `durable LMDB puts of ${sizes.join(' + ')} B per line, ${batch} lines a transaction, ${IN_FLIGHT} in flight`, perSec: count / seconds, seconds: Math.round(seconds * 100) / 100 };
  } finally {
    await env.close();
  }
}
