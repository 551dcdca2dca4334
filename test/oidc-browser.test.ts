/**
 * The OIDC authorization-code flow with PKCE driven by a real browser (headless Chromium through
 * playwright-core): the browser opens /oidc/authorize, a person's steps are typed into the HTML
 * login pages (password; TOTP enrollment with the QR page; the TOTP form), the redirects are
 * followed by the browser to a local receiver on 127.0.0.1, and the test exchanges the code with
 * its verifier and uses the access token as a Bearer token on both APIs.
 *
 * Chromium comes from the system (Debian's `chromium`, which npm test installs where it may:
 * scripts/test-prerequisites.sh looks at the same paths); MESH_CHROMIUM names another executable.
 * Without one the test fails: it is part of `npm test`.
 */
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import { chromium, type Browser, type Page } from 'playwright-core';
import { startServer, Client, type Server } from './helpers/server.js';
import { createUser } from './helpers/users.js';
import { authPolicyBody } from './helpers/bodies.js';
import { pkce } from './helpers/oidc.js';
import { totpCode } from '../src/auth/mfa.js';

const CANDIDATES = [process.env.MESH_CHROMIUM, '/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'].filter((p): p is string => !!p);
const executablePath = CANDIDATES.find((p) => fs.existsSync(p));

/** A local redirect receiver, as a native app or the admin console runs one: records each callback it gets. */
async function receiver(t: Test) {
  const hits: URL[] = [];
  const server = http.createServer((req, res) => {
    hits.push(new URL(req.url ?? '/', 'http://127.0.0.1'));
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end('<!doctype html><title>Signed in</title><p>You may close this window.</p>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const port = (server.address() as AddressInfo).port;
  return { hits, redirectUri: `http://127.0.0.1:${port}/auth/callback` };
}


function authorizeUrl(srv: Server, redirectUri: string, challenge: string, state: string) {
  const q = new URLSearchParams({ client_id: 'openziti', response_type: 'code', scope: 'openid offline_access', redirect_uri: redirectUri, code_challenge: challenge, code_challenge_method: 'S256', state });
  return `${srv.origin}/oidc/authorize?${q}`;
}

/** Type the credentials into the login page and submit it; resolves once the next page has loaded. */
async function submitPassword(page: Page, username: string, password: string) {
  await page.getByLabel('Username').fill(username);
  await page.getByLabel('Password').fill(password);
  await Promise.all([page.waitForLoadState('load'), page.waitForURL((u) => u.pathname === '/oidc/login/password' || u.pathname.endsWith('/auth/callback')), page.getByRole('button', { name: 'Log in' }).click()]);
}

/** The code the receiver got for `state`, and the tokens it is exchanged for (the verifier proves PKCE). */
async function exchangeAt(t: Test, srv: Server, hits: URL[], redirectUri: string, state: string, verifier: string) {
  const hit = hits.find((u) => u.searchParams.get('state') === state);
  t.ok(hit, 'the browser was redirected to the local receiver');
  t.equal(hit?.pathname, '/auth/callback', 'at the registered callback path');
  const code = hit?.searchParams.get('code') ?? '';
  t.ok(code, 'with a code');
  const form = (f: Record<string, string>) => Buffer.from(new URLSearchParams({ client_id: 'openziti', ...f }).toString());
  const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
  const wrong = await srv.raw('POST', '/oidc/oauth/token', form({ grant_type: 'authorization_code', code, redirect_uri: redirectUri, code_verifier: pkce().verifier }), FORM);
  t.equal(wrong.status, 400, 'another verifier is refused');
  t.equal(wrong.body.error, 'invalid_grant', 'invalid_grant');
  return { code, form, FORM };
}

async function bearerWorks(t: Test, srv: Server, accessToken: string, identityId: string) {
  const auth = { headers: { authorization: `Bearer ${accessToken}` } };
  const me = await new Client(srv, '/edge/client/v1').get('/current-identity', auth);
  t.equal(me.status, 200, 'client API with the access token as Bearer');
  t.equal(me.body.data?.id, identityId, 'as the identity that logged in');
  const mgmt = await new Client(srv, '/edge/management/v1').get('/current-identity', auth);
  t.equal(mgmt.status, 200, 'management API with the access token as Bearer');
  t.equal(mgmt.body.data?.id, identityId, 'as the same identity');
}

t.test('PKCE code flow in a real browser: password, TOTP enrollment, TOTP', async (t) => {
  if (!executablePath) {
    t.fail(`no Chromium found (looked at ${CANDIDATES.join(', ')}); install Debian's chromium or set MESH_CHROMIUM`);
    return;
  }
  const srv = await startServer(t);
  const admin = await srv.login();
  const { hits, redirectUri } = await receiver(t);
  const browser: Browser = await chromium.launch({ executablePath, headless: true });
  t.teardown(() => browser.close());

  // Password only.
  const userId = await createUser(admin, 'browser-user', 'browser-password-1');
  {
    const context = await browser.newContext({ ignoreHTTPSErrors: true });
    const page = await context.newPage();
    const { verifier, challenge } = pkce();
    const landed = await page.goto(authorizeUrl(srv, redirectUri, challenge, 'st-password'));
    t.equal(landed?.status(), 200, 'authorize led the browser to a page');
    t.match(new URL(page.url()).pathname, '/oidc/login/password', 'the password login page');
    t.equal(await page.title(), 'Log in', 'its title');

    await submitPassword(page, 'browser-user', 'not-the-password');
    t.match(await page.getByRole('alert').textContent(), /invalid|auth/i, 'a wrong password shows the reason on the page');
    t.equal(hits.length, 0, 'nothing reached the receiver');

    await submitPassword(page, 'browser-user', 'browser-password-1');
    t.equal(new URL(page.url()).origin, new URL(redirectUri).origin, 'the browser followed the redirects to the receiver');
    t.match(await page.textContent('body'), /close this window/, 'and shows its page');
    const { code, form, FORM } = await exchangeAt(t, srv, hits, redirectUri, 'st-password', verifier);
    // The wrong verifier above ended that login: a code is single-use and a failed exchange ends it.
    const gone = await srv.raw('POST', '/oidc/oauth/token', form({ grant_type: 'authorization_code', code, redirect_uri: redirectUri, code_verifier: verifier }), FORM);
    t.equal(gone.status, 400, 'after a failed exchange the code is gone');

    // Again, exchanging with the right verifier at once.
    const second = pkce();
    await page.goto(authorizeUrl(srv, redirectUri, second.challenge, 'st-password-2'));
    await submitPassword(page, 'browser-user', 'browser-password-1');
    const hit = hits.find((u) => u.searchParams.get('state') === 'st-password-2');
    t.ok(hit, 'second login reached the receiver');
    const tok = await srv.raw('POST', '/oidc/oauth/token', form({ grant_type: 'authorization_code', code: hit?.searchParams.get('code') ?? '', redirect_uri: redirectUri, code_verifier: second.verifier }), FORM);
    t.equal(tok.status, 200, 'the code is exchanged with its verifier');
    t.equal(tok.body.token_type, 'Bearer', 'Bearer tokens');
    await bearerWorks(t, srv, tok.body.access_token, userId);
    await context.close();
  }

  // An auth policy requiring TOTP: the browser enrolls an authenticator during the login, then logs in with it.
  const pol = await admin.post('/auth-policies', { ...authPolicyBody('browser-totp'), secondary: { requireTotp: true, requireExtJwtSigner: null } });
  t.equal(pol.status, 201, 'policy requiring TOTP');
  const mfaId = await createUser(admin, 'browser-mfa', 'browser-password-2', { authPolicyId: pol.body.data.id });
  let secret = '';
  {
    const context = await browser.newContext({ ignoreHTTPSErrors: true });
    const page = await context.newPage();
    const { verifier, challenge } = pkce();
    await page.goto(authorizeUrl(srv, redirectUri, challenge, 'st-enroll'));
    await submitPassword(page, 'browser-mfa', 'browser-password-2');
    t.equal(await page.title(), 'Set up an authenticator', 'the login offers TOTP enrollment');
    await Promise.all([page.waitForLoadState('load'), page.waitForURL((u) => u.pathname === '/oidc/login/totp/enroll'), page.getByRole('button', { name: 'Set up' }).click()]);
    secret = (await page.locator('#secret').textContent()) ?? '';
    t.match(secret, /^[A-Z2-7]{32}$/, 'the page shows the secret');
    t.equal(await page.locator('#qr').evaluate((img: HTMLImageElement) => img.complete && img.naturalWidth), 256, 'and its QR code as a 256-pixel image');
    t.equal(await page.locator('#recovery-codes li').count(), 20, 'and 20 recovery codes');

    const wrong = totpCode(secret) === '000000' ? '111111' : '000000';
    await page.getByLabel('Code from the app').fill(wrong);
    await Promise.all([page.waitForLoadState('load'), page.waitForURL((u) => u.pathname === '/oidc/login/totp/enroll/verify'), page.getByRole('button', { name: 'Verify' }).click()]);
    t.match(await page.getByRole('alert').textContent(), /MFA code/i, 'a wrong code shows the reason');
    t.equal(await page.locator('#secret').textContent(), secret, 'with the same secret to scan');

    await page.getByLabel('Code from the app').fill(totpCode(secret));
    await Promise.all([page.waitForURL((u) => u.pathname === '/auth/callback'), page.getByRole('button', { name: 'Verify' }).click()]);
    const { code, form, FORM } = await exchangeAt(t, srv, hits, redirectUri, 'st-enroll', verifier);
    t.equal((await srv.raw('POST', '/oidc/oauth/token', form({ grant_type: 'authorization_code', code, redirect_uri: redirectUri, code_verifier: verifier }), FORM)).status, 400, 'the code ended with the failed exchange');
    t.equal((await admin.get(`/identities/${mfaId}`)).body.data.isMfaEnabled, true, 'MFA is enabled on the identity');
    await context.close();
  }
  {
    const context = await browser.newContext({ ignoreHTTPSErrors: true });
    const page = await context.newPage();
    const { verifier, challenge } = pkce();
    await page.goto(authorizeUrl(srv, redirectUri, challenge, 'st-totp'));
    await submitPassword(page, 'browser-mfa', 'browser-password-2');
    t.equal(await page.title(), 'Authenticator code', 'the TOTP page');
    const wrong = totpCode(secret) === '000000' ? '111111' : '000000';
    await page.getByLabel('Code').fill(wrong);
    await Promise.all([page.waitForLoadState('load'), page.waitForURL((u) => u.pathname === '/oidc/login/totp'), page.getByRole('button', { name: 'Verify' }).click()]);
    t.ok(await page.getByRole('alert').isVisible(), 'a wrong code shows the reason');
    t.equal(hits.filter((u) => u.searchParams.get('state') === 'st-totp').length, 0, 'and nothing reached the receiver');
    await page.getByLabel('Code').fill(totpCode(secret));
    await Promise.all([page.waitForURL((u) => u.pathname === '/auth/callback'), page.getByRole('button', { name: 'Verify' }).click()]);
    const hit = hits.find((u) => u.searchParams.get('state') === 'st-totp');
    t.ok(hit, 'the TOTP login reached the receiver');
    const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
    const tok = await srv.raw('POST', '/oidc/oauth/token', Buffer.from(new URLSearchParams({ client_id: 'openziti', grant_type: 'authorization_code', code: hit?.searchParams.get('code') ?? '', redirect_uri: redirectUri, code_verifier: verifier }).toString()), FORM);
    t.equal(tok.status, 200, 'code exchanged');
    await bearerWorks(t, srv, tok.body.access_token, mfaId);
    const cur = await new Client(srv, '/edge/client/v1').get('/current-api-session', { headers: { authorization: `Bearer ${tok.body.access_token}` } });
    t.same(cur.body.data?.authQueries, [], 'fully authenticated (TOTP passed)');
    await context.close();
  }
});
