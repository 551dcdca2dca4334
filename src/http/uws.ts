/**
 * uWebSockets.js adapter: the HTTPS front end. It copies what a request needs synchronously (the
 * uWS request object dies at the first await), reads the body with a size limit, hands a plain
 * `Req` to the router and writes the `Reply` corked. Nothing else in src/ imports uWS.
 */
import uWS from 'uWebSockets.js';
import { STATUS_TEXT, TLS12_CIPHERS, FLUSH_BEFORE_CLOSE_MS, type Handle, replyBody, routerRejected, InFlight, byteLength, inPieces, KNOWN_METHODS, methodNotAllowed, withFinished } from './common.js';
import { BodyPieces } from '../core/envelope.js';
import { enqueue } from '../core/slices.js';
import { defaultRetryAfter } from '../core/errors.js';
import type { Reply, Req } from '../core/operation.js';
import type { Connection, Transport } from '../control/channel.js';
import { cannotListen } from './ports.js';

/** A WebSocket endpoint: each upgraded connection is handed to `accept` as a transport-neutral Transport. */
export interface WsEndpoint {
  path: string;
  /** Largest frame accepted; a bigger one closes the connection. */
  maxPayloadLength: number;
  accept(t: Transport): Connection;
}

export interface UwsOptions {
  host: string;
  port: number;
  certFile: string;
  keyFile: string;
  maxBodyBytes: number;
  handle: Handle;
  /** Reply sent when a body exceeds the limit (built by the router so the envelope stays in one place). */
  tooLarge: () => Reply;
  /** Reply to a request still running when the shutdown grace ends. */
  shuttingDown: () => Reply;
  /** WebSocket endpoints (the router control channel). */
  websockets?: WsEndpoint[];
}

export interface UwsServer {
  port: number;
  /** Stop accepting connections and wait (up to graceMs) for in-flight requests. */
  close(graceMs: number): Promise<void>;
}

const decoder = new TextDecoder();

/** Advertised idle timeout, well inside uWS's fixed 10 s. */
const KEEP_ALIVE_LINE = 'keep-alive: timeout=5';

/** Bodies larger than this are written in pieces with backpressure (streamBody). */
const STREAM_ABOVE = 1024 * 1024;

/** Shared by every bodiless request (handlers replace `req.body`, never mutate it). */
const NO_BODY = Buffer.alloc(0);

/** `200 OK`, … built once per status. */
const statusLines = new Map<number, string>();
const statusLine = (status: number): string => {
  let line = statusLines.get(status);
  if (line === undefined) statusLines.set(status, (line = `${status} ${STATUS_TEXT[status] ?? ''}`));
  return line;
};

/**
 * Every response header as one `[key, value]` pair for a single writeHeader call: uWS writes
 * `key: value\r\n` verbatim, so the value carries the other lines. Each writeHeader call crosses
 * into C++, and a poll answer has eight headers.
 */
function headerBlock(h: Record<string, string> | undefined, contentType: string | undefined, closing: boolean): [string, string] {
  const lines: string[] = [];
  if (h) for (const k in h) lines.push(`${k}: ${h[k]}`);
  if (contentType) lines.push(`content-type: ${contentType}`);
  // uWS drops a kept-alive connection after 10 s idle; saying so (as node's own HTTP server
  // does) lets clients retire idle sockets first instead of reusing one the server is closing.
  if (!closing) lines.push(KEEP_ALIVE_LINE);
  else if (h?.connection === undefined) lines.push('connection: close');
  const all = lines.join('\r\n');
  const colon = all.indexOf(':');
  return [all.slice(0, colon), all.slice(colon + 2)];
}

