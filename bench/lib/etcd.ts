/**
 * A real etcd cluster for tests and benchmarks: N members (`/usr/bin/etcd`) on free loopback ports
 * with temporary data directories. Members can be killed (kill -9) and started again on the same
 * ports and data; `leader()` asks etcd which member leads. Everything is torn down with the test
 * (`t.teardown`), and every process still running is killed when this process exits, so a failed
 * or crashed test leaves no etcd behind.
 *
 *   const etcd = await startEtcd(t, 3);
 *   const srv = await startServer(t, { env: { MESH_CLUSTER_ETCD: etcd.endpoints.join(',') } });
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { freePort } from './ports.js';

export const ETCD_BIN = process.env.MESH_ETCD_BIN ?? 'etcd';
export const ETCDCTL_BIN = process.env.MESH_ETCDCTL_BIN ?? 'etcdctl';

const running = new Set<ChildProcess>();
process.once('exit', () => {
  for (const p of running) if (p.exitCode === null) p.kill('SIGKILL');
});

export interface Member {
  name: string;
  clientPort: number;
  peerPort: number;
  dir: string;
  proc?: ChildProcess;
  output: string;
}

function healthy(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/health', timeout: 1000 }, (res) => {
      let body = '';
      res.on('data', (d) => (body += d));
      res.on('end', () => resolve(res.statusCode === 200 && body.includes('"true"')));
    });
    req.on('error', () => resolve(false));
    req.on('timeout', () => {
      req.destroy();
      resolve(false);
    });
  });
}

export class EtcdCluster {
  constructor(
    readonly members: Member[],
    readonly root: string,
  ) {}

  get endpoints(): string[] {
    return this.members.map((m) => `http://127.0.0.1:${m.clientPort}`);
  }

  private initialCluster() {
    return this.members.map((m) => `${m.name}=http://127.0.0.1:${m.peerPort}`).join(',');
  }

  /** Start member `i` (first start or restart on the same ports and data directory). */
  start(i: number, state: 'new' | 'existing' = 'existing'): void {
    const m = this.members[i];
    if (m.proc && m.proc.exitCode === null && m.proc.signalCode === null) return;
    const peer = `http://127.0.0.1:${m.peerPort}`;
    const client = `http://127.0.0.1:${m.clientPort}`;
    const proc = spawn(
      ETCD_BIN,
      [
        '--name', m.name, '--data-dir', m.dir,
        '--listen-client-urls', client, '--advertise-client-urls', client,
        '--listen-peer-urls', peer, '--initial-advertise-peer-urls', peer,
        '--initial-cluster', this.initialCluster(), '--initial-cluster-state', state,
        '--initial-cluster-token', path.basename(this.root),
        '--log-level', 'error', '--logger', 'zap',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    m.output = '';
    proc.once('error', (e) => {
      m.output += `could not run ${ETCD_BIN}: ${e.message} (install Debian's etcd-server, as npm test does where it may: scripts/test-prerequisites.sh; or name it with MESH_ETCD_BIN)\n`;
    });
    proc.stdout!.on('data', (d) => (m.output += d));
    proc.stderr!.on('data', (d) => (m.output += d));
    running.add(proc);
    proc.once('exit', () => running.delete(proc));
    m.proc = proc;
  }

  /** kill -9 of member `i`; resolves when it has exited. */
  async kill(i: number, signal: NodeJS.Signals = 'SIGKILL'): Promise<void> {
    const p = this.members[i].proc;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const exited = new Promise((r) => p.once('exit', r));
    p.kill(signal);
    await exited;
  }

  /** Wait until every running member answers /health (the cluster has a leader). */
  async waitHealthy(timeoutMs = 30_000, which = this.members.map((_, i) => i)): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (const i of which) {
      for (;;) {
        const m = this.members[i];
        if (m.proc && m.proc.exitCode !== null) throw new Error(`etcd ${m.name} exited with ${m.proc.exitCode}:\n${m.output}`);
        if (await healthy(m.clientPort)) break;
        if (Date.now() > deadline) throw new Error(`etcd ${m.name} not healthy after ${timeoutMs} ms:\n${m.output}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  /** Index of the member that currently leads (asked with etcdctl), or -1. */
  async leader(): Promise<number> {
    const alive = this.members.map((m, i) => ({ m, i })).filter(({ m }) => m.proc && m.proc.exitCode === null && m.proc.signalCode === null);
    const out = await etcdctl(alive.map(({ m }) => `http://127.0.0.1:${m.clientPort}`), ['endpoint', 'status', '-w', 'json']).catch(() => '[]');
    const status = JSON.parse(out || '[]') as { Endpoint: string; Status: { header: { member_id: number }; leader: number } }[];
    for (const s of status) {
      if (String(s.Status.header.member_id) === String(s.Status.leader)) {
        const port = Number(new URL(s.Endpoint).port);
        return this.members.findIndex((m) => m.clientPort === port);
      }
    }
    return -1;
  }

  /** Run etcdctl against the running members. */
  ctl(args: string[]): Promise<string> {
    return etcdctl(this.endpoints, args);
  }

  async close(): Promise<void> {
    await Promise.all(this.members.map((_, i) => this.kill(i)));
    fs.rmSync(this.root, { recursive: true, force: true });
  }
}

export function etcdctl(endpoints: string[], args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(ETCDCTL_BIN, [`--endpoints=${endpoints.join(',')}`, '--command-timeout=5s', ...args], { env: { ...process.env, ETCDCTL_API: '3' } }, (err, stdout, stderr) =>
      err ? reject(new Error(`etcdctl ${args.join(' ')}: ${stderr || err.message}`)) : resolve(stdout),
    );
  });
}

/** Start an n-member etcd cluster; when `t` is given it is killed and removed when `t` ends. */
export async function startEtcd(t?: { teardown(fn: () => unknown): void }, n = 3): Promise<EtcdCluster> {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-etcd-'));
  const members: Member[] = [];
  for (let i = 0; i < n; i++) members.push({ name: `m${i}`, clientPort: await freePort(), peerPort: await freePort(), dir: path.join(root, `m${i}`), output: '' });
  const cluster = new EtcdCluster(members, root);
  t?.teardown(() => cluster.close());
  try {
    for (let i = 0; i < n; i++) cluster.start(i, 'new');
    await cluster.waitHealthy();
  } catch (e) {
    if (!t) await cluster.close();
    throw e;
  }
  return cluster;
}
