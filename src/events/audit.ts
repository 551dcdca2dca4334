/**
 * The audit trail: every change made through the APIs (a non-GET operation that succeeded) becomes
 * one event — who (identity, API session, address), what (API, operation, family, entity id,
 * create/update/delete, the fields sent), when — written to
 * - `<dataDir>/audit/audit-<UTC date>.jsonl`, one JSON object per line, one file per day;
 * - the embedded search store, index `mesh.audit` (`GET /search/mesh.audit/_search`, or the pattern `mesh.audit*`);
 * - when `auditWebhookUrl` is set, that URL: POST `{"events":[…]}` signed with HMAC-SHA256 of the
 *   exact body under `auditWebhookSecret` (`x-mesh-signature: sha256=<hex>`), from a bounded queue
 *   (the oldest dropped beyond it), each batch retried with exponential backoff and dropped after
 *   `auditWebhookAttempts` tries; drops are counted (`mesh_audit_webhook_dropped_total`).
 *
 * Never a secret: field values whose name says password, secret, token, key, certificate, CSR, JWT
 * or code are replaced by "[redacted]", text bodies (PEM CSRs) are not recorded, nor are query
 * strings (enrollment tokens travel there) or headers. Long values are cut to 256 characters.
 *
 * Not audited, being runtime traffic rather than changes of configuration, at rates that would
 * drown the trail: service session creates and deletes and posture responses of the Client API.
 *
 * The request path only builds a small object and queues it; files, index and webhook are written
 * in batches off the request path.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import type { SessionCtx as Ctx } from '../auth/api-sessions.js';
import type { Reply } from '../core/operation.js';
import type { SearchStore } from './search-store.js';

export const AUDIT_INDEX = 'mesh.audit';
/** One file per UTC day (`2026-11-25`) under `<dataDir>/audit`; `mesh` appends its offline changes there too. */
export const auditFileName = (day: string) => `audit-${day}.jsonl`;

const NOT_AUDITED = new Set(['client:createSession', 'client:deleteSession', 'client:createPostureResponse', 'client:createPostureResponseBulk']);
const SECRET_FIELD = /pass|secret|token|key|cert|csr|jwt|code|otp|pem/i;
const MAX_VALUE = 256;
const FLUSH_MS = 200;

export interface AuditEvent {
  '@timestamp': string;
  action: 'create' | 'update' | 'delete';
  api: string;
  operation: string;
  family: string;
  entityId: string | null;
  method: string;
  path: string;
  status: number;
  requestId: string;
  actor: { identityId: string | null; identityName: string | null; apiSessionId: string | null; address: string };
  changes?: Record<string, unknown>;
}

export interface AuditOptions {
  dataDir: string;
  search: SearchStore;
  log: Logger;
  webhookUrl?: string;
  webhookSecret?: string;
  webhookQueue: number;
  webhookBatch: number;
  webhookAttempts: number;
  webhookRetryMs: number;
  webhookTimeoutMs: number;
}

/** Field values as recorded: secrets replaced, long strings cut, depth bounded. */
export function redact(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return /^-----BEGIN /.test(value) ? '[redacted]' : value.length > MAX_VALUE ? value.slice(0, MAX_VALUE) + '…' : value;
  if (value === null || typeof value !== 'object') return value;
  if (depth >= 4) return '[…]';
  if (Array.isArray(value)) return value.slice(0, 50).map((v) => redact(v, depth + 1));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = SECRET_FIELD.test(k) ? '[redacted]' : redact(v, depth + 1);
  return out;
}

const ACTION = { post: 'create', put: 'update', patch: 'update', delete: 'delete' } as const;
/** Families named by what they change where the path's first segment does not say it. */
const FAMILY: Record<string, string> = { authenticate: 'api-sessions', 'current-api-session': 'api-sessions', enroll: 'enrollments' };

export class Audit {
  readonly stats = { events: 0, webhookSent: 0, webhookDropped: { overflow: 0, failed: 0 } };
  private pending: AuditEvent[] = [];
  private timer?: NodeJS.Timeout;
  private flushing: Promise<void> = Promise.resolve();
  private readonly dir: string;
  private readonly webhook: AuditEvent[] = [];
  private sending?: Promise<void>;
  private closed = false;

  constructor(private readonly opts: AuditOptions) {
    this.dir = path.join(opts.dataDir, 'audit');
    fs.mkdirSync(this.dir, { recursive: true, mode: 0o700 });
  }

  get webhookQueued(): number {
    return this.webhook.length;
  }

