/**
 * The API reference pages, `/edge/client/v1/docs` and `/edge/management/v1/docs` (where upstream
 * serves its own), rendered by Swagger UI from the `swagger-ui-dist` package: every asset is served
 * by the controller itself, so the page works with no Internet access. The page reads the spec the
 * controller serves (`…/specs/<id>/spec`), so it shows exactly the operations this controller has.
 *
 * The page's script is a file of its own rather than an inline script, so the page can carry a
 * Content-Security-Policy that allows only this origin.
 */
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import type { RawRoute } from '../core/operation.js';
import { BASE_PATHS } from './router.js';
import { errors } from '../core/errors.js';
import type { ApiName } from '../core/operation.js';

const ASSETS: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'swagger-ui-standalone-preset.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
  'favicon-16x16.png': 'image/png',
};

const SPEC_ID: Record<ApiName, string> = { client: 'edge-client', management: 'edge-management', fabric: 'fabric' };

const CSP = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; connect-src 'self'";

let assetDir: string | undefined;
/** Asset bytes, read on first use (the bundle is ~1.5 MB) and kept. */
const cache = new Map<string, Buffer>();

function asset(name: string): Buffer {
  let b = cache.get(name);
  if (!b) {
    assetDir ??= path.dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
    cache.set(name, (b = fs.readFileSync(path.join(assetDir, name))));
  }
  return b;
}

function page(api: ApiName): string {
  const base = BASE_PATHS[api];
  const title = api === 'client' ? 'Edge Client API' : 'Edge Management API';
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>${title} reference</title>
<link rel="stylesheet" href="${base}/docs/swagger-ui.css">
<link rel="icon" type="image/png" href="${base}/docs/favicon-32x32.png" sizes="32x32">
</head>
<body>
<div id="swagger-ui"></div>
<script src="${base}/docs/swagger-ui-bundle.js"></script>
<script src="${base}/docs/swagger-ui-standalone-preset.js"></script>
<script src="${base}/docs/init.js"></script>
</body>
</html>
`;
}

function initScript(api: ApiName): string {
  const base = BASE_PATHS[api];
  return `window.ui = SwaggerUIBundle({
  url: ${JSON.stringify(`${base}/specs/${SPEC_ID[api]}/spec`)},
  dom_id: '#swagger-ui',
  deepLinking: true,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
  layout: 'StandaloneLayout',
  // The spec is served by this controller; no validator badge calling out to the Internet.
  validatorUrl: null,
});
`;
}

export function docsRoutes(): RawRoute[] {
  return (['client', 'management'] as const).map((api) => {
    const root = `${BASE_PATHS[api]}/docs`;
    const html = page(api);
    const init = initScript(api);
    return {
      method: '*',
      path: root,
      prefix: true,
      handle(req) {
        if (req.method !== 'get' && req.method !== 'head') throw errors.methodNotAllowed();
        const headers = { 'content-security-policy': CSP, 'x-content-type-options': 'nosniff' };
        if (req.path === root) return { status: 200, body: html, contentType: 'text/html; charset=utf-8', headers: { ...headers, 'cache-control': 'no-cache' } };
        const name = req.path.slice(root.length + 1);
        if (name === 'init.js') return { status: 200, body: init, contentType: 'text/javascript; charset=utf-8', headers: { ...headers, 'cache-control': 'no-cache' } };
        const type = ASSETS[name];
        if (!type) throw errors.notFound();
        return { status: 200, body: asset(name), contentType: type, headers: { ...headers, 'cache-control': 'public, max-age=86400' } };
      },
    };
  });
}
