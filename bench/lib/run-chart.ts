/**
 * The chart of one benchmark run: answers per second of every timed phase on one time axis, with
 * the controller's CPU and RSS below (sampled from /proc every 500 ms), written as SVG next to the
 * run's JSON (`bench/results/<name>-<timestamp>.svg` and `<name>-latest.svg`).
 *
 *   const chart = new RunChart(ctl.pid);
 *   chart.add('creates', createResult.timeline);
 *   chart.write('crud', 'bench:crud — 100,000 identities', startedAt);
 */
import fs from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { renderChart, type Series } from './chart.js';
import { BUCKET_MS, type TimelineBucket } from './load.js';
import { resultsDir } from './report.js';
import { ProcessSampler } from './sampler.js';

export class RunChart {
  private readonly t0 = performance.now();
  private readonly series: Series[] = [];
  private readonly phases: { name: string; from: number; to: number }[] = [];
  private sampler?: ProcessSampler;

  constructor(pid?: number) {
    if (pid !== undefined) this.watch(pid);
  }

  /** Sample this process (the controller) from now on; a second call replaces the first. */
  watch(pid: number): void {
    this.sampler?.stop();
    this.sampler = new ProcessSampler(pid, 500, this.t0).start();
  }

  /** One phase's answers per second (ok and failed) from a LoadResult/RawCeiling timeline. */
  add(name: string, timeline: TimelineBucket[] | undefined): void {
    if (!timeline?.length) return;
    const sec = (t: number) => Math.round(((t - this.t0) / 1000) * 100) / 100;
    const per = 1000 / BUCKET_MS;
    this.series.push({ name, points: timeline.map((b) => [sec(b.t), b.ok * per]) });
    const failed = timeline.filter((b) => b.failed > 0);
    if (failed.length) this.series.push({ name: `${name} (failed)`, points: timeline.map((b) => [sec(b.t), b.failed * per]) });
    this.phases.push({ name, from: sec(timeline[0].t), to: sec(timeline[timeline.length - 1].t + BUCKET_MS) });
  }

  /** Renders and writes the chart; returns the timestamped file's path. */
  write(name: string, title: string, when = new Date()): string {
    this.sampler?.stop();
    const samples = this.sampler?.samples ?? [];
    const svg = renderChart({
      title,
      subtitle: `${when.toISOString()} — shaded: timed phases`,
      phases: this.phases,
      panels: [
        { title: 'answers per second', unit: '/s', series: this.series, log: true },
        ...(samples.length
          ? [
              { title: 'controller CPU', unit: '% of a core', series: [{ name: 'cpu', points: samples.map((s) => [s.t, s.cpuPct] as [number, number]) }] },
              { title: 'controller RSS', unit: 'MiB', series: [{ name: 'rss', points: samples.map((s) => [s.t, s.rssMiB] as [number, number]) }] },
            ]
          : []),
      ],
    });
    const dir = resultsDir();
    fs.mkdirSync(dir, { recursive: true });
    const file = path.join(dir, `${name}-${when.toISOString().replace(/[:.]/g, '-')}.svg`);
    fs.writeFileSync(file, svg);
    fs.writeFileSync(path.join(dir, `${name}-latest.svg`), svg);
    return file;
  }
}
