/**
 * The edge API v0.28.0 Swagger 2.0 documents and the fabric document this controller serves (`src/api/spec/*.json`: upstream's
 * documents with the brand renames and defect fixes of scripts/lib/upstream-import.ts; that they
 * equal upstream's files is checked in test/spec.test.ts), patched for the compatibility suites.
 * Nothing here reads outside the repository. The patches, each listed in `PATCHES` below:
 *
 * 1. the spec's own defects the import leaves (the brand renames, the null
 *    `controllerSettingsList.items`, the missing operationId of `DELETE /current-api-session` and
 *    `required` entries naming properties no schema declares are fixed there, once): the
 *    `WWW-Authenticate` response headers (declared as arrays of strings on responses that never
 *    carry them: dropped), and `link.href` declared `format: uri` although upstream's own
 *    links are relative (`./identities/<id>`), so it is checked as `uri-reference`; and
 *    `GET /specs/{id}/spec`, which serves the raw document, not the envelope the spec names;
 *    `GET /edge-routers/{id}/service-edge-router-policies`, declared as a list of service policies
 *    but a list of service edge router policies upstream; `POST /posture-response-bulk`, declared
 *    200 but answered 201 upstream; the body of `POST /enroll`, declared an object although the
 *    operation consumes a raw PEM CSR; the fabric `POST /cluster/transfer-leadership`, which
 *    answers 400 on a controller without Raft (its three siblings declare it) although it
 *    declares no 400;
 * 2. what prism's Swagger 2 reading gets wrong (see `patch`): definition-level `x-nullable` on
 *    `tags`, and free-form `additionalProperties: {type: object}` maps (any value, as go-swagger reads them).
 *
 * Everything else — paths, parameters, schemas, response codes — is upstream's, unchanged.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export type Api = 'client' | 'management' | 'fabric';
export const APIS: readonly Api[] = ['client', 'management', 'fabric'];

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'];

/** What was patched, for the suites' diagnostics (and docs/compat.md). */
export interface PatchNote { api: Api; what: string }

