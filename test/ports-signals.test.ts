/**
 * One controller per port, and stopping as supervisors stop it. A second controller started on a
 * port another controller (or any program) listens on exits with status 3 and a message naming
 * the port and the cause, no stack trace, while the first keeps answering every request; a busy
 * port stops a first start before anything exists on disk, and the generated admin password
 * comes with the start that serves. SIGTERM or SIGINT to the controller `npm start` runs, to npm
 * itself or to the whole process group stops it cleanly, releasing its ports and data directory.
 * Real processes throughout: `node dist/src/main.js`, and npm running the repository's start script.
 */
import t, { type Test } from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { tryLock, unlock } from 'fs-native-extensions';
import { startServer, ADMIN_PASSWORD, controllerExit } from './helpers/server.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

const BASE_ENV = {
  PATH: process.env.PATH ?? '',
  MESH_ADMIN_PASSWORD: ADMIN_PASSWORD,
  MESH_LOG_LEVEL: 'warn',
  MESH_ARGON2_MEMORY_KIB: '1024',
  MESH_ARGON2_ITERATIONS: '1',
  MESH_WORKERS: '1',
};

/** A data directory path that does not exist yet (its parent is removed when `t` ends). */
function freshDataDir(t: Test): string {
  const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-ports-'));
  t.teardown(() => fs.rmSync(parent, { recursive: true, force: true }));
  return path.join(parent, 'data');
}

/** Start a controller that must not start; resolves with its exit code and output. */
const failedStart = (env: Record<string, string>) => controllerExit({ ...BASE_ENV, ...env });

/** A plain TCP listener on 127.0.0.1 (port 0: any), standing for "some other program". */
function occupy(t: Test, port = 0): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer((c) => c.destroy());
    s.once('error', reject);
    s.listen(port, '127.0.0.1', () => {
      t.teardown(() => new Promise<void>((r) => s.close(() => r())));
      resolve((s.address() as net.AddressInfo).port);
    });
  });
}

/** Whether 127.0.0.1:port can be listened on now. */
function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen({ port, host: '127.0.0.1', exclusive: true }, () => s.close(() => resolve(true)));
  });
}

function assertRefused(t: Test, r: { code: number | null; output: string }, port: number, setting: string) {
  t.equal(r.code, 3, `exit status 3 (${r.code})`);
  t.match(r.output, `cannot listen on 127.0.0.1:${port}: the port is already in use (EADDRINUSE)`, 'names the port and the cause');
  t.match(r.output, setting, `names the setting ${setting}`);
  t.notMatch(r.output, /\n\s+at /, 'no stack trace');
}

t.test('a second controller on a port the first serves exits 3; the first answers every request', async (t) => {
  const first = await startServer(t);
  const before = await first.login();
  t.ok(before.token);

  const apiDir = freshDataDir(t);
  const onApi = await failedStart({ MESH_DATA_DIR: apiDir, MESH_ADDRESS: `127.0.0.1:${first.port}`, MESH_CERT_ADDRESS: '127.0.0.1:0' });
  assertRefused(t, onApi, first.port, 'MESH_ADDRESS');
  t.notOk(fs.existsSync(apiDir), 'nothing created on disk');

  const certDir = freshDataDir(t);
  const onCert = await failedStart({ MESH_DATA_DIR: certDir, MESH_ADDRESS: '127.0.0.1:0', MESH_CERT_ADDRESS: `127.0.0.1:${first.certPort}` });
  assertRefused(t, onCert, first.certPort, 'MESH_CERT_ADDRESS');
  t.notOk(fs.existsSync(certDir), 'nothing created on disk');

  // Every login reaches the one controller that has this admin (a shared port would send some
  // of them to the second, where this password does not exist).
  const logins = await Promise.all(Array.from({ length: 12 }, () => first.mgmt.post('/authenticate?method=password', { username: 'admin', password: ADMIN_PASSWORD })));
  t.same(logins.map((r) => r.status), Array(12).fill(200), 'all 12 logins answered by the first controller');
  const ids = await Promise.all(Array.from({ length: 12 }, () => before.get('/current-identity')));
  t.same(ids.map((r) => r.status), Array(12).fill(200), 'its session is valid on every request');
});

t.test('a port any other program listens on is refused the same way', async (t) => {
  const busy = await occupy(t);
  const r = await failedStart({ MESH_DATA_DIR: freshDataDir(t), MESH_ADDRESS: `127.0.0.1:${busy}`, MESH_CERT_ADDRESS: '127.0.0.1:0' });
  assertRefused(t, r, busy, 'MESH_ADDRESS');
});

t.test('a busy port stops a first start before anything exists; the password comes with the start that serves', async (t) => {
  const dataDir = freshDataDir(t);
  const busy = await occupy(t);
  const env = { MESH_DATA_DIR: dataDir, MESH_ADDRESS: '127.0.0.1:0', MESH_CERT_ADDRESS: `127.0.0.1:${busy}`, MESH_ADMIN_PASSWORD: '' };
  const r = await failedStart(env);
  assertRefused(t, r, busy, 'MESH_CERT_ADDRESS');
  t.notOk(fs.existsSync(dataDir), 'no data directory: no PKI, no store, no admin');
  t.notMatch(r.output, /with password/, 'no password printed by the start that failed');

  const srv = await startServer(t, { dataDir, env: { MESH_ADMIN_PASSWORD: '' } });
  const m = /created the default admin "admin" with password: (\S+)/.exec(srv.output);
  t.ok(m, 'the start that serves prints the generated password');
  const admin = await srv.login('admin', m?.[1] ?? '');
  t.ok(admin.token, 'and it logs in');
});

