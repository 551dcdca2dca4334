/**
 * Runs the real controller (`node dist/src/main.js`) as a child process for a benchmark: a fresh
 * data directory, port 0 on 127.0.0.1, the bound address read from what it prints, its CA bundle, and
 * a guaranteed stop (SIGINT, then SIGKILL) at the end, on error, on Ctrl-C and on exit.
 *
 *   const ctl = await spawnController({ password: 'bench-admin-pw' });
 *   ctl.origin          // https://127.0.0.1:40123
 *   ctl.memory()        // { rssKiB, hwmKiB } from /proc/<pid>/status
 *   await ctl.stop();
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { HttpClient } from './http.js';
import { requestJson } from './http.js';
import { NODE_FLAGS } from '../../src/node-flags.js';

/** Repository root (this file is dist/bench/lib/controller.js once built). */
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
export const MAIN = path.join(ROOT, 'dist', 'src', 'main.js');
export const MGMT = '/edge/management/v1';

export interface SpawnOptions {
  password: string;
  /** Extra environment (MESH_* settings). */
  env?: Record<string, string>;
  /** Extra node flags, e.g. ['--cpu-prof', '--cpu-prof-dir=/tmp/prof']. */
  nodeArgs?: string[];
  /** Keep the data directory after stop (default: removed). */
  keepData?: boolean;
  /** Use this (e.g. pre-seeded) data directory instead of a fresh temporary one. */
  dataDir?: string;
  /** Listen address (default 127.0.0.1:0). */
  address?: string;
  readyTimeoutMs?: number;
}

export interface ControllerProcess {
  readonly pid: number;
  readonly port: number;
  readonly origin: string;
  readonly dataDir: string;
  readonly ca: Buffer;
  /** Everything it printed (stdout + stderr), capped at 64 KiB. */
  output(): string;
  /** Every `listening on https://…` URL printed so far, in order (the API first; a mutual-TLS
   *  certificate listener, when the controller has one, prints a second line). */
  listeners(): string[];
  /** Resident set size now and its peak, from /proc/<pid>/status (undefined if unreadable). */
  memory(): { rssKiB: number; hwmKiB: number } | undefined;
  /** CPU time (user + system) the controller has used so far, in ms (undefined if unreadable). */
  cpuMs(): number | undefined;
  /** The same for its main thread alone (the event loop; worker pool and native threads excluded). */
  mainThreadCpuMs(): number | undefined;
  /** SIGINT (clean shutdown; lets --cpu-prof write its file), SIGKILL after `graceMs`. */
  stop(graceMs?: number): Promise<{ code: number | null; signal: string | null }>;
}

const live = new Set<ChildProcess>();
let hooksInstalled = false;

function installHooks() {
  if (hooksInstalled) return;
  hooksInstalled = true;
  // Last resort: never leave a controller behind.
  process.on('exit', () => {
    for (const p of live) p.kill('SIGKILL');
  });
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.on(sig, () => {
      for (const p of live) p.kill('SIGKILL');
      process.exit(130);
    });
  }
}

