/**
 * The mutual-TLS listener (node:https): the same Router and operation table as the uWS front end,
 * plus the client certificate. uWS gives JavaScript no access to the peer certificate, so
 * certificate login, CA enrollment, ottca and certificate extension are served here
 * (MESH_CERT_ADDRESS); every other operation works on it too, so an SDK pointed at this address
 * (the `iss` of enrollment JWTs) works end to end.
 *
 * The server asks for a client certificate but accepts the handshake without one and without
 * verifying it (`rejectUnauthorized: false`): which certificates are good is decided per
 * operation (pinned authenticator fingerprints, verified third-party CAs, expiry rules of the
 * auth policy), which OpenSSL's chain check cannot express. `req.peerCertificates` is the DER
 * chain the client sent, leaf first, and `req.peerLeaf` the leaf alone; both are read lazily and
 * once per connection (node builds the chain's object graph at a cost of milliseconds, the leaf
 * alone in microseconds: hot paths read the leaf only).
 */
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket, PeerCertificate, DetailedPeerCertificate } from 'node:tls';
import { encodeReply, InFlight, routerRejected, TLS12_CIPHERS, FLUSH_BEFORE_CLOSE_MS, byteLength, inPieces, type Handle, KNOWN_METHODS, methodNotAllowed, rawErrorResponse, withFinished } from './common.js';
import { BodyPieces } from '../core/envelope.js';
import { listenError } from './ports.js';
import type { Reply, Req } from '../core/operation.js';

export interface TlsOptions {
  host: string;
  port: number;
  certPem: string;
  keyPem: string;
  maxBodyBytes: number;
  handle: Handle;
  tooLarge: () => Reply;
  /** Reply to a request still running when the shutdown grace ends. */
  shuttingDown: () => Reply;
}

export interface TlsServer {
  port: number;
  close(graceMs: number): Promise<void>;
}

/**
 * Bodies larger than this go out in pieces of this size, each once the previous one has drained.
 * Handed to node in one piece, a body is encrypted whole into the connection's TLS buffers, which
 * then keep their size: kept-alive connections that had each received one large answer (a
 * device's `GET /services?limit=500`) kept more than twice the memory of those written in pieces
 * (docs/benchmarks.md, "Measurements behind the code").
 */
const PIECE = 16 * 1024;

/**
 * Request line and headers together; a larger head is answered 431. As much as the uWS listener
 * reads (it closes the connection on a larger one, docs/limits.md), so a request that works on one
 * listener works on the other.
 */
const MAX_HEADER_BYTES = 64 * 1024;

/** Write `pieces` (each split again into PIECE writes), with a turn of the event loop between two pieces. */
async function endInPieces(res: ServerResponse, pieces: Buffer[]): Promise<void> {
  for (let p = 0; p < pieces.length && !res.destroyed; p++) {
    if (p > 0) await new Promise((r) => setImmediate(r));
    const body = pieces[p];
    const last = p === pieces.length - 1;
    for (let at = 0; at < body.length && !res.destroyed; at += PIECE) {
      const piece = body.subarray(at, at + PIECE);
      if (last && at + PIECE >= body.length) res.end(piece);
      else if (!res.write(piece)) await drainedOrClosed(res);
    }
  }
}

const drainedOrClosed = (res: ServerResponse) =>
  new Promise<void>((resolve) => {
    const on = () => {
      res.off('drain', on);
      res.off('close', on);
      resolve();
    };
    res.on('drain', on);
    res.on('close', on);
  });

/** Chains read once per TLS connection (keep-alive requests share the handshake). */
const chains = new WeakMap<TLSSocket, Buffer[]>();

export function peerChain(socket: TLSSocket): Buffer[] {
  let chain = chains.get(socket);
  if (chain) return chain;
  chain = [];
  let c = socket.getPeerCertificate(true) as DetailedPeerCertificate | PeerCertificate | null;
  const seen = new Set<string>();
  while (c && (c as PeerCertificate).raw && chain.length < 10) {
    const der = (c as PeerCertificate).raw;
    const key = der.toString('base64');
    if (seen.has(key)) break;
    seen.add(key);
    chain.push(der);
    c = (c as DetailedPeerCertificate).issuerCertificate ?? null;
  }
  chains.set(socket, chain);
  return chain;
}

const leaves = new WeakMap<TLSSocket, Buffer | null>();

/** The client's leaf certificate (getPeerX509Certificate: no chain building). */
export function peerLeaf(socket: TLSSocket): Buffer | undefined {
  let leaf = leaves.get(socket);
  if (leaf === undefined) {
    leaf = socket.getPeerX509Certificate()?.raw ?? null;
    leaves.set(socket, leaf);
  }
  return leaf ?? undefined;
}

