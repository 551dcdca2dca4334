/**
 * A router's side of the control channel protocol (docs/router-protocol.md), over the `ws`
 * package: what the router simulator (bench/router-sim.ts) and the control channel tests run.
 *
 *   const r = new RouterClient({ url: 'wss://127.0.0.1:1280/ctrl/v1', ca, certChain, key, hostname: 'er1',
 *                                protocols: { tls: 'tls:er1:3022' } });
 *   const welcome = await r.connect();        // hello → challenge → proof → welcome → synced
 *   r.report({ hostname: 'er1.example' });    // a state report
 *   r.silence();                              // stop answering pings (a hung router)
 *   await r.close();
 *
 * The proof signs `mesh-ctrl/1 proof\n<nonce>\n<controller fingerprint>\n<router fingerprint>`,
 * where the controller fingerprint is the SHA-1 of the TLS certificate this socket actually saw
 * (so a relaying impostor cannot reuse a proof).
 */
import crypto from 'node:crypto';
import { EventEmitter } from 'node:events';
import type { TLSSocket } from 'node:tls';
import WebSocket from 'ws';

export interface RouterClientOptions {
  /** wss://host:port/ctrl/v1 */
  url: string;
  /** PEM of the CA bundle that verifies the controller. */
  ca: string | Buffer;
  /** PEM: the router's client certificate (then, optionally, its issuers). */
  certChain: string;
  /** PEM private key of that certificate. */
  key: string | crypto.KeyObject;
  routerId?: string;
  hostname?: string;
  protocols?: Record<string, string>;
  versionInfo?: { os: string; arch: string; version: string; revision: string; buildDate: string };
  /** Answer `welcome` with `synced` (default true). */
  autoSync?: boolean;
  /** Override the protocol version announced (tests). */
  protocolVersion?: number;
  /** Sign something else than the challenge (tests of the negative path). */
  tamperProof?: boolean;
}

export interface ClosedInfo {
  code: number;
  reason: string;
  /** The `error` message the controller sent before closing, if any. */
  error?: { code: string; message: string };
}

export class RouterClient extends EventEmitter {
  ws?: WebSocket;
  welcome?: any;
  /** Every message received, in order (tests read it). */
  readonly received: any[] = [];
  lastError?: { code: string; message: string };
  closedInfo?: ClosedInfo;
  private silent = false;
  private closedPromise?: Promise<ClosedInfo>;
  private readonly key: crypto.KeyObject;

  constructor(readonly opts: RouterClientOptions) {
    super();
    this.key = typeof opts.key === 'string' ? crypto.createPrivateKey(opts.key) : opts.key;
  }

  /** Connect and authenticate; resolves with `welcome`, rejects with the ClosedInfo if refused. */
  connect(): Promise<any> {
    const ws = new WebSocket(this.opts.url, { ca: this.opts.ca, perMessageDeflate: false, handshakeTimeout: 15_000 });
    this.ws = ws;
    this.closedInfo = undefined;
    this.welcome = undefined;
    let controllerFingerprint = '';
    const leafPem = this.opts.certChain.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/)?.[0] ?? '';
    let routerFingerprint = '';
    try {
      routerFingerprint = crypto.createHash('sha1').update(new crypto.X509Certificate(leafPem).raw).digest('hex');
    } catch {
      // Not a certificate: send it anyway and let the controller refuse it (tests do this on purpose).
    }
    this.closedPromise = new Promise<ClosedInfo>((resolve) => {
      ws.on('close', (code, reason) => {
        this.closedInfo = { code, reason: reason.toString(), ...(this.lastError ? { error: this.lastError } : {}) };
        this.emit('closed', this.closedInfo);
        resolve(this.closedInfo);
      });
    });
    return new Promise((resolve, reject) => {
      ws.on('upgrade', (res) => {
        const cert = (res.socket as TLSSocket).getPeerCertificate?.();
        if (cert?.raw) controllerFingerprint = crypto.createHash('sha1').update(cert.raw).digest('hex');
      });
      ws.on('open', () => {
        this.send({
          type: 'hello',
          protocolVersion: this.opts.protocolVersion ?? 1,
          certChain: this.opts.certChain,
          ...(this.opts.routerId ? { routerId: this.opts.routerId } : {}),
          ...(this.opts.hostname !== undefined ? { hostname: this.opts.hostname } : {}),
          ...(this.opts.protocols ? { protocols: this.opts.protocols } : {}),
          ...(this.opts.versionInfo ? { versionInfo: this.opts.versionInfo } : {}),
        });
      });
      ws.on('message', (data) => {
        let msg: any;
        try {
          msg = JSON.parse(data.toString());
        } catch {
          return;
        }
        this.received.push(msg);
        this.emit('message', msg);
        switch (msg.type) {
          case 'challenge': {
            const payload = Buffer.from(`mesh-ctrl/1 proof\n${this.opts.tamperProof ? 'x' + msg.nonce : msg.nonce}\n${controllerFingerprint}\n${routerFingerprint}`);
            const type = this.key.asymmetricKeyType;
            const signature = crypto.sign(type === 'ed25519' || type === 'ed448' ? null : 'sha256', payload, this.key).toString('base64');
            this.send({ type: 'proof', signature });
            break;
          }
          case 'welcome':
            this.welcome = msg;
            if (this.opts.autoSync !== false) this.send({ type: 'synced' });
            resolve(msg);
            break;
          case 'ping':
            if (!this.silent) this.send({ type: 'pong', seq: msg.seq });
            break;
          case 'error':
            this.lastError = { code: msg.code, message: msg.message };
            break;
        }
      });
      ws.on('error', (e) => this.emit('socket-error', e));
      void this.closedPromise!.then((info) => {
        if (!this.welcome) reject(Object.assign(new Error(`refused: ${info.code} ${info.error?.code ?? info.reason}`), info));
      });
    });
  }

  send(msg: unknown): void {
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(msg));
  }

  /** A state report (hostname, protocols, versionInfo, interfaces). */
  report(state: Record<string, unknown>): void {
    this.send({ type: 'state', ...state });
  }

  /** Stop answering pings and sending anything: the controller should declare us offline. */
  silence(): void {
    this.silent = true;
  }

  /** Resolves when the controller (or the network) closed the connection. */
  closed(): Promise<ClosedInfo> {
    return this.closedPromise ?? Promise.resolve({ code: 0, reason: 'never connected' });
  }

  /** Say bye and close cleanly. */
  async close(): Promise<ClosedInfo> {
    if (this.ws && this.ws.readyState === WebSocket.OPEN) {
      this.send({ type: 'bye', reason: 'router stopping' });
      this.ws.close(1000, 'bye');
    }
    return this.closed();
  }

  /** Drop the TCP connection without a close frame (a crashed router or a cut cable). */
  kill(): void {
    this.ws?.terminate();
  }
}
