/**
 * Benchmark reporting: machine description, a compact text table, and JSON result files
 * `bench/results/<name>-<timestamp>.json` plus `<name>-latest.json`.
 *
 *   writeResults('crud', { machine: machineInfo(), ... })  // → path of the timestamped file
 *   table(['query', 'p50'], [['list', '1.2']])
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT } from './controller.js';

export interface MachineInfo {
  hostname: string;
  platform: string;
  kernel: string;
  arch: string;
  cpus: number;
  cpuModel: string;
  totalMemGiB: number;
  node: string;
  /** 1/5/15-minute load averages when the bench started (the machine is shared). */
  loadavg: number[];
}

export function machineInfo(): MachineInfo {
  const cpus = os.cpus();
  return {
    hostname: os.hostname(),
    platform: os.platform(),
    kernel: os.release(),
    arch: os.arch(),
    cpus: cpus.length,
    cpuModel: cpus[0]?.model ?? 'unknown',
    totalMemGiB: Math.round((os.totalmem() / 1024 ** 3) * 10) / 10,
    node: process.version,
    loadavg: os.loadavg().map((x) => Math.round(x * 100) / 100),
  };
}

/** Right-aligned columns except the first. */
export function table(header: string[], rows: (string | number)[][]): string {
  const cells = [header, ...rows.map((r) => r.map(String))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? '').length)));
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...cells.slice(1).map(line)].join('\n');
}

export const fmt = (x: number | undefined, digits = 2): string => (x === undefined || Number.isNaN(x) ? '-' : x.toFixed(digits));

export function resultsDir(): string {
  return path.join(ROOT, 'bench', 'results');
}

/** Write `<name>-<timestamp>.json` and `<name>-latest.json`; returns the timestamped path. */
export function writeResults(name: string, data: unknown, when = new Date()): string {
  const dir = resultsDir();
  fs.mkdirSync(dir, { recursive: true });
  const stamp = when.toISOString().replace(/[:.]/g, '-');
  const file = path.join(dir, `${name}-${stamp}.json`);
  const text = JSON.stringify(data, null, 2) + '\n';
  fs.writeFileSync(file, text);
  fs.writeFileSync(path.join(dir, `${name}-latest.json`), text);
  return file;
}
