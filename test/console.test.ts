/**
 * An admin console build served at /zac/ from MESH_CONSOLE_DIR (src/http/console.ts), with a
 * stand-in single-page app the test writes into a temporary directory:
 * - over HTTPS: files with their content types, the index fallback for the app's routes, HEAD,
 *   ETag revalidation and cache headers, nothing outside the directory (dot segments, encoded or
 *   not, hidden files, symbolic links leading out), GET and HEAD only, and the setting checked at start;
 * - in headless Chromium (as test/oidc-browser.test.ts drives it): the app served from /zac/ logs
 *   in through the OIDC pages (authorization code + PKCE, every request on the controller's own
 *   origin), lists identities over the Management API with its access token, and logs out as
 *   upstream's console does (POST /oidc/oauth/revoke with its refresh token), after which the
 *   token is refused on both APIs and on the certificate listener.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t, { type Test } from 'tap';
import { chromium } from 'playwright-core';
import { startServer, Client, ADMIN_USER, ADMIN_PASSWORD } from './helpers/server.js';

const INDEX = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<base href="/zac/">
<title>Stand-in console</title>
<link rel="stylesheet" href="style.css">
<script src="app.js" defer></script>
</head>
<body>
<p id="status">loading</p>
<button id="login" hidden>Log in</button>
<button id="logout" hidden>Log out</button>
<ul id="identities"></ul>
</body>
</html>
`;

/** The app: the code flow with PKCE through the OIDC pages, one Management list, logout by revoke. */
const APP = `const CLIENT = 'openziti';
const redirectUri = location.origin + '/zac/callback';
const $ = (id) => document.getElementById(id);
const b64url = (buf) => btoa(String.fromCharCode(...new Uint8Array(buf))).replace(/\\+/g, '-').replace(/\\//g, '_').replace(/=+$/, '');
const form = (fields) => new URLSearchParams(fields);
const tokens = () => JSON.parse(sessionStorage.getItem('tokens') || 'null');

async function login() {
  const verifier = b64url(crypto.getRandomValues(new Uint8Array(32)));
  const challenge = b64url(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier)));
  const state = b64url(crypto.getRandomValues(new Uint8Array(16)));
  sessionStorage.setItem('pkce', JSON.stringify({ verifier, state }));
  location.assign('/oidc/authorize?' + form({ client_id: CLIENT, response_type: 'code', scope: 'openid offline_access', redirect_uri: redirectUri, code_challenge: challenge, code_challenge_method: 'S256', state }));
}

async function callback(params) {
  const { verifier, state } = JSON.parse(sessionStorage.getItem('pkce') || '{}');
  sessionStorage.removeItem('pkce');
  if (params.get('state') !== state) throw new Error('state mismatch');
  const r = await fetch('/oidc/oauth/token', { method: 'POST', headers: { accept: 'application/json' }, body: form({ grant_type: 'authorization_code', client_id: CLIENT, code: params.get('code'), code_verifier: verifier, redirect_uri: redirectUri }) });
  const tok = await r.json();
  if (!r.ok) throw new Error(tok.error_description || tok.error);
  sessionStorage.setItem('tokens', JSON.stringify(tok));
  history.replaceState(null, '', '/zac/identities');
}

async function list(tok) {
  const r = await fetch('/edge/management/v1/identities?limit=25', { headers: { authorization: 'Bearer ' + tok.access_token, accept: 'application/json' } });
  const body = await r.json();
  if (!r.ok) throw new Error('identities: ' + r.status);
  $('identities').replaceChildren(...body.data.map((i) => Object.assign(document.createElement('li'), { textContent: i.name })));
  $('status').textContent = 'signed in: ' + body.meta.pagination.totalCount + ' identities';
}

async function logout() {
  const tok = tokens();
  await fetch('/oidc/oauth/revoke', { method: 'POST', headers: { accept: 'application/json' }, body: form({ token: tok.refresh_token, token_type_hint: 'refresh_token', client_id: CLIENT }) });
  sessionStorage.removeItem('tokens');
  $('identities').replaceChildren();
  $('logout').hidden = true;
  const after = await fetch('/edge/management/v1/identities', { headers: { authorization: 'Bearer ' + tok.access_token, accept: 'application/json' } });
  $('status').textContent = 'signed out; the old token gets ' + after.status;
}

$('login').onclick = () => login().catch((e) => ($('status').textContent = 'error: ' + e.message));
$('logout').onclick = () => logout().catch((e) => ($('status').textContent = 'error: ' + e.message));
(async () => {
  const params = new URLSearchParams(location.search);
  if (params.has('error')) throw new Error(params.get('error_description') || params.get('error'));
  if (location.pathname === '/zac/callback' && params.has('code')) await callback(params);
  const tok = tokens();
  if (!tok) {
    $('login').hidden = false;
    $('status').textContent = 'signed out';
    return;
  }
  $('logout').hidden = false;
  await list(tok);
})().catch((e) => ($('status').textContent = 'error: ' + e.message));
`;

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CANDIDATES = [process.env.MESH_CHROMIUM, '/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'].filter((p): p is string => !!p);
const executablePath = CANDIDATES.find((p) => fs.existsSync(p));

