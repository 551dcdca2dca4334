/**
 * The documents served by the spec endpoints (`GET /specs`, `GET /specs/{id}`, `GET /specs/{id}/spec`).
 *
 * The served Swagger 2.0 document is the imported upstream one (src/api/spec), restricted to and
 * consistent with our operation table, with `info.version` 0.28.0 (the edge APIs) or 0.16.54 (the
 * fabric API, upstream's fabric spec of the same controller release) and without `host`.
 *
 * Example:
 *   buildServedSpec('client', operations.filter(o => o.api === 'client'))  // → { swagger: '2.0', info: {version: '0.28.0', …}, paths: {…} }
 *   specSummaries('.')      // → [{ id: 'edge-client', name: 'edge-client', _links: { self: { href: './specs/edge-client' }, spec: {…} }, … }, …]
 *   specDetail('edge-management', '.')
 */
import type { ApiName, OperationSpec } from '../core/operation.js';
import { upstreamDocument } from './spec/index.js';

const SPEC_VERSION = '0.28.0';
/** The fabric spec keeps its own version: upstream numbers it apart from the edge APIs. */
const FABRIC_SPEC_VERSION = '0.16.54';

/** Spec ids as upstream names them, and the API each one describes. */
export const SPEC_IDS: Readonly<Record<string, ApiName>> = Object.freeze({
  'edge-client': 'client',
  'edge-management': 'management',
  fabric: 'fabric',
});

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch'];

/** The minimum an operation must tell about itself to appear in the served document. */
export interface ServedOp {
  method: string;
  path: string;
  operationId: string;
  /** Used when the upstream document has no operation at this method and path. */
  spec?: OperationSpec;
}

const served = new WeakMap<readonly ServedOp[], Map<ApiName, object>>();

/**
 * The Swagger 2.0 document served at `GET /specs/<id>/spec`: a deep copy of the upstream
 * document, `info.version` = 0.28.0 (0.16.54 for the fabric API), `host` removed, `basePath` kept, and `paths` holding exactly
 * the given operations (upstream's operation object where upstream has one, with our operationId;
 * `op.spec`, or a minimal stub, otherwise). Path order follows upstream; paths that are ours only
 * come last. Cached per (ops array, api): do not mutate the result.
 */
export function buildServedSpec(api: ApiName, ops: readonly ServedOp[]): object {
  let perApi = served.get(ops);
  const hit = perApi?.get(api);
  if (hit) return hit;

  const upstream = structuredClone(upstreamDocument(api));
  const doc: Record<string, unknown> = upstream;
  doc.info = { ...upstream.info, version: api === 'fabric' ? FABRIC_SPEC_VERSION : SPEC_VERSION };
  delete doc.host;

  const wanted = new Map<string, Map<string, ServedOp>>();
  for (const op of ops) {
    const method = op.method.toLowerCase();
    let byMethod = wanted.get(op.path);
    if (!byMethod) wanted.set(op.path, (byMethod = new Map()));
    byMethod.set(method, op);
  }

  const upstreamPaths: Record<string, Record<string, object | undefined>> = upstream.paths ?? {};
  const paths: Record<string, Record<string, object>> = {};
  const emit = (path: string, item: Record<string, object | undefined> | undefined, byMethod: Map<string, ServedOp>) => {
    const out: Record<string, object> = {};
    if (item?.parameters) out.parameters = item.parameters;
    // Upstream method order first, then ours.
    const order = [...HTTP_METHODS.filter((m) => item?.[m] && byMethod.has(m)), ...[...byMethod.keys()].filter((m) => !item?.[m])];
    for (const m of order) {
      const op = byMethod.get(m)!;
      const upstreamOp = item?.[m];
      if (upstreamOp) out[m] = { ...upstreamOp, operationId: op.operationId };
      else out[m] = { ...(op.spec ? structuredClone(op.spec) : { responses: { default: { description: 'See the API reference' } } }), operationId: op.operationId };
    }
    if (order.length) paths[path] = out;
  };
  for (const [path, item] of Object.entries(upstreamPaths)) {
    const byMethod = wanted.get(path);
    if (byMethod) emit(path, item, byMethod);
  }
  for (const [path, byMethod] of wanted) if (!upstreamPaths[path]) emit(path, undefined, byMethod);
  doc.paths = paths;

  if (!perApi) served.set(ops, (perApi = new Map()));
  perApi.set(api, doc);
  return doc;
}

/** When the specs were "created": the controller start (upstream builds them at start-up). */
const createdAt = new Date().toISOString();

/** The API a spec id describes, or undefined for an unknown id. */
function specApi(id: string): ApiName | undefined {
  return Object.prototype.hasOwnProperty.call(SPEC_IDS, id) ? SPEC_IDS[id] : undefined;
}

/**
 * One `specDetail` (baseEntity + `name`) per served spec, for `GET /specs` (both edge APIs list all three specs).
 * `baseUrl` prefixes the links; pass `'.'` for upstream's relative form (`./specs/edge-client`).
 */
export function specSummaries(baseUrl = '.'): object[] {
  return Object.keys(SPEC_IDS).map((id) => entity(id, baseUrl));
}

/** The `specDetail` for `GET /specs/{id}`, or undefined when the id is unknown (→ 404 NOT_FOUND). */
export function specDetail(id: string, baseUrl = '.'): object | undefined {
  return specApi(id) ? entity(id, baseUrl) : undefined;
}

function entity(id: string, baseUrl: string) {
  const base = baseUrl.replace(/\/+$/, '');
  return {
    id,
    name: id,
    createdAt,
    updatedAt: createdAt,
    tags: {},
    _links: {
      self: { href: `${base}/specs/${id}` },
      spec: { href: `${base}/specs/${id}/spec` },
    },
  };
}
