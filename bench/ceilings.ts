/**
 * bench/ceilings — this machine's ceilings alone (bench/lib/ceilings.ts; the fleet run measures
 * them too): a trivial uWS HTTPS JSON response, a raw node:tls mutual-TLS handshake, raw CSR signing
 * (DER template + node:crypto, and @peculiar/x509), with a throwaway controller PKI.
 *
 *   node dist/bench/ceilings.js [--duration S] [--concurrency C]
 *
 * Prints a table and writes bench/results/ceilings-<ts>.json and ceilings-latest.json. Other
 * benchmarks import `measureCeilings` to state their figures as fractions of these.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { loadOrCreatePki } from '../src/pki/bootstrap.js';
import { measureCeilings } from './lib/ceilings.js';
import { machineInfo, table, fmt, writeResults } from './lib/report.js';

const { values: argv } = parseArgs({
  options: { duration: { type: 'string', default: '5' }, concurrency: { type: 'string', default: '64' } },
  strict: true,
});

async function main() {
  const durationS = Number(argv.duration);
  const concurrency = Number(argv.concurrency);
  if (!(durationS > 0 && durationS <= 600)) throw new Error('--duration must be in (0, 600]');
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 4096) throw new Error('--concurrency must be 1..4096');
  const started = new Date();
  const machine = machineInfo();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-ceilings-'));
  try {
    await loadOrCreatePki(path.join(dir, 'pki'), { advertisedHost: '127.0.0.1' });
    const c = await measureCeilings({ pkiDir: path.join(dir, 'pki'), durationMs: durationS * 1000, concurrency, log: (s) => process.stderr.write(s + '\n') });
    const file = writeResults('ceilings', { bench: 'ceilings', startedAt: started.toISOString(), machine, parameters: { durationS, concurrency }, ceilings: c }, started);
    const rows = Object.entries(c).map(([name, x]) => [name, x.what, fmt(x.okPerSec, 1), fmt(x.latencyMs.p50), fmt(x.latencyMs.p99), x.serverCpuPct === undefined ? '-' : fmt(x.serverCpuPct, 0), Object.keys(x.errors).length ? JSON.stringify(x.errors) : '0']);
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
