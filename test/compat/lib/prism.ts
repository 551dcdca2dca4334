/**
 * A `prism proxy` (@stoplight/prism-cli) in front of a running controller, checking every exchange
 * against one patched upstream spec (./upstream-spec.ts). Started once per suite (it takes a couple
 * of seconds to read a spec) and killed when the suite ends.
 *
 *   const proxy = await startPrism(t, srv, 'management');
 *   // proxy.base = 'http://127.0.0.1:<port>' stands for https://127.0.0.1:<srv.port>/edge/management/v1
 *
 * `--errors` makes prism answer a request violation with its own 422 (the request is not forwarded)
 * and a response violation with its own 500 (`…/errors#VIOLATIONS`); every violation is also listed
 * in the `sl-violations` response header. ./exchanges.ts turns each of those into a test failure.
 * Prism routes on paths relative to the spec's basePath (it ignores basePath), so the upstream URL
 * given to it carries the API base path. It reaches our self-signed HTTPS front end by trusting the
 * controller's CA bundle through NODE_EXTRA_CA_CERTS.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { createRequire } from 'node:module';
import type { Server } from '../../helpers/server.js';
import { writePatchedSpec, type Api, type LoadedSpec } from './upstream-spec.js';
import { CertRelay, CLIENT_CERT_HEADER } from './cert-relay.js';
import { freePort } from '../../helpers/ports.js';

export { CLIENT_CERT_HEADER };

const require = createRequire(import.meta.url);
const PRISM_CLI = path.join(path.dirname(require.resolve('@stoplight/prism-cli/package.json')), 'dist', 'index.js');

export interface Proxy {
  api: Api;
  /** Plain-HTTP base URL of the proxy; `${base}/identities` is `…/edge/<api>/v1/identities` upstream. */
  base: string;
  spec: LoadedSpec;
  /**
   * With `clientCerts`: registers a client certificate; requests carrying the header
   * `x-compat-client-cert: <name>` reach the controller with it (see ./cert-relay.ts).
   */
  clientCert(name: string, certPem: string, keyPem: string): void;
  /** Everything prism printed (its log lines name each violation). */
  output(): string;
  stop(): Promise<void>;
}

const WATCHDOG = `const parent = Number(process.env.MESH_COMPAT_PARENT);
setInterval(() => { try { process.kill(parent, 0); } catch { process.exit(0); } }, 1000).unref();
`;

export async function startPrism(
  t: { teardown(fn: () => unknown): void },
  srv: Server,
  api: Api,
  opts: {
    /** Edits a copy of the patched spec (only to prove the checker catches violations). */
    mutate?: (doc: any) => void;
    /** Forward through a relay that can present TLS client certificates (./cert-relay.ts). */
    clientCerts?: boolean;
  } = {},
): Promise<Proxy> {
  const spec = writePatchedSpec(api, opts.mutate);
  const caFile = path.join(srv.dataDir, 'pki', 'ca-bundle.pem');
  const relay = opts.clientCerts ? await CertRelay.start(srv) : undefined;
  if (relay) t.teardown(() => relay.close());
  const upstream = relay ? `http://127.0.0.1:${relay.port}${spec.basePath}` : `${srv.origin}${spec.basePath}`;
  // Prism must not outlive a suite killed on timeout: a preloaded watchdog exits with the parent.
  const watchdog = path.join(path.dirname(spec.file), 'watchdog.cjs');
  fs.writeFileSync(watchdog, WATCHDOG);
  let lastError: unknown;
  // The free port may be taken between probing and prism's listen: retry a couple of times.
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    const proc = spawn(
      process.execPath,
      ['--require', watchdog, PRISM_CLI, 'proxy', spec.file, upstream, '--errors', '--port', String(port), '--host', '127.0.0.1', '--multiprocess=false', '--verboseLevel', 'warn'],
      { env: { PATH: process.env.PATH ?? '', NODE_EXTRA_CA_CERTS: caFile, NODE_ENV: 'test', MESH_COMPAT_PARENT: String(process.pid) }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    proc.stdout!.on('data', (d) => (out += d.toString()));
    proc.stderr!.on('data', (d) => (out += d.toString()));
    // Ready when the port accepts connections (prism prints its banner only at `info` level).
    const started = await new Promise<boolean>((resolve) => {
      let done = false;
      const finish = (v: boolean) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        resolve(v);
      };
      const timer = setTimeout(() => finish(false), 60_000);
      proc.once('exit', () => finish(false));
      const probe = () => {
        if (done) return;
        const sock = net.connect(port, '127.0.0.1');
        sock.once('connect', () => {
          sock.destroy();
          finish(true);
        });
        sock.once('error', () => {
          sock.destroy();
          setTimeout(probe, 100);
        });
      };
      probe();
    });
    if (!started) {
      lastError = new Error(`prism did not start (${api}):\n${out.slice(-2000)}`);
      if (proc.exitCode === null) proc.kill('SIGKILL');
      continue;
    }
    const stop = async () => {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
      proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    };
    t.teardown(async () => {
      await stop();
      fs.rmSync(path.dirname(spec.file), { recursive: true, force: true });
    });
    const clientCert = (name: string, cert: string, key: string) => {
      if (!relay) throw new Error('startPrism(..., { clientCerts: true }) is needed for client certificates');
      relay.register(name, cert, key);
    };
    return { api, base: `http://127.0.0.1:${port}`, spec, clientCert, output: () => out, stop };
  }
  throw lastError;
}
