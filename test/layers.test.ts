/**
 * The import graph of src/ and workers/, read from the code (every `import`, `import type`,
 * `export … from` and `import()`): each folder (or top-level file) has a rank of its own, every
 * import points to a lower rank or within its own folder, and no chain of imports comes back to
 * where it started. With one rank per folder there are no sideways imports to allow: a new arrow
 * between two folders either fits the order below or the order (and docs/layers.md) changes.
 *
 *   main.ts > node-flags.ts > app.ts > cli > workers > http > observability > oidc > api
 *     > migrations.ts > pool.ts > cluster > resources > events > policy > auth > control > pki
 *     > core > store > config.ts
 *
 * workers/ holds the piscina entry files only: they import the tasks from src/, and nothing in
 * src/ imports them (the pool names them by URL; the task contract is `Tasks` in src/pool.ts).
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

const ROOT = path.resolve(new URL('..', import.meta.url).pathname);
const SRC = path.join(ROOT, 'src');
const WORKERS = path.join(ROOT, 'workers');

/** Lowest first: a file may import its own folder and the folders before it. */
const ORDER = [
  'config.ts', 'store', 'core', 'pki', 'control', 'auth', 'policy', 'events', 'resources', 'cluster', 'pool.ts',
  'managers', 'migrations.ts', 'api', 'oidc', 'observability', 'http', 'workers', 'cli', 'app.ts', 'node-flags.ts', 'main.ts',
];
const RANK: Record<string, number> = Object.fromEntries(ORDER.map((name, i) => [name, i]));

/** Layer of a file: `workers`, or its top directory under src/ (its own name for files at the top). */
function layerOf(file: string): string {
  if (file.startsWith(WORKERS + path.sep)) return 'workers';
  return path.relative(SRC, file).split(path.sep)[0];
}

function sources(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((d) => {
    const p = path.join(dir, d.name);
    if (d.isDirectory()) return sources(p);
    return d.name.endsWith('.ts') && !d.name.endsWith('.d.ts') ? [p] : [];
  });
}

/** The files under src/ and workers/ a file imports (relative specifiers only; `x.js` is written for `x.ts`). */
function importsOf(file: string): string[] {
  const info = ts.preProcessFile(fs.readFileSync(file, 'utf8'), true, true);
  const out: string[] = [];
  for (const { fileName } of info.importedFiles) {
    if (!fileName.startsWith('.')) continue;
    const target = path.resolve(path.dirname(file), fileName).replace(/\.js$/, '.ts');
    if ((target.startsWith(SRC + path.sep) || target.startsWith(WORKERS + path.sep)) && target.endsWith('.ts')) out.push(target);
  }
  return out;
}

const files = [...sources(SRC), ...sources(WORKERS)];
const graph = new Map(files.map((f) => [f, importsOf(f)]));
const rel = (f: string) => path.relative(ROOT, f);

t.test('every file under src/ and workers/ belongs to a layer', async (t) => {
  t.same(files.filter((f) => RANK[layerOf(f)] === undefined).map(rel), []);
});

t.test('imports point down or within a layer', async (t) => {
  const upward: string[] = [];
  for (const [from, targets] of graph) {
    for (const to of targets) {
      const a = layerOf(from);
      const b = layerOf(to);
      if (a !== b && RANK[b] > RANK[a]) upward.push(`${rel(from)} → ${rel(to)}`);
    }
  }
  t.same(upward, [], 'upward imports');
});

/** Strongly connected components of more than one file (Tarjan), each as its files. */
function cycles(): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const scc: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        scc.push(rel(w));
      } while (w !== v);
      if (scc.length > 1 || (graph.get(v) ?? []).includes(v)) found.push(scc.sort());
    }
  };
  for (const f of files) if (!index.has(f)) visit(f);
  return found;
}

t.test('no import cycles', async (t) => {
  t.same(cycles(), []);
});

t.test('the check sees imports of every kind', async (t) => {
  // A sample the rules above rely on: type-only imports and re-exports count as arrows.
  const probe = path.join(SRC, 'core', 'context.ts');
  t.ok(graph.get(probe)?.some((f) => rel(f) === path.join('src', 'store', 'store.ts')), 'core/context.ts imports store types');
  t.ok(graph.get(path.join(WORKERS, 'tasks.ts'))?.some((f) => rel(f) === path.join('src', 'pool.ts')), 'workers/ are read too');
});
