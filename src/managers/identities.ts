/**
 * An administrator's writes to an identity beyond its fields: disable and enable (the lockout that
 * also disables is src/auth/disable.ts), data-flow tracing (pushed to routers by src/control/traces.ts)
 * and per-service config overrides. The identity's own fields are the family's standard writes.
 */
import crypto from 'node:crypto';
import { errors } from '../core/errors.js';
import type { Store } from '../store/store.js';
import { write } from '../resources/write.js';
import { MAX_DISABLE_MINUTES, disableIdentityInTx, enableIdentityInTx } from '../auth/disable.js';
import type { StoredTrace } from '../control/traces.js';

export interface IdentitiesDeps {
  store: Store;
  /** The minute `durationMinutes` counts in (config `minuteMs`; default a real one). */
  minuteMs?: number;
}

/** A trace request as the body gives it. Example: `{ enabled: true, duration: '1h30m', channels: ['establish'] }`. */
export interface TraceRequest {
  enabled?: unknown;
  duration?: unknown;
  traceId?: unknown;
  channels?: unknown;
}

/** A config that replaces, for this identity, the service's config of the same type. */
export interface ServiceConfigPair {
  serviceId: string;
  configId: string;
}

/** Longest trace: one year (upstream takes any Go duration; unbounded would overflow a date). */
const MAX_TRACE_MS = 365 * 24 * 3_600_000;
/** Duration of a trace enabled without one (the upstream CLI's default). */
const DEFAULT_TRACE = '10m';
const MAX_CHANNELS = 64;

