/** Unauthenticated documents: version, capabilities, specs, protocols, CA bundle, fixed type lists. (Controllers: handlers/controllers.ts.) */
import { dump } from 'js-yaml';
import type { Ctx, Entry, Op } from '../context.js';
import type { ApiName, Reply } from '../../core/operation.js';
import { errors } from '../../core/errors.js';
import { ok, list } from '../../core/envelope.js';
import { parseListParams, runList } from '../../core/query.js';
import type { SymbolTable } from '../../core/filter/index.js';
import type { Rec } from '../../store/store.js';
import { BASE_PATHS } from '../router.js';
import { buildServedSpec, specDetail, specSummaries, SPEC_IDS } from '../openapi.js';
import { IDENTITY_TYPES } from '../../resources/identities.js';
import { POSTURE_CHECK_TYPES } from '../../resources/posture.js';

const yamlCache = new WeakMap<object, string>();

const CAPABILITIES = ['OIDC_AUTH', 'HA_CONTROLLER'] as const;

function versionDocument(ctx: Ctx) {
  // Cluster mode: every live controller serves every API, so each API lists them all, this one
  // first (GET /controllers has the same list with more detail); upstream announces HA_CONTROLLER.
  const members = ctx.app.cluster?.members();
  const bases = members ? [ctx.app.baseUrl, ...members.slice(1).map((m) => m.baseUrl)] : [ctx.app.baseUrl];
  const apiVersion = (path: string) => ({ v1: { path, apiBaseUrls: bases.map((b) => b + path) } });
  return {
    version: ctx.app.version,
    revision: ctx.app.revision,
    buildDate: ctx.app.buildDate,
    runtimeVersion: process.version,
    // OIDC login is served under /oidc (src/oidc/).
    capabilities: members ? ['OIDC_AUTH', 'HA_CONTROLLER'] : ['OIDC_AUTH'],
    apiVersions: {
      edge: apiVersion(BASE_PATHS.client),
      'edge-client': apiVersion(BASE_PATHS.client),
      'edge-management': apiVersion(BASE_PATHS.management),
      fabric: apiVersion(BASE_PATHS.fabric),
      // Served by src/observability/routes.ts (upstream's health-check API shape).
      'health-checks': apiVersion('/health-checks'),
      // Upstream's binding name for its OIDC provider.
      'edge-oidc': apiVersion('/oidc'),
    },
  };
}

const version = (ctx: Ctx) => ok(versionDocument(ctx));

/** Fixed entities (identity types, posture check types) carry the controller's start time. */
function fixed(ctx: Ctx, path: string, id: string, fields: Record<string, unknown>) {
  const at = new Date(ctx.app.startedAt).toISOString();
  return { id, createdAt: at, updatedAt: at, tags: {}, _links: { self: { href: `./${path}/${id}` } }, ...fields };
}

const FIXED_SYMBOLS: SymbolTable = {
  id: { type: 'string' },
  name: { type: 'string' },
  createdAt: { type: 'datetime' },
  updatedAt: { type: 'datetime' },
};

/** A fixed list through the list engine: paging, filter and sort like any stored collection. */
function fixedList(ctx: Ctx, path: string, items: { id: string; name: string }[], fields: (id: string) => Record<string, unknown>): Reply {
  const at = ctx.app.startedAt;
  const records = items.map((t) => ({ id: t.id, name: t.name, createdAt: at, updatedAt: at }) as Rec);
  const p = parseListParams(ctx.req.query, FIXED_SYMBOLS);
  const { page, pagination } = runList(ctx.app.store, { collection: '', symbols: FIXED_SYMBOLS, filterableFields: Object.keys(FIXED_SYMBOLS), records }, p);
  const data = page.map((r) => {
    const rec = r as Rec;
    return fixed(ctx, path, rec.id, { name: rec.name, ...fields(rec.id) });
  });
  return list(data, pagination, Object.keys(FIXED_SYMBOLS));
}

