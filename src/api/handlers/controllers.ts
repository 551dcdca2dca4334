/**
 * The controllers list, controller settings (global, per controller, effective) and identity
 * tracing, as entries of the operation table; the settings and trace writes are the managers'
 * (src/managers/controller-settings.ts, src/managers/identities.ts). The router control channel
 * itself is not an operation: it is a WebSocket (src/control/, served by src/http/uws.ts).
 */
import type { Member } from '../../cluster/members.js';
import type { Ctx, Entry, Handler } from '../context.js';
import type { WithBody } from '../../core/operation.js';
import type { ManagementBodies } from '../../core/bodies.js';
import { errors } from '../../core/errors.js';
import { created, empty, list, ok } from '../../core/envelope.js';
import { BASE_PATHS } from '../router.js';
import { parseListParams, sortRecords } from '../../core/query.js';
import { compileFilter, type SymbolTable } from '../../core/filter/index.js';
import type { Registry } from '../../resources/registry.js';
import type { Rec } from '../../store/store.js';
import { CONTROL_PATH } from '../../control/protocol.js';
import { GLOBAL_SETTINGS_ID, effectiveSettings } from '../../control/settings.js';
import type { SettingsUpdate } from '../../managers/controller-settings.js';

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

  const updateSettings = (mode: SettingsUpdate) => async (ctx: WithBody<Ctx, ManagementBodies['updateControllerSetting'] | ManagementBodies['patchControllerSetting']>) => {
    await ctx.app.controllerSettings.update(ctx.params.id, mode, ctx.body);
    return empty();
  };

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
        const id = await ctx.app.controllerSettings.create(body.controllerId, body);
        return created(id, `./controller-settings/${id}`);
      } },
    { api: 'management', operationId: 'detailControllerSettingEffective', auth: 'admin', permission: { family: 'ops', action: 'read' },
      handler: (ctx) => {
        const id = ctx.params.id;
        if (!ctx.app.controllerSettings.known(id)) throw errors.notFound();
        const { store, startedAt } = ctx.app;
        const rec = store.get('controllerSettings', id) ?? store.get('controllerSettings', GLOBAL_SETTINGS_ID) ?? { id, createdAt: startedAt, updatedAt: startedAt, tags: {} };
        return ok({ ...settingsView({ ...rec, id }), ...effectiveSettings(store, id) });
      } },
    { api: 'management', operationId: 'updateControllerSetting', auth: 'admin', permission: { family: 'controller-setting', action: 'update' },
      handler: updateSettings('put') },
    { api: 'management', operationId: 'patchControllerSetting', auth: 'admin', permission: { family: 'controller-setting', action: 'update' },
      handler: updateSettings('patch') },
    { api: 'management', operationId: 'deleteControllerSetting', auth: 'admin', permission: { family: 'controller-setting', action: 'delete' },
      handler: async (ctx) => {
        await ctx.app.controllerSettings.remove(ctx.params.id);
        return empty();
      } },

    { api: 'management', operationId: 'updateIdentityTracing', auth: 'admin', permission: { family: 'identity', action: 'update' }, reaches: { from: 'path' },
      handler: async (ctx) => {
        const trace = await ctx.app.identities.trace(ctx.params.id, ctx.body ?? {});
        return ok({ enabled: trace.enabled, traceId: trace.traceId, until: new Date(trace.until).toISOString() });
      } },
  ];
}
