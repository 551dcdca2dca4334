/** Every way the repository starts a controller passes the same Node flags (src/node-flags.ts). */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { NODE_FLAGS } from '../../src/node-flags.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const read = (p: string) => fs.readFileSync(path.join(ROOT, p), 'utf8');

t.test('npm start, npm run dev and the compose file carry NODE_FLAGS before the entry point', async (t) => {
  t.ok(NODE_FLAGS.length > 0);
  const scripts = JSON.parse(read('package.json')).scripts as Record<string, string>;
  for (const name of ['start', 'dev']) t.ok(scripts[name].includes(`node ${NODE_FLAGS.join(' ')} dist/src/main.js`), `${name}: ${scripts[name]}`);
  const compose = read('docs/cluster/compose.yaml');
  t.ok(compose.includes(`command: ${JSON.stringify(['node', ...NODE_FLAGS, 'dist/src/main.js']).replaceAll(',', ', ')}`), 'docs/cluster/compose.yaml');
});
