/**
 * Test harness: starts the real controller (`node dist/src/main.js`) on port 0 with a fresh data
 * directory, waits for the address it prints, and speaks HTTPS to it, verifying the server
 * certificate against the CA bundle the controller generated. No mocks.
 *
 *   const srv = await startServer(t);          // stopped and cleaned up when `t` ends
 *   const admin = await srv.login();           // admin Management API client
 *   const r = await admin.post('/identities', { name: 'a', type: 'User', isAdmin: false });
 *   t.equal(r.status, 201);
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const MAIN = path.join(ROOT, 'dist', 'src', 'main.js');

export const ADMIN_USER = 'admin';
export const ADMIN_PASSWORD = 'admin-test-password';

export interface Res {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  /** Parsed JSON when the response is JSON, else undefined. */
  body: any;
  text: string;
}

export interface RequestOptions {
  headers?: Record<string, string>;
  /** Raw body (Buffer or string) sent as is; `json` is ignored when set. */
  raw?: Buffer | string;
}

export class Client {
  constructor(
    readonly server: Server,
    readonly base: string,
    public token?: string,
  ) {}

  request(method: string, p: string, json?: unknown, opts: RequestOptions = {}): Promise<Res> {
    const headers: Record<string, string> = { accept: 'application/json', ...opts.headers };
    if (this.token && headers['zt-session'] === undefined) headers['zt-session'] = this.token;
    let body: Buffer | undefined;
    if (opts.raw !== undefined) body = Buffer.from(opts.raw);
    else if (json !== undefined) {
      body = Buffer.from(JSON.stringify(json));
      headers['content-type'] ??= 'application/json';
    }
    return this.server.raw(method, this.base + p, body, headers);
  }
  get(p: string, opts?: RequestOptions) { return this.request('GET', p, undefined, opts); }
  post(p: string, json?: unknown, opts?: RequestOptions) { return this.request('POST', p, json, opts); }
  put(p: string, json?: unknown, opts?: RequestOptions) { return this.request('PUT', p, json, opts); }
  patch(p: string, json?: unknown, opts?: RequestOptions) { return this.request('PATCH', p, json, opts); }
  delete(p: string, json?: unknown, opts?: RequestOptions) { return this.request('DELETE', p, json, opts); }

  /** Create for a test's set-up: the new entity's id; anything but 201 throws. */
  async create(p: string, body: unknown): Promise<string> {
    const r = await this.post(p, body);
    if (r.status !== 201) throw new Error(`setup ${p}: ${r.status} ${r.text}`);
    return r.body.data.id;
  }
}

export interface StartOptions {
  env?: Record<string, string>;
  /** Reuse an existing data directory (restart tests). */
  dataDir?: string;
  /** Keep the data directory after the test (restart tests clean it themselves). */
  keepData?: boolean;
}

export class Server {
  readonly agent: https.Agent;
  readonly mgmt: Client;
  readonly client: Client;
  output = '';
  /** Port of the mutual-TLS listener (certificate login and enrollment; same operations). */
  certPort = 0;

  constructor(
    readonly proc: ChildProcess,
    readonly port: number,
    readonly dataDir: string,
    readonly ca: string,
  ) {
    // The server drops kept-alive connections after 10 s idle (uWS); retire idle sockets at 4 s so
    // a slow, loaded test run never sends on a socket the server is closing ("socket hang up").
    this.agent = new https.Agent({ ca, keepAlive: true, maxSockets: 32, timeout: 4000 });
    this.mgmt = new Client(this, '/edge/management/v1');
    this.client = new Client(this, '/edge/client/v1');
  }

  get origin() {
    return `https://127.0.0.1:${this.port}`;
  }

  get certOrigin() {
    return `https://127.0.0.1:${this.certPort}`;
  }

  /**
   * A client of the mutual-TLS listener presenting `cert`/`key` (PEM; omit both for no client
   * certificate). Each client has its own agent: TLS sessions and connections are not shared.
   */
  tlsClient(api: 'client' | 'management', cert?: string, key?: string): Client {
    const agent = new https.Agent({ ca: this.ca, cert, key, keepAlive: false });
    const base = api === 'management' ? '/edge/management/v1' : '/edge/client/v1';
    const server = this;
    const c = new Client({ raw: (m: string, p: string, b?: Buffer, h?: Record<string, string>) => server.rawOn(this.certPort, agent, m, p, b, h) } as Server, base);
    return c;
  }

  /** `p` may hold raw spaces and quotes (filters); they are percent-encoded here. `#` must be encoded by the caller. */
  raw(method: string, p: string, body?: Buffer, headers: Record<string, string> = {}): Promise<Res> {
    return this.rawOn(this.port, this.agent, method, p, body, headers);
  }

