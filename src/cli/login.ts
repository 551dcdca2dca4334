/**
 * `mesh login URL`: trust the controller's CA bundle (from `/.well-known/est/cacerts`, shown by
 * SHA-256 fingerprint and accepted by the operator or `-y`), then log in with a password on the
 * Management API. `mesh login --identity FILE`: log in with an enrolled identity's certificate on
 * the Client API of the certificate listener. Either way the session is kept (state.ts).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import readline from 'node:readline/promises';
import { call, apiErrorText } from './http.js';
import { CliError, saveSession, usage, type Session } from './state.js';

/** `https://host:port` of a URL the operator typed (a path, if any, is dropped). */
export function origin(text: string): string {
  let u: URL;
  try {
    u = new URL(/^[a-z]+:\/\//i.test(text) ? text : `https://${text}`);
  } catch {
    throw usage(`"${text}" is not a controller URL (https://host:port)`);
  }
  if (u.protocol !== 'https:') throw usage(`${text}: the controller speaks https only`);
  return u.origin;
}

/** The CA certificates a controller publishes (base64 PKCS#7), fetched before anything can be checked. */
export async function fetchCaBundle(url: string): Promise<{ pem: string; certs: crypto.X509Certificate[] }> {
  const r = await call('GET', `${url}/.well-known/est/cacerts`, undefined, { insecure: true, headers: { accept: 'application/pkcs7-mime' } });
  if (r.status !== 200) throw new CliError(`${url}/.well-known/est/cacerts: ${r.status}; is this a mesh controller?`);
  await import('reflect-metadata'); // @peculiar/x509 (tsyringe) needs it loaded before the library itself
  const { X509Certificates } = await import('@peculiar/x509');
  let pems: string[];
  try {
    const set = new X509Certificates(Buffer.from(r.text.replace(/\s+/g, ''), 'base64'));
    pems = set.map((c) => c.toString('pem'));
  } catch (e) {
    throw new CliError(`${url}/.well-known/est/cacerts: not a PKCS#7 certificate bundle: ${(e as Error).message}`);
  }
  if (pems.length === 0) throw new CliError(`${url}/.well-known/est/cacerts holds no certificate`);
  return { pem: pems.join('\n') + '\n', certs: pems.map((p) => new crypto.X509Certificate(p)) };
}

function describeCas(certs: crypto.X509Certificate[]): string {
  return certs.map((c) => `  ${c.subject.replace(/\n/g, ', ')}\n    SHA-256 ${c.fingerprint256}  valid until ${new Date(c.validTo).toISOString().slice(0, 10)}`).join('\n');
}

async function confirm(question: string): Promise<boolean> {
  if (!process.stdin.isTTY) throw usage(`${question.trim()} — no terminal to answer on; pass -y to accept`);
  const rl = readline.createInterface({ input: process.stdin, output: process.stderr });
  try {
    return /^y(es)?$/i.test((await rl.question(question)).trim());
  } finally {
    rl.close();
  }
}

async function ask(question: string): Promise<string> {
  if (!process.stdin.isTTY) throw usage(`${question.trim()} — no terminal to answer on; pass it as an option`);
  const rl = readline.createInterface({ input: process.stdin, output: process.stderr });
  try {
    return (await rl.question(question)).trim();
  } finally {
    rl.close();
  }
}

export async function passwordLogin(urlText: string, opts: { username?: string; password?: string; yes?: boolean }): Promise<void> {
  const url = origin(urlText);
  const { pem, certs } = await fetchCaBundle(url);
  process.stderr.write(`The controller at ${url} presents these CA certificates:\n${describeCas(certs)}\n`);
  if (!opts.yes && !(await confirm('Trust them for this controller? [y/N] '))) throw new CliError('not trusted: nothing saved');
  const username = opts.username ?? (await ask('Username: '));
  const password = opts.password ?? (await ask('Password: '));
  // From here on every call checks the controller's certificate against the bundle just accepted.
  const r = await call('POST', `${url}/edge/management/v1/authenticate?method=password`, { username, password }, { ca: pem });
  if (r.status !== 200) throw new CliError(apiErrorText('POST', '/authenticate', r));
  const d = r.body.data;
  const file = saveSession({ url, api: 'management', token: d.token, ca: pem, identity: { id: d.identity?.id, name: d.identity?.name } });
  process.stdout.write(`logged in to ${url} as ${d.identity?.name} (${d.identity?.id}); session saved in ${file}\n`);
}

/** An identity file as `mesh enroll` writes it (upstream's identity JSON: `pem:` prefixed PEMs). */
export interface IdentityFile {
  ztAPI: string;
  ztAPIs?: string[];
  id: { key: string; cert: string; ca: string };
}

const unpem = (v: string) => (v.startsWith('pem:') ? v.slice(4) : v);

function readIdentityFile(file: string): { url: string; key: string; cert: string; ca: string } {
  let f: IdentityFile;
  try {
    f = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    throw usage(`${file}: not an identity file: ${(e as Error).message}`);
  }
  if (typeof f?.ztAPI !== 'string' || typeof f.id?.key !== 'string' || typeof f.id?.cert !== 'string' || typeof f.id?.ca !== 'string')
    throw usage(`${file}: not an identity file (needs ztAPI and id.key, id.cert, id.ca)`);
  return { url: f.ztAPI, key: unpem(f.id.key), cert: unpem(f.id.cert), ca: unpem(f.id.ca) };
}

export async function certificateLogin(file: string, urlText?: string): Promise<void> {
  const id = readIdentityFile(file);
  const url = origin(urlText ?? id.url);
  const r = await call('POST', `${url}/edge/client/v1/authenticate?method=cert`, {}, { ca: id.ca, cert: id.cert, key: id.key });
  if (r.status !== 200) throw new CliError(apiErrorText('POST', '/authenticate?method=cert', r));
  const d = r.body.data;
  const s: Session = { url, api: 'client', token: d.token, ca: id.ca, cert: id.cert, key: id.key, identity: { id: d.identity?.id, name: d.identity?.name } };
  const saved = saveSession(s);
  process.stdout.write(`logged in to ${url} as ${d.identity?.name} (${d.identity?.id}) with the certificate of ${file}; session saved in ${saved}\n`);
}
