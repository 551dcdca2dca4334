/**
 * This machine's ceilings, measured in the same run as the fleet with the same closed-loop driver
 * (bench/lib/ops.ts), so every controller figure can be stated as a fraction of what the machine can
 * do at all:
 *
 *  - `uwsJson`: a trivial uWS HTTPS server answering one fixed JSON body, keep-alive connections —
 *    the ceiling of any API request;
 *  - `mtlsHandshake`: a raw `node:tls` server that requires a client certificate, a new connection
 *    per operation (full handshake, no resumption) — the ceiling of certificate logins;
 *  - `csrSign`: parse + verify a PKCS#10 CSR and issue a certificate from a DER template signed with
 *    node:crypto and the controller's intermediate CA, in this process (one thread) — the ceiling of
 *    enrollments; `csrSignPeculiar` does the same with @peculiar/x509 (the library path), for reference.
 *
 * The servers run as child processes (bench/lib/ceiling-server.ts), like the controller.
 *
 *   const c = await measureCeilings({ pkiDir: ctlDataDir + '/pki', durationMs: 3000, concurrency: 32 });
 *   c.uwsJson.okPerSec
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import tls from 'node:tls';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { createClient } from './http.js';
import { OpStats, runClosedLoop, errorCode, transportCode, type OpSummary } from './ops.js';
import { ProcessSampler } from './sampler.js';
import { progressBar } from './progress.js';
import { CsrSigner, DerCsrSigner, deviceKeys } from '../fleet/pki.js';

export interface Ceiling extends OpSummary {
  what: string;
  concurrency: number;
  /** CPU of the ceiling server while measured, % of one core (undefined for in-process ones). */
  serverCpuPct?: number;
}

export interface Ceilings {
  uwsJson: Ceiling;
  mtlsHandshake: Ceiling;
  /** The fastest CSR → certificate path known here (DER template + node:crypto), one thread. */
  csrSign: Ceiling;
  /** The same with @peculiar/x509 (the library path), one thread: for reference. */
  csrSignPeculiar: Ceiling;
}

export interface CeilingOptions {
  /** A controller PKI directory (server chain/key, CA bundle, intermediate CA). */
  pkiDir: string;
  durationMs: number;
  concurrency: number;
  warmupMs?: number;
  log?: (s: string) => void;
}

const SERVER = path.join(path.dirname(fileURLToPath(import.meta.url)), 'ceiling-server.js');

async function startChild(args: string[]): Promise<{ proc: ChildProcess; port: number }> {
  const proc = spawn(process.execPath, [SERVER, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`ceiling server ${args[0]} did not start: ${out}`)), 15_000);
    const on = (d: Buffer) => {
      out += d.toString();
      const m = /listening (\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(Number(m[1]));
      }
    };
    proc.stdout!.on('data', on);
    proc.stderr!.on('data', on);
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`ceiling server ${args[0]} exited (${code}): ${out}`));
    });
  });
  return { proc, port };
}

function stopChild(proc: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
    proc.once('exit', () => resolve());
    proc.kill('SIGTERM');
    setTimeout(() => proc.kill('SIGKILL'), 3000).unref();
  });
}

function summarize(stats: OpStats, name: string, what: string, concurrency: number, serverCpuPct?: number): Ceiling {
  const s = stats.summary()[name] ?? { count: 0, ok: 0, errors: {}, okPerSec: 0, activeMs: 0, latencyMs: { count: 0, min: NaN, mean: NaN, p50: NaN, p95: NaN, p99: NaN, max: NaN } };
  return { what, concurrency, ...s, ...(serverCpuPct !== undefined ? { serverCpuPct } : {}) };
}

