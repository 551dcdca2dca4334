/**
 * Ships every document the embedded search store takes in (alerts and ingested usage) to an
 * external Elasticsearch/OpenSearch with `_bulk`, so the seed's queries work against the real
 * cluster too. Configured with `searchExportUrl` (+ basic credentials).
 *
 * - Batching: up to `batch` documents per request, sent every `flushMs` or as soon as a batch is full.
 * - Bounded buffer: at most `buffer` documents wait; beyond it the oldest are dropped (and counted),
 *   so an unreachable cluster can never exhaust memory.
 * - Retry with exponential backoff (1 s doubling up to 60 s, with jitter) on network errors, 429
 *   and 5xx; per-item failures of a 200 answer are retried when the item status is 429/5xx, and
 *   dropped (logged) when the cluster refused the document itself (4xx).
 * - The document `_id` is the embedded store's, so a retried request never duplicates a document.
 */
import type { Logger } from 'pino';
import type { IndexedDoc } from './search-store.js';

export interface ExporterOptions {
  url: string;
  username?: string;
  password?: string;
  batch: number;
  buffer: number;
  flushMs: number;
  log: Logger;
}

const MIN_BACKOFF = 1000;
const MAX_BACKOFF = 60_000;

export class Exporter {
  private queue: IndexedDoc[] = [];
  private timer?: NodeJS.Timeout;
  private sending = false;
  private backoff = 0;
  private closed = false;
  /** Counters, for logs and tests. */
  readonly stats = { sent: 0, dropped: 0, rejected: 0, failures: 0 };
  private readonly endpoint: string;
  private readonly auth?: string;

  constructor(private readonly opts: ExporterOptions) {
    this.endpoint = opts.url.replace(/\/+$/, '') + '/_bulk';
    if (opts.username !== undefined) this.auth = 'Basic ' + Buffer.from(`${opts.username}:${opts.password ?? ''}`).toString('base64');
  }

  enqueue(docs: IndexedDoc[]) {
    if (this.closed) return;
    this.queue.push(...docs);
    const over = this.queue.length - this.opts.buffer;
    if (over > 0) {
      this.queue.splice(0, over);
      this.stats.dropped += over;
      this.opts.log.warn({ dropped: over, buffer: this.opts.buffer }, 'search export buffer full: oldest documents dropped');
    }
    if (this.queue.length >= this.opts.batch && this.backoff === 0) this.kick(0);
    else this.kick(this.backoff || this.opts.flushMs);
  }

  private kick(delay: number) {
    if (this.sending || this.closed) return;
    if (this.timer && delay > 0) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.send();
    }, delay);
    this.timer.unref();
  }

  private async send() {
    if (this.sending || this.queue.length === 0) return;
    this.sending = true;
    const batch = this.queue.slice(0, this.opts.batch);
    const retry: IndexedDoc[] = [];
    let ok = false;
    try {
      const body = batch.map((d) => JSON.stringify({ index: { _index: d.index, _id: d.id } }) + '\n' + JSON.stringify(d.source) + '\n').join('');
      const headers: Record<string, string> = { 'content-type': 'application/x-ndjson' };
      if (this.auth) headers.authorization = this.auth;
      const res = await fetch(this.endpoint, { method: 'POST', headers, body, signal: AbortSignal.timeout(30_000) });
      const text = await res.text();
      if (res.status === 429 || res.status >= 500) throw new Error(`HTTP ${res.status}`);
      if (res.status >= 400) {
        // The whole request was refused (credentials, bad URL): keeping it would block forever.
        this.stats.rejected += batch.length;
        this.opts.log.error({ status: res.status, body: text.slice(0, 500), documents: batch.length }, 'search export refused; documents dropped');
        ok = true;
      } else {
        let parsed: { errors?: boolean; items?: Record<string, { status?: number; error?: unknown }>[] } = {};
        try {
          parsed = JSON.parse(text);
        } catch {
          parsed = {};
        }
        if (parsed.errors && Array.isArray(parsed.items)) {
          parsed.items.forEach((item, i) => {
            const r = Object.values(item ?? {})[0];
            const status = r?.status ?? 0;
            if (status === 429 || status >= 500) retry.push(batch[i]);
            else if (status >= 300) {
              this.stats.rejected++;
              this.opts.log.warn({ index: batch[i]?.index, id: batch[i]?.id, status, error: r?.error }, 'search export: document refused');
            }
          });
        }
        this.stats.sent += batch.length - retry.length;
        ok = true;
      }
    } catch (err) {
      this.stats.failures++;
      this.opts.log.warn({ err: (err as Error).message, documents: batch.length, retryInMs: this.nextBackoff() }, 'search export failed; will retry');
    }
    if (ok) {
      // The batch leaves the queue; items to retry go back to its front.
      this.queue.splice(0, batch.length, ...retry);
      this.backoff = retry.length ? this.nextBackoff() : 0;
    } else {
      this.backoff = this.nextBackoff();
    }
    this.sending = false;
    if (this.queue.length && !this.closed) this.kick(this.backoff || (this.queue.length >= this.opts.batch ? 0 : this.opts.flushMs));
  }

  private nextBackoff(): number {
    const base = this.backoff === 0 ? MIN_BACKOFF : Math.min(MAX_BACKOFF, this.backoff * 2);
    return Math.round(base * (0.8 + Math.random() * 0.4));
  }

  /** Try once more to send what waits (bounded by `graceMs`), then stop. */
  async close(graceMs = 2000) {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const until = Date.now() + graceMs;
    while (this.queue.length && this.backoff === 0 && Date.now() < until) {
      const before = this.queue.length;
      await this.send();
      if (this.queue.length >= before) break;
    }
    this.closed = true;
    if (this.queue.length) this.opts.log.warn({ documents: this.queue.length }, 'search export stopped with documents unsent');
  }
}