const DURATION_UNITS: Record<string, number> = { ns: 1e-6, us: 1e-3, 'µs': 1e-3, 'μs': 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Go's time.ParseDuration subset a trace needs: `90s`, `1h30m`, `1.5h`, `250ms`; returns ms. */
export function parseDuration(text: string): number | undefined {
  if (text.length === 0 || text.length > 64) return undefined;
  const re = /(\d+(?:\.\d+)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/gy;
  let total = 0;
  let at = 0;
  let m: RegExpExecArray | null;
  while ((m = re.exec(text)) !== null) {
    total += Number(m[1]) * DURATION_UNITS[m[2]];
    at = re.lastIndex;
  }
  return at === text.length && Number.isFinite(total) ? total : undefined;
}

/** `[{serviceId, configId}]` checked for shape; `undefined`/`null` is none, or a 400 when `required`. */
export function serviceConfigPairs(body: unknown, required: boolean): ServiceConfigPair[] {
  if (body === undefined || body === null) {
    if (required) throw errors.field('(root)', 'an array of service config pairs is required', body);
    return [];
  }
  if (!Array.isArray(body)) throw errors.field('(root)', 'must be an array of {serviceId, configId}', body);
  return body.map((p, i) => {
    if (!p || typeof p !== 'object') throw errors.field(`[${i}]`, 'must be an object', p);
    const { serviceId, configId } = p as Record<string, unknown>;
    if (typeof serviceId !== 'string' || serviceId === '') throw errors.field(`[${i}].serviceId`, 'is required', serviceId);
    if (typeof configId !== 'string' || configId === '') throw errors.field(`[${i}].configId`, 'is required', configId);
    return { serviceId, configId };
  });
}

export class Identities {
  constructor(private readonly deps: IdentitiesDeps) {}

  /** Disable for `minutes` (0: until enabled); ends the identity's API sessions and sessions. */
  async disable(id: string, minutes: unknown): Promise<void> {
    if (typeof minutes !== 'number' || !Number.isInteger(minutes) || minutes < 0 || minutes > MAX_DISABLE_MINUTES)
      throw errors.field('durationMinutes', `must be an integer from 0 (indefinitely) to ${MAX_DISABLE_MINUTES}`, minutes);
    await write(this.deps.store, (tx) => {
      const cur = tx.get('identities', id);
      if (!cur) throw errors.notFound();
      disableIdentityInTx(tx, cur, minutes, this.deps.minuteMs);
    });
  }

  /** Enable, also clearing every lockout count. */
  async enable(id: string): Promise<void> {
    await write(this.deps.store, (tx) => {
      const cur = tx.get('identities', id);
      if (!cur) throw errors.notFound();
      enableIdentityInTx(tx, cur);
    });
  }

  /** Start, change or stop tracing the identity's flows; returns the trace as stored. */
  async trace(id: string, req: TraceRequest): Promise<StoredTrace> {
    if (req.enabled !== undefined && req.enabled !== null && typeof req.enabled !== 'boolean') throw errors.field('enabled', 'must be a boolean', req.enabled);
    const enabled = req.enabled === true;
    let ms = 0;
    if (enabled) {
      const text = req.duration ?? DEFAULT_TRACE;
      const parsed = typeof text === 'string' ? parseDuration(text) : undefined;
      if (parsed === undefined) throw errors.field('duration', 'must be a duration such as 90s, 10m or 1h30m', text);
      if (parsed <= 0 || parsed > MAX_TRACE_MS) throw errors.field('duration', 'must be more than 0 and at most 8760h (one year)', text);
      ms = parsed;
    }
    const given = req.traceId;
    if (given !== undefined && given !== null && (typeof given !== 'string' || given.length > 128))
      throw errors.field('traceId', 'must be a string of at most 128 characters', given);
    const channels = req.channels ?? [];
    if (!Array.isArray(channels) || channels.length > MAX_CHANNELS || channels.some((c: unknown) => typeof c !== 'string' || c.length === 0 || c.length > 64))
      throw errors.field('channels', `must be at most ${MAX_CHANNELS} channel names (1-64 characters)`, req.channels);
    return write(this.deps.store, (tx) => {
      const cur = tx.get('identities', id);
      if (!cur) throw errors.notFound();
      const now = Date.now();
      // Re-enabling or changing a trace keeps its id unless a new one is given, so a trace can be extended.
      const previous = cur.trace as StoredTrace | undefined;
      const traceId = (given as string | null | undefined) || (previous && previous.until > now ? previous.traceId : crypto.randomUUID());
      const trace: StoredTrace = { enabled, traceId, until: now + ms, channels: [...new Set<string>(channels as string[])] };
      // Tracing is not an edit of the identity: its updatedAt stays.
      const next = { ...cur, trace };
      if (enabled) next.traceUntil = trace.until;
      else delete next.traceUntil;
      tx.put('identities', next);
      return trace;
    });
  }

  /** Add overrides; each replaces the identity's override of the same service and config type. */
  async associateServiceConfigs(id: string, pairs: ServiceConfigPair[]): Promise<void> {
    await write(this.deps.store, (tx) => {
      const identity = tx.get('identities', id);
      if (!identity) throw errors.notFound();
      const current = [...((identity.serviceConfigs as ServiceConfigPair[] | undefined) ?? [])];
      for (const p of pairs) {
        if (!tx.exists('services', p.serviceId)) throw errors.notFound();
        const cfg = tx.get('configs', p.configId);
        if (!cfg) throw errors.notFound();
        // One override per (service, config type): a new one replaces the previous of its type.
        for (let i = current.length - 1; i >= 0; i--) {
          const c = current[i];
          if (c.serviceId !== p.serviceId) continue;
          if (c.configId === p.configId || tx.get('configs', c.configId)?.configTypeId === cfg.configTypeId) current.splice(i, 1);
        }
        current.push({ serviceId: p.serviceId, configId: p.configId });
      }
      tx.put('identities', { ...identity, serviceConfigs: current, overrideConfigIds: [...new Set(current.map((c) => c.configId))], updatedAt: Date.now() });
    });
  }

  /**
   * Remove overrides: `undefined` removes every one; a pair removes the override of its config's
   * type for that service. Nothing to remove writes nothing.
   */
  async disassociateServiceConfigs(id: string, pairs: ServiceConfigPair[] | undefined): Promise<void> {
    await write(this.deps.store, (tx) => {
      const identity = tx.get('identities', id);
      if (!identity) throw errors.notFound();
      const current = (identity.serviceConfigs as ServiceConfigPair[] | undefined) ?? [];
      const next =
        pairs === undefined
          ? []
          : current.filter((c) => {
              return !pairs.some((p) => {
                if (p.serviceId !== c.serviceId) return false;
                if (p.configId === c.configId) return true;
                const a = tx.get('configs', p.configId)?.configTypeId;
                return a !== undefined && a === tx.get('configs', c.configId)?.configTypeId;
              });
            });
      if (next.length === current.length) return;
      tx.put('identities', { ...identity, serviceConfigs: next, overrideConfigIds: [...new Set(next.map((c) => c.configId))], updatedAt: Date.now() });
    });
  }
}
