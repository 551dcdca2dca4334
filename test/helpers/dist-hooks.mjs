/**
 * Module hooks for tap (registered by dist-loader.mjs, package.json "tap" node-arg): a test file or
 * a module it imports from this repository (`x.ts`) runs as the JavaScript `npm run build` already
 * made of it (`dist/x.js`), so no test process transpiles again what tsc just compiled. The module
 * keeps its own URL (import.meta.url, stack traces and relative paths are those of the source), and
 * the source map names the source. When the build is missing or older than the source (a file
 * edited since), ts-node (tap's TypeScript plugin) compiles it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DIST = path.join(ROOT, 'dist');

/** The built JavaScript of a .ts file of this repository, when it is at least as new as the source. */
function built(url) {
  if (!url.startsWith('file:') || !url.endsWith('.ts') || url.endsWith('.d.ts')) return undefined;
  const file = fileURLToPath(url);
  const rel = path.relative(ROOT, file);
  if (rel.startsWith('..') || path.isAbsolute(rel) || /^(dist|node_modules)[\\/]/.test(rel)) return undefined;
  const js = path.join(DIST, rel.slice(0, -3) + '.js');
  try {
    return fs.statSync(js).mtimeMs >= fs.statSync(file).mtimeMs ? js : undefined;
  } catch {
    return undefined;
  }
}

/** A relative `./x.js` import of a module written as `x.ts` (TypeScript's NodeNext convention), also built. */
export async function resolve(specifier, context, nextResolve) {
  if (specifier.startsWith('.') && specifier.endsWith('.js') && context.parentURL?.startsWith('file:')) {
    const url = new URL(specifier.slice(0, -3) + '.ts', context.parentURL).href;
    if (built(url) && !fs.existsSync(fileURLToPath(new URL(specifier, context.parentURL)))) return { url, format: 'module', shortCircuit: true };
  }
  return nextResolve(specifier, context);
}

export async function load(url, context, nextLoad) {
  const js = built(url);
  if (!js) return nextLoad(url, context);
  // tsc's map sits beside the built file and names the source relative to it; inline it, naming
  // the module's own URL, so stack traces point into the source.
  const source = fs.readFileSync(js, 'utf8').replace(/\/\/# sourceMappingURL=(\S+)\s*$/, (line, file) => {
    try {
      const map = JSON.parse(fs.readFileSync(path.join(path.dirname(js), file), 'utf8'));
      map.sources = [url];
      delete map.sourceRoot;
      return `//# sourceMappingURL=data:application/json;base64,${Buffer.from(JSON.stringify(map)).toString('base64')}`;
    } catch {
      return line;
    }
  });
  return { format: 'module', source, shortCircuit: true };
}
