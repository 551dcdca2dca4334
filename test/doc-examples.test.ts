/**
 * Every command example of README.md and docs/*.md, run as written, in page order, against a real
 * controller: a doc example that fails fails the suite.
 *
 * Each ```sh block is marked on the line before it:
 *   <!-- doc-example: run -->           run with bash against the running controller;
 *   <!-- doc-example: run offline -->   the controller is stopped during the block, then started
 *                                       again on the same ports and data directory;
 *   <!-- doc-example: skip (why) -->    not run (starts the controller itself, a benchmark, Docker, …).
 * An unmarked block fails the first test, so a new example is run or skipped on purpose.
 *
 * The pages set the addresses they use once, in lines of nothing but assignments
 * (`ADDR=127.0.0.1:1280 CERT_ADDR=127.0.0.1:1281 DATA=/tmp/mesh-try`); the test replaces the
 * values of the variables it knows (VARS) with those of its controller and leaves every other
 * line as written. Blocks run one after the other in one temporary working directory (files one
 * block writes are there for the next) with their own CLI state, under `set -euo pipefail`, with
 * `curl` failing on an HTTP error (`--fail-with-body`) and `npx mesh` running the built CLI.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { startServer, type Server } from './helpers/server.js';
import { freePort } from './helpers/ports.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CLI = path.join(ROOT, 'dist', 'src', 'cli', 'main.js');
const PAGES = ['README.md', ...fs.readdirSync(path.join(ROOT, 'docs')).filter((n) => n.endsWith('.md')).sort().map((n) => `docs/${n}`)];
/** The admin password of the README's walkthrough (its `npm start` block sets it). */
const PASSWORD = 'secret123';

interface Block {
  page: string;
  line: number;
  mode: 'run' | 'run offline' | 'skip' | 'unmarked';
  reason?: string;
  text: string;
}

const MARK = /^<!--\s*doc-example:\s*(run offline|run|skip)\s*(?:\((.+)\))?\s*-->$/;

function blocks(page: string): Block[] {
  const lines = fs.readFileSync(path.join(ROOT, page), 'utf8').split('\n');
  const out: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (!/^```sh\s*$/.test(lines[i])) continue;
    const m = MARK.exec(lines[i - 1]?.trim() ?? '');
    const end = lines.findIndex((l, j) => j > i && /^```\s*$/.test(l));
    out.push({ page, line: i + 1, mode: m ? (m[1] as Block['mode']) : 'unmarked', reason: m?.[2], text: lines.slice(i + 1, end).join('\n') });
    i = end;
  }
  return out;
}

const quote = (v: string) => `'${v.replace(/'/g, `'\\''`)}'`;

/** Lines of nothing but `NAME=value` assignments get the test's value for every NAME it knows. */
export function substitute(text: string, vars: Record<string, string>): string {
  const assignment = /([A-Z_][A-Z0-9_]*)=('[^']*'|"[^"]*"|\S+)/g;
  return text
    .split('\n')
    .map((line) => {
      const hash = line.search(/\s#/);
      const code = hash < 0 ? line : line.slice(0, hash);
      if (!/^\s*([A-Z_][A-Z0-9_]*=('[^']*'|"[^"]*"|\S+)\s*)+$/.test(code)) return line;
      return code.replace(assignment, (all, name: string) => (name in vars ? `${name}=${quote(vars[name])}` : all)) + (hash < 0 ? '' : line.slice(hash));
    })
    .join('\n');
}

const PRELUDE = `set -euo pipefail
curl() { command curl --fail-with-body "$@"; }
npx() {
  if [ "$1" = mesh ]; then shift; node "$MESH_CLI" "$@"; return; fi
  echo "doc example: npx $1 is not run by this test" >&2; return 1
}
`;

function bash(script: string, cwd: string, env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const p = spawn('bash', ['-c', PRELUDE + script], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], timeout: 180_000 });
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (out += d));
    p.on('close', (code) => resolve({ code, out }));
  });
}

const all = PAGES.flatMap(blocks);
// A controller, a restart and every example one after the other: longer than most files on a busy machine.
t.setTimeout(600_000);

t.test('every sh block of the README and docs/ is marked run or skip', async (t) => {
  t.ok(all.filter((b) => b.mode !== 'skip').length >= 5, 'there are examples to run');
  for (const b of all) {
    t.not(b.mode, 'unmarked', `${b.page}:${b.line}: mark it <!-- doc-example: run --> or <!-- doc-example: skip (why) -->`);
    if (b.mode === 'skip') t.ok(b.reason, `${b.page}:${b.line}: a skipped example says why`);
  }
  // Commands in a fence without a language would escape the test: they must be sh blocks.
  for (const page of PAGES) {
    const lines = fs.readFileSync(path.join(ROOT, page), 'utf8').split('\n');
    let open: string | undefined;
    lines.forEach((l, i) => {
      if (!l.startsWith('```')) return;
      if (open === undefined) open = l.slice(3).trim();
      else {
        open = undefined;
        return;
      }
      if (open === '' && /^\s*(npx|npm|curl|node|mesh) /.test(lines[i + 1] ?? '')) t.fail(`${page}:${i + 1}: a command example in a fence without a language; make it \`\`\`sh and mark it`);
    });
  }
  t.match(fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8'), `MESH_ADMIN_PASSWORD=${PASSWORD} `, 'the README starts its controller with the password this test uses');
  t.equal(substitute('A=1 B="x y" C=3   # note\nA=1 echo', { A: '9', B: "it's" }), `A='9' B='it'\\''s' C=3   # note\nA=1 echo`, 'only assignment lines change');
});

