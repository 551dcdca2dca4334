/**
 * src/http/ports.ts and the listeners' exclusive binds, without a controller: a held port refuses
 * every other listener (node, the uWS listener, a uWS listener that asks to share the port as
 * uSockets does by default) until it is handed over, and the refusal names address and cause.
 */
import t from 'tap';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import uWS from 'uWebSockets.js';
import { reservePort, ListenError, listenError } from '../../../src/http/ports.js';
import { startUws } from '../../../src/http/uws.js';
import { startTls } from '../../../src/http/tls.js';
import { newCa } from '../../helpers/pki.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-ports-unit-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
// A leaf: uSockets refuses to serve with a certificate whose key usage is CA-only.
const { cert, key } = newCa('ports-test-ca').sign('localhost');
fs.writeFileSync(path.join(dir, 'cert.pem'), cert);
fs.writeFileSync(path.join(dir, 'key.pem'), key);

const never = () => ({ status: 500, body: '' }) as never;
const uwsOn = (port: number) =>
  startUws({ host: '127.0.0.1', port, certFile: path.join(dir, 'cert.pem'), keyFile: path.join(dir, 'key.pem'), maxBodyBytes: 1024, handle: async () => never(), tooLarge: never, shuttingDown: never });
const tlsOn = (port: number) => startTls({ host: '127.0.0.1', port, certPem: cert, keyPem: key, maxBodyBytes: 1024, handle: async () => never(), tooLarge: never, shuttingDown: never });

/** A port the kernel hands out, free when returned. */
async function someFreePort(): Promise<number> {
  const r = await new Promise<net.Server>((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => resolve(s));
  });
  const port = (r.address() as net.AddressInfo).port;
  await new Promise((resolve) => r.close(resolve));
  return port;
}

/** A uWS listener with uSockets' default options (SO_REUSEPORT), as an older controller listened. */
function sharingUws(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    uWS.App().listen('127.0.0.1', port, (s) => {
      if (s) uWS.us_listen_socket_close(s);
      resolve(Boolean(s));
    });
  });
}

const IN_USE = (port: number) => new RegExp(`^cannot listen on 127\\.0\\.0\\.1:${port}: the port is already in use \\(EADDRINUSE\\)`);

t.test('port 0 holds nothing', async (t) => {
  const r = await reservePort('127.0.0.1', 0, 'MESH_ADDRESS');
  r.release();
  r.release();
  t.pass('release is a no-op, twice');
});

t.test('a held port refuses every other listener until it is handed over', async (t) => {
  const port = await someFreePort();
  const held = await reservePort('127.0.0.1', port, 'MESH_ADDRESS');
  await t.rejects(reservePort('127.0.0.1', port, 'MESH_ADDRESS'), { constructor: ListenError, message: IN_USE(port) }, 'a second reservation');
  await t.rejects(reservePort('127.0.0.1', port, 'MESH_ADDRESS'), { message: /or set MESH_ADDRESS to another address$/ }, 'the message names the setting');
  await t.rejects(uwsOn(port), { constructor: ListenError, message: IN_USE(port) }, 'the uWS listener');
  await t.rejects(tlsOn(port), { constructor: ListenError, message: IN_USE(port) }, 'the node:https listener');
  t.notOk(await sharingUws(port), 'a uWS listener asking to share the port');

  held.release();
  held.release();
  const api = await uwsOn(port);
  t.equal(api.port, port, 'the uWS listener takes the port over once released');
  await t.rejects(reservePort('127.0.0.1', port, 'MESH_ADDRESS'), { message: IN_USE(port) }, 'and holds it exclusively');
  t.notOk(await sharingUws(port), 'no sharing with a uWS listener that asks for it');
  await t.rejects(uwsOn(port), { message: IN_USE(port) }, 'nor a second uWS listener');
  await api.close(0);

  const tls = await tlsOn(port);
  t.notOk(await sharingUws(port), 'the node:https listener is exclusive too');
  await tls.close(0);
});

t.test('a connection to a held port is closed at once', async (t) => {
  const port = await someFreePort();
  const held = await reservePort('127.0.0.1', port, 'MESH_ADDRESS');
  t.teardown(() => held.release());
  const closed = await new Promise<boolean>((resolve) => {
    const c = net.connect(port, '127.0.0.1');
    c.on('error', () => {});
    c.on('close', () => resolve(true));
  });
  t.ok(closed, 'closed by the placeholder');
});

t.test('causes other than a busy port are named', async (t) => {
  t.match(listenError('0.0.0.0', 80, 'EACCES', 'x', 'MESH_ADDRESS').message, /^cannot listen on 0\.0\.0\.0:80: permission denied \(EACCES\)/);
  t.match(listenError('10.9.9.9', 1280, 'EADDRNOTAVAIL', 'x').message, /^cannot listen on 10\.9\.9\.9:1280: the address is not one of this machine's \(EADDRNOTAVAIL\)$/);
  t.match(listenError('::1', 1280, 'EADDRINUSE', 'x').message, /^cannot listen on \[::1\]:1280: /);
  t.match(listenError('h', 1, 'ENOTFOUND', 'getaddrinfo ENOTFOUND h').message, /getaddrinfo ENOTFOUND h \(ENOTFOUND\)/);
});
