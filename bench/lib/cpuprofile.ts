/**
 * Reads a V8 `.cpuprofile` (from `node --cpu-prof`) and lists where the time went: self time and
 * inclusive time per function, with `dist/…js` locations mapped back to the TypeScript sources
 * through the emitted source maps.
 *
 *   const top = summarizeProfile('/tmp/prof/CPU.…cpuprofile', { root: '/work/main' });
 *   printProfile(top, 20);
 */
import fs from 'node:fs';
import path from 'node:path';
import { SourceMap } from 'node:module';
import { fileURLToPath } from 'node:url';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface FunctionTime {
  /** `src/store/store.ts:Tx.put` style label (or `(garbage collector)`, `node:internal/…`). */
  name: string;
  selfMs: number;
  selfPct: number;
  totalMs: number;
  totalPct: number;
}

export interface ProfileSummary {
  file: string;
  durationMs: number;
  /** Time not spent idle (`(idle)` and `(program)` excluded). */
  busyMs: number;
  functions: FunctionTime[];
}

const maps = new Map<string, SourceMap | null>();

function sourceMapFor(jsFile: string): SourceMap | null {
  if (!maps.has(jsFile)) {
    let sm: SourceMap | null = null;
    try {
      sm = new SourceMap(JSON.parse(fs.readFileSync(jsFile + '.map', 'utf8')));
    } catch {
      sm = null;
    }
    maps.set(jsFile, sm);
  }
  return maps.get(jsFile)!;
}

function label(cf: CallFrame, root: string): string {
  const fn = cf.functionName || '(anonymous)';
  if (!cf.url) return fn;
  if (!cf.url.startsWith('file://')) return `${cf.url}:${fn}`;
  const file = fileURLToPath(cf.url);
  let where = path.relative(root, file);
  let line = cf.lineNumber + 1;
  const sm = file.endsWith('.js') ? sourceMapFor(file) : null;
  if (sm) {
    const e = sm.findEntry(cf.lineNumber, cf.columnNumber) as { originalSource?: string; originalLine?: number };
    if (e && e.originalSource) {
      const src = e.originalSource.startsWith('file://') ? fileURLToPath(e.originalSource) : path.resolve(path.dirname(file), e.originalSource);
      where = path.relative(root, src);
      line = (e.originalLine ?? 0) + 1;
    }
  }
  if (where.startsWith('node_modules/')) {
    // Collapse dependency paths to the package: node_modules/lmdb/read.js:getRange
    return `${where}:${fn}`;
  }
  return `${where}:${line}:${fn}`;
}

/**
 * `window` restricts the summary to samples taken between two CLOCK_MONOTONIC times in µs
 * (the clock of `process.hrtime.bigint() / 1000n` in any process on the machine, which is what
 * V8 stamps profiles with on Linux), so one profile of a whole run can be cut into phases.
 */
export function summarizeProfile(file: string, opts: { root: string; window?: [number, number] }): ProfileSummary {
  const prof = JSON.parse(fs.readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map<number, ProfileNode>();
  for (const n of prof.nodes) byId.set(n.id, n);
  const self = new Map<number, number>(); // node id → µs
  const [from, to] = opts.window ?? [-Infinity, Infinity];
  let t = prof.startTime;
  let first = Infinity;
  let last = -Infinity;
  for (let i = 0; i < prof.samples.length; i++) {
    const dt = prof.timeDeltas[i] ?? 0;
    t += dt;
    if (t < from || t > to) continue;
    if (t < first) first = t - dt;
    last = t;
    self.set(prof.samples[i], (self.get(prof.samples[i]) ?? 0) + dt);
  }
  const labels = new Map<number, string>();
  for (const n of prof.nodes) labels.set(n.id, label(n.callFrame, opts.root));

  const selfBy = new Map<string, number>();
  const totalBy = new Map<string, number>();
  // Inclusive time: DFS from the root; a function counts once per stack (recursion-safe).
  const onStack = new Map<string, number>();
  const subtree = (id: number): number => {
    const node = byId.get(id)!;
    const name = labels.get(id)!;
    onStack.set(name, (onStack.get(name) ?? 0) + 1);
    let t = self.get(id) ?? 0;
    for (const c of node.children ?? []) t += subtree(c);
    const depth = onStack.get(name)! - 1;
    if (depth === 0) onStack.delete(name);
    else onStack.set(name, depth);
    if (depth === 0) totalBy.set(name, (totalBy.get(name) ?? 0) + t);
    selfBy.set(name, (selfBy.get(name) ?? 0) + (self.get(id) ?? 0));
    return t;
  };
  const rootId = prof.nodes[0].id;
  subtree(rootId);

  const idle = (selfBy.get('(idle)') ?? 0) + (selfBy.get('(program)') ?? 0);
  const all = [...self.values()].reduce((a, b) => a + b, 0);
  const busy = Math.max(1, all - idle);
  const functions: FunctionTime[] = [];
  for (const [name, s] of selfBy) {
    if (name === '(root)' || name === '(idle)' || name === '(program)') continue;
    const t = totalBy.get(name) ?? s;
    functions.push({
      name,
      selfMs: Math.round(s / 100) / 10,
      selfPct: Math.round((s / busy) * 1000) / 10,
      totalMs: Math.round(t / 100) / 10,
      totalPct: Math.round((t / busy) * 1000) / 10,
    });
  }
  functions.sort((a, b) => b.selfMs - a.selfMs);
  const span = opts.window ? Math.max(0, last - first) : prof.endTime - prof.startTime;
  return { file, durationMs: Math.round(span / 1000), busyMs: Math.round(busy / 1000), functions };
}

/** Top functions by self time, and the project's own functions by inclusive time. */
export function formatProfile(s: ProfileSummary, top = 25, ownPrefix = 'src/'): string {
  const lines: string[] = [];
  lines.push(`profile ${path.basename(s.file)}: ${s.durationMs} ms wall, ${s.busyMs} ms busy (idle excluded)`);
  lines.push('  self ms  self%  total%  function (by self time)');
  for (const f of s.functions.slice(0, top)) lines.push(`  ${f.selfMs.toFixed(1).padStart(7)} ${f.selfPct.toFixed(1).padStart(6)} ${f.totalPct.toFixed(1).padStart(7)}  ${f.name}`);
  const own = s.functions.filter((f) => f.name.startsWith(ownPrefix)).sort((a, b) => b.totalMs - a.totalMs);
  lines.push(`  ${ownPrefix} functions by inclusive time:`);
  for (const f of own.slice(0, top)) lines.push(`  ${f.totalMs.toFixed(1).padStart(7)} ${f.totalPct.toFixed(1).padStart(6)}%  self ${f.selfPct.toFixed(1)}%  ${f.name}`);
  return lines.join('\n');
}

/** Newest `.cpuprofile` in a directory. */
export function latestProfile(dir: string): string | undefined {
  const files = fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.endsWith('.cpuprofile')) : [];
  files.sort((a, b) => fs.statSync(path.join(dir, b)).mtimeMs - fs.statSync(path.join(dir, a)).mtimeMs);
  return files.length ? path.join(dir, files[0]) : undefined;
}

// `node dist/bench/lib/cpuprofile.js <file.cpuprofile> [top]`
if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const file = process.argv[2];
  if (!file) {
    process.stderr.write('usage: node dist/bench/lib/cpuprofile.js <file.cpuprofile> [top]\n');
    process.exit(2);
  }
  const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
  process.stdout.write(formatProfile(summarizeProfile(file, { root }), Number(process.argv[3] ?? 25)) + '\n');
}