/** The stand-in build, and beside it (outside it) a file no request may reach. */
function standIn(t: Test) {
  const base = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-console-'));
  t.teardown(() => fs.rmSync(base, { recursive: true, force: true }));
  const dir = path.join(base, 'build');
  fs.mkdirSync(path.join(dir, 'assets'), { recursive: true });
  fs.mkdirSync(path.join(dir, 'media'));
  fs.writeFileSync(path.join(dir, 'index.html'), INDEX);
  fs.writeFileSync(path.join(dir, 'app.js'), APP);
  fs.writeFileSync(path.join(dir, 'style.css'), 'body { font-family: sans-serif; }\n');
  fs.writeFileSync(path.join(dir, 'main.0123456789abcdef.js'), 'console.log("hashed");\n');
  fs.writeFileSync(path.join(dir, 'assets', 'logo.svg'), '<svg xmlns="http://www.w3.org/2000/svg"/>\n');
  fs.writeFileSync(path.join(dir, 'media', 'font.woff2'), Buffer.from([0x77, 0x4f, 0x46, 0x32]));
  fs.writeFileSync(path.join(dir, '.env'), 'SECRET=hidden-file\n');
  fs.writeFileSync(path.join(base, 'secret.txt'), 'outside the console directory\n');
  fs.symlinkSync(path.join(base, 'secret.txt'), path.join(dir, 'out.txt'));
  fs.symlinkSync(base, path.join(dir, 'up'));
  fs.symlinkSync(path.join(dir, 'app.js'), path.join(dir, 'alias.js'));
  return dir;
}

