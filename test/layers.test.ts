/**
 * The import graph of src/, read from the code (every `import`, `import type`, `export … from`
 * and `import()`): each import points to a lower layer or within its own, and no chain of
 * imports comes back to where it started.
 *
 *   main, app, cli → http, observability → api, oidc, migrations
 *     → resources | auth | pki | policy | events | control | cluster | pool → core → store | config
 *
 * Layers of one rank may import each other (resources reads the policy engine, which reads the
 * store through resources' definitions), as long as no cycle results.
 */
import t from 'tap';
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

const SRC = path.resolve(new URL('..', import.meta.url).pathname, 'src');

/** Layer of a file under src/: its top directory, or its own name for files at the top. */
const RANK: Record<string, number> = {
  'main.ts': 6, 'node-flags.ts': 6, 'app.ts': 6, cli: 6,
  http: 5, observability: 5,
  api: 4, oidc: 4, 'migrations.ts': 4,
  resources: 3, auth: 3, pki: 3, policy: 3, events: 3, control: 3, cluster: 3, 'pool.ts': 3,
  core: 2,
  store: 1, 'config.ts': 1,
};

function layerOf(file: string): string {
  return path.relative(SRC, file).split(path.sep)[0];
}

function sources(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((d) => {
    const p = path.join(dir, d.name);
    if (d.isDirectory()) return sources(p);
    return d.name.endsWith('.ts') && !d.name.endsWith('.d.ts') ? [p] : [];
  });
}

/** The files under src/ a file imports (relative specifiers only; `x.js` is written for `x.ts`). */
function importsOf(file: string): string[] {
  const info = ts.preProcessFile(fs.readFileSync(file, 'utf8'), true, true);
  const out: string[] = [];
  for (const { fileName } of info.importedFiles) {
    if (!fileName.startsWith('.')) continue;
    const target = path.resolve(path.dirname(file), fileName).replace(/\.js$/, '.ts');
    if (target.startsWith(SRC + path.sep) && target.endsWith('.ts')) out.push(target);
  }
  return out;
}

const files = sources(SRC);
const graph = new Map(files.map((f) => [f, importsOf(f)]));
const rel = (f: string) => path.relative(SRC, f);

t.test('every file under src/ belongs to a layer', async (t) => {
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
  t.ok(graph.get(probe)?.some((f) => rel(f) === path.join('store', 'store.ts')), 'core/context.ts imports store types');
});
