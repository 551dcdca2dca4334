/** HTTPS calls to the controller, checking its certificate against the trusted CA bundle. */
import https from 'node:https';
import { CliError, type Session } from './state.js';

export interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: any;
  text: string;
  /** The server's certificate (DER), when asked for. */
  peerCert?: Buffer;
}

export interface CallOptions {
  ca?: string;
  cert?: string;
  key?: string;
  token?: string;
  /** Only to fetch the CA bundle itself, before anything can be checked (`mesh login`, `mesh enroll`). */
  insecure?: boolean;
  headers?: Record<string, string>;
}

export function call(method: string, url: string, body: unknown, opts: CallOptions = {}): Promise<Answer> {
  const headers: Record<string, string> = { accept: 'application/json', ...opts.headers };
  if (opts.token) headers['zt-session'] = opts.token;
  let payload: Buffer | undefined;
  if (typeof body === 'string') payload = Buffer.from(body);
  else if (body !== undefined) {
    payload = Buffer.from(JSON.stringify(body));
    headers['content-type'] ??= 'application/json';
  }
  if (payload) headers['content-length'] = String(payload.length);
  return new Promise((resolve, reject) => {
    const req = https.request(
      url,
      { method, headers, ca: opts.ca, cert: opts.cert, key: opts.key, rejectUnauthorized: !opts.insecure, agent: false, timeout: 30_000 },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let parsed: unknown;
          if (String(res.headers['content-type'] ?? '').includes('json')) {
            try {
              parsed = JSON.parse(text);
            } catch {
              parsed = undefined;
            }
          }
          const peer = (res.socket as import('node:tls').TLSSocket).getPeerCertificate?.();
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: parsed, text, peerCert: peer?.raw });
        });
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('no answer within 30 s')));
    req.on('error', (e) => reject(new CliError(`${method} ${url}: ${e.message}`)));
    if (payload) req.write(payload);
    req.end();
  });
}

/** A call with the saved session; a failure becomes a CliError carrying the controller's message. */
export async function api(s: Session, method: string, path: string, body?: unknown): Promise<Answer> {
  const base = `${s.url}/edge/${s.api}/v1`;
  const r = await call(method, base + path, body, { ca: s.ca, cert: s.cert, key: s.key, token: s.token });
  if (r.status === 401) throw new CliError(`${method} ${path}: 401 ${r.body?.error?.message ?? 'unauthorized'}; the session may have expired: run \`mesh login\` again`);
  if (r.status >= 400) throw new CliError(apiErrorText(method, path, r));
  return r;
}

export function apiErrorText(method: string, path: string, r: Answer): string {
  const e = r.body?.error;
  if (!e) return `${method} ${path}: ${r.status} ${r.text.slice(0, 300)}`;
  const cause = e.cause?.field ? ` (${e.cause.field}: ${e.cause.reason ?? e.cause.message ?? ''})` : e.cause?.message ? ` (${e.cause.message})` : '';
  return `${method} ${path}: ${r.status} ${e.code}: ${e.message}${cause}`;
}
