/**
 * Data directory format versions: a new directory is marked current, a directory of the previous
 * format (the datastore with no format.json) is migrated at start with its data intact, and a
 * directory of a newer format is refused with a clear message. Also the controller's own command
 * line (--help, --version) and the warning about an ignored MESH_ADMIN_PASSWORD.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { startServer } from './helpers/server.js';
import { CURRENT_FORMAT, migrate, type Migration } from '../src/store/data-format.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const MAIN = path.join(ROOT, 'dist', 'src', 'main.js');
const format = (dir: string) => JSON.parse(fs.readFileSync(path.join(dir, 'format.json'), 'utf8')).format;

t.test('--help and --version', async (t) => {
  const v = spawnSync(process.execPath, [MAIN, '--version'], { encoding: 'utf8' });
  t.equal(v.status, 0);
  t.match(v.stdout, /^mesh-controller v\d+\.\d+\.\d+\n$/);
  const h = spawnSync(process.execPath, [MAIN, '--help'], { encoding: 'utf8' });
  t.equal(h.status, 0);
  t.match(h.stdout, /MESH_LOG_LEVEL\s+least level of the JSON log on stdout \[logLevel; one of trace, debug, info, warn, error, fatal, silent; default "info"\]/);
  const settings = h.stdout.split('\n').filter((l) => /^ {2}MESH_/.test(l));
  t.ok(settings.length > 40, 'every setting is listed');
  for (const l of settings) t.match(l, /^ {2}MESH_\w+\s+[a-zA-Z].{10,} \[\w+; .+\]$/, `one line, with what it does: ${l.trim().split(/\s/)[0]}`);
  t.match(h.stdout, /MESH_CONFIG/);
  const bad = spawnSync(process.execPath, [MAIN, '--frobnicate'], { encoding: 'utf8' });
  t.equal(bad.status, 2);
  t.match(bad.stderr, /unknown argument "--frobnicate"/);
  const badLevel = spawnSync(process.execPath, [MAIN], { encoding: 'utf8', env: { PATH: process.env.PATH, MESH_LOG_LEVEL: 'loud' } });
  t.equal(badLevel.status, 2);
  t.equal(badLevel.stderr.match(/must be/g)?.length, 1, `one message for one bad setting: ${badLevel.stderr}`);
});

t.test('new directory marked current; previous format migrated with data intact; ignored admin password warned about', async (t) => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-upgrade-'));
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  let srv = await startServer(undefined, { dataDir, keepData: true });
  t.equal(format(dataDir), CURRENT_FORMAT, 'a new directory records the current format');
  const admin = await srv.login();
  const r = await admin.post('/identities', { name: 'survivor', type: 'Device', isAdmin: false });
  t.equal(r.status, 201);
  t.notMatch(srv.output, /MESH_ADMIN_PASSWORD is set/, 'no warning when the admin is created');
  await srv.stop();

  // The previous format: exactly what the code wrote before versions were recorded.
  fs.rmSync(path.join(dataDir, 'format.json'));
  srv = await startServer(undefined, { dataDir, keepData: true });
  t.teardown(() => srv.stop());
  t.equal(format(dataDir), CURRENT_FORMAT, 'migrated to the current format');
  const again = await srv.login();
  const list = await again.get('/identities?filter=name="survivor"');
  t.equal(list.body.data.length, 1, 'records survive the upgrade');
  t.match(srv.output, /MESH_ADMIN_PASSWORD is set but the default admin already exists: it is ignored/, 'the ignored password is warned about');
  t.notMatch(srv.output, /admin-test-password/, 'the password itself is not printed');
  await srv.stop();

  fs.writeFileSync(path.join(dataDir, 'format.json'), JSON.stringify({ format: CURRENT_FORMAT + 1 }));
  const refused = spawnSync(process.execPath, [MAIN], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH, MESH_DATA_DIR: dataDir, MESH_ADDRESS: '127.0.0.1:0', MESH_CERT_ADDRESS: '127.0.0.1:0', MESH_LOG_LEVEL: 'warn' },
    timeout: 30_000,
  });
  t.equal(refused.status, 2, 'a newer directory is refused');
  t.match(refused.stderr, new RegExp(`has data format ${CURRENT_FORMAT + 1}, written by a newer controller; this controller \\(v[^)]+\\) reads format ${CURRENT_FORMAT} and older`));
  t.notMatch(refused.stderr, /\n\s+at /, 'a message, not a stack trace');
  t.equal(format(dataDir), CURRENT_FORMAT + 1, 'the newer directory is left untouched');
});

t.test('migrations run in order from the directory format, each step recorded', async (t) => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-migrate-'));
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const ran: number[] = [];
  const list: Migration[] = [2, 3, 4].map((to) => ({ to, description: `step ${to}`, run: () => void ran.push(to) }));
  const log = { info: () => {} };
  const steps = await migrate({ dataDir, store: undefined as never, log }, 2, list);
  t.same(ran, [3, 4], 'only the steps above the directory format');
  t.same(steps.map((s) => s.to), [3, 4]);
  t.equal(format(dataDir), 4);
  const failing: Migration[] = [{ to: 5, description: 'ok', run: () => {} }, { to: 6, description: 'fails', run: () => { throw new Error('boom'); } }];
  await t.rejects(migrate({ dataDir, store: undefined as never, log }, 4, failing), /boom/);
  t.equal(format(dataDir), 5, 'an interrupted upgrade records the last step that finished');
});
