/**
 * A one-line progress bar on stderr for a benchmark phase, redrawn at most 5 times a second and
 * only when stderr is a terminal (logs and CI output get nothing from it). A phase knows how many
 * operations it will do or how long it will run, and the bar shows whichever it knows; a phase that
 * knows neither (writing a model) shows the time it has taken so far.
 *
 *   const bar = progressBar('creates', { total: 100_000 });
 *   bar.update(done);      // as often as you like
 *   bar.done();            // clears the line
 */
import { performance } from 'node:perf_hooks';

export interface ProgressBar {
  update(done: number): void;
  done(): void;
}

const NONE: ProgressBar = { update() {}, done() {} };
const WIDTH = 30;

export function progressBar(label: string, opts: { total?: number; durationMs?: number }): ProgressBar {
  const out = process.stderr;
  if (!out.isTTY) return NONE;
  const start = performance.now();
  let count = 0;
  const draw = () => {
    const elapsed = performance.now() - start;
    const byCount = opts.total ? count / opts.total : 0;
    const byTime = opts.durationMs ? elapsed / opts.durationMs : 0;
    const f = Math.min(1, Math.max(byCount, byTime));
    const filled = Math.round(f * WIDTH);
    const rate = elapsed > 0 ? Math.round((count / elapsed) * 1000) : 0;
    const counted = opts.total ? `${count}/${opts.total}` : `${count}`;
    const line = !opts.total && !opts.durationMs
      ? `${label} … ${(elapsed / 1000).toFixed(0)} s${count ? `  ${count}` : ''}`
      : `${label} [${'#'.repeat(filled)}${'.'.repeat(WIDTH - filled)}] ${Math.round(f * 100)}%  ${count || opts.total ? `${counted}  ${rate}/s  ` : ''}${(elapsed / 1000).toFixed(0)} s`;
    out.write(`\r${line.slice(0, (out.columns ?? 120) - 1)}\x1b[K`);
  };
  const timer = setInterval(draw, 200);
  timer.unref();
  return {
    update(done: number) {
      count = done;
    },
    done() {
      clearInterval(timer);
      out.write('\r\x1b[K');
    },
  };
}
