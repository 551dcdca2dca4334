/**
 * Child process for the ceilings (bench/lib/ceilings.ts): the fastest this machine can do the thing
 * the controller does, with nothing of the controller in the way. Run on its own so it gets its own
 * core as the controller does.
 *
 *   node dist/bench/lib/ceiling-server.js uws <chain.pem> <key.pem>            # HTTPS, uWS, one JSON reply
 *   node dist/bench/lib/ceiling-server.js tls <chain.pem> <key.pem> <ca.pem>   # node:tls, client cert required
 *
 * Prints `listening <port>` on 127.0.0.1 once ready; exits on SIGINT/SIGTERM or when stdin closes.
 */
import fs from 'node:fs';
import tls from 'node:tls';

const [mode, certFile, keyFile, caFile] = process.argv.slice(2);

async function main() {
  if (mode === 'uws') {
    const uWS = (await import('uWebSockets.js')).default as any;
    const body = JSON.stringify({ data: { ok: true }, meta: {} });
    const app = uWS.SSLApp({ cert_file_name: certFile, key_file_name: keyFile });
    app.any('/*', (res: any) => {
      res.cork(() => res.writeStatus('200 OK').writeHeader('content-type', 'application/json').end(body));
    });
    app.listen('127.0.0.1', 0, (token: any) => {
      if (!token) throw new Error('uWS could not listen');
      process.stdout.write(`listening ${uWS.us_socket_local_port(token)}\n`);
    });
  } else if (mode === 'tls') {
    const server = tls.createServer(
      { cert: fs.readFileSync(certFile), key: fs.readFileSync(keyFile), ca: fs.readFileSync(caFile), requestCert: true, rejectUnauthorized: true },
      (socket) => {
        socket.on('error', () => {});
        socket.end();
      },
    );
    server.on('tlsClientError', () => {});
    server.listen(0, '127.0.0.1', () => process.stdout.write(`listening ${(server.address() as { port: number }).port}\n`));
  } else {
    throw new Error(`unknown mode ${mode}`);
  }
  process.stdin.on('end', () => process.exit(0));
  process.stdin.resume();
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.on(sig, () => process.exit(0));
}

main().catch((e) => {
  process.stderr.write(`ceiling-server: ${e?.stack ?? e}\n`);
  process.exit(1);
});
