/**
 * Operations: the controllers list, controller settings (global, per controller,
 * effective) and identity tracing. The router control channel itself is not an operation: it is a
 * WebSocket (src/control/, served by src/http/uws.ts).
 * Keys are `<api>:<operationId>` for one API or a bare operationId for both; a handler here wins
 * over the standard resource handlers (src/api/operations.ts).
 */
import type { Member } from '../../cluster/members.js';
import crypto from 'node:crypto';
import type { Ctx, Entry, Handler } from '../context.js';
import type { Reply } from '../../core/operation.js';
import { errors } from '../../core/errors.js';
import { created, empty, list, ok } from '../../core/envelope.js';
import { BASE_PATHS } from '../router.js';
import { parseListParams, sortRecords } from '../../core/query.js';
import { compileFilter, type SymbolTable } from '../../core/filter/index.js';
import { type Registry } from '../../resources/registry.js';
import { write } from '../../resources/write.js';
import type { Rec } from '../../store/store.js';
import { CONTROL_PATH } from '../../control/protocol.js';
import { GLOBAL_SETTINGS_ID, cleanOidc, effectiveSettings, isProblem, type OidcSettings } from '../../control/settings.js';
import type { StoredTrace } from '../../control/traces.js';

/** Longest trace: one year (upstream takes any Go duration; unbounded would overflow a date). */
const MAX_TRACE_MS = 365 * 24 * 3_600_000;
/** Duration of a trace enabled without one (the upstream CLI's default). */
const DEFAULT_TRACE = '10m';
const MAX_CHANNELS = 64;

const CONTROLLER_SYMBOLS: SymbolTable = {
  id: { type: 'string' },
  name: { type: 'string' },
  createdAt: { type: 'datetime' },
  updatedAt: { type: 'datetime' },
  lastJoinedAt: { type: 'datetime' },
  isOnline: { type: 'bool' },
  isPreferredLeader: { type: 'bool' },
  fingerprint: { type: 'string' },
  ctrlAddress: { type: 'string' },
};

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

