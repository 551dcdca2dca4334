// Run before `npm start` and `npm run bench*`, which use the compiled dist/ without rebuilding:
// stops with a plain message when dist/ is missing or older than a TypeScript source, instead of
// a module-not-found error or a silently outdated controller. Plain JavaScript, so it runs unbuilt.
//
//   node scripts/check-dist.mjs            # exit 0 when every .ts under src workers bench scripts has a newer .js
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const DIRS = ['src', 'workers', 'bench', 'scripts'];

function* tsFiles(dir) {
  let entries;
  try {
    entries = fs.readdirSync(path.join(root, dir), { withFileTypes: true });
  } catch {
    return;
  }
  for (const e of entries) {
    const rel = path.join(dir, e.name);
    if (e.isDirectory()) yield* tsFiles(rel);
    else if (e.name.endsWith('.ts') && !e.name.endsWith('.d.ts')) yield rel;
  }
}

const fail = (msg) => {
  process.stderr.write(`${msg}\n  Build it with \`npm run build\` (or use \`npm run dev\`, which builds and starts).\n`);
  process.exit(1);
};

if (!fs.existsSync(path.join(root, 'dist', 'src', 'main.js'))) fail('dist/ is missing: the TypeScript has not been compiled.');
const stale = [];
for (const ts of DIRS.flatMap((d) => [...tsFiles(d)])) {
  const js = path.join(root, 'dist', ts.replace(/\.ts$/, '.js'));
  let jsTime;
  try {
    jsTime = fs.statSync(js).mtimeMs;
  } catch {
    stale.push(`${ts} (not compiled)`);
    continue;
  }
  if (fs.statSync(path.join(root, ts)).mtimeMs > jsTime) stale.push(ts);
}
if (stale.length) fail(`dist/ is older than the sources: ${stale.slice(0, 5).join(', ')}${stale.length > 5 ? ` and ${stale.length - 5} more` : ''}.`);