  rawOn(port: number, agent: https.Agent, method: string, p: string, body?: Buffer, headers: Record<string, string> = {}): Promise<Res> {
    p = p.replace(/[^\x21-\x7e]|["<>\\^`{|}]/g, (c) => encodeURIComponent(c));
    return new Promise((resolve, reject) => {
      const req = https.request(
        { host: '127.0.0.1', port, method, path: p, agent, headers: { ...headers, ...(body ? { 'content-length': String(body.length) } : {}) } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let parsed: any;
            if ((res.headers['content-type'] ?? '').includes('json')) {
              try {
                parsed = JSON.parse(text);
              } catch {
                parsed = undefined;
              }
            }
            resolve({ status: res.statusCode ?? 0, headers: res.headers, body: parsed, text });
          });
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      if (body) req.write(body);
      req.end();
    });
  }

  /** Password login on the given API; returns a client carrying the session token. */
  async login(username = ADMIN_USER, password = ADMIN_PASSWORD, api: 'management' | 'client' = 'management'): Promise<Client> {
    const c = new Client(this, api === 'management' ? '/edge/management/v1' : '/edge/client/v1');
    const r = await c.post('/authenticate?method=password', { username, password });
    if (r.status !== 200) throw new Error(`login ${username} failed: ${r.status} ${r.text}`);
    c.token = r.body.data.token;
    return c;
  }

  /** SIGTERM and wait for exit; resolves with the exit code. */
  async stop(signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
    this.agent.destroy();
    // Already exited (a signal such as kill -9 leaves exitCode null and sets signalCode).
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return this.proc.exitCode;
    const exited = new Promise<number | null>((resolve) => this.proc.once('exit', (code) => resolve(code)));
    this.proc.kill(signal);
    return exited;
  }
}

/** Start a controller; when `t` is given it is stopped (and its data removed) at the end of `t`. */
export async function startServer(t?: { teardown(fn: () => unknown): void }, opts: StartOptions = {}): Promise<Server> {
  const dataDir = opts.dataDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-test-'));
  const proc = spawn(process.execPath, [MAIN], {
    env: {
      PATH: process.env.PATH ?? '',
      MESH_DATA_DIR: dataDir,
      MESH_ADDRESS: '127.0.0.1:0',
      MESH_CERT_ADDRESS: '127.0.0.1:0',
      MESH_ADMIN_PASSWORD: ADMIN_PASSWORD,
      MESH_LOG_LEVEL: 'warn',
      // Cheap hashing keeps tests fast; production defaults are measured in bench/.
      MESH_ARGON2_MEMORY_KIB: '1024',
      MESH_ARGON2_ITERATIONS: '1',
      MESH_WORKERS: '2',
      ...opts.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  let certPort = 0;
  const port = await new Promise<number>((resolve, reject) => {
    // A start that times out is killed: nothing else would stop it, and it would outlive the test.
    const timer = setTimeout(() => {
      proc.kill('SIGKILL');
      reject(new Error(`controller did not start in 30 s:\n${output}`));
    }, 30_000);
    const onData = (d: Buffer) => {
      output += d.toString();
      const m = /listening on https:\/\/[^\s]*:(\d+)/.exec(output);
      const c = /certificate listener on https:\/\/[^\s]*:(\d+)/.exec(output);
      if (m && c) {
        clearTimeout(timer);
        certPort = Number(c[1]);
        resolve(Number(m[1]));
      }
    };
    proc.stdout!.on('data', onData);
    proc.stderr!.on('data', onData);
    proc.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`controller exited with ${code} before listening:\n${output}`));
    });
  });
  const ca = fs.readFileSync(path.join(dataDir, 'pki', 'ca-bundle.pem'), 'utf8');
  const srv = new Server(proc, port, dataDir, ca);
  srv.certPort = certPort;
  proc.stdout!.on('data', (d) => (srv.output += d.toString()));
  proc.stderr!.on('data', (d) => (srv.output += d.toString()));
  srv.output = output;
  t?.teardown(async () => {
    await srv.stop();
    if (!opts.keepData) fs.rmSync(dataDir, { recursive: true, force: true });
  });
  return srv;
}

/** The API-session id (`jti`) a signed API-session token names. */
export function sessionIdOf(token: string): string {
  return JSON.parse(Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8')).jti;
}

/** Assert an upstream error envelope: status, code, and the standard meta. */
export function isError(r: Res, status: number, code: string): boolean {
  return (
    r.status === status &&
    r.body?.error?.code === code &&
    typeof r.body?.error?.requestId === 'string' &&
    r.body?.meta?.apiVersion === '0.0.1' &&
    r.body?.meta?.apiEnrollmentVersion === '0.0.1'
  );
}

/**
 * Run the controller (`node dist/src/main.js`) with exactly `env` until it exits: for starts that
 * must fail. Killed after 30 s. Resolves with its exit code and its stdout and stderr together.
 */
export function controllerExit(env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const proc = spawn(process.execPath, [MAIN], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    proc.stdout!.on('data', (d) => (output += d));
    proc.stderr!.on('data', (d) => (output += d));
    const timer = setTimeout(() => proc.kill('SIGKILL'), 30_000);
    proc.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}
