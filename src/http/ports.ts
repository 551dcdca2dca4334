/**
 * One controller per port. Both listeners bind exclusively (no SO_REUSEPORT: uWS is told so with
 * LIBUS_LISTEN_EXCLUSIVE_PORT, node's listeners never set it), so a port that anyone already
 * listens on is an error, not a port the kernel quietly shares between two controllers with
 * different data.
 *
 * The ports are also taken first, before the data directory, the PKI or the default admin are
 * created: the listeners need the server certificate that the first start's PKI bootstrap makes,
 * so `reservePort` holds each port with a plain node:net listener (exclusive like the real one)
 * from the very start, and the real listener takes it over only once it can be made. A busy
 * port therefore stops a first start before it has written anything. Between the placeholder
 * closing and the listener binding there is only the listener's synchronous set-up; a process
 * that takes the port in that moment makes the listener fail with the same message.
 *
 *   const api = await reservePort('127.0.0.1', 1280, 'MESH_ADDRESS');   // ListenError when busy
 *   …                                                                   // data dir, PKI, admin
 *   api.release(); await startUws({ host, port: 1280, … });
 */
import net from 'node:net';

/** A listener that cannot be opened: the message names the address, the cause and the remedy. */
export class ListenError extends Error {}

/** A port held for a listener that is not made yet. */
export interface PortReservation {
  /** Close the placeholder so the real listener can bind; idempotent. */
  release(): void;
}

const NOTHING_HELD: PortReservation = { release() {} };

/**
 * Hold host:port until `release`. Port 0 holds nothing (the real listener picks its own port).
 * Connections that arrive meanwhile are closed at once: the controller does not serve yet.
 */
export function reservePort(host: string, port: number, setting: string): Promise<PortReservation> {
  if (port === 0) return Promise.resolve(NOTHING_HELD);
  return new Promise((resolve, reject) => {
    const server = net.createServer((socket) => socket.destroy());
    const failed = (e: NodeJS.ErrnoException) => reject(listenError(host, port, e.code, e.message, setting));
    server.once('error', failed);
    const listening = () => {
      server.removeAllListeners('error');
      // A late error on a listening server (none is expected) must not become an uncaught exception.
      server.on('error', () => {});
      let held = true;
      resolve({
        release() {
          if (!held) return;
          held = false;
          // libuv closes the listening socket's fd synchronously here; only the callback waits.
          server.close();
        },
      });
    };
    try {
      server.listen({ host, port, exclusive: true }, listening);
    } catch (e) {
      // A port out of range (the API port 65535 makes the default certificate port 65536).
      failed(e as NodeJS.ErrnoException);
    }
  });
}

/**
 * Why host:port cannot be listened on, for a listener (uWS) that reports only failure: the same
 * bind with node:net gives the errno. When that bind succeeds the cause was something else.
 */
export function cannotListen(host: string, port: number, setting?: string): Promise<ListenError> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', (e: NodeJS.ErrnoException) => resolve(listenError(host, port, e.code, e.message, setting)));
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve(listenError(host, port, undefined, 'the HTTP library refused to listen', setting))));
  });
}

/** The message for a failed listen, e.g. from node:https's 'error' event. */
export function listenError(host: string, port: number, code: string | undefined, detail: string, setting?: string): ListenError {
  const at = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  const change = setting ? `, or set ${setting} to another address` : '';
  switch (code) {
    case 'EADDRINUSE':
      return new ListenError(`cannot listen on ${at}: the port is already in use (EADDRINUSE) — another controller or program listens on it; stop that one${change}`);
    case 'EACCES':
      return new ListenError(`cannot listen on ${at}: permission denied (EACCES) — ports below 1024 need privileges${change}`);
    case 'EADDRNOTAVAIL':
      return new ListenError(`cannot listen on ${at}: the address is not one of this machine's (EADDRNOTAVAIL)${change}`);
    default:
      return new ListenError(`cannot listen on ${at}: ${code ? `${detail} (${code})` : detail}${change}`);
  }
}