t.test('the examples run, in order, against a real controller', async (t) => {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-doc-examples-'));
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-doc-data-'));
  t.teardown(() => {
    for (const d of [work, dataDir]) fs.rmSync(d, { recursive: true, force: true });
  });
  // Fixed ports: an offline block stops the controller, and the next blocks find it where it was.
  const [port, certPort] = [await freePort(), await freePort()];
  const start = () =>
    startServer(undefined, {
      dataDir,
      keepData: true,
      env: { MESH_ADDRESS: `127.0.0.1:${port}`, MESH_CERT_ADDRESS: `127.0.0.1:${certPort}`, MESH_ADMIN_PASSWORD: PASSWORD },
    });
  let srv: Server = await start();
  t.teardown(() => srv.stop());
  const vars: Record<string, string> = {
    ADDR: `127.0.0.1:${port}`,
    CERT_ADDR: `127.0.0.1:${certPort}`,
    URL: `https://127.0.0.1:${port}`,
    DATA: dataDir,
    CA: path.join(dataDir, 'pki', 'ca-bundle.pem'),
    PASSWORD,
    SEARCH: `https://127.0.0.1:${port}/search`,
    CREDS: `admin:${PASSWORD}`,
  };
  const env = {
    PATH: process.env.PATH ?? '',
    HOME: work,
    XDG_CONFIG_HOME: path.join(work, '.config'),
    MESH_CLI: CLI,
    // The controller's own cheap test hashing, for `mesh admin reset-password`.
    MESH_ARGON2_MEMORY_KIB: '1024',
    MESH_ARGON2_ITERATIONS: '1',
  };
  for (const b of all) {
    if (b.mode === 'skip' || b.mode === 'unmarked') continue;
    if (b.mode === 'run offline') await srv.stop();
    const r = await bash(substitute(b.text, vars), work, env);
    t.equal(r.code, 0, `${b.page}:${b.line} runs${r.code === 0 ? '' : `:\n${r.out.slice(-3000)}`}`);
    if (b.mode === 'run offline') srv = await start();
  }
});

t.test('every line the controller writes on stdout is JSON; the address lines are on stderr', async (t) => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-doc-stdout-'));
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const p = spawn(process.execPath, [path.join(ROOT, 'dist', 'src', 'main.js')], {
    env: { PATH: process.env.PATH ?? '', MESH_DATA_DIR: dataDir, MESH_ADDRESS: '127.0.0.1:0', MESH_LOG_LEVEL: 'info', MESH_ARGON2_MEMORY_KIB: '1024', MESH_ARGON2_ITERATIONS: '1', MESH_WORKERS: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  p.stdout.on('data', (d) => (stdout += d));
  const exited = new Promise<number | null>((resolve) => p.once('exit', resolve));
  await new Promise<void>((resolve, reject) => {
    p.stderr.on('data', (d) => {
      stderr += d;
      if (/certificate listener on https:/.test(stderr)) resolve();
    });
    p.once('exit', () => reject(new Error(`exited before listening: ${stderr}`)));
  });
  p.kill('SIGTERM');
  await exited;
  t.match(stderr, /mesh-controller listening on https:\/\/127\.0\.0\.1:\d+\n/, 'the address line is on stderr');
  t.match(stderr, /created the default admin "admin" with password/, 'so is the first admin password');
  const lines = stdout.split('\n').filter(Boolean);
  t.ok(lines.length >= 2, 'the log has lines');
  for (const l of lines) t.doesNotThrow(() => JSON.parse(l), `JSON: ${l.slice(0, 80)}`);
});
