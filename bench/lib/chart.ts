/**
 * A dependency-free SVG chart of a benchmark run: stacked panels sharing the time axis, each with
 * one polyline per series, a legend, axis ticks, and shaded phases (e.g. "enroll", "login", "mix")
 * named in a band above the panels.
 *
 *   const svg = renderChart({ title: 'fleet', panels: [
 *     { title: 'throughput', unit: 'ops/s', series: [{ name: 'services', points: [[0, 10], [1, 250]] }] },
 *   ], phases: [{ name: 'mix', from: 12, to: 42 }] });
 *   fs.writeFileSync('bench/results/fleet-latest.svg', svg);
 */

export interface Series {
  name: string;
  /** [seconds, value]; NaN values break the line. */
  points: [number, number][];
}

export interface Panel {
  title: string;
  unit: string;
  series: Series[];
  /** Logarithmic y axis (latencies spanning orders of magnitude). */
  log?: boolean;
}

export interface ChartSpec {
  title: string;
  subtitle?: string;
  panels: Panel[];
  phases?: { name: string; from: number; to: number }[];
  width?: number;
}

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#bcbd22', '#7f7f7f'];

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/** 1-2-5 ticks covering [0, max]. */
function niceTicks(max: number, target = 5): number[] {
  if (!(max > 0)) return [0, 1];
  const raw = max / target;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? 10 * mag;
  const out: number[] = [];
  for (let v = 0; v <= max + step * 0.001; v += step) out.push(v);
  if (out[out.length - 1] < max) out.push(out[out.length - 1] + step);
  return out;
}

const fmtTick = (v: number) => (v >= 10_000 ? `${Math.round(v / 1000)}k` : v >= 1000 ? `${(v / 1000).toFixed(1)}k` : v >= 10 ? String(Math.round(v)) : v >= 1 ? v.toFixed(1) : v.toPrecision(1));

