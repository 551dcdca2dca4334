/**
 * A plain-HTTP relay between prism and the controller that can present a TLS client certificate.
 * Prism forwards with its own HTTPS client, which has no client certificate; operations that
 * authenticate by one (cert login, CA/OTT-CA enrollment, router and authenticator extension) need
 * it. With `startPrism(t, srv, api, { clientCerts: true })`, prism's upstream is this relay; a
 * request carrying `x-compat-client-cert: <name>` is sent on over HTTPS to the controller's
 * certificate listener (`srv.certPort`) with the certificate registered under that name
 * (`proxy.clientCert(name, certPem, keyPem)`), any other request to the front end without one.
 * Everything else (method, path, headers, body, status, response headers) passes unchanged.
 */
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Server } from '../../helpers/server.js';

export const CLIENT_CERT_HEADER = 'x-compat-client-cert';

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'proxy-connection', 'te', 'trailer']);

export class CertRelay {
  private readonly certs = new Map<string, { cert: string; key: string }>();
  private constructor(private readonly server: http.Server, readonly port: number) {}

  static async start(srv: Server): Promise<CertRelay> {
    let relay: CertRelay | undefined;
    const server = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c) => chunks.push(c));
      req.on('end', () => {
        const name = req.headers[CLIENT_CERT_HEADER];
        const creds = typeof name === 'string' ? relay!.certs.get(name) : undefined;
        const headers: Record<string, string | string[]> = {};
        for (const [k, v] of Object.entries(req.headers)) {
          if (v === undefined || HOP_BY_HOP.has(k) || k === CLIENT_CERT_HEADER || k === 'host') continue;
          headers[k] = v;
        }
        const body = Buffer.concat(chunks);
        if (body.length) headers['content-length'] = String(body.length);
        const up = https.request(
          // with a certificate: the certificate listener (the uWS front end asks for none)
          { host: '127.0.0.1', port: creds ? srv.certPort : srv.port, method: req.method, path: req.url, headers, ca: srv.ca, agent: false, ...(creds ?? {}) },
          (ur) => {
            const out: Record<string, string | string[]> = {};
            for (const [k, v] of Object.entries(ur.headers)) if (v !== undefined && !HOP_BY_HOP.has(k)) out[k] = v;
            res.writeHead(ur.statusCode ?? 502, out);
            ur.pipe(res);
          },
        );
        up.on('error', (e) => {
          // not `server: mesh-controller`: the exchange log reports it as not from the controller
          res.writeHead(502, { 'content-type': 'text/plain' });
          res.end(`relay: ${e.message}`);
        });
        up.end(body);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    relay = new CertRelay(server, (server.address() as AddressInfo).port);
    return relay;
  }

  register(name: string, cert: string, key: string) {
    this.certs.set(name, { cert, key });
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.closeAllConnections();
      this.server.close(() => resolve());
    });
  }
}