// ---- Signals through npm ----

interface NpmStart {
  npm: ChildProcess;
  output: () => string;
  /** The controller's pid (from the data directory's lock file). */
  pid: number;
  port: number;
  certPort: number;
  dataDir: string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** `npm start` in the repository, in a process group of its own, on port 0 and a fresh data directory. */
async function npmStart(t: Test): Promise<NpmStart> {
  const dataDir = freshDataDir(t);
  const npm = spawn('npm', ['start'], {
    cwd: ROOT,
    detached: true,
    env: { ...BASE_ENV, HOME: process.env.HOME ?? os.tmpdir(), npm_config_update_notifier: 'false', MESH_LOG_LEVEL: 'info', MESH_DATA_DIR: dataDir, MESH_ADDRESS: '127.0.0.1:0', MESH_CERT_ADDRESS: '127.0.0.1:0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  npm.stdout!.on('data', (d) => (output += d));
  npm.stderr!.on('data', (d) => (output += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => npm.once('exit', (code, signal) => resolve({ code, signal })));
  t.teardown(() => {
    // Whatever a failed assertion left running.
    try {
      process.kill(-npm.pid!, 'SIGKILL');
    } catch {}
  });
  const [port, certPort] = await new Promise<[number, number]>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`npm start did not start in 60 s:\n${output}`)), 60_000);
    const check = () => {
      const m = /listening on https:\/\/[^\s]*:(\d+)/.exec(output);
      const c = /certificate listener on https:\/\/[^\s]*:(\d+)/.exec(output);
      if (m && c) {
        clearTimeout(timer);
        resolve([Number(m[1]), Number(c[1])]);
      }
    };
    npm.stdout!.on('data', check);
    npm.stderr!.on('data', check);
    void exited.then(() => reject(new Error(`npm start exited before listening:\n${output}`)));
  });
  const pid = Number.parseInt(fs.readFileSync(path.join(dataDir, 'controller.lock'), 'utf8'), 10);
  return { npm, output: () => output, pid, port, certPort, dataDir, exited };
}

/** The parent pid of `pid` (Linux /proc). */
function parentOf(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
}

/** Resolves once `pid` no longer exists (it need not be our child); false after 30 s. */
async function gone(pid: number): Promise<boolean> {
  for (let i = 0; i < 300; i++) {
    try {
      process.kill(pid, 0);
    } catch {
      return true;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

const CASES: Array<{ target: 'controller' | 'npm' | 'group'; signal: NodeJS.Signals }> = [
  { target: 'controller', signal: 'SIGTERM' },
  { target: 'npm', signal: 'SIGTERM' },
  { target: 'group', signal: 'SIGTERM' },
  { target: 'group', signal: 'SIGINT' },
];

for (const { target, signal } of CASES) {
  const to = { controller: 'the controller npm start runs', npm: 'npm itself', group: 'the process group of npm start' }[target];
  t.test(`${signal} to ${to}: the controller stops cleanly, port and lock released`, async (t) => {
    const s = await npmStart(t);
    t.equal(parentOf(s.pid), s.npm.pid, 'the controller is npm\'s own child (the start script execs node, no shell between)');
    if (target === 'controller') {
      process.kill(s.pid, signal);
      // A second signal while stopping (as a supervisor that repeats itself sends) changes nothing.
      process.kill(s.pid, signal === 'SIGTERM' ? 'SIGINT' : 'SIGTERM');
    } else if (target === 'npm') s.npm.kill(signal);
    else process.kill(-s.npm.pid!, signal);
    t.ok(await gone(s.pid), 'the controller process has exited');
    const npmExit = await s.exited;
    t.same(npmExit, { code: 0, signal: null }, 'npm exits 0: the controller exited 0');
    const out = s.output();
    // The kernel delivers two pending signals lowest number first: SIGINT may come before SIGTERM.
    t.match(out, target === 'controller' ? /"signal":"SIG(TERM|INT)","msg":"stopping"/ : `"signal":"${signal}","msg":"stopping"`, 'the controller stopped on the signal');
    t.match(out, '"msg":"stopped"', 'and finished its shutdown');
    t.equal(out.match(/"msg":"stopping"/g)?.length, 1, 'one shutdown, however many signals');
    t.notMatch(out, /shutdown took too long|error while stopping|UNHANDLED|uncaught/i);
    t.ok(await canListen(s.port), 'API port released');
    t.ok(await canListen(s.certPort), 'certificate port released');
    const fd = fs.openSync(path.join(s.dataDir, 'controller.lock'), 'r+');
    t.ok(tryLock(fd), 'data directory lock released');
    unlock(fd);
    fs.closeSync(fd);
  });
}
