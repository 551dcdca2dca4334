/**
 * bench/ceilings — this machine's ceilings alone, for a look at the machine before or between
 * benchmark runs (every benchmark measures the ceilings it needs in its own run). `--help` lists them.
 * Prints a table and writes bench/results/ceilings-<ts>.json and ceilings-latest.json.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadOrCreatePki } from '../src/pki/bootstrap.js';
import { measureCeilings } from './lib/ceilings.js';
import { machineInfo, table, fmt, writeResults } from './lib/report.js';
import { parseCli, intFlag, numFlag } from './lib/cli.js';
import { argon2Verify, lmdbCommit } from './lib/raw-ceilings.js';

const argv = parseCli({
  name: 'bench:ceilings',
  summary: `this machine's ceilings, with a throwaway controller PKI: a trivial uWS HTTPS JSON answer
(keep-alive, C at a time), a raw node:tls mutual-TLS handshake (new connection each, C at a time), raw
CSR signing on one thread (DER template + node:crypto, and @peculiar/x509), durable LMDB puts (C at a
time) and argon2id verifications with the controller's default cost (one per core at a time).`,
  usage: ['npm run bench:ceilings', 'npm run bench:ceilings -- --duration 1 --concurrency 8   # a smoke run'],
  flags: {
    duration: { type: 'string', default: '5', arg: 'S', help: 'seconds per ceiling' },
    concurrency: { type: 'string', default: '64', arg: 'C', help: 'concurrent operations (HTTP, TLS, LMDB)' },
  },
});

async function main() {
  const durationS = numFlag(argv, 'duration', 0.1, 600);
  const concurrency = intFlag(argv, 'concurrency', 1, 4096);
  const started = new Date();
  const machine = machineInfo();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-ceilings-'));
  try {
    await loadOrCreatePki(path.join(dir, 'pki'), { advertisedHost: '127.0.0.1' });
    const c = await measureCeilings({ pkiDir: path.join(dir, 'pki'), durationMs: durationS * 1000, concurrency, log: (s) => process.stderr.write(s + '\n') });
    const lmdb = await lmdbCommit({ concurrency, durationMs: durationS * 1000 });
    const argon = await argon2Verify({ concurrency: os.availableParallelism(), durationMs: durationS * 1000 });
    const raw = { lmdbPut: { ...lmdb, timeline: undefined }, argon2Verify: { ...argon, timeline: undefined } };
    const file = writeResults('ceilings', { bench: 'ceilings', startedAt: started.toISOString(), machine, parameters: { durationS, concurrency }, ceilings: { ...c, ...raw } }, started);
    const rows = [
      ...Object.entries(c).map(([name, x]) => [name, x.what, fmt(x.okPerSec, 1), fmt(x.latencyMs.p50), fmt(x.latencyMs.p99), x.serverCpuPct === undefined ? '-' : fmt(x.serverCpuPct, 0), Object.keys(x.errors).length ? JSON.stringify(x.errors) : '0']),
      ...Object.entries(raw).map(([name, x]) => [name, x.what, fmt(x.perSec, 1), fmt(x.p50Ms), fmt(x.p99Ms), '-', '0']),
    ];
    process.stdout.write(`\nceilings  ${machine.cpus} cpus, node ${machine.node}, load at start ${machine.loadavg.join(' ')}\n`);
    process.stdout.write(table(['ceiling', 'what', 'ok/s', 'p50 ms', 'p99 ms', 'server cpu %', 'errors'], rows) + '\n');
    process.stdout.write(`results: ${path.relative(process.cwd(), file)}\n`);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e) => {
  process.stderr.write(`bench/ceilings failed: ${e?.stack ?? e}\n`);
  process.exitCode = 1;
});