export function startTls(opts: TlsOptions): Promise<TlsServer> {
  const inFlight = new InFlight();
  let closing = false;

  const server = https.createServer(
    {
      cert: opts.certPem,
      key: opts.keyPem,
      requestCert: true,
      rejectUnauthorized: false,
      minVersion: 'TLSv1.2',
      ciphers: TLS12_CIPHERS,
      keepAlive: true,
      // Headers and bodies are small; a slow client must not hold a socket forever.
      maxHeaderSize: MAX_HEADER_BYTES,
      headersTimeout: 30_000,
      requestTimeout: 60_000,
    },
    (hreq: IncomingMessage, hres: ServerResponse) => {
      let answered = false;
      let done = inFlight.begin(() => send(opts.shuttingDown()));
      const url = hreq.url ?? '/';
      const q = url.indexOf('?');
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(hreq.headers)) if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(', ') : v;
      const socket = hreq.socket as TLSSocket;
      const req: Req = {
        method: (hreq.method ?? 'GET').toLowerCase(),
        path: q >= 0 ? url.slice(0, q) : url,
        query: new URLSearchParams(q >= 0 ? url.slice(q + 1) : ''),
        headers,
        body: Buffer.alloc(0),
        remoteAddress: socket.remoteAddress ?? '',
        aborted: false,
      };
      Object.defineProperty(req, 'peerCertificates', { enumerable: true, get: () => peerChain(socket) });
      Object.defineProperty(req, 'peerLeaf', { enumerable: true, get: () => peerLeaf(socket) });
      hres.on('close', () => {
        if (!hres.writableFinished) req.aborted = true;
      });
      const send = (reply: Reply) => {
        if (answered) return reply.finished?.();
        answered = true;
        done = withFinished(reply, done);
        if (req.aborted || hres.destroyed) return done();
        const { status, headers: h, body } = encodeReply(reply);
        if (closing) h.connection = 'close';
        const length = byteLength(body);
        h['content-length'] = String(length);
        hres.writeHead(status, h);
        if (req.method === 'head' || (length <= PIECE && !(body instanceof BodyPieces))) {
          hres.end(req.method === 'head' ? undefined : body);
          return done();
        }
        void endInPieces(hres, inPieces(body)).finally(done);
      };
      const dispatch = () =>
        opts.handle(req).then(send, (e) => {
          console.error('router rejected', e);
          send(routerRejected());
        });
      if (!KNOWN_METHODS.has(req.method)) {
        send(methodNotAllowed());
        hreq.resume();
        return;
      }
      const declared = Number(headers['content-length'] ?? 0);
      if (declared > opts.maxBodyBytes) {
        send(opts.tooLarge());
        hreq.resume();
        return;
      }
      const chunks: Buffer[] = [];
      let size = 0;
      let rejected = false;
      hreq.on('data', (chunk: Buffer) => {
        if (rejected) return;
        size += chunk.length;
        if (size > opts.maxBodyBytes) {
          rejected = true;
          send(opts.tooLarge());
          return;
        }
        chunks.push(chunk);
      });
      hreq.on('end', () => {
        if (rejected) return;
        req.body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
        void dispatch();
      });
      hreq.on('error', () => {
        req.aborted = true;
        done();
      });
    },
  );
  // A failed or aborted handshake is the client's problem, not a process error.
  server.on('tlsClientError', () => {});
  // A head over maxHeaderSize, or a method node's parser does not know (BREW), gets an answer in
  // the envelope; other malformed heads the connection closed.
  server.on('clientError', (e: NodeJS.ErrnoException, socket) => {
    const status = e.code === 'HPE_HEADER_OVERFLOW' ? 431 : e.code === 'HPE_INVALID_METHOD' ? 405 : undefined;
    if (status && socket.writable) socket.end(rawErrorResponse(status));
    else socket.destroy();
  });
  // node hands CONNECT to this event instead of the request handler (and drops it when unheard).
  server.on('connect', (_req, socket) => {
    if (socket.writable) socket.end(rawErrorResponse(405));
    else socket.destroy();
  });

  return new Promise((resolve, reject) => {
    const failed = (e: NodeJS.ErrnoException) => reject(listenError(opts.host, opts.port, e.code, e.message));
    server.once('error', failed);
    // Exclusive like the API listener (http/ports.ts): node never sets SO_REUSEPORT unless asked.
    server.listen({ port: opts.port, host: opts.host, exclusive: true }, () => {
      server.off('error', failed);
      const addr = server.address();
      const port = typeof addr === 'object' && addr ? addr.port : opts.port;
      resolve({
        port,
        async close(graceMs: number) {
          closing = true;
          const closed = new Promise<void>((r) => server.close(() => r()));
          server.closeIdleConnections();
          await inFlight.drain(graceMs);
          if (inFlight.abandonAll() > 0) await new Promise((r) => setTimeout(r, FLUSH_BEFORE_CLOSE_MS));
          server.closeAllConnections();
          await closed;
        },
      });
    });
  });
}
