/**
 * Version ranges of OS posture checks: `>=10.0.19041`, `>=1.0.0 <2.0.0 || >=3.0.0`,
 * a bare version meaning equality. Versions compare numerically by dot-separated segments, missing
 * segments counting as 0 (`10` = `10.0.0`); anything after the numeric prefix (`-beta`, build
 * metadata) is ignored, as operating systems report versions loosely.
 *
 * Example: satisfies('10.0.19042', '>=10.0.19041 <11') → true
 */

function parse(v: string): number[] | undefined {
  const m = /^\s*v?(\d+(?:\.\d+)*)/.exec(v);
  if (!m) return undefined;
  return m[1].split('.').map(Number);
}

function compare(a: number[], b: number[]): number {
  const n = Math.max(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d < 0 ? -1 : 1;
  }
  return 0;
}

const OPS: Record<string, (c: number) => boolean> = {
  '': (c) => c === 0,
  '=': (c) => c === 0,
  '==': (c) => c === 0,
  '!=': (c) => c !== 0,
  '>': (c) => c > 0,
  '>=': (c) => c >= 0,
  '<': (c) => c < 0,
  '<=': (c) => c <= 0,
};

/** Whether `version` satisfies `range`; an unparsable version or range never does. */
export function satisfies(version: string, range: string): boolean {
  const v = parse(version);
  if (!v) return false;
  return range.split('||').some((alt) => {
    const parts = alt.trim().split(/\s+/).filter(Boolean);
    if (parts.length === 0) return false;
    return parts.every((p) => {
      const m = /^(==|!=|>=|<=|=|>|<)?\s*(.+)$/.exec(p);
      if (!m) return false;
      const target = parse(m[2]);
      if (!target) return false;
      return OPS[m[1] ?? ''](compare(v, target));
    });
  });
}