const postureCheckTypeFields = (id: string) => {
  const t = POSTURE_CHECK_TYPES.find((x) => x.id === id)!;
  return { name: t.name, operatingSystems: t.operatingSystems, version: '1' };
};

export function informationalEntries(ops: () => Op[]): Entry[] {
  const specOps = (api: ApiName) => ops().filter((o) => o.api === api);
  return [
    { api: 'both', operationId: 'listRoot', auth: 'none',
      handler: version },
    { api: 'both', operationId: 'listVersion', auth: 'none',
      handler: version },
    { api: 'both', operationId: 'listEnumeratedCapabilities', auth: 'none',
      handler: () => ok([...CAPABILITIES]) },
    { api: 'both', operationId: 'listSpecs', auth: 'none',
      handler: () => ok(specSummaries('.')) },
    { api: 'both', operationId: 'detailSpec', auth: 'none',
      handler: (ctx) => {
        if (!SPEC_IDS[ctx.params.id]) throw errors.notFound();
        return ok(specDetail(ctx.params.id, '.'));
      } },
    { api: 'both', operationId: 'detailSpecBody', auth: 'none',
      handler: (ctx) => {
        const api = SPEC_IDS[ctx.params.id];
        if (!api) throw errors.notFound();
        const doc = buildServedSpec(api, specOps(api));
        // The spec produces text/yaml and application/json; JSON unless YAML is asked for first.
        const accept = (ctx.req.headers.accept ?? '').toLowerCase();
        const yamlAt = accept.search(/(text|application)\/(x-)?yaml/);
        const jsonAt = accept.indexOf('json');
        if (yamlAt >= 0 && (jsonAt < 0 || yamlAt < jsonAt)) {
          let text = yamlCache.get(doc);
          if (!text) yamlCache.set(doc, (text = dump(doc, { noRefs: true, lineWidth: -1 })));
          return { status: 200, body: text, contentType: 'text/yaml' };
        }
        return { status: 200, body: doc };
      } },
    // `https`: the API listener; `mtls`: the mutual-TLS listener (certificate login and enrollment).
    { api: 'client', operationId: 'listProtocols', auth: 'none',
      handler: (ctx) => ok({ https: { address: ctx.app.config.advertisedAddress }, mtls: { address: ctx.app.config.certAdvertisedAddress } }) },
    { api: 'both', operationId: 'listWellKnownCas', auth: 'none',
      handler: (ctx) => ({
        status: 200,
        body: ctx.app.pki.wellKnownCaStore(),
        contentType: 'application/pkcs7-mime',
        headers: { 'content-transfer-encoding': 'base64' },
      }) },
    { api: 'management', operationId: 'listIdentityTypes', auth: 'admin', permission: { family: 'identity', action: 'read' },
      handler: (ctx) => fixedList(ctx, 'identity-types', IDENTITY_TYPES.map((t) => ({ id: t, name: t })), () => ({})) },
    { api: 'management', operationId: 'detailIdentityType', auth: 'admin', permission: { family: 'identity', action: 'read' },
      handler: (ctx) => {
        const t = IDENTITY_TYPES.find((x) => x === ctx.params.id);
        if (!t) throw errors.notFound();
        return ok(fixed(ctx, 'identity-types', t, { name: t }));
      } },
    { api: 'management', operationId: 'listPostureCheckTypes', auth: 'admin', permission: { family: 'posture-check', action: 'read' },
      handler: (ctx) => fixedList(ctx, 'posture-check-types', POSTURE_CHECK_TYPES, postureCheckTypeFields) },
    { api: 'management', operationId: 'detailPostureCheckType', auth: 'admin', permission: { family: 'posture-check', action: 'read' },
      handler: (ctx) => {
        const t = POSTURE_CHECK_TYPES.find((x) => x.id === ctx.params.id);
        if (!t) throw errors.notFound();
        return ok(fixed(ctx, 'posture-check-types', t.id, postureCheckTypeFields(t.id)));
      } },
  ];
}