/*
 * Pipelining (RFC 9112 §9.3.2). uWS parses every request of a read in one go and answers requests
 * sent back to back on a connection only while each answer is written before the next request is
 * parsed ("sync pipelining"): a request parsed while an earlier answer is pending makes it close the
 * connection at once, aborting that answer, before our handler sees the request. An answer ready
 * once the request handler and the microtasks it queued have run (most reads) counts as written in
 * time; anything later (a store commit, a worker) does not. Within those rules:
 * - work that changes something (every method but GET and HEAD) starts only after the read its
 *   request came in has been parsed whole (afterThisRead): when uWS closed the connection for a
 *   successor in that read, the request is found aborted and has done nothing, so the client's
 *   retry of its unanswered requests is safe;
 * - a request whose answer is not written by then stops reads from its connection (pause) until
 *   its answer is being written (resume): a successor that arrives meanwhile waits in the socket
 *   and is answered in turn. POST and PATCH too, although RFC 9112 §9.3.2 tells clients not to
 *   pipeline after them: with reads on, a successor would close the connection and lose the
 *   answer of a write that was made. The pause and resume are the largest cost of these guards
 *   (docs/benchmarks.md, "Measurements behind the code"); uWS offers no cheaper way to hold a successor back.
 * Both happen in one setImmediate per turn of the event loop shared by every request of that turn.
 * Reads resume when the answer starts: a successor arriving while a large answer streams makes
 * uWS close the connection, cutting that answer (a read, safe to retry). Keeping reads paused
 * through the stream does not work with uWS: a write that backs up turns reads back on, and
 * re-pausing after each write (retrying on a timer, as a paused socket reports no writability)
 * stalled the TLS writes whenever a successor was waiting (4 of 6 tries, until the idle timeout):
 * uSockets retries a TLS write that OpenSSL says waits for a read only after the next read.
 */

/** One request's state as afterThisRead sees it. */
interface Exchange {
  res: uWS.HttpResponse;
  req: Req;
  /** Its work waits for afterThisRead (it changes something). */
  deferred: boolean;
  /** Reads from its connection are paused. */
  paused: boolean;
  /** Its answer is being written: reads stay on from then. */
  writing: boolean;
  run(): void;
  done(): void;
}

/** Requests parsed in this turn of the event loop, for afterThisRead's sweep. */
let parsedThisTurn: Exchange[] = [];

/** Once every read of this turn is parsed: start the request's work if deferred, and pause reads while its answer is pending. */
function afterThisRead(x: Exchange) {
  if (parsedThisTurn.push(x) === 1) setImmediate(sweep);
}

function sweep() {
  const batch = parsedThisTurn;
  parsedThisTurn = [];
  for (const x of batch) {
    if (x.req.aborted) {
      // Closed for a successor in the same read (or by the client): a deferred request did nothing.
      if (x.deferred) x.done();
      continue;
    }
    if (!x.writing) {
      x.paused = true;
      x.res.pause();
    }
    if (x.deferred) x.run();
  }
}

