/**
 * The OIDC code flow as a client drives it by hand (test/oidc*.test.ts): a PKCE pair, authorize →
 * password step → callback, and the token endpoint. Redirects are followed by hand.
 */
import crypto from 'node:crypto';
import https from 'node:https';
import type { Test } from 'tap';
import type { Client, Res, Server } from './server.js';
import { newCsr } from './pki.js';

// Allowed by the default redirect patterns (127.0.0.1, any port, /auth/callback); nothing
// listens there: the code is read from the redirect.
export const REDIRECT = 'http://127.0.0.1:20314/auth/callback';

export const form = (fields: Record<string, string>) => Buffer.from(new URLSearchParams(fields).toString());
export const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

/** Path and query of an absolute or relative Location. */
export function pathOf(location: string): string {
  const u = new URL(location, 'https://x');
  return u.pathname + u.search;
}

export function pkce() {
  const verifier = crypto.randomBytes(32).toString('base64url');
  const challenge = crypto.createHash('sha256').update(verifier).digest('base64url');
  return { verifier, challenge };
}

/** authorize → password login → callback: the code (and the state) sent to the redirect URI. */
export async function codeFlow(t: Test, srv: Server, username: string, password: string, challenge: string) {
  const q = new URLSearchParams({ client_id: 'openziti', response_type: 'code', scope: 'openid offline_access', redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: 'S256', state: 'st-1', nonce: 'n-1' });
  const auth = await srv.raw('GET', `/oidc/authorize?${q}`);
  t.equal(auth.status, 302, 'authorize redirects to the login step');
  const loginUrl = pathOf(String(auth.headers.location));
  t.match(loginUrl, /^\/oidc\/login\/password\?authRequestID=/, 'to the password login');
  const id = new URL(loginUrl, 'https://x').searchParams.get('authRequestID')!;
  const page = await srv.raw('GET', loginUrl, undefined, { accept: 'text/html' });
  t.equal(page.status, 200, 'login page');
  t.equal(page.headers['auth-request-id'], id, 'login page names the request');
  const login = await srv.raw('POST', '/oidc/login/password', Buffer.from(JSON.stringify({ id, username, password })), { 'content-type': 'application/json', accept: 'application/json' });
  return { id, login };
}

/** The login step's 302 followed to the callback, whose 302 to the redirect URI carries the code. */
export async function finish(t: Test, srv: Server, login: { status: number; headers: Record<string, unknown> }) {
  t.equal(login.status, 302, 'login step redirects to the callback');
  const cb = await srv.raw('GET', pathOf(String(login.headers.location)));
  t.equal(cb.status, 302, 'callback redirects to the client');
  const back = new URL(String(cb.headers.location));
  t.equal(`${back.origin}${back.pathname}`, REDIRECT, 'to the registered redirect URI');
  t.equal(back.searchParams.get('state'), 'st-1', 'state carried back');
  const code = back.searchParams.get('code');
  t.ok(code, 'a code');
  return code!;
}

/** A token request of the `openziti` client (form-encoded). */
export const exchange = (srv: Server, fields: Record<string, string>) => srv.raw('POST', '/oidc/oauth/token', form({ client_id: 'openziti', ...fields }), FORM);

/** A device enrolled by ott, and a client on the certificate listener presenting its certificate. */
export async function enrolledDevice(t: Test, srv: Server, admin: Client, name: string) {
  const dev = await admin.post('/identities', { name, type: 'Device', isAdmin: false, enrollment: { ott: true } });
  t.equal(dev.status, 201, `${name} created`);
  const ott = (await admin.get(`/identities/${dev.body.data.id}`)).body.data.enrollment.ott.token;
  const { key, csr } = newCsr(name);
  const en = await srv.client.post('/enroll/ott', { token: ott, clientCsr: csr });
  t.equal(en.status, 200, `${name} enrolled`);
  const cert: string = en.body.data.cert;
  const agent = new https.Agent({ ca: srv.ca, cert, key, keepAlive: false });
  const onCert = (m: string, p: string, b?: Buffer, h?: Record<string, string>): Promise<Res> => srv.rawOn(srv.certPort, agent, m, p, b, h);
  return { id: dev.body.data.id as string, cert, key, onCert };
}

/**
 * An OIDC access token for a user with a verified TOTP MFA, by the code flow as a client drives it
 * (authorize → password → TOTP → callback → token), without assertions: for set-up hooks.
 */
export async function oidcAccessTokenWithTotp(srv: Server, username: string, password: string, code: () => string): Promise<string> {
  const { verifier, challenge } = pkce();
  const q = new URLSearchParams({ client_id: 'openziti', response_type: 'code', scope: 'openid offline_access', redirect_uri: REDIRECT, code_challenge: challenge, code_challenge_method: 'S256', state: 'st-1', nonce: 'n-1' });
  const auth = await srv.raw('GET', `/oidc/authorize?${q}`);
  const id = new URL(pathOf(String(auth.headers.location)), 'https://x').searchParams.get('authRequestID');
  if (!id) throw new Error(`authorize: ${auth.status} ${auth.text.slice(0, 200)}`);
  const json = { 'content-type': 'application/json', accept: 'application/json' };
  const login = await srv.raw('POST', '/oidc/login/password', Buffer.from(JSON.stringify({ id, username, password })), json);
  if (login.status !== 200) throw new Error(`password step: ${login.status} ${login.text.slice(0, 200)}`);
  const totp = await srv.raw('POST', '/oidc/login/totp', Buffer.from(JSON.stringify({ id, code: code() })), json);
  if (totp.status !== 302) throw new Error(`totp step: ${totp.status} ${totp.text.slice(0, 200)}`);
  const cb = await srv.raw('GET', pathOf(String(totp.headers.location)));
  const authCode = new URL(String(cb.headers.location)).searchParams.get('code');
  if (!authCode) throw new Error(`callback: ${cb.status} ${cb.text.slice(0, 200)}`);
  const tok = await exchange(srv, { grant_type: 'authorization_code', code: authCode, redirect_uri: REDIRECT, code_verifier: verifier });
  if (tok.status !== 200) throw new Error(`token: ${tok.status} ${tok.text.slice(0, 200)}`);
  return tok.body.access_token;
}
