/**
 * Imports the upstream edge API v0.28.0 swagger specs (YAML) and the fabric spec of the same
 * controller release into the commit-able JSON data files `src/api/spec/client.json`,
 * `src/api/spec/management.json` and `src/api/spec/fabric.json` (what changes: scripts/lib/upstream-import.ts).
 *
 *   npm run build && node dist/scripts/import-upstream-spec.js <upstreamSpecDir>
 *
 * `upstreamSpecDir` (or `MESH_UPSTREAM_SPEC_DIR`) must hold `client.yml`, `management.yml` and `fabric.yml`. The
 * controller never reads them: it reads the JSON written here (src/api/spec/index.ts).
 */
import { readFileSync, writeFileSync, existsSync, mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { HTTP_METHODS, importUpstreamSpec, type Json } from './lib/upstream-import.js';

function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    const up = dirname(dir);
    if (up === dir) throw new Error('package.json not found above ' + fileURLToPath(import.meta.url));
    dir = up;
  }
}

function main(): void {
  const root = repoRoot();
  const given = process.argv[2] ?? process.env.MESH_UPSTREAM_SPEC_DIR;
  if (!given) throw new Error('usage: node dist/scripts/import-upstream-spec.js <dir with client.yml, management.yml and fabric.yml> (or set MESH_UPSTREAM_SPEC_DIR)');
  const srcDir = resolve(given);
  const outDir = join(root, 'src', 'api', 'spec');
  mkdirSync(outDir, { recursive: true });
  for (const api of ['client', 'management', 'fabric'] as const) {
    const { doc, notes } = importUpstreamSpec(api, readFileSync(join(srcDir, `${api}.yml`), 'utf8'));
    const out = join(outDir, `${api}.json`);
    writeFileSync(out, JSON.stringify(doc) + '\n');
    let ops = 0;
    const isObj = (v: Json | undefined): v is { [k: string]: Json } => typeof v === 'object' && v !== null && !Array.isArray(v);
    for (const item of Object.values(doc.paths as { [k: string]: Json })) if (isObj(item)) for (const m of HTTP_METHODS) if (isObj(item[m])) ops++;
    console.log(`${api}: ${ops} operations, ${Object.keys(doc.definitions as object).length} definitions -> ${out}`);
    for (const n of notes) console.log('  ' + n);
  }
}

main();
