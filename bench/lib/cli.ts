/**
 * The one command-line parser of every benchmark: node's `util.parseArgs` (strict, no positionals),
 * with a `--help` generated from the same flag table, printed before anything runs.
 *
 *   const args = parseCli({
 *     name: 'bench:crud', summary: 'identity creates and list latency',
 *     usage: ['npm run bench:crud -- --identities 20000'],
 *     flags: { identities: { type: 'string', default: '100000', help: 'identities to seed' } },
 *   });
 *   const n = intFlag(args, 'identities', 1, 10_000_000);
 *
 * A bad flag prints the error and the hint to use --help, and exits with code 2.
 */
import { parseArgs } from 'node:util';

export interface Flag {
  type: 'string' | 'boolean';
  help: string;
  default?: string | boolean;
  /** Placeholder of the value in the help text (default N). */
  arg?: string;
  multiple?: boolean;
  short?: string;
}

export interface CliSpec {
  /** The npm script or file, e.g. `bench:crud`. */
  name: string;
  /** What it measures, and against which ceiling: a few lines. */
  summary: string;
  usage: string[];
  flags: Record<string, Flag>;
}

export type CliValues = Record<string, string | boolean | string[] | undefined>;

export function helpText(spec: CliSpec): string {
  const rows = Object.entries({ ...spec.flags, help: { type: 'boolean', help: 'print this help and exit', short: 'h' } as Flag }).map(([name, f]) => {
    const left = `  ${f.short ? `-${f.short}, ` : ''}--${name}${f.type === 'string' ? ` ${f.arg ?? 'N'}` : ''}`;
    const def = f.default !== undefined && f.default !== false ? ` (default ${f.default})` : '';
    return [left, `${f.help}${def}${f.multiple ? ' (repeatable)' : ''}`];
  });
  const width = Math.max(...rows.map(([l]) => l.length)) + 2;
  return [
    `${spec.name}: ${spec.summary.trim()}`,
    '',
    'Usage:',
    ...spec.usage.map((u) => `  ${u}`),
    '',
    'Flags:',
    ...rows.map(([l, r]) => l.padEnd(width) + r),
    '',
  ].join('\n');
}

export function parseCli(spec: CliSpec, argv = process.argv.slice(2)): CliValues {
  const options: Record<string, { type: 'string' | 'boolean'; default?: string | boolean | string[]; multiple?: boolean; short?: string }> = {
    help: { type: 'boolean', short: 'h', default: false },
  };
  for (const [name, f] of Object.entries(spec.flags)) {
    options[name] = { type: f.type, ...(f.short ? { short: f.short } : {}), ...(f.multiple ? { multiple: true } : {}) };
    if (f.default !== undefined) options[name].default = f.multiple ? [String(f.default)] : f.default;
  }
  // --help wins over everything else, even over an invalid flag next to it.
  if (argv.includes('--help') || argv.includes('-h')) {
    process.stdout.write(helpText(spec));
    process.exit(0);
  }
  try {
    return parseArgs({ args: argv, options: options as any, strict: true, allowPositionals: false }).values as CliValues;
  } catch (e) {
    process.stderr.write(`${spec.name}: ${(e as Error).message}\nRun with --help for the flags.\n`);
    process.exit(2);
  }
}

function fail(name: string, msg: string): never {
  process.stderr.write(`--${name}: ${msg}\nRun with --help for the flags.\n`);
  process.exit(2);
}

/** A number flag within [min, max]; `undefined` when the flag has no value and no default. */
export function numFlag(values: CliValues, name: string, min: number, max: number): number {
  const raw = values[name];
  const v = Number(raw);
  if (typeof raw !== 'string' || raw.trim() === '' || !Number.isFinite(v) || v < min || v > max) fail(name, `expected a number in ${min}..${max}, got ${JSON.stringify(raw)}`);
  return v;
}

export function intFlag(values: CliValues, name: string, min: number, max: number): number {
  const v = numFlag(values, name, min, max);
  if (!Number.isInteger(v)) fail(name, `expected a whole number, got ${v}`);
  return v;
}

/** A comma-separated list of whole numbers, each within [min, max]. */
export function intListFlag(values: CliValues, name: string, min: number, max: number): number[] {
  const raw = String(values[name] ?? '');
  const out = raw.split(',').map((s) => Number(s.trim()));
  if (!out.length || out.some((n) => !Number.isInteger(n) || n < min || n > max)) fail(name, `expected whole numbers ${min}..${max} separated by commas, got ${JSON.stringify(raw)}`);
  return [...new Set(out)];
}

export function choiceFlag<T extends string>(values: CliValues, name: string, choices: readonly T[]): T | undefined {
  const raw = values[name];
  if (raw === undefined) return undefined;
  if (!choices.includes(raw as T)) fail(name, `expected one of ${choices.join(', ')}, got ${JSON.stringify(raw)}`);
  return raw as T;
}
