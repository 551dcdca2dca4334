/**
 * The imported upstream edge API v0.28.0 Swagger 2.0 documents and the fabric API document of the
 * same controller release (see scripts/import-upstream-spec.ts), and a flat, document-ordered view
 * of their operations.
 *
 * Example: `upstreamOperations('management').find(o => o.operationId === 'createIdentity')`
 *   → `{ api: 'management', method: 'POST', path: '/identities', bodyDefinition: 'identityCreate', secured: true, … }`
 */
import clientDoc from './client.json' with { type: 'json' };
import managementDoc from './management.json' with { type: 'json' };
import fabricDoc from './fabric.json' with { type: 'json' };
import type { ApiName, OperationSpec } from '../../core/operation.js';

export type { ApiName };

export type UpstreamMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface UpstreamOp {
  api: ApiName;
  method: UpstreamMethod;
  /** Path relative to the base path, as written in the spec (`/identities/{id}`). */
  path: string;
  operationId: string;
  /** The operation has a non-empty security requirement (its own, or the document's global one). */
  secured: boolean;
  /** Definition name of the `in: body` parameter's schema (`$ref` target, or the items' target for arrays). */
  bodyDefinition?: string;
  /** The body schema is an array of `$ref` (bulk operations). */
  bodyIsArray?: boolean;
  /** The `in: body` parameter is marked `required`. Only set when the operation has a body parameter. */
  bodyRequired?: boolean;
  /**
   * The raw schema of the `in: body` parameter, when it is not a plain `$ref` (or array of `$ref`):
   * e.g. the inline object of `enrollUpdb` or the `type: string` body of `verifyCa`.
   * Validate it with `BodyValidator.validateSchema`.
   */
  bodySchema?: Record<string, unknown>;
  /** Names of the `in: query` parameters (path-level and operation-level, in document order). */
  queryParams: string[];
  /** Names of the `in: header` parameters. */
  headerParams: string[];
  tags: string[];
  summary?: string;
}

/** A Swagger 2.0 schema object, as far as this code reads it; every other keyword is kept as it is. */
export interface SwaggerSchema {
  $ref?: string;
  /** A list in the fabric document (`inspectResponseValue.value`). */
  type?: string | string[];
  enum?: unknown[];
  items?: SwaggerSchema;
  properties?: Record<string, SwaggerSchema>;
  required?: string[];
  allOf?: SwaggerSchema[];
  additionalProperties?: SwaggerSchema | boolean;
  discriminator?: string;
  [keyword: string]: unknown;
}

export interface SwaggerParameter {
  name: string;
  in: string;
  $ref?: never;
  required?: boolean;
  schema?: SwaggerSchema;
  [keyword: string]: unknown;
}

/** A reference to one of the document's `parameters` (the fabric document's `id`, `limit`, …). */
export type ParameterRef = { $ref: string };

export type SwaggerOperation = OperationSpec & { operationId: string; parameters?: (SwaggerParameter | ParameterRef)[] };

/** A path: its shared parameters and one operation per method. */
export type SwaggerPathItem = {
  parameters?: (SwaggerParameter | ParameterRef)[];
  get?: SwaggerOperation;
  put?: SwaggerOperation;
  post?: SwaggerOperation;
  delete?: SwaggerOperation;
  patch?: SwaggerOperation;
};

export interface SwaggerDocument {
  basePath: string;
  info: Record<string, unknown>;
  security?: Partial<Record<string, string[]>>[];
  paths: Record<string, SwaggerPathItem>;
  definitions: Record<string, SwaggerSchema>;
  parameters?: Record<string, SwaggerParameter>;
  [field: string]: unknown;
}

const documents: Record<ApiName, SwaggerDocument> = { client: clientDoc, management: managementDoc, fabric: fabricDoc };

const METHODS: readonly string[] = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch'];
const SUPPORTED = new Set(['get', 'post', 'put', 'patch', 'delete']);

/** The parsed upstream document. Shared: treat as read-only (deep-copy before changing anything). */
export function upstreamDocument(api: ApiName): SwaggerDocument {
  const doc = documents[api];
  if (!doc) throw new Error(`unknown api ${String(api)}`);
  return doc;
}

const DEF_PREFIX = '#/definitions/';

function refName(schema: SwaggerSchema | undefined): string | undefined {
  const ref = schema?.$ref;
  return typeof ref === 'string' && ref.startsWith(DEF_PREFIX) ? ref.slice(DEF_PREFIX.length) : undefined;
}

/** Resolve a `#/parameters/x` reference (the fabric document's `id`, `limit`, `offset`, `filter`). */
function resolveParam(doc: SwaggerDocument, p: SwaggerParameter | ParameterRef): SwaggerParameter {
  if (p.$ref === undefined) return p;
  const found = p.$ref.startsWith('#/parameters/') ? doc.parameters?.[p.$ref.slice('#/parameters/'.length)] : undefined;
  if (!found) throw new Error(`unresolved parameter ${p.$ref}`);
  return found;
}

/** Operation parameters override path-level ones with the same `in` + `name` (Swagger 2.0 rule). */
function mergeParams(doc: SwaggerDocument, pathParams: (SwaggerParameter | ParameterRef)[] | undefined, opParams: (SwaggerParameter | ParameterRef)[] | undefined): SwaggerParameter[] {
  const merged: SwaggerParameter[] = [];
  const own = (opParams ?? []).map((p) => resolveParam(doc, p));
  for (const p of (pathParams ?? []).map((p) => resolveParam(doc, p))) {
    if (!own.some((o) => o.in === p.in && o.name === p.name)) merged.push(p);
  }
  merged.push(...own);
  return merged;
}

const cache = new Map<ApiName, UpstreamOp[]>();

/** Every operation of the document, in document order (paths, then methods as written). */
export function upstreamOperations(api: ApiName): UpstreamOp[] {
  const hit = cache.get(api);
  if (hit) return hit;
  const doc = upstreamDocument(api);
  const globalSecured = Array.isArray(doc.security) && doc.security.length > 0;
  const ops: UpstreamOp[] = [];
  for (const [path, item] of Object.entries(doc.paths ?? {})) {
    for (const [method, value] of Object.entries(item)) {
      if (!METHODS.includes(method)) continue;
      const op = value as SwaggerOperation;
      if (!SUPPORTED.has(method)) throw new Error(`unsupported method ${method} ${path} in ${api} spec`);
      const params = mergeParams(doc, item.parameters, op.parameters);
      const body = params.find((p) => p.in === 'body');
      const security = op.security !== undefined ? op.security : doc.security;
      const u: UpstreamOp = {
        api,
        method: method.toUpperCase() as UpstreamMethod,
        path,
        operationId: op.operationId,
        secured: op.security !== undefined ? Array.isArray(security) && security.length > 0 : globalSecured,
        queryParams: params.filter((p) => p.in === 'query').map((p) => p.name),
        headerParams: params.filter((p) => p.in === 'header').map((p) => p.name),
        tags: Array.isArray(op.tags) ? [...op.tags] : [],
      };
      if (op.summary !== undefined) u.summary = op.summary;
      if (body) {
        u.bodyRequired = body.required === true;
        const schema = body.schema;
        const direct = refName(schema);
        const items = schema?.type === 'array' ? refName(schema.items) : undefined;
        if (direct) u.bodyDefinition = direct;
        else if (items) {
          u.bodyDefinition = items;
          u.bodyIsArray = true;
        } else if (schema) u.bodySchema = schema;
      }
      ops.push(Object.freeze(u) as UpstreamOp);
    }
  }
  cache.set(api, ops);
  return ops;
}