t.test('the console directory over HTTPS: files, the index fallback, HEAD, caching, nothing outside it', async (t) => {
  const dir = standIn(t);
  const srv = await startServer(t, { env: { MESH_CONSOLE_DIR: dir } });
  const get = (p: string, headers: Record<string, string> = {}) => srv.raw('GET', p, undefined, headers);

  const index = await get('/zac/');
  t.equal(index.status, 200, '/zac/ answers');
  t.equal(index.headers['content-type'], 'text/html; charset=utf-8', 'as HTML');
  t.equal(index.text, INDEX, 'the index.html of the directory');
  t.equal(index.headers['cache-control'], 'no-cache', 'revalidated: a new build is seen at once');
  t.equal(index.headers['x-content-type-options'], 'nosniff', 'nosniff');
  t.equal(index.headers['referrer-policy'], 'no-referrer', 'no Referer leaves the console (a code in its URL stays there)');
  t.ok(index.headers.etag, 'with an ETag');
  t.equal((await get('/zac')).text, INDEX, '/zac as well');

  const js = await get('/zac/app.js');
  t.equal(js.status, 200, 'a file');
  t.equal(js.headers['content-type'], 'text/javascript; charset=utf-8', 'JavaScript');
  t.equal(js.text, APP, 'its bytes');
  t.equal((await get('/zac/style.css')).headers['content-type'], 'text/css; charset=utf-8', 'CSS');
  const font = await get('/zac/media/font.woff2');
  t.equal(font.headers['content-type'], 'font/woff2', 'a font, in a subdirectory');
  t.equal(font.text, 'wOF2', 'its bytes');
  const hashed = await get('/zac/main.0123456789abcdef.js');
  t.equal(hashed.headers['cache-control'], 'public, max-age=31536000, immutable', 'a hashed bundle name is cached for good');
  t.equal((await get('/zac/alias.js')).text, APP, 'a symbolic link inside the directory is followed');
  const svg = await get('/assets/logo.svg');
  t.equal(svg.status, 200, "/assets/ as upstream's zac binding serves it");
  t.equal(svg.headers['content-type'], 'image/svg+xml', 'SVG');

  for (const route of ['/zac/identities', '/zac/identities/abc/edit', '/zac/callback?code=x&state=y', '/zac/media', '/zac/missing.js']) {
    const r = await get(route);
    t.equal(r.status, 200, `${route}: answered`);
    t.equal(r.text, INDEX, `${route}: with index.html (the app reads its route)`);
  }

  const head = await srv.raw('HEAD', '/zac/app.js');
  t.equal(head.status, 200, 'HEAD');
  t.equal(head.headers['content-type'], 'text/javascript; charset=utf-8', 'with the GET headers');
  t.equal(head.headers.etag, js.headers.etag, 'the same ETag');
  t.equal(head.text, '', 'and no body');
  const again = await get('/zac/app.js', { 'if-none-match': String(js.headers.etag) });
  t.equal(again.status, 304, 'a matching If-None-Match: 304');
  t.equal(again.text, '', 'without the body');

  for (const m of ['POST', 'PUT', 'DELETE']) {
    const r = await srv.raw(m, '/zac/app.js', Buffer.from('x'));
    t.equal(r.status, 405, `${m}: 405`);
    t.equal(r.body?.error?.code, 'METHOD_NOT_ALLOWED', `${m}: in the error envelope`);
  }

  const refused: [string, number][] = [
    ['/zac/../secret.txt', 400],
    ['/zac/media/../../secret.txt', 400],
    ['/zac/%2e%2e/secret.txt', 400],
    ['/zac/%2E%2E/secret.txt', 400],
    ['/zac/..%2fsecret.txt', 400],
    ['/zac/media%2f..%2f..%2fsecret.txt', 400],
    ['/zac/..%5csecret.txt', 400],
    ['/zac/./app.js', 400],
    ['/zac/app.js%00.html', 400],
    ['/zac/%zz', 400],
    ['/assets/../secret.txt', 400],
    ['/zac/.env', 404],
    ['/zac/%2eenv', 404],
    ['/zac/out.txt', 404],
    ['/zac/up/secret.txt', 404],
  ];
  for (const [p, status] of refused) {
    const r = await get(p);
    t.equal(r.status, status, `${p}: ${status}`);
    t.ok(r.body?.error?.code, `${p}: in the error envelope`);
    t.notMatch(r.text, /outside the console directory|hidden-file/, `${p}: nothing of the file`);
  }

  // Logins from the console: its own pages on the request's origin need no registration.
  const authorize = (redirectUri: string, host?: string) => {
    const p = `/oidc/authorize?${new URLSearchParams({ client_id: 'openziti', response_type: 'code', scope: 'openid', redirect_uri: redirectUri, code_challenge: 'x'.repeat(43), code_challenge_method: 'S256' })}`;
    if (!host) return srv.raw('GET', p);
    // A host name the test certificate does not cover: only the Host header changes.
    return new Promise<{ status: number }>((resolve, reject) => {
      https.get({ host: '127.0.0.1', port: srv.port, path: p, ca: srv.ca, headers: { host }, checkServerIdentity: () => undefined }, (res) => {
        res.resume();
        resolve({ status: res.statusCode ?? 0 });
      }).on('error', reject);
    });
  };
  t.equal((await authorize(`${srv.origin}/zac/callback`)).status, 302, 'a redirect URI under /zac/ on the origin the request came to is accepted');
  t.equal((await authorize(`https://ctrl.example:${srv.port}/auth/callback`, `ctrl.example:${srv.port}`)).status, 302, "as is upstream's console's /auth/callback on that origin, under any host name");
  t.equal((await authorize(`https://ctrl.example:${srv.port}/auth/callback`)).status, 400, "but not on another origin than the request's");
  t.equal((await authorize(`${srv.origin}/elsewhere`)).status, 400, 'nor another path of the origin');
  t.equal((await authorize(`http://127.0.0.1:${srv.port}/zac/callback`)).status, 400, 'nor plain http');

  t.equal((await get('/zacanything')).status, 404, 'only /zac and what is under it');
  t.equal((await srv.mgmt.get('/version')).status, 200, 'the APIs are as before');
});

t.test('without MESH_CONSOLE_DIR nothing is served at /zac/; a directory without index.html stops the start', async (t) => {
  const srv = await startServer(t);
  t.equal((await srv.raw('GET', '/zac/')).status, 404, 'no console: 404');
  t.equal((await srv.raw('GET', '/assets/logo.svg')).status, 404, 'nor /assets/');
  const authorize = await srv.raw('GET', `/oidc/authorize?${new URLSearchParams({ client_id: 'openziti', response_type: 'code', scope: 'openid', redirect_uri: `${srv.origin}/zac/callback`, code_challenge: 'x'.repeat(43), code_challenge_method: 'S256' })}`);
  t.equal(authorize.status, 400, 'and no redirect to /zac/ without registration');

  const empty = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-console-empty-'));
  t.teardown(() => fs.rmSync(empty, { recursive: true, force: true }));
  for (const dir of [empty, path.join(empty, 'missing')]) {
    const run = spawnSync(process.execPath, [path.join(ROOT, 'dist', 'src', 'main.js')], {
      env: { ...process.env, MESH_CONSOLE_DIR: dir, MESH_DATA_DIR: path.join(empty, 'data'), MESH_ADDRESS: '127.0.0.1:0' },
      encoding: 'utf8',
      timeout: 60_000,
    });
    t.equal(run.status, 2, `${dir}: exit status 2`);
    t.match(run.stderr, /consoleDir \(MESH_CONSOLE_DIR\).*index\.html/, `${dir}: the message names the setting and what it needs`);
  }
});

