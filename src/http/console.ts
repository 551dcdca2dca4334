/**
 * An admin console build (a single-page app) served from a directory the operator names
 * (`consoleDir`, MESH_CONSOLE_DIR) at `/zac/` on both listeners, as upstream's `zac`/`spa`
 * binding serves one: the console then runs on the controller's origin, with no proxy and no
 * cross-origin requests.
 *
 * - A path that names a file under the directory answers it; any other `/zac/…` path (a route of
 *   the app, a directory) answers `index.html`, the app's entry, which reads the route itself.
 * - `/assets/…` is served from the directory's `assets/` the same way: upstream's `zac` binding
 *   claims it too, for console builds made without a base href.
 * - Nothing outside the directory is ever read: `.`/`..` segments, also percent-encoded, and
 *   encoded separators are a 400; a hidden file (`.env`, `.git/…`) or a symbolic link that
 *   resolves outside the directory is a 404.
 * - GET and HEAD only. `index.html` and files without a content hash in their name are
 *   revalidated (`no-cache`, with an ETag answered 304); hashed bundle names
 *   (`main.3f2a9c81b7d0e4a6.js`) are cached for a year, as their content never changes.
 *
 * Example: `MESH_CONSOLE_DIR=/opt/ziti-console npm start`, then open https://127.0.0.1:1280/zac/.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { RawRoute, Reply, Req } from '../core/operation.js';
import { ApiError, errors } from '../core/errors.js';

export const CONSOLE_PATH = '/zac';
const ASSETS_PATH = '/assets';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.htm': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.map': 'application/json',
  '.webmanifest': 'application/manifest+json',
  '.txt': 'text/plain; charset=utf-8',
  '.xml': 'application/xml',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
  '.avif': 'image/avif',
  '.ico': 'image/x-icon',
  '.woff': 'font/woff',
  '.woff2': 'font/woff2',
  '.ttf': 'font/ttf',
  '.otf': 'font/otf',
  '.eot': 'application/vnd.ms-fontobject',
  '.wasm': 'application/wasm',
  '.pdf': 'application/pdf',
};

/** A bundler's content hash in a file name (`main.3f2a9c81b7d0e4a6.js`, `chunk-AB12CD34.js`): such a file never changes. */
const HASHED = /[.-]([0-9a-f]{16,}|[0-9A-Z]{8})\.[a-z0-9]+$/;

/** No Referer leaves the console: a page of it may hold an authorization code in its URL. */
const SECURITY_HEADERS = { 'x-content-type-options': 'nosniff', 'x-frame-options': 'SAMEORIGIN', 'referrer-policy': 'no-referrer' };

/** Throws unless `dir` holds an index.html (config.ts checks the same for a clear start-up message). */
function assertConsoleDir(dir: string): void {
  if (!fs.statSync(path.join(dir, 'index.html'), { throwIfNoEntry: false })?.isFile()) throw new Error(`console directory ${dir} holds no index.html`);
}

/** The path's segments, decoded; refuses every form of a step outside the directory. */
function segments(rest: string): string[] {
  const out: string[] = [];
  for (const raw of rest.split('/')) {
    if (raw === '') continue;
    let s: string;
    try {
      s = decodeURIComponent(raw);
    } catch {
      throw new ApiError('INVALID_FIELD', 'The path is not valid percent-encoding', { field: 'path', reason: 'invalid percent-encoding', value: rest });
    }
    if (s === '.' || s === '..' || /[/\\\0]/.test(s)) throw new ApiError('INVALID_FIELD', 'The path may not hold "." or ".." segments or encoded separators', { field: 'path', reason: 'path traversal', value: rest });
    out.push(s);
  }
  return out;
}

interface Found {
  file: string;
  size: number;
  mtimeMs: number;
}

/** The regular file at `segs` under root, if it is one and really lies under root. */
function find(root: string, segs: string[]): Found | undefined {
  if (segs.some((s) => s.startsWith('.'))) throw errors.notFound();
  let real: string;
  try {
    real = fs.realpathSync(path.join(root, ...segs));
  } catch {
    return undefined;
  }
  // A symbolic link may point anywhere: what it resolves to must still be under the directory.
  if (real !== root && !real.startsWith(root + path.sep)) throw errors.notFound();
  const st = fs.statSync(real, { throwIfNoEntry: false });
  return st?.isFile() ? { file: real, size: st.size, mtimeMs: st.mtimeMs } : undefined;
}

async function serve(req: Req, f: Found): Promise<Reply> {
  const etag = `W/"${f.size.toString(16)}-${Math.floor(f.mtimeMs).toString(16)}"`;
  const name = path.basename(f.file);
  const cache = name !== 'index.html' && HASHED.test(name) ? 'public, max-age=31536000, immutable' : 'no-cache';
  const headers = { ...SECURITY_HEADERS, 'cache-control': cache, etag, 'last-modified': new Date(f.mtimeMs).toUTCString() };
  const contentType = TYPES[path.extname(name).toLowerCase()] ?? 'application/octet-stream';
  if (req.headers['if-none-match']?.split(',').some((t) => t.trim() === etag)) return { status: 304, headers };
  // HEAD: the GET's headers; the adapters send no body for it, so the file need not be read.
  const body = req.method === 'head' ? Buffer.alloc(0) : await fs.promises.readFile(f.file);
  return { status: 200, body, contentType, headers };
}

/**
 * The raw routes of the console: `/zac/…` and upstream's `/assets/…`, from `dir` (which must
 * hold an index.html). The directory is resolved again on every request, so a new build
 * swapped in behind a symbolic link is served without a restart.
 */
export function consoleRoutes(dir: string): RawRoute[] {
  assertConsoleDir(dir);
  const route = (prefix: string, base: string[]): RawRoute => ({
    method: '*',
    path: prefix,
    prefix: true,
    handle(req) {
      if (req.method !== 'get' && req.method !== 'head') throw errors.methodNotAllowed();
      const segs = [...base, ...segments(req.path.slice(prefix.length))];
      let root: string;
      try {
        root = fs.realpathSync(dir);
      } catch {
        throw errors.notFound();
      }
      const found = segs.length ? find(root, segs) : undefined;
      if (found) return serve(req, found);
      const index = find(root, ['index.html']);
      if (!index) throw errors.notFound();
      return serve(req, index);
    },
  });
  return [route(CONSOLE_PATH, []), route(ASSETS_PATH, ['assets'])];
}