export function startUws(opts: UwsOptions): Promise<UwsServer> {
  const inFlight = new InFlight();
  /** closing: the listener is closed, responses ask clients to close; stopped: in-flight work has drained. */
  let closing = false;
  let stopped = false;
  const app = uWS.SSLApp({ cert_file_name: opts.certFile, key_file_name: opts.keyFile, ssl_ciphers: TLS12_CIPHERS });
  const sockets = new Set<uWS.WebSocket<WsData>>();
  for (const ep of opts.websockets ?? []) addWebSocket(app, ep, sockets, () => closing);

  app.any('/*', (res, ureq) => {
    const url = ureq.getUrl();
    const q = ureq.getQuery();
    const headers: Record<string, string> = {};
    ureq.forEach((k, v) => {
      headers[k] = headers[k] === undefined ? v : `${headers[k]}, ${v}`;
    });
    const req: Req = {
      method: ureq.getCaseSensitiveMethod().toLowerCase(),
      path: url,
      query: new URLSearchParams(q ?? ''),
      headers,
      body: NO_BODY,
      remoteAddress: decoder.decode(res.getRemoteAddressAsText()),
      aborted: false,
    };
    /** Set while a large body is being written with backpressure (see streamBody). */
    let streaming = false;
    // Called before the answer's first write. (Not later: uWS forbids touching a completed
    // response, and a paused socket drains a large answer's backpressure unreliably.)
    const resumeReads = () => {
      exchange.writing = true;
      if (!exchange.paused) return;
      exchange.paused = false;
      res.resume();
    };
    res.onAborted(() => {
      req.aborted = true;
      if (streaming) {
        streaming = false;
        done();
      }
    });
    let done = inFlight.begin(() => send(opts.shuttingDown()));
    let answered = false;
    const send = (reply: Reply) => {
      if (answered) return reply.finished?.();
      answered = true;
      done = withFinished(reply, done);
      if (req.aborted) return done();
      const { body, contentType } = replyBody(reply);
      const [key, value] = headerBlock(reply.headers, contentType, closing);
      const length = byteLength(body);
      const large = req.method !== 'head' && length > STREAM_ABOVE;
      res.cork(() => {
        resumeReads();
        res.writeStatus(statusLine(reply.status));
        res.writeHeader(key, value);
        // HEAD: the headers of the GET and no body. (Passing a reported length to
        // endWithoutBody makes uWS drop the kept-alive connection after it.)
        if (req.method === 'head') res.endWithoutBody();
        else if (!large) res.end(body instanceof BodyPieces ? Buffer.concat(body.pieces, length) : body);
      });
      if (large) streamBody(inPieces(body), length);
      else done();
    };
    /**
     * A large body goes out in pieces as fast as the client reads it (tryEnd, resumed from
     * onWritable), a piece at a time in the turns of the large answers' work (slices.ts: all of it
     * together TURN_MS per turn of the event loop): uWS neither copies all of it into its own
     * buffer for a slow reader nor encrypts tens of MiB in one go while every other request waits
     * (a client on the same host reads as fast as it is written). Pieces go to uWS as
     * ArrayBuffers of their own (it reads a typed array's whole buffer, not the view).
     */
    const streamBody = (pieces: Buffer[], total: number) => {
      streaming = true;
      let next = 0;
      let pending: { piece: ArrayBuffer; at: number } | undefined;
      const finish = () => {
        streaming = false;
        done();
      };
      /** Write the next piece; false once the body is written or waits for onWritable. */
      const writePiece = (): boolean => {
        if (req.aborted) return false;
        const b = pieces[next++];
        const piece = (b.byteOffset === 0 && b.byteLength === b.buffer.byteLength ? b.buffer : b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength)) as ArrayBuffer;
        const at = res.getWriteOffset();
        let ok = false;
        let finished = false;
        res.cork(() => ([ok, finished] = res.tryEnd(piece, total)));
        if (finished) finish();
        else if (!ok) pending = { piece, at };
        return ok && !finished;
      };
      res.onWritable((offset) => {
        if (req.aborted || !pending) return true;
        const { piece, at } = pending;
        const [ok, finished] = res.tryEnd(piece.slice(offset - at), total);
        if (finished) {
          finish();
          return true;
        }
        if (!ok) return false;
        pending = undefined;
        enqueue(writePiece);
        return true;
      });
      enqueue(writePiece);
    };
    const run = () => opts.handle(req).then(send, (e) => {
      // The router never rejects; this is the last line of defence for the process.
      console.error('router rejected', e);
      send(routerRejected());
    });
    const exchange: Exchange = { res, req, deferred: false, paused: false, writing: false, run, done };
    /** Reads run at once; anything else waits until the rest of its read is parsed (the pipelining note). */
    const start = () => {
      if (req.method === 'get' || req.method === 'head') run();
      else exchange.deferred = true;
      afterThisRead(exchange);
    };
    if (stopped) {
      // Drained and stopping: like an HTTP server shutting down, drop kept-alive connections
      // instead of starting work the closed pool and store can no longer do.
      res.close();
      done();
      return;
    }
    if (!KNOWN_METHODS.has(req.method)) {
      send(methodNotAllowed());
      return;
    }
    const declared = Number(headers['content-length'] ?? 0);
    if (declared > opts.maxBodyBytes) {
      send(opts.tooLarge());
      return;
    }
    // A GET may carry a body (upstream's recovery-code view takes `{code}`; Elasticsearch's `_search` is sent that way).
    if (req.method === 'head' || (declared === 0 && headers['transfer-encoding'] === undefined)) {
      start();
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let rejected = false;
    res.onData((chunk, isLast) => {
      if (rejected) return;
      size += chunk.byteLength;
      if (size > opts.maxBodyBytes) {
        rejected = true;
        send(opts.tooLarge());
        return;
      }
      // The ArrayBuffer is only valid during this callback: copy it.
      chunks.push(Buffer.from(chunk.slice(0)));
      if (isLast) {
        req.body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
        // A GET with a body is a read: answered at once like other reads, so pipelined ones stay in order.
        start();
      }
    });
  });

  return new Promise((resolve, reject) => {
    // Exclusive: without it uSockets sets SO_REUSEPORT and a second controller started on this
    // port would share it, the kernel spreading connections over both (http/ports.ts).
    listenExclusive(app, opts.host, opts.port, (listenSocket) => {
      if (!listenSocket) return void cannotListen(opts.host, opts.port).then(reject);
      const port = uWS.us_socket_local_port(listenSocket as unknown as uWS.us_socket);
      resolve({
        port,
        async close(graceMs: number) {
          closing = true;
          uWS.us_listen_socket_close(listenSocket);
          // WebSockets are long-lived: end them now (the control channel normally did already).
          for (const ws of [...sockets]) ws.end(1001, 'controller shutting down');
          await inFlight.drain(graceMs);
          if (inFlight.abandonAll() > 0) await new Promise((r) => setTimeout(r, FLUSH_BEFORE_CLOSE_MS));
          stopped = true;
          (app as unknown as { close?: () => void }).close?.();
        },
      });
    });
  });
}

