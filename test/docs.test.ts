/**
 * The API reference pages at /edge/client/v1/docs and /edge/management/v1/docs: served whole by
 * the controller (Swagger UI from swagger-ui-dist), nothing loaded from elsewhere, reading the spec
 * this controller serves.
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import t from 'tap';
import { isError, startServer } from './helpers/server.js';

t.test('reference pages work offline and read the served spec', async (t) => {
  const srv = await startServer(t);
  const dist = path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
  for (const [api, specId] of [['client', 'edge-client'], ['management', 'edge-management']] as const) {
    const base = `/edge/${api}/v1`;
    const r = await srv.raw('GET', `${base}/docs`);
    t.equal(r.status, 200, `${base}/docs → 200`);
    t.match(r.headers['content-type'], /^text\/html/);
    t.match(r.headers['content-security-policy'], /default-src 'self'/, 'the page may load only from this origin');
    const refs = [...r.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]);
    t.ok(refs.length >= 4, `page references its assets: ${refs.join(', ')}`);
    for (const ref of refs) {
      t.ok(ref.startsWith(`${base}/docs/`), `${ref} is served by the controller`);
      const a = await srv.raw('GET', ref);
      t.equal(a.status, 200, `${ref} → 200`);
      t.ok(a.text.length > 0, `${ref} has content`);
      const name = ref.slice(`${base}/docs/`.length);
      if (name.endsWith('.png')) t.equal(a.headers['content-type'], 'image/png');
      else if (name !== 'init.js') t.ok(a.text === fs.readFileSync(path.join(dist, name), 'utf8'), `${name} is the package's file`);
      else {
        t.notMatch(a.text, /https?:\/\//, 'the initializer names no outside URL');
        const spec = /url: "([^"]+)"/.exec(a.text)?.[1];
        t.equal(spec, `${base}/specs/${specId}/spec`, 'the page reads the served spec');
        const s = await srv.raw('GET', spec!, undefined, { accept: 'application/json' });
        t.equal(s.status, 200, 'the spec is served');
        t.equal(s.body?.swagger, '2.0');
        t.equal(s.body?.basePath, base);
      }
    }
    t.notMatch(r.text, /https?:\/\//, 'the page names no outside URL');
    t.ok(isError(await srv.raw('GET', `${base}/docs/package.json`), 404, 'NOT_FOUND'), 'only the listed assets are served');
    t.ok(isError(await srv.raw('GET', `${base}/docs/..%2f..%2fpackage.json`), 404, 'NOT_FOUND'), 'no path out of the asset list');
    t.ok(isError(await srv.raw('POST', `${base}/docs`), 405, 'METHOD_NOT_ALLOWED'), 'POST → 405');
  }
});