  /** The router's change hook: a succeeded non-GET operation. */
  record(ctx: Ctx, reply: Reply): void {
    const { op, req } = ctx;
    if (op.method === 'get' || reply.status >= 400 || NOT_AUDITED.has(`${op.api}:${op.operationId}`)) return;
    const data = (reply.body as { data?: Record<string, any> } | undefined)?.data;
    const first = op.path.split('/')[1] ?? '';
    const body = ctx.body;
    const event: AuditEvent = {
      '@timestamp': new Date().toISOString(),
      // A POST on an existing entity (`/cas/{id}/verify`) changes it.
      action: op.method === 'post' && ctx.params.id ? 'update' : ACTION[op.method],
      api: op.api,
      operation: op.operationId,
      family: FAMILY[first] ?? first,
      entityId: ctx.params.id ?? (typeof data?.id === 'string' ? data.id : null),
      method: op.method.toUpperCase(),
      path: req.path,
      status: reply.status,
      requestId: ctx.requestId,
      actor: {
        identityId: ctx.identity?.id ?? data?.identity?.id ?? null,
        identityName: ctx.identity?.name ?? data?.identity?.name ?? null,
        apiSessionId: ctx.session?.id ?? (op.operationId === 'authenticate' ? (data?.id ?? null) : null),
        address: req.remoteAddress,
      },
    };
    if (body !== undefined && body !== null && typeof body === 'object') event.changes = redact(body) as Record<string, unknown>;
    this.pending.push(event);
    this.stats.events++;
    this.timer ??= setTimeout(() => void this.flush(), FLUSH_MS);
  }

  /** Write what is pending to the file and the index, and queue it for the webhook. */
  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.pending;
    if (batch.length === 0) return this.flushing;
    this.pending = [];
    this.flushing = this.flushing.then(async () => {
      const byDay = new Map<string, string[]>();
      for (const e of batch) {
        const day = e['@timestamp'].slice(0, 10);
        if (!byDay.has(day)) byDay.set(day, []);
        byDay.get(day)!.push(JSON.stringify(e));
      }
      try {
        for (const [day, lines] of byDay) await fs.promises.appendFile(path.join(this.dir, auditFileName(day)), lines.join('\n') + '\n', { mode: 0o600 });
      } catch (err) {
        this.opts.log.error({ err }, 'audit file write failed');
      }
      try {
        await this.opts.search.bulk(batch.map((e) => ({ op: 'index' as const, index: AUDIT_INDEX, source: e as unknown as Record<string, unknown> })));
      } catch (err) {
        this.opts.log.error({ err }, 'audit index write failed');
      }
      if (this.opts.webhookUrl) this.enqueue(batch);
    });
    return this.flushing;
  }

  private enqueue(events: AuditEvent[]) {
    this.webhook.push(...events);
    const over = this.webhook.length - this.opts.webhookQueue;
    if (over > 0) {
      this.webhook.splice(0, over);
      this.stats.webhookDropped.overflow += over;
      this.opts.log.warn({ dropped: over }, 'audit webhook queue full: oldest events dropped');
    }
    this.sending ??= this.send().finally(() => (this.sending = undefined));
  }

  private async send(): Promise<void> {
    while (this.webhook.length && !this.closed) {
      const batch = this.webhook.slice(0, this.opts.webhookBatch);
      const body = JSON.stringify({ events: batch });
      let delivered = false;
      for (let attempt = 1; attempt <= this.opts.webhookAttempts && !delivered; attempt++) {
        delivered = await this.post(body);
        if (!delivered && attempt < this.opts.webhookAttempts) {
          const wait = Math.min(this.opts.webhookRetryMs * 2 ** (attempt - 1), 60_000);
          await new Promise((r) => setTimeout(r, wait * (0.75 + Math.random() * 0.5)).unref());
          if (this.closed) return;
        }
      }
      // The batch leaves the queue now; overflow may meanwhile have dropped (and counted) its oldest part.
      const left = this.webhook.indexOf(batch[batch.length - 1]) + 1;
      this.webhook.splice(0, left);
      if (delivered) this.stats.webhookSent += left;
      else {
        this.stats.webhookDropped.failed += left;
        this.opts.log.warn({ dropped: left, attempts: this.opts.webhookAttempts }, 'audit webhook unreachable: events dropped');
      }
    }
  }

  private async post(body: string): Promise<boolean> {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (this.opts.webhookSecret) headers['x-mesh-signature'] = 'sha256=' + crypto.createHmac('sha256', this.opts.webhookSecret).update(body).digest('hex');
    try {
      const r = await fetch(this.opts.webhookUrl!, { method: 'POST', headers, body, signal: AbortSignal.timeout(this.opts.webhookTimeoutMs) });
      await r.arrayBuffer().catch(() => undefined);
      return r.status >= 200 && r.status < 300;
    } catch {
      return false;
    }
  }

  /** Flush, then give the webhook up to `graceMs` to drain. */
  async close(graceMs = 2000): Promise<void> {
    await this.flush();
    if (this.sending) await Promise.race([this.sending, new Promise((r) => setTimeout(r, graceMs).unref())]);
    this.closed = true;
  }
}