/**
 * uSockets' listen option that leaves SO_REUSEPORT off. The binary exports it; the typings only
 * declare an enum that does not exist at run time, and no overload takes (host, port, options).
 */
const EXCLUSIVE_PORT = (uWS as unknown as { LIBUS_LISTEN_EXCLUSIVE_PORT?: number }).LIBUS_LISTEN_EXCLUSIVE_PORT;
type ListenWithOptions = (host: string, port: number, options: number, cb: (s: uWS.us_listen_socket | false) => void) => void;

function listenExclusive(app: uWS.TemplatedApp, host: string, port: number, cb: (s: uWS.us_listen_socket | false) => void) {
  if (typeof EXCLUSIVE_PORT !== 'number') throw new Error('this uWebSockets.js build has no LIBUS_LISTEN_EXCLUSIVE_PORT: it cannot refuse a port another process listens on');
  (app.listen as unknown as ListenWithOptions).call(app, host, port, EXCLUSIVE_PORT, cb);
}

interface WsData {
  conn?: Connection;
  remoteAddress: string;
  /** Set once uWS reported the close; the socket must not be touched after that. */
  closed: boolean;
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * One WebSocket route. uWS hands us ArrayBuffers that die when the callback returns: frames are
 * decoded (strict UTF-8) before the channel sees them. A frame that is not valid UTF-8 is passed on
 * as binary, which the protocol refuses.
 */
function addWebSocket(app: uWS.TemplatedApp, ep: WsEndpoint, sockets: Set<uWS.WebSocket<WsData>>, isClosing: () => boolean) {
  app.ws<WsData>(ep.path, {
    maxPayloadLength: ep.maxPayloadLength,
    // The channel runs its own heartbeats; uWS's idle timeout is only a backstop.
    idleTimeout: 120,
    sendPingsAutomatically: false,
    maxBackpressure: 1024 * 1024,
    closeOnBackpressureLimit: 1,
    upgrade: (res, req, context) => {
      if (isClosing()) {
        res.cork(() => res.writeStatus('503 Service Unavailable').writeHeader('retry-after', defaultRetryAfter(503)!).writeHeader('connection', 'close').end());
        return;
      }
      const remoteAddress = decoder.decode(res.getRemoteAddressAsText());
      res.upgrade<WsData>(
        { remoteAddress, closed: false },
        req.getHeader('sec-websocket-key'),
        req.getHeader('sec-websocket-protocol'),
        req.getHeader('sec-websocket-extensions'),
        context,
      );
    },
    open: (ws) => {
      sockets.add(ws);
      const data = ws.getUserData();
      const transport: Transport = {
        remoteAddress: data.remoteAddress,
        send(text) {
          if (data.closed) return false;
          ws.send(text, false);
          return true;
        },
        close(code, reason) {
          if (data.closed) return;
          ws.end(code, reason.slice(0, 120));
        },
      };
      data.conn = ep.accept(transport);
    },
    message: (ws, message, isBinary) => {
      const data = ws.getUserData();
      let text = '';
      let binary = isBinary;
      if (!binary) {
        try {
          text = strictUtf8.decode(message);
        } catch {
          binary = true;
        }
      }
      data.conn?.message(text, binary);
    },
    close: (ws) => {
      const data = ws.getUserData();
      data.closed = true;
      sockets.delete(ws);
      data.conn?.closed();
    },
  });
}
