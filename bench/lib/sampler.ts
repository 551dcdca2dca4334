/**
 * Samples a process's CPU and resident memory at a fixed interval from /proc/<pid>/stat and
 * /proc/<pid>/status (the controller under load), for the result's "CPU and RSS over time".
 *
 *   const s = new ProcessSampler(ctl.pid, 1000); s.start();  …  s.stop();
 *   s.samples  // [{ t: 1.0, cpuPct: 87.5, rssMiB: 212.3 }, …]   cpuPct: % of one core
 */
import { performance } from 'node:perf_hooks';
import { readCpuMs, readMemory } from './controller.js';

export interface ProcessSample {
  /** Seconds since `t0`. */
  t: number;
  /** CPU used over the last interval, in % of one core (200 = two cores busy). */
  cpuPct: number;
  rssMiB: number;
}

export class ProcessSampler {
  readonly samples: ProcessSample[] = [];
  private timer?: NodeJS.Timeout;
  private lastCpu?: number;
  private lastAt = 0;

  constructor(readonly pid: number, readonly intervalMs = 1000, readonly t0 = performance.now()) {}

  start(): this {
    this.lastCpu = readCpuMs(this.pid);
    this.lastAt = performance.now();
    this.timer = setInterval(() => this.sample(), this.intervalMs);
    this.timer.unref();
    return this;
  }

  sample(): void {
    const now = performance.now();
    const cpu = readCpuMs(this.pid);
    const mem = readMemory(this.pid);
    if (cpu === undefined || mem === undefined || this.lastCpu === undefined) return;
    const pct = ((cpu - this.lastCpu) / Math.max(1, now - this.lastAt)) * 100;
    this.lastCpu = cpu;
    this.lastAt = now;
    this.samples.push({ t: Math.round((now - this.t0) / 100) / 10, cpuPct: Math.round(pct * 10) / 10, rssMiB: Math.round((mem.rssKiB / 1024) * 10) / 10 });
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.sample();
  }

  /** Mean CPU % of a core and peak RSS between two times (seconds since t0). */
  window(from = 0, to = Infinity): { meanCpuPct: number; maxCpuPct: number; peakRssMiB: number } {
    const xs = this.samples.filter((s) => s.t > from && s.t <= to + 0.001);
    if (xs.length === 0) return { meanCpuPct: NaN, maxCpuPct: NaN, peakRssMiB: NaN };
    return {
      meanCpuPct: Math.round((xs.reduce((a, s) => a + s.cpuPct, 0) / xs.length) * 10) / 10,
      maxCpuPct: Math.max(...xs.map((s) => s.cpuPct)),
      peakRssMiB: Math.max(...xs.map((s) => s.rssMiB)),
    };
  }
}