function patch(api: Api, doc: any, notes: PatchNote[]): void {
  const defs = doc.definitions ?? {};
  // `link.href` is declared `format: uri`, but upstream's own examples and controller send relative
  // references (`./identities/<id>`): a strict uri check rejects every upstream response.
  if (defs.link?.properties?.href?.format === 'uri') {
    defs.link.properties.href.format = 'uri-reference';
    notes.push({ api, what: 'link.href format uri -> uri-reference (upstream sends ./relative links)' });
  }
  // `tags` is `allOf: [subTags]` + `x-nullable: true`; prism's Swagger 2 converter honours
  // `x-nullable` only next to a string `type`, so null tags (valid upstream) would be rejected.
  // Inline it as the equivalent `type: object` schema. And `additionalProperties: {type: object}`
  // with no further structure is go-swagger's `map[string]interface{}` (tags say "values null,
  // string, boolean"; config data holds any JSON): read it as any value, as go-swagger clients do.
  if (Array.isArray(defs.tags?.allOf) && defs.tags['x-nullable'] === true && defs.subTags?.type === 'object') {
    defs.tags = { description: defs.tags.description, type: 'object', additionalProperties: {}, 'x-nullable': true };
    notes.push({ api, what: 'tags: allOf[subTags] + x-nullable -> nullable object (prism ignores x-nullable without type)' });
  }
  let free = 0;
  const walkFree = (v: any): void => {
    if (Array.isArray(v)) return v.forEach(walkFree);
    if (!v || typeof v !== 'object') return;
    const ap = v.additionalProperties;
    if (ap && typeof ap === 'object' && ap.type === 'object' && Object.keys(ap).length === 1) {
      v.additionalProperties = {};
      free++;
    }
    for (const x of Object.values(v)) walkFree(x);
  };
  walkFree(defs);
  walkFree(doc.paths);
  if (free) notes.push({ api, what: `${free} additionalProperties {type: object} -> any value (go-swagger map[string]interface{})` });
  // `GET /specs/{id}/spec` serves the raw spec document (a YAML text or a JSON object, as the
  // client asks), not the `detailSpecBodyEnvelope` the spec names (upstream's controller does the same). Swagger 2 has one schema for both media types: any.
  const specBody = doc.paths?.['/specs/{id}/spec']?.get?.responses?.['200'];
  if (specBody?.schema) {
    specBody.schema = { description: 'the raw specification document, YAML text or JSON object' };
    notes.push({ api, what: 'detailSpecBody 200: detailSpecBodyEnvelope -> the raw document (any)' });
  }
  // Responses the spec declares differently from what upstream's controller answers:
  // - `GET /edge-routers/{id}/service-edge-router-policies` names `listServicePoliciesEnvelope`
  //   (service policies) although the route lists service edge router policies, as its twin
  //   `GET /services/{id}/service-edge-router-policies` declares and upstream returns;
  // - `POST /posture-response-bulk` declares 200, but upstream answers 201 (its handler ends in
  //   CreateWithResponder → RespondWithCreated, as the single `POST /posture-response` does).
  const serp = doc.paths?.['/edge-routers/{id}/service-edge-router-policies']?.get?.responses?.['200'];
  if (serp?.schema?.$ref === '#/definitions/listServicePoliciesEnvelope' && defs.listServiceEdgeRouterPoliciesEnvelope) {
    serp.schema = { $ref: '#/definitions/listServiceEdgeRouterPoliciesEnvelope' };
    serp.description = 'A list of service edge router policies';
    notes.push({ api, what: 'listEdgeRouterServiceEdgeRouterPolicies 200: listServicePoliciesEnvelope -> listServiceEdgeRouterPoliciesEnvelope' });
  }
  const bulk = doc.paths?.['/posture-response-bulk']?.post?.responses;
  if (bulk?.['200'] && !bulk['201']) {
    bulk['201'] = bulk['200'];
    delete bulk['200'];
    notes.push({ api, what: 'createPostureResponseBulk success status 200 -> 201 (what upstream answers)' });
  }
  // `POST /enroll` consumes application/x-pem-file, application/pkcs7 and text/plain besides JSON,
  // and upstream's own SDKs send the CSR raw as `application/x-pem-file` (the OTT flow and the
  // legacy enroll), but Swagger 2 allows one body schema and it names the
  // object `genericEnroll`, so every raw-CSR request would be rejected. Accept either that object
  // or a text body (the PEM CSR).
  const enrollItem = doc.paths?.['/enroll'];
  const enrollBody = [...(enrollItem?.parameters ?? []), ...(enrollItem?.post?.parameters ?? [])].find((x: any) => x.in === 'body');
  if (enrollBody?.schema?.$ref === '#/definitions/genericEnroll') {
    enrollBody.schema = { anyOf: [{ $ref: '#/definitions/genericEnroll' }, { type: 'string', description: 'a raw PEM (or PKCS7) CSR' }] };
    notes.push({ api, what: 'POST /enroll body: genericEnroll -> genericEnroll or a raw CSR text (it consumes x-pem-file/pkcs7/text)' });
  }
  // Fabric: `POST /cluster/transfer-leadership` on a controller without Raft answers upstream's
  // 400 SERVER_NOT_RUNNING_IN_HA_MODE (as the other three cluster operations, which declare it),
  // a status the operation does not declare.
  const transfer = doc.paths?.['/cluster/transfer-leadership']?.post?.responses;
  if (api === 'fabric' && transfer && !transfer['400']) {
    transfer['400'] = { $ref: '#/responses/badRequestResponse' };
    notes.push({ api, what: 'clusterTransferLeadership: 400 declared (upstream answers SERVER_NOT_RUNNING_IN_HA_MODE without Raft)' });
  }
  let headers = 0;
  for (const [p, item] of Object.entries<any>(doc.paths ?? {})) {
    for (const m of HTTP_METHODS) {
      const op = item?.[m];
      if (!op) continue;
      if (!op.operationId) throw new Error(`${api}: ${m} ${p} has no operationId`);
      for (const r of Object.values<any>(op.responses ?? {})) {
        if (r?.headers?.['WWW-Authenticate']) {
          delete r.headers['WWW-Authenticate'];
          if (Object.keys(r.headers).length === 0) delete r.headers;
          headers++;
        }
      }
    }
  }
  if (headers) notes.push({ api, what: `dropped ${headers} WWW-Authenticate response header declarations` });
}

export interface LoadedSpec { api: Api; doc: any; file: string; basePath: string; notes: PatchNote[] }

const cache = new Map<Api, { doc: any; notes: PatchNote[] }>();

/** The patched document (a fresh deep copy per call is not needed: treat as read-only). */
export function patchedSpec(api: Api): { doc: any; notes: PatchNote[] } {
  let hit = cache.get(api);
  if (!hit) {
    const doc = JSON.parse(fs.readFileSync(path.join(ROOT, 'src', 'api', 'spec', `${api}.json`), 'utf8'));
    const notes: PatchNote[] = [];
    patch(api, doc, notes);
    hit = { doc, notes };
    cache.set(api, hit);
  }
  return hit;
}

/** Writes the patched document as JSON to a temp file (prism reads it from there); `mutate` edits a copy (tests of the checker). */
export function writePatchedSpec(api: Api, mutate?: (doc: any) => void): LoadedSpec {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-compat-'));
  const { doc: shared, notes } = patchedSpec(api);
  const doc = mutate ? structuredClone(shared) : shared;
  mutate?.(doc);
  const file = path.join(dir, `${api}.json`);
  fs.writeFileSync(file, JSON.stringify(doc));
  return { api, doc, file, basePath: doc.basePath, notes };
}

export interface SpecOp { api: Api; operationId: string; method: string; path: string }

/** Every operation of the patched document, in document order. */
export function specOperations(api: Api): SpecOp[] {
  const { doc } = patchedSpec(api);
  const out: SpecOp[] = [];
  for (const [p, item] of Object.entries<any>(doc.paths)) {
    for (const m of HTTP_METHODS) if (item?.[m]) out.push({ api, operationId: item[m].operationId, method: m.toUpperCase(), path: p });
  }
  return out;
}
