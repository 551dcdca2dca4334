/**
 * Elasticsearch date math, as range queries on `@timestamp` use it: `now`, `now-24h`,
 * `now-1d/d` (rounded), `2026-11-23T00:00:00Z||+1M/d`, epoch milliseconds, and the formats
 * `strict_date_optional_time` (ISO 8601, date with optional time) and `epoch_millis`/`epoch_second`.
 * Units: y M w d h H m s (ms via epoch only). Rounding follows ES: for `gte`/`lt` a rounded value
 * is the start of the unit, for `gt`/`lte` its end (so `lte: now/d` includes all of today).
 */
export class DateMathError extends Error {}

const UNIT = /^[yMwdhHms]$/;

/** Parse an absolute date; `undefined` when it is not one. */
export function parseDate(v: unknown, format?: string): number | undefined {
  if (typeof v === 'number' && Number.isFinite(v)) return format === 'epoch_second' ? v * 1000 : v;
  if (typeof v !== 'string' || v.length === 0) return undefined;
  // Fast path for what agents and the controller write: `2026-11-23T15:00:00.000Z`.
  if (format === undefined && (v.length === 24 || v.length === 20) && v[10] === 'T' && v[v.length - 1] === 'Z') {
    const t = Date.parse(v);
    if (!Number.isNaN(t) && /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z$/.test(v)) return t;
  }
  const formats = (format ?? 'strict_date_optional_time||epoch_millis').split('||');
  for (const f of formats) {
    if ((f === 'epoch_millis' || f === 'epoch_second') && /^-?\d+(\.\d+)?$/.test(v)) return Number(v) * (f === 'epoch_second' ? 1000 : 1);
    if (f === 'strict_date_optional_time' || f === 'date_optional_time' || f === 'strict_date_time' || f === 'date_time' || f === 'strict_date' || f === 'date') {
      // yyyy-MM-dd with optional THH:mm[:ss[.SSS]] and zone; no zone means UTC (as in ES).
      const m = /^(\d{4})(?:-(\d{2})(?:-(\d{2})(?:[T ](\d{2})(?::(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?)?)?)?)?(Z|[+-]\d{2}:?\d{2})?$/.exec(v);
      if (!m) continue;
      const [, y, mo = '01', d = '01', h = '00', mi = '00', s = '00', frac = '0', zone] = m;
      const ms = Number((frac + '00').slice(0, 3));
      let t = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s), ms);
      if (Number.isNaN(t) || Number(mo) > 12 || Number(d) > 31 || Number(h) > 23 || Number(mi) > 59 || Number(s) > 60) continue;
      if (zone && zone !== 'Z') {
        const sign = zone[0] === '-' ? -1 : 1;
        const digits = zone.slice(1).replace(':', '');
        t -= sign * (Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2))) * 60_000;
      }
      return t;
    }
  }
  return undefined;
}

function add(t: number, n: number, unit: string): number {
  const d = new Date(t);
  switch (unit) {
    case 'y': d.setUTCFullYear(d.getUTCFullYear() + n); return d.getTime();
    case 'M': d.setUTCMonth(d.getUTCMonth() + n); return d.getTime();
    case 'w': return t + n * 7 * 86_400_000;
    case 'd': return t + n * 86_400_000;
    case 'h': case 'H': return t + n * 3_600_000;
    case 'm': return t + n * 60_000;
    case 's': return t + n * 1000;
  }
  throw new DateMathError(`unsupported date math unit [${unit}]`);
}

function round(t: number, unit: string, up: boolean): number {
  const d = new Date(t);
  const start = (() => {
    switch (unit) {
      case 'y': return Date.UTC(d.getUTCFullYear(), 0, 1);
      case 'M': return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
      case 'w': {
        const day = (d.getUTCDay() + 6) % 7; // weeks start on Monday
        return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() - day);
      }
      case 'd': return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
      case 'h': case 'H': return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate(), d.getUTCHours());
      case 'm': return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate(), d.getUTCHours(), d.getUTCMinutes());
      case 's': return Math.floor(t / 1000) * 1000;
    }
    throw new DateMathError(`unsupported date math unit [${unit}]`);
  })();
  return up ? add(start, 1, unit) - 1 : start;
}

/**
 * Resolve a range bound. `roundUp` is true for `gt` and `lte`.
 * Throws DateMathError for anything that is neither a date nor date math.
 */
export function resolveDate(v: unknown, now: number, opts: { format?: string; roundUp?: boolean } = {}): number {
  if (typeof v === 'number') {
    const t = parseDate(v, opts.format);
    if (t === undefined) throw new DateMathError(`failed to parse date field [${v}]`);
    return t;
  }
  if (typeof v !== 'string') throw new DateMathError(`failed to parse date field [${JSON.stringify(v)}]`);
  let base: number;
  let rest: string;
  if (v.startsWith('now')) {
    base = now;
    rest = v.slice(3);
  } else {
    const i = v.indexOf('||');
    const abs = parseDate(i >= 0 ? v.slice(0, i) : v, opts.format);
    if (abs === undefined) throw new DateMathError(`failed to parse date field [${v}] with format [${opts.format ?? 'strict_date_optional_time||epoch_millis'}]`);
    if (i < 0) return abs;
    base = abs;
    rest = v.slice(i + 2);
  }
  let t = base;
  let p = 0;
  while (p < rest.length) {
    const op = rest[p];
    if (op === '/') {
      const unit = rest[p + 1];
      if (!unit || !UNIT.test(unit)) throw new DateMathError(`rounding requires a unit in [${v}]`);
      t = round(t, unit, opts.roundUp === true);
      p += 2;
      continue;
    }
    if (op !== '+' && op !== '-') throw new DateMathError(`operator not supported for date math [${v}]`);
    const m = /^(\d*)([yMwdhHms])/.exec(rest.slice(p + 1));
    if (!m) throw new DateMathError(`truncated date math [${v}]`);
    const n = m[1] === '' ? 1 : Number(m[1]);
    t = add(t, op === '-' ? -n : n, m[2]);
    p += 1 + m[0].length;
  }
  return t;
}