t.test('in Chromium: the stand-in console served from /zac/ logs in through the OIDC pages, lists identities, and logs out by revoking its token', async (t) => {
  if (!executablePath) {
    t.fail(`no Chromium found (looked at ${CANDIDATES.join(', ')}); install Debian's chromium or set MESH_CHROMIUM`);
    return;
  }
  const dir = standIn(t);
  const srv = await startServer(t, { env: { MESH_CONSOLE_DIR: dir } });
  const admin = await srv.login();
  await admin.create('/identities', { name: 'console-listed', type: 'User', isAdmin: false });

  const browser = await chromium.launch({ executablePath, headless: true });
  t.teardown(() => browser.close());
  const context = await browser.newContext({ ignoreHTTPSErrors: true });
  const page = await context.newPage();
  const origins = new Set<string>();
  page.on('request', (r) => {
    if (!r.url().startsWith('data:')) origins.add(new URL(r.url()).origin);
  });

  await page.goto(`${srv.origin}/zac/`);
  t.equal(await page.title(), 'Stand-in console', 'the app loads from /zac/');
  await page.getByRole('button', { name: 'Log in' }).waitFor();
  await Promise.all([page.waitForURL((u) => u.pathname === '/oidc/login/password'), page.getByRole('button', { name: 'Log in' }).click()]);
  t.equal(await page.title(), 'Log in', "the controller's OIDC login page");
  await page.getByLabel('Username').fill(ADMIN_USER);
  await page.getByLabel('Password').fill(ADMIN_PASSWORD);
  await Promise.all([page.waitForURL((u) => u.pathname === '/zac/identities'), page.getByRole('button', { name: 'Log in' }).click()]);
  await page.locator('#identities li', { hasText: 'console-listed' }).waitFor();
  const names = await page.locator('#identities li').allTextContents();
  t.ok(names.includes('console-listed') && names.length >= 2, `the Management list is shown (${names.join(', ')})`);
  t.match(await page.locator('#status').textContent(), /^signed in: \d+ identities$/, 'signed in');

  // A deep link is answered with the app (the index fallback), which still has its tokens.
  await page.reload();
  await page.locator('#identities li', { hasText: 'console-listed' }).waitFor();
  t.pass('reloading /zac/identities shows the list again');

  const tokens = JSON.parse((await page.evaluate(() => sessionStorage.getItem('tokens'))) ?? '{}');
  t.ok(tokens.access_token && tokens.refresh_token, 'the app holds an access and a refresh token');
  const bearer = { headers: { authorization: `Bearer ${tokens.access_token}` } };
  t.equal((await new Client(srv, '/edge/client/v1').get('/current-identity', bearer)).status, 200, 'the token works on the Client API');
  t.equal((await srv.tlsClient('management').get('/current-identity', bearer)).status, 200, 'and on the certificate listener');

  const revoked = page.waitForResponse((r) => new URL(r.url()).pathname === '/oidc/oauth/revoke');
  await page.getByRole('button', { name: 'Log out' }).click();
  t.equal((await revoked).status(), 200, 'logout revoked at /oidc/oauth/revoke');
  await page.locator('#status', { hasText: 'signed out' }).waitFor();
  t.equal(await page.locator('#status').textContent(), 'signed out; the old token gets 401', 'the app sees its old token refused');
  t.same([...origins], [srv.origin], "every request the browser made went to the controller's origin");

  t.equal((await new Client(srv, '/edge/client/v1').get('/current-identity', bearer)).status, 401, 'refused on the Client API');
  t.equal((await new Client(srv, '/edge/management/v1').get('/identities', bearer)).status, 401, 'on the Management API');
  t.equal((await srv.tlsClient('client').get('/current-identity', bearer)).status, 401, 'on the certificate listener');
  const refresh = await srv.raw('POST', '/oidc/oauth/token', Buffer.from(new URLSearchParams({ client_id: 'openziti', grant_type: 'refresh_token', refresh_token: tokens.refresh_token }).toString()), { 'content-type': 'application/x-www-form-urlencoded' });
  t.equal(refresh.status, 400, 'and its refresh token is refused');
  await context.close();
});
