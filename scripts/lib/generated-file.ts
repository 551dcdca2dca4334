/**
 * The generators of checked-in TypeScript (operation ids, record types, body types): where the
 * generated file lives in the repository, found from the generator's place in src or dist, and the
 * write when the generator runs as a script (tests import it to compare instead).
 *
 *   export const recordTypesPath = () => repoPath(import.meta.url, 'src', 'store', 'records.ts');
 *   writeWhenRun(import.meta.url, recordTypesPath(), recordTypesSource);
 */
import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** A path in the repository, from a module of scripts/ (or its build in dist/scripts/). */
export function repoPath(moduleUrl: string, ...segments: string[]): string {
  const here = fileURLToPath(new URL('.', moduleUrl));
  return join(resolve(here, here.includes('/dist/') ? '../..' : '..'), ...segments);
}

/** Write `file` when the module at `moduleUrl` is the script node was asked to run. */
export function writeWhenRun(moduleUrl: string, file: string, source: () => string): void {
  if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(moduleUrl)) {
    writeFileSync(file, source());
    console.log(`wrote ${file}`);
  }
}
