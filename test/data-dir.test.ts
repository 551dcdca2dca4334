/**
 * The data directory: started under umask 000, every directory is 0700 and every file 0600 (the
 * datastore, its snapshots, the event search index, the PKI); looser modes left by an older
 * version are tightened at start-up; a second controller on a live directory refuses to start
 * with a clear message and a non-zero exit, and takes the directory over after the first was
 * killed with SIGKILL, data intact; a snapshot copy a crash left half-made is removed.
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer, ADMIN_PASSWORD, controllerExit } from './helpers/server.js';


/** Every path under `dir` (itself included) whose mode is not owner-only. */
function loose(dir: string): string[] {
  const out: string[] = [];
  const walk = (p: string) => {
    const st = fs.lstatSync(p);
    const want = st.isDirectory() ? 0o700 : 0o600;
    if (!st.isSymbolicLink() && (st.mode & 0o777) !== want) out.push(`${path.relative(dir, p) || '.'} ${(st.mode & 0o777).toString(8)}`);
    if (st.isDirectory()) for (const n of fs.readdirSync(p)) walk(path.join(p, n));
  };
  walk(dir);
  return out;
}

/** Start a second controller on `dataDir` and wait for it to exit (it must not start). */
const second = (dataDir: string) =>
  controllerExit({ PATH: process.env.PATH ?? '', MESH_DATA_DIR: dataDir, MESH_ADDRESS: '127.0.0.1:0', MESH_CERT_ADDRESS: '127.0.0.1:0', MESH_ADMIN_PASSWORD: ADMIN_PASSWORD, MESH_LOG_LEVEL: 'warn', MESH_WORKERS: '1' });

t.test('owner-only modes under umask 000', async (t) => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-modes-'));
  fs.chmodSync(dataDir, 0o777);
  const old = process.umask(0);
  let srv;
  try {
    srv = await startServer(t, { dataDir });
  } finally {
    process.umask(old);
  }
  const admin = await srv.login();
  const r = await admin.post('/identities', { name: 'modes-1', type: 'User', isAdmin: false, enrollment: { ott: true } });
  t.equal(r.status, 201);
  const snap = await admin.post('/database/snapshot');
  t.equal(snap.status, 200, `snapshot: ${snap.text.slice(0, 200)}`);
  for (const d of ['db', 'pki', 'snapshots']) t.ok(fs.existsSync(path.join(dataDir, d)), `${d}/ exists`);
  t.same(loose(dataDir), [], 'every directory 0700, every file 0600');
});

t.test('a second controller refuses a live directory and takes it over after kill -9', async (t) => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-lock-'));
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const first = await startServer(undefined, { dataDir, keepData: true });
  const admin = await first.login();
  t.equal((await admin.post('/identities', { name: 'kept-1', type: 'User', isAdmin: false })).status, 201);

  const refused = await second(dataDir);
  t.not(refused.code, 0, `the second controller exits non-zero (${refused.code})`);
  t.match(refused.output, new RegExp(`data directory .* is in use by another controller \\(pid ${first.proc.pid}\\)`), 'and says which process holds it');
  t.equal((await admin.get('/identities?filter=name="kept-1"')).body.data.length, 1, 'the first one still serves');

  // A snapshot copy a crash interrupted (as the copy starts: an empty directory).
  fs.mkdirSync(path.join(dataDir, 'snapshots', 'db-20260101T000000Z.partial'), { recursive: true });
  // Looser modes left by an older version.
  fs.chmodSync(path.join(dataDir, 'db'), 0o755);
  fs.chmodSync(path.join(dataDir, 'controller.id'), 0o644);

  await first.stop('SIGKILL');
  const again = await startServer(t, { dataDir, keepData: true });
  const admin2 = await again.login();
  t.equal((await admin2.get('/identities?filter=name="kept-1"')).body.data.length, 1, 'taken over after kill -9, data intact');
  t.same(fs.readdirSync(path.join(dataDir, 'snapshots')), [], 'the half-made snapshot is gone');
  t.same(loose(dataDir), [], 'looser modes were tightened');
  const refusedAgain = await second(dataDir);
  t.not(refusedAgain.code, 0, 'and the new holder is protected in turn');
});
