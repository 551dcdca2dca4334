/** What both transports (uWS and node:https) share: reply encoding and in-flight tracking. */
import http from 'node:http';
import type { Reply, Req } from '../core/operation.js';

export type Handle = (req: Req) => Promise<Reply>;

export const STATUS_TEXT: Record<number, string> = http.STATUS_CODES as Record<number, string>;

/** A Reply's body bytes and media type: JSON unless the body is already a string or Buffer (no type when there is no body). */
export function replyBody(reply: Reply): { body: Buffer | string; contentType?: string } {
  if (reply.body === undefined) return { body: '' };
  if (typeof reply.body === 'string' || Buffer.isBuffer(reply.body)) return { body: reply.body, contentType: reply.contentType ?? 'text/plain; charset=utf-8' };
  return { body: JSON.stringify(reply.body), contentType: reply.contentType ?? 'application/json' };
}

/** Turn a Reply into status, headers and bytes (a fresh headers object the caller may extend). */
export function encodeReply(reply: Reply): { status: number; headers: Record<string, string>; body: Buffer | string } {
  const { body, contentType } = replyBody(reply);
  const headers: Record<string, string> = { ...reply.headers };
  if (contentType) headers['content-type'] = contentType;
  return { status: reply.status, headers, body };
}

/** Counts requests being served so shutdown can wait for them. */
export class InFlight {
  private n = 0;
  private waiters: (() => void)[] = [];
  begin(): () => void {
    this.n++;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      if (--this.n === 0) for (const w of this.waiters.splice(0)) w();
    };
  }
  get count() {
    return this.n;
  }
  drain(graceMs: number): Promise<void> {
    if (this.n === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const t = setTimeout(resolve, graceMs);
      this.waiters.push(() => {
        clearTimeout(t);
        resolve();
      });
    });
  }
}