export async function measureCeilings(opts: CeilingOptions): Promise<Ceilings> {
  const log = opts.log ?? (() => {});
  const chain = path.join(opts.pkiDir, 'server.chain.pem');
  const key = path.join(opts.pkiDir, 'server.key.pem');
  const caFile = path.join(opts.pkiDir, 'ca-bundle.pem');
  const ca = fs.readFileSync(caFile);
  const warmupMs = opts.warmupMs ?? 500;
  const C = opts.concurrency;

  // -- uWS JSON
  let uwsJson: Ceiling;
  {
    const { proc, port } = await startChild(['uws', chain, key]);
    const client = await createClient({ origin: `https://127.0.0.1:${port}`, ca, connections: C, timeoutMs: 10_000 });
    try {
      const spec = { method: 'GET', path: '/edge/client/v1/version', headers: { accept: 'application/json' } };
      const run = async (stats: OpStats, ms: number) =>
        runClosedLoop({ concurrency: C, durationMs: ms }, async () => {
          const t0 = performance.now();
          try {
            const r = await client.request(spec);
            stats.record('uwsJson', t0, performance.now(), r.status === 200 ? undefined : errorCode(r.status));
          } catch (e) {
            stats.record('uwsJson', t0, performance.now(), transportCode(e));
          }
        });
      await run(new OpStats(), warmupMs);
      const stats = new OpStats();
      const sampler = new ProcessSampler(proc.pid!, 500).start();
      const bar = progressBar('ceiling: trivial uWS answer', { durationMs: opts.durationMs });
      await run(stats, opts.durationMs);
      bar.done();
      sampler.stop();
      uwsJson = summarize(stats, 'uwsJson', 'trivial uWS HTTPS JSON response, keep-alive', C, sampler.window().meanCpuPct);
    } finally {
      await client.close();
      await stopChild(proc);
    }
    log(`  ceiling uWS JSON: ${uwsJson.okPerSec} req/s, p99 ${uwsJson.latencyMs.p99} ms`);
  }

  const mtlsHandshake = await measureMtlsHandshake(opts);
  log(`  ceiling mTLS handshake: ${mtlsHandshake.okPerSec}/s, p99 ${mtlsHandshake.latencyMs.p99} ms`);

  // -- raw CSR signing (in this process, one thread): the fast path, and @peculiar/x509 for reference
  const csrs: string[] = [];
  for (let i = 0; i < 32; i++) csrs.push((await deviceKeys(`ceiling-${i}`)).csrPem);
  const der = DerCsrSigner.fromPkiDir(opts.pkiDir);
  const signing = async (name: string, what: string, sign: (csr: string) => unknown): Promise<Ceiling> => {
    const run = (stats: OpStats, ms: number) =>
      runClosedLoop({ concurrency: 1, durationMs: ms }, async (i) => {
        const t0 = performance.now();
        try {
          await sign(csrs[i % csrs.length]);
          stats.record(name, t0, performance.now());
        } catch (e) {
          stats.record(name, t0, performance.now(), (e as Error).message);
        }
      });
    await run(new OpStats(), warmupMs);
    const stats = new OpStats();
    const bar = progressBar(`ceiling: ${name}`, { durationMs: opts.durationMs });
    await run(stats, opts.durationMs);
    bar.done();
    const c = summarize(stats, name, what, 1);
    log(`  ceiling ${what}: ${c.okPerSec}/s`);
    return c;
  };
  const csrSign = await signing('csrSign', 'CSR signing (parse, verify, DER template + node:crypto sign), one thread', (csr) => der.sign(csr));
  const signer = await CsrSigner.fromPkiDir(opts.pkiDir);
  const csrSignPeculiar = await signing('csrSignPeculiar', 'CSR signing with @peculiar/x509, one thread', (csr) => signer.sign(csr));
  return { uwsJson, mtlsHandshake, csrSign, csrSignPeculiar };
}

/** The raw node:tls mutual-TLS handshake ceiling alone, with a client certificate from the PKI's own CA. */
export async function measureMtlsHandshake(opts: CeilingOptions): Promise<Ceiling> {
  const chain = path.join(opts.pkiDir, 'server.chain.pem');
  const key = path.join(opts.pkiDir, 'server.key.pem');
  const caFile = path.join(opts.pkiDir, 'ca-bundle.pem');
  const ca = fs.readFileSync(caFile);
  const warmupMs = opts.warmupMs ?? 500;
  const C = opts.concurrency;
  // A client certificate from the controller's own CA, for the handshake ceiling.
  const signer = await CsrSigner.fromPkiDir(opts.pkiDir);
  const dev = await deviceKeys('ceiling-client');
  const clientCert = (await signer.sign(dev.csrPem)) + signer.caChainPem;

  let mtlsHandshake: Ceiling;
  {
    const { proc, port } = await startChild(['tls', chain, key, caFile]);
    try {
      // One secure context for every connection: parsing PEM keys per connect is not handshake work.
      const secureContext = tls.createSecureContext({ ca, cert: clientCert, key: dev.keyPem });
      const handshake = (stats: OpStats) =>
        new Promise<void>((resolve) => {
          const t0 = performance.now();
          let secure = false;
          let done = false;
          const finish = (err?: string) => {
            if (done) return;
            done = true;
            stats.record('mtlsHandshake', t0, performance.now(), err);
            resolve();
          };
          const sock = tls.connect({ host: '127.0.0.1', port, secureContext, servername: 'localhost' });
          sock.setTimeout(10_000, () => sock.destroy(Object.assign(new Error('handshake timed out'), { code: 'ETIMEDOUT' })));
          sock.on('secureConnect', () => (secure = true));
          sock.on('data', () => {});
          // The server ends the connection once it has verified our certificate: count that.
          sock.on('end', () => {
            sock.destroy();
            finish(secure ? undefined : 'EPROTO');
          });
          sock.on('error', (e) => finish(transportCode(e)));
          sock.on('close', () => finish(secure ? undefined : 'ECONNRESET'));
        });
      const run = (stats: OpStats, ms: number) => runClosedLoop({ concurrency: C, durationMs: ms }, () => handshake(stats));
      await run(new OpStats(), warmupMs);
      const stats = new OpStats();
      const sampler = new ProcessSampler(proc.pid!, 500).start();
      const bar = progressBar('ceiling: raw mTLS handshake', { durationMs: opts.durationMs });
      await run(stats, opts.durationMs);
      bar.done();
      sampler.stop();
      mtlsHandshake = summarize(stats, 'mtlsHandshake', 'raw node:tls handshake with a client certificate, new connection each', C, sampler.window().meanCpuPct);
    } finally {
      await stopChild(proc);
    }
  }
  return mtlsHandshake;
}
