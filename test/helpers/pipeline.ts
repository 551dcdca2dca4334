/**
 * Several HTTP/1.1 requests written to one TLS connection in a single write (pipelining), so the
 * server parses and starts them in the same turn of its event loop: the way to observe "a second
 * run while one is running" without any timing assumption.
 */
import tls from 'node:tls';
import type { Server } from './server.js';

export interface PipelinedRequest {
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

export interface PipelinedResponse {
  status: number;
  body: any;
  text: string;
}

export function pipelined(srv: Server, reqs: PipelinedRequest[]): Promise<PipelinedResponse[]> {
  return new Promise((resolve, reject) => {
    const sock = tls.connect({ host: '127.0.0.1', port: srv.port, ca: srv.ca }, () => {
      const wire = reqs
        .map((r) => {
          const body = r.body ?? '';
          const headers = { host: `127.0.0.1:${srv.port}`, 'content-length': String(Buffer.byteLength(body)), ...r.headers };
          return `${r.method} ${r.path} HTTP/1.1\r\n${Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n${body}`;
        })
        .join('');
      sock.write(wire);
    });
    let buf = Buffer.alloc(0);
    const out: PipelinedResponse[] = [];
    sock.on('data', (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) break;
        const head = buf.subarray(0, end).toString('latin1');
        const len = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
        if (buf.length < end + 4 + len) break;
        const text = buf.subarray(end + 4, end + 4 + len).toString('utf8');
        let body: any;
        try {
          body = JSON.parse(text);
        } catch {
          body = undefined;
        }
        out.push({ status: Number(head.split(' ')[1]), body, text });
        buf = buf.subarray(end + 4 + len);
        if (out.length === reqs.length) {
          sock.end();
          resolve(out);
          return;
        }
      }
    });
    sock.on('error', reject);
    sock.on('close', () => {
      if (out.length < reqs.length) reject(new Error(`connection closed after ${out.length} of ${reqs.length} responses`));
    });
  });
}