export function controllerEntries(_reg: Registry): Entry[] {
  /** This controller, as `GET /controllers` shows it (a standalone controller: always itself, online). */
  function controller(ctx: Ctx) {
    const { app } = ctx;
    return controllerView(ctx, {
      id: app.controllerId,
      name: app.config.advertisedAddress,
      certPem: app.pki.serverCertPem,
      fingerprint: app.pki.serverCertSha1Hex,
      // Where routers connect: the control channel WebSocket on the API listener.
      ctrlAddress: `wss://${app.config.advertisedAddress}${CONTROL_PATH}`,
      baseUrl: app.baseUrl,
      certBaseUrl: app.certBaseUrl,
      startedAt: app.startedAt,
      joinedAt: app.startedAt,
      versionInfo: { version: app.version, revision: app.revision, buildDate: app.buildDate, os: process.platform, arch: process.arch },
    });
  }

  /** A controller as `GET /controllers` shows it; in cluster mode every live member, all online. */
  function controllerView(ctx: Ctx, m: Member) {
    const at = new Date(m.startedAt).toISOString();
    return {
      id: m.id,
      createdAt: at,
      updatedAt: at,
      tags: {},
      _links: { self: { href: `./controllers/${m.id}` } },
      name: m.name,
      certPem: m.certPem,
      fingerprint: m.fingerprint,
      isOnline: true,
      // No leader among controllers (etcd elects its own): each is as preferred as the others.
      isPreferredLeader: !ctx.app.cluster,
      lastJoinedAt: new Date(m.joinedAt).toISOString(),
      ctrlAddress: m.ctrlAddress,
      apiAddresses: {
        'edge-client': [{ url: m.baseUrl + BASE_PATHS.client, version: 'v1' }],
        'edge-management': [{ url: m.baseUrl + BASE_PATHS.management, version: 'v1' }],
      },
      // Not in upstream's controllerDetail; clients ignore unknown fields. The build this controller runs.
      versionInfo: m.versionInfo,
    };
  }

  const settingsView = (rec: Rec) => ({
    id: rec.id,
    createdAt: new Date(rec.createdAt).toISOString(),
    updatedAt: new Date(rec.updatedAt).toISOString(),
    tags: rec.tags ?? {},
    _links: { self: { href: `./controller-settings/${rec.id}` } },
  });

  /** Known controller ids: the global record, this controller, and any with settings. */
  const knownController = (ctx: Ctx, id: string) =>
    id === GLOBAL_SETTINGS_ID || id === ctx.app.controllerId || ctx.app.store.has('controllerSettings', id);

  function oidcFromBody(body: any): OidcSettings {
    const cleaned = cleanOidc(body?.oidc);
    if (isProblem(cleaned)) throw errors.field(cleaned.field, cleaned.reason, cleaned.value);
    return cleaned;
  }

  async function writeSettings(ctx: Ctx, mode: 'put' | 'patch' | 'delete'): Promise<Reply> {
    const id = ctx.params.id;
    if (!knownController(ctx, id)) throw errors.notFound();
    const body = ctx.body ?? {};
    const oidc = mode === 'delete' ? {} : oidcFromBody(body);
    await write(ctx.app.store, (tx) => {
      const cur = tx.get('controllerSettings', id);
      const now = Date.now();
      if (mode === 'delete') {
        // The global record always exists: deleting it resets it.
        if (id === GLOBAL_SETTINGS_ID) tx.put('controllerSettings', { ...(cur ?? { id, createdAt: now, tags: {} }), oidc: {}, updatedAt: now });
        else if (cur) tx.delete('controllerSettings', id);
        else throw errors.notFound();
        return;
      }
      // This controller's own record is created on first write (the controller exists even without one).
      const base: Rec = cur ?? { id, createdAt: now, updatedAt: now, tags: {}, oidc: {} };
      const next = mode === 'put' ? oidc : { ...(base.oidc ?? {}), ...oidc };
      const tags = mode === 'put' ? body.tags ?? {} : body.tags ?? base.tags ?? {};
      tx.put('controllerSettings', { ...base, oidc: next, tags, updatedAt: now });
    });
    return empty();
  }

  const listControllers: Handler = (ctx) => {
    const p = parseListParams(ctx.req.query, CONTROLLER_SYMBOLS);
    const pred = compileFilter(p.filter.where, CONTROLLER_SYMBOLS);
    const all = (ctx.app.cluster ? ctx.app.cluster.members().map((m) => controllerView(ctx, m)) : [controller(ctx)]).filter((c) => pred(c as unknown as Rec));
    sortRecords(all as unknown as Rec[], CONTROLLER_SYMBOLS, p.sort);
    const page = p.limit === -1 ? all.slice(p.offset) : all.slice(p.offset, p.offset + p.limit);
    return list(page, { limit: p.limit, offset: p.offset, totalCount: all.length }, Object.keys(CONTROLLER_SYMBOLS));
  };

  return [
    { api: 'client', operationId: 'listControllers', auth: 'session',
      handler: listControllers },
    { api: 'management', operationId: 'listControllers', auth: 'admin', permission: { family: 'ops', action: 'read' },
      handler: listControllers },

    // Writes are the family `controller-setting`, a trust anchor (src/auth/permissions.ts): the OIDC
    // redirect and post-logout URIs decide where authorization codes go. Reads stay `ops.read`.
    { api: 'management', operationId: 'createControllerSetting', auth: 'admin', permission: { family: 'controller-setting', action: 'create' },
      handler: async (ctx) => {
        const body = ctx.body ?? {};
        const id = body.controllerId;
        if (typeof id !== 'string' || !/^[A-Za-z0-9._-]{1,64}$/.test(id))
          throw errors.field('controllerId', 'must be a controller id (1-64 of A-Z a-z 0-9 . _ -)', id);
        const oidc = oidcFromBody(body);
        await write(ctx.app.store, (tx) => {
          if (tx.exists('controllerSettings', id)) throw errors.field('controllerId', 'settings for this controller already exist', id);
          const now = Date.now();
          tx.put('controllerSettings', { id, createdAt: now, updatedAt: now, tags: body.tags ?? {}, oidc });
        });
        return created(id, `./controller-settings/${id}`);
      } },
    { api: 'management', operationId: 'detailControllerSettingEffective', auth: 'admin', permission: { family: 'ops', action: 'read' },
      handler: (ctx) => {
        const id = ctx.params.id;
        if (!knownController(ctx, id)) throw errors.notFound();
        const { store, startedAt } = ctx.app;
        const rec = store.get('controllerSettings', id) ?? store.get('controllerSettings', GLOBAL_SETTINGS_ID) ?? { id, createdAt: startedAt, updatedAt: startedAt, tags: {} };
        return ok({ ...settingsView({ ...rec, id }), ...effectiveSettings(store, id) });
      } },
    { api: 'management', operationId: 'updateControllerSetting', auth: 'admin', permission: { family: 'controller-setting', action: 'update' },
      handler: (ctx) => writeSettings(ctx, 'put') },
    { api: 'management', operationId: 'patchControllerSetting', auth: 'admin', permission: { family: 'controller-setting', action: 'update' },
      handler: (ctx) => writeSettings(ctx, 'patch') },
    { api: 'management', operationId: 'deleteControllerSetting', auth: 'admin', permission: { family: 'controller-setting', action: 'delete' },
      handler: (ctx) => writeSettings(ctx, 'delete') },

    { api: 'management', operationId: 'updateIdentityTracing', auth: 'admin', permission: { family: 'identity', action: 'update' }, reaches: { from: 'path' },
      handler: async (ctx) => {
        const body = ctx.body ?? {};
        if (body.enabled !== undefined && body.enabled !== null && typeof body.enabled !== 'boolean') throw errors.field('enabled', 'must be a boolean', body.enabled);
        const enabled = body.enabled === true;
        let ms = 0;
        if (enabled) {
          const text = body.duration ?? DEFAULT_TRACE;
          const parsed = typeof text === 'string' ? parseDuration(text) : undefined;
          if (parsed === undefined) throw errors.field('duration', 'must be a duration such as 90s, 10m or 1h30m', text);
          if (parsed <= 0 || parsed > MAX_TRACE_MS) throw errors.field('duration', 'must be more than 0 and at most 8760h (one year)', text);
          ms = parsed;
        }
        if (body.traceId !== undefined && body.traceId !== null && (typeof body.traceId !== 'string' || body.traceId.length > 128))
          throw errors.field('traceId', 'must be a string of at most 128 characters', body.traceId);
        const channels = body.channels ?? [];
        if (!Array.isArray(channels) || channels.length > MAX_CHANNELS || channels.some((c: unknown) => typeof c !== 'string' || c.length === 0 || c.length > 64))
          throw errors.field('channels', `must be at most ${MAX_CHANNELS} channel names (1-64 characters)`, body.channels);
        let trace!: StoredTrace;
        await write(ctx.app.store, (tx) => {
          const cur = tx.get('identities', ctx.params.id);
          if (!cur) throw errors.notFound();
          const now = Date.now();
          // Re-enabling or changing a trace keeps its id unless a new one is given, so a trace can be extended.
          const previous = cur.trace as StoredTrace | undefined;
          const traceId = body.traceId || (previous && previous.until > now ? previous.traceId : crypto.randomUUID());
          trace = { enabled, traceId, until: now + ms, channels: [...new Set<string>(channels)] };
          // Tracing is not an edit of the identity: its updatedAt stays.
          tx.put('identities', { ...cur, trace });
        });
        return ok({ enabled: trace.enabled, traceId: trace.traceId, until: new Date(trace.until).toISOString() });
      } },
  ];
}