export async function spawnController(opts: SpawnOptions): Promise<ControllerProcess> {
  installHooks();
  if (!fs.existsSync(MAIN)) throw new Error(`${MAIN} not found: run npm run build first`);
  const dataDir = opts.dataDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-bench-'));
  const proc = spawn(process.execPath, [...NODE_FLAGS, ...(opts.nodeArgs ?? []), MAIN], {
    cwd: ROOT,
    env: {
      ...process.env,
      MESH_DATA_DIR: dataDir,
      MESH_ADDRESS: opts.address ?? '127.0.0.1:0',
      MESH_ADMIN_PASSWORD: opts.password,
      MESH_LOG_LEVEL: 'warn',
      ...opts.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  live.add(proc);
  let out = '';
  const append = (d: Buffer) => {
    if (out.length < 65536) out += d.toString();
  };
  proc.stdout!.on('data', append);
  proc.stderr!.on('data', append);
  const exited = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
    proc.once('exit', (code, signal) => {
      live.delete(proc);
      resolve({ code, signal });
    }),
  );

  const cleanup = () => {
    if (!opts.keepData && !opts.dataDir) fs.rmSync(dataDir, { recursive: true, force: true });
  };

  let port: number;
  try {
    port = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`controller not listening after ${opts.readyTimeoutMs ?? 60_000} ms:\n${out}`)), opts.readyTimeoutMs ?? 60_000);
      const check = () => {
        const m = /mesh-controller listening on https:\/\/[^\s]*:(\d+)/.exec(out);
        if (m) {
          clearTimeout(timer);
          resolve(Number(m[1]));
        }
      };
      // The address lines are on stderr, the JSON log on stdout.
      proc.stdout!.on('data', check);
      proc.stderr!.on('data', check);
      proc.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`controller exited (${code ?? signal}) before listening:\n${out}`));
      });
    });
  } catch (e) {
    proc.kill('SIGKILL');
    await exited;
    cleanup();
    throw e;
  }

  let stopping: Promise<{ code: number | null; signal: string | null }> | undefined;
  return {
    pid: proc.pid!,
    port,
    origin: `https://127.0.0.1:${port}`,
    dataDir,
    ca: fs.readFileSync(path.join(dataDir, 'pki', 'ca-bundle.pem')),
    output: () => out,
    listeners: () => [...out.matchAll(/listening on (https:\/\/[^\s]+)/g)].map((m) => m[1]),
    memory: () => readMemory(proc.pid!),
    cpuMs: () => readCpuMs(proc.pid!),
    mainThreadCpuMs: () => readCpuMs(proc.pid!, proc.pid!),
    stop: (graceMs = 20_000) =>
      (stopping ??= (async () => {
        if (proc.exitCode === null && proc.signalCode === null) {
          proc.kill('SIGINT');
          const t = setTimeout(() => proc.kill('SIGKILL'), graceMs);
          const r = await exited;
          clearTimeout(t);
          cleanup();
          return r;
        }
        const r = await exited;
        cleanup();
        return r;
      })()),
  };
}

export function readMemory(pid: number): { rssKiB: number; hwmKiB: number } | undefined {
  try {
    const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const rss = /VmRSS:\s+(\d+)\s+kB/.exec(s);
    const hwm = /VmHWM:\s+(\d+)\s+kB/.exec(s);
    if (!rss) return undefined;
    return { rssKiB: Number(rss[1]), hwmKiB: hwm ? Number(hwm[1]) : Number(rss[1]) };
  } catch {
    return undefined;
  }
}

/** utime + stime of a process from /proc/<pid>/stat, in ms (assumes the usual 100 Hz clock tick). */
export function readCpuMs(pid: number, thread?: number): number | undefined {
  try {
    const s = fs.readFileSync(thread === undefined ? `/proc/${pid}/stat` : `/proc/${pid}/task/${thread}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * 10; // fields 14 and 15 of the full line
  } catch {
    return undefined;
  }
}

/** CPU ms of each of the process's threads by thread id (the main thread's is the process id). */
export function readThreadCpuMs(pid: number): Map<number, number> {
  const out = new Map<number, number>();
  let tids: string[] = [];
  try {
    tids = fs.readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    const ms = readCpuMs(pid, Number(tid));
    if (ms !== undefined) out.set(Number(tid), ms);
  }
  return out;
}

/** Password login on the Management API; returns the `zt-session` token. */
export async function login(client: HttpClient, username: string, password: string): Promise<string> {
  const r = await requestJson(client, 'POST', `${MGMT}/authenticate?method=password`, { accept: 'application/json' }, { username, password });
  const token = r.body?.data?.token;
  if (r.status !== 200 || typeof token !== 'string') throw new Error(`login failed: ${r.status} ${JSON.stringify(r.body)}`);
  return token;
}

/** The controller's group-commit counters (`mesh_store_commit*` of /metrics). */
export interface CommitCounters {
  commits: number;
  writes: number;
  seconds: number;
}

export async function readCommitCounters(client: HttpClient): Promise<CommitCounters | undefined> {
  const r = await client.request({ method: 'GET', path: '/metrics', headers: {}, wantBody: true });
  if (r.status !== 200 || !r.body) return undefined;
  const text = r.body.toString('utf8');
  const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
  return { commits: value('mesh_store_commits_total'), writes: value('mesh_store_committed_writes_total'), seconds: value('mesh_store_commit_seconds_total') };
}

/** Writes per transaction and mean time to durable over a window of two readings. */
export function commitDelta(a: CommitCounters | undefined, b: CommitCounters | undefined): { commits: number; writesPerCommit: number; meanCommitMs: number } | undefined {
  if (!a || !b || !(b.commits > a.commits)) return undefined;
  const commits = b.commits - a.commits;
  return { commits, writesPerCommit: Math.round(((b.writes - a.writes) / commits) * 10) / 10, meanCommitMs: Math.round(((b.seconds - a.seconds) / commits) * 1e5) / 100 };
}
