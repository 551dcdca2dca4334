/**
 * Latency recording for benchmarks: exact samples in a growable Float64Array (milliseconds), so
 * percentiles are exact and recording costs one store per request, no allocation.
 *
 *   const rec = new Recorder();
 *   rec.add(1.25);
 *   rec.summary(); // { count, min, mean, p50, p95, p99, max }
 */

export interface LatencySummary {
  count: number;
  min: number;
  mean: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
}

export class Recorder {
  private buf: Float64Array;
  private n = 0;

  constructor(initial = 1 << 16) {
    this.buf = new Float64Array(initial);
  }

  add(ms: number): void {
    if (this.n === this.buf.length) {
      const next = new Float64Array(this.buf.length * 2);
      next.set(this.buf);
      this.buf = next;
    }
    this.buf[this.n++] = ms;
  }

  get count(): number {
    return this.n;
  }

  /** Sorted copy of the samples. */
  sorted(): Float64Array {
    return this.buf.slice(0, this.n).sort();
  }

  summary(): LatencySummary {
    return summarize(this.sorted());
  }
}

/** Nearest-rank percentile of an ascending array (p in 0..100). */
export function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

export function summarize(sorted: Float64Array): LatencySummary {
  const count = sorted.length;
  if (count === 0) return { count: 0, min: NaN, mean: NaN, p50: NaN, p95: NaN, p99: NaN, max: NaN };
  let sum = 0;
  for (let i = 0; i < count; i++) sum += sorted[i];
  return {
    count,
    min: round(sorted[0]),
    mean: round(sum / count),
    p50: round(percentile(sorted, 50)),
    p95: round(percentile(sorted, 95)),
    p99: round(percentile(sorted, 99)),
    max: round(sorted[count - 1]),
  };
}

/** Three decimals (µs resolution for milliseconds). */
export const round = (x: number, digits = 3): number => {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
};