export function renderChart(spec: ChartSpec): string {
  const W = spec.width ?? 960;
  const left = 70, right = 190, panelH = 170, gap = 45;
  const plotW = W - left - right;
  const allT = spec.panels.flatMap((p) => p.series.flatMap((s) => s.points.map((x) => x[0])));
  const tMax = Math.max(1, ...allT, ...(spec.phases ?? []).map((p) => p.to));
  const xOf = (t: number) => left + (t / tMax) * plotW;
  // Phase names in a band of their own above the panels, centred on their phase and moved to a
  // further row where they would overlap (short phases side by side), never past the plot's edges.
  const CHAR_W = 6.5, ROW_H = 13;
  const rowEnds: number[] = [];
  const labels = (spec.phases ?? []).map((ph, i) => {
    const w = ph.name.length * CHAR_W;
    const x = Math.max(left, Math.min((xOf(ph.from) + xOf(ph.to)) / 2 - w / 2, left + plotW - w));
    let row = rowEnds.findIndex((end) => x >= end + 8);
    if (row < 0) row = rowEnds.push(-Infinity) - 1;
    rowEnds[row] = x + w;
    return { ph, i, x, row };
  });
  const headerBottom = spec.subtitle ? 46 : 28;
  const band = labels.length ? rowEnds.length * ROW_H + 8 : 0;
  // Room for the first panel's own title above it.
  const top = headerBottom + band + 24;
  const H = top + spec.panels.length * (panelH + gap) + 10;
  const out: string[] = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="11">`);
  out.push(`<rect width="${W}" height="${H}" fill="#fff"/>`);
  out.push(`<text x="${left}" y="20" font-size="15" font-weight="bold">${esc(spec.title)}</text>`);
  if (spec.subtitle) out.push(`<text x="${left}" y="37" fill="#555">${esc(spec.subtitle)}</text>`);
  for (const { ph, i, x, row } of labels) {
    const y = headerBottom + 10 + row * ROW_H;
    out.push(`<text x="${x.toFixed(1)}" y="${y}" fill="#555">${esc(ph.name)}</text>`);
    const x1 = xOf(ph.from), x2 = xOf(ph.to);
    out.push(`<rect x="${x1.toFixed(1)}" y="${headerBottom + band - 4}" width="${Math.max(1, x2 - x1).toFixed(1)}" height="3" fill="${i % 2 ? '#bbb' : '#8fb2d6'}"/>`);
  }

  spec.panels.forEach((panel, pi) => {
    const y0 = top + pi * (panelH + gap);
    const yBottom = y0 + panelH;
    const values = panel.series.flatMap((s) => s.points.map((p) => p[1]).filter((v) => Number.isFinite(v) && (!panel.log || v > 0)));
    const vMax = Math.max(...values, panel.log ? 1 : 0);
    let yOf: (v: number) => number;
    let ticks: number[];
    if (panel.log) {
      const lo = Math.max(1e-3, Math.min(...values, 1));
      const lMin = Math.floor(Math.log10(lo));
      const lMax = Math.ceil(Math.log10(Math.max(vMax, lo * 10)));
      ticks = [];
      for (let e = lMin; e <= lMax; e++) ticks.push(10 ** e);
      yOf = (v) => yBottom - ((Math.log10(Math.max(v, 10 ** lMin)) - lMin) / (lMax - lMin || 1)) * panelH;
    } else {
      ticks = niceTicks(vMax);
      const top = ticks[ticks.length - 1] || 1;
      yOf = (v) => yBottom - (v / top) * panelH;
    }
    // Phases.
    for (const [i, ph] of (spec.phases ?? []).entries()) {
      const x1 = xOf(ph.from), x2 = xOf(ph.to);
      out.push(`<rect x="${x1.toFixed(1)}" y="${y0}" width="${Math.max(0, x2 - x1).toFixed(1)}" height="${panelH}" fill="${i % 2 ? '#f4f4f4' : '#eaf1f8'}"/>`);
    }
    out.push(`<text x="${left}" y="${y0 - 8}" font-weight="bold">${esc(panel.title)} <tspan font-weight="normal" fill="#555">(${esc(panel.unit)}${panel.log ? ', log scale' : ''})</tspan></text>`);
    for (const v of ticks) {
      const y = yOf(v);
      out.push(`<line x1="${left}" x2="${left + plotW}" y1="${y.toFixed(1)}" y2="${y.toFixed(1)}" stroke="#ddd"/>`);
      out.push(`<text x="${left - 6}" y="${(y + 4).toFixed(1)}" text-anchor="end" fill="#444">${fmtTick(v)}</text>`);
    }
    out.push(`<rect x="${left}" y="${y0}" width="${plotW}" height="${panelH}" fill="none" stroke="#999"/>`);
    for (const t of niceTicks(tMax, 10)) {
      if (t > tMax) continue;
      const x = xOf(t);
      out.push(`<line x1="${x.toFixed(1)}" x2="${x.toFixed(1)}" y1="${yBottom}" y2="${yBottom + 4}" stroke="#999"/>`);
      out.push(`<text x="${x.toFixed(1)}" y="${yBottom + 15}" text-anchor="middle" fill="#444">${fmtTick(t)}s</text>`);
    }
    panel.series.forEach((s, si) => {
      const color = COLORS[si % COLORS.length];
      let d = '';
      let pen = false;
      for (const [t, v] of s.points) {
        if (!Number.isFinite(v) || (panel.log && v <= 0)) {
          pen = false;
          continue;
        }
        d += `${pen ? 'L' : 'M'}${xOf(t).toFixed(1)},${yOf(v).toFixed(1)}`;
        pen = true;
      }
      if (d) out.push(`<path d="${d}" fill="none" stroke="${color}" stroke-width="1.5"/>`);
      const ly = y0 + 12 + si * 15;
      out.push(`<line x1="${left + plotW + 12}" x2="${left + plotW + 30}" y1="${ly - 4}" y2="${ly - 4}" stroke="${color}" stroke-width="2"/>`);
      out.push(`<text x="${left + plotW + 35}" y="${ly}">${esc(s.name)}</text>`);
    });
  });
  out.push('</svg>');
  return out.join('\n') + '\n';
}
