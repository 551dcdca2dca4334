/**
 * Benchmark models: a deterministic population of identities, services (with configs), edge routers
 * and the three policy families, in named shapes (upstream's scale-test shapes), written either
 * straight into a data directory's LMDB store before the controller starts, or through the
 * Management API of a running controller.
 *
 *   const summary = await writeModelToStore('/tmp/data', SHAPES.medium, { seed: 1 });
 *   // then start the controller on /tmp/data
 *   const summary = await writeModelViaApi('https://127.0.0.1:1280', token, SHAPES.tiny, { seed: 1, ca });
 *
 * Reproducible: `planModel(shape, seed)` is a pure function of its arguments, so the same seed gives
 * the same names, role attributes, configs and policy selections both ways. Direct writes also draw
 * entity ids from the seed (same seed → same ids); over the API the controller assigns them. Secrets
 * (enrollment tokens) are always random.
 *
 * Faithful: the direct writer validates every body with the Management API's own body validator and
 * creates each record with the resource layer's create (`createInTx`, src/resources/write.ts, what
 * a POST runs) through the bulk import's writer (src/cli/import.ts): same fields, defaults, indexes,
 * and an ott enrollment (with its signed JWT) per identity and an erott one per edge router.
 *
 * Selectivity (what makes the model realistic for the policy engine):
 *  - identities carry `group-<g>` (one each), usually `region-<r>`, sometimes a `role-<x>`;
 *    services carry `svc-group-<j>`; edge routers `region-<r>` and sometimes `public`;
 *  - policies mostly select by one or two `#attributes` (AnyOf), some by AllOf of two, some by `@id`
 *    lists, and a few by `#all`; an identity typically lands in a handful of service policies;
 *  - the *worst-case identity* (`worstCaseIdentityId`, the identity whose name sorts last) carries
 *    every identity attribute the policies use and is listed by `@id` in every policy that selects
 *    identities by id only, so EVERY service policy and edge router policy selects it.
 */
import https from 'node:https';
import { UniqueViolation } from '../../src/store/store.js';
import { WorkerPool } from '../../src/pool.js';
import { BodyValidator } from '../../src/api/validate.js';
import { ApiError } from '../../src/core/errors.js';
import { bootstrap } from '../../src/app.js';
import { builtinConfigTypeId } from '../../src/resources/builtin-config-types.js';
import { BulkWriter, ImportError, openOffline } from '../../src/cli/import.js';

// ---- shapes ----------------------------------------------------------------------------------

export interface Shape {
  name: string;
  identities: number;
  services: number;
  edgeRouters: number;
  servicePolicies: number;
  edgeRouterPolicies: number;
  serviceEdgeRouterPolicies: number;
}

export const SHAPES: Record<string, Shape> = {
  /** For tests: every kind of selection appears, but it is written in well under a second. */
  tiny: { name: 'tiny', identities: 24, services: 8, edgeRouters: 4, servicePolicies: 8, edgeRouterPolicies: 6, serviceEdgeRouterPolicies: 4 },
  /** For `npm run bench` (the short run). */
  small: { name: 'small', identities: 1000, services: 40, edgeRouters: 20, servicePolicies: 20, edgeRouterPolicies: 20, serviceEdgeRouterPolicies: 10 },
  medium: { name: 'medium', identities: 5000, services: 100, edgeRouters: 100, servicePolicies: 50, edgeRouterPolicies: 50, serviceEdgeRouterPolicies: 25 },
  large: { name: 'large', identities: 100_000, services: 2000, edgeRouters: 500, servicePolicies: 250, edgeRouterPolicies: 250, serviceEdgeRouterPolicies: 100 },
  /** The large shape's services, routers and policies with ten times its identities (issue #35). */
  huge: { name: 'huge', identities: 1_000_000, services: 2000, edgeRouters: 500, servicePolicies: 250, edgeRouterPolicies: 250, serviceEdgeRouterPolicies: 100 },
  'many-services': { name: 'many-services', identities: 16_000, services: 10_000, edgeRouters: 100, servicePolicies: 100, edgeRouterPolicies: 100, serviceEdgeRouterPolicies: 100 },
};

export function shapeByName(name: string): Shape {
  const s = SHAPES[name];
  if (!s) throw new Error(`unknown model shape "${name}" (known: ${Object.keys(SHAPES).join(', ')})`);
  return s;
}

// ---- deterministic randomness ----------------------------------------------------------------

/** sfc32 seeded through a string hash: one independent stream per purpose. */
export function rng(seed: number, stream: string): () => number {
  let h = 1779033703 ^ stream.length;
  const mixIn = (s: string) => {
    for (let i = 0; i < s.length; i++) {
      h = Math.imul(h ^ s.charCodeAt(i), 3432918353);
      h = (h << 13) | (h >>> 19);
    }
  };
  mixIn(`${seed >>> 0}:${Math.floor(seed / 2 ** 32)}:${stream}`);
  const next = () => {
    h = Math.imul(h ^ (h >>> 16), 2246822507);
    h = Math.imul(h ^ (h >>> 13), 3266489909);
    return (h ^= h >>> 16) >>> 0;
  };
  let a = next(), b = next(), c = next(), d = next();
  return () => {
    a |= 0; b |= 0; c |= 0; d |= 0;
    const t = (((a + b) | 0) + d) | 0;
    d = (d + 1) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    c = (c + t) | 0;
    return (t >>> 0) / 4294967296;
  };
}

const int = (r: () => number, n: number) => Math.floor(r() * n);
/** `k` distinct integers in [0, n), in ascending order. */
function pick(r: () => number, n: number, k: number): number[] {
  const out = new Set<number>();
  k = Math.min(k, n);
  while (out.size < k) out.add(int(r, n));
  return [...out].sort((a, b) => a - b);
}

/** Same alphabet and length as the controller's entity ids (src/store/ids.ts shortId). */
const ID_ALPHABET = '0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-';
function idSource(seed: number): () => string {
  const r = rng(seed, 'ids');
  const seen = new Set<string>();
  return () => {
    for (;;) {
      let s = '';
      for (let i = 0; i < 10; i++) s += ID_ALPHABET[int(r, 64)];
      if (!seen.has(s)) {
        seen.add(s);
        return s;
      }
    }
  };
}

// ---- the plan --------------------------------------------------------------------------------

/** A policy role: `#attribute`, `#all`, or a reference to the entity at an index of a family. */
export type Role = string | { ref: 'identities' | 'services' | 'edgeRouters'; index: number };

export interface PlannedConfig { name: string; configTypeId: string; data: Record<string, unknown> }
export interface PlannedService { name: string; roleAttributes: string[]; configs: number[]; encryptionRequired: boolean }
export interface PlannedRouter { name: string; roleAttributes: string[]; isTunnelerEnabled: boolean; cost: number }
export interface PlannedIdentity { name: string; roleAttributes: string[] }
export interface PlannedPolicy {
  name: string;
  semantic: 'AllOf' | 'AnyOf';
  type?: 'Dial' | 'Bind';
  identityRoles?: Role[];
  serviceRoles?: Role[];
  edgeRouterRoles?: Role[];
}

export interface ModelPlan {
  shape: Shape;
  seed: number;
  configs: PlannedConfig[];
  services: PlannedService[];
  edgeRouters: PlannedRouter[];
  identities: PlannedIdentity[];
  servicePolicies: PlannedPolicy[];
  edgeRouterPolicies: PlannedPolicy[];
  serviceEdgeRouterPolicies: PlannedPolicy[];
  /** Index (in `identities`) of the identity every service and edge router policy selects. */
  worstCaseIdentity: number;
}

const ROLES = ['employee', 'contractor', 'device', 'server'];

const pad = (i: number, n: number) => String(i).padStart(String(Math.max(0, n - 1)).length, '0');

export function planModel(shape: Shape, seed: number): ModelPlan {
  for (const [k, v] of Object.entries(shape)) {
    if (k !== 'name' && (!Number.isInteger(v) || (v as number) < 1)) throw new Error(`shape ${shape.name}: ${k} must be a positive integer`);
  }
  const nRegions = Math.min(8, shape.edgeRouters);
  const nGroups = Math.max(2, Math.round(shape.servicePolicies / 2));
  const nSvcGroups = Math.max(2, Math.min(shape.services, Math.round(shape.servicePolicies / 2)));

  // Configs and services: each service has an intercept.v1 (dial side) and a host.v1 (bind side).
  const rs = rng(seed, 'services');
  const configs: PlannedConfig[] = [];
  const services: PlannedService[] = [];
  for (let i = 0; i < shape.services; i++) {
    const name = `service-${pad(i, shape.services)}`;
    const port = 1024 + int(rs, 60000);
    configs.push({
      name: `${name}-intercept`,
      configTypeId: builtinConfigTypeId('intercept.v1'),
      data: { protocols: ['tcp'], addresses: [`${name}.mesh.internal`], portRanges: [{ low: port, high: port }] },
    });
    configs.push({
      name: `${name}-host`,
      configTypeId: builtinConfigTypeId('host.v1'),
      data: { protocol: 'tcp', address: `10.${int(rs, 256)}.${int(rs, 256)}.${1 + int(rs, 254)}`, port },
    });
    const attrs = [`svc-group-${i % nSvcGroups}`];
    if (rs() < 0.2) attrs.push(`tier-${int(rs, 3)}`);
    services.push({ name, roleAttributes: attrs, configs: [2 * i, 2 * i + 1], encryptionRequired: true });
  }

  const rr = rng(seed, 'routers');
  const edgeRouters: PlannedRouter[] = [];
  for (let i = 0; i < shape.edgeRouters; i++) {
    const attrs = [`region-${i % nRegions}`];
    if (i === 0 || rr() < 0.3) attrs.push('public');
    edgeRouters.push({ name: `edge-router-${pad(i, shape.edgeRouters)}`, roleAttributes: attrs, isTunnelerEnabled: false, cost: int(rr, 10) * 10 });
  }

  // Identities: the last name (zero-padded numbers) is the worst case.
  const ri = rng(seed, 'identities');
  const identities: PlannedIdentity[] = [];
  for (let i = 0; i < shape.identities; i++) {
    const attrs = [`group-${int(ri, nGroups)}`];
    if (ri() < 0.8) attrs.push(`region-${int(ri, nRegions)}`);
    if (ri() < 0.5) attrs.push(`role-${ROLES[int(ri, ROLES.length)]}`);
    identities.push({ name: `identity-${pad(i, shape.identities)}`, roleAttributes: attrs });
  }
  const worst = shape.identities - 1;
  const worstAttrs = new Set<string>();

  const rp = rng(seed, 'policies');
  const idRefs = (family: 'identities' | 'services' | 'edgeRouters', n: number, k: number): Role[] => pick(rp, n, k).map((index) => ({ ref: family, index }));
  const used = (roles: Role[]) => {
    for (const r of roles) if (typeof r === 'string' && r !== '#all') worstAttrs.add(r.slice(1));
    return roles;
  };
  /** Identity selection shared by service and edge router policies. */
  const identitySelection = (i: number): { semantic: 'AllOf' | 'AnyOf'; roles: Role[] } => {
    if (i === 0) return { semantic: 'AnyOf', roles: ['#all'] };
    const x = rp();
    if (x < 0.65) return { semantic: 'AnyOf', roles: used(pick(rp, nGroups, 1 + int(rp, 2)).map((g) => `#group-${g}`)) };
    if (x < 0.8) return { semantic: 'AllOf', roles: used([`#region-${int(rp, nRegions)}`, `#role-${ROLES[int(rp, ROLES.length)]}`]) };
    if (x < 0.9) return { semantic: 'AnyOf', roles: used([`#role-${ROLES[int(rp, ROLES.length)]}`]) };
    // By id: a few identities, always including the worst case.
    const ids = idRefs('identities', shape.identities, 1 + int(rp, 5)).filter((r) => typeof r !== 'string' && r.index !== worst);
    return { semantic: 'AnyOf', roles: [...ids, { ref: 'identities', index: worst }] };
  };

  const servicePolicies: PlannedPolicy[] = [];
  for (let i = 0; i < shape.servicePolicies; i++) {
    const who = identitySelection(i);
    let serviceRoles: Role[];
    const y = rp();
    // `#all` identities get one service group only: nobody should see every service by accident.
    // The semantic applies to both lists: under AllOf, a single service attribute (services carry one).
    const one = who.roles[0] === '#all' || who.semantic === 'AllOf';
    if (one || y < 0.85) serviceRoles = pick(rp, nSvcGroups, one ? 1 : 1 + int(rp, 2)).map((j) => `#svc-group-${j}`);
    else serviceRoles = idRefs('services', shape.services, 1 + int(rp, 3));
    servicePolicies.push({
      name: `service-policy-${pad(i, shape.servicePolicies)}`,
      type: i % 3 === 2 ? 'Bind' : 'Dial',
      semantic: who.semantic,
      identityRoles: who.roles,
      serviceRoles,
    });
  }

  const edgeRouterPolicies: PlannedPolicy[] = [];
  for (let i = 0; i < shape.edgeRouterPolicies; i++) {
    const who = identitySelection(i);
    const y = rp();
    let edgeRouterRoles: Role[];
    if (i === 0 || y < 0.1) edgeRouterRoles = ['#all'];
    else if (y < 0.7) edgeRouterRoles = [`#region-${int(rp, nRegions)}`];
    else if (y < 0.9) edgeRouterRoles = ['#public'];
    else edgeRouterRoles = idRefs('edgeRouters', shape.edgeRouters, 1 + int(rp, 3));
    // Every router list is one attribute, `#all` or ids, so either semantic selects routers.
    edgeRouterPolicies.push({
      name: `edge-router-policy-${pad(i, shape.edgeRouterPolicies)}`,
      semantic: who.semantic,
      identityRoles: who.roles,
      edgeRouterRoles,
    });
  }

  const serviceEdgeRouterPolicies: PlannedPolicy[] = [];
  for (let i = 0; i < shape.serviceEdgeRouterPolicies; i++) {
    const y = rp();
    let serviceRoles: Role[];
    if (i === 0 || y < 0.2) serviceRoles = ['#all'];
    else if (y < 0.9) serviceRoles = pick(rp, nSvcGroups, 1 + int(rp, 2)).map((j) => `#svc-group-${j}`);
    else serviceRoles = idRefs('services', shape.services, 1 + int(rp, 3));
    const z = rp();
    const edgeRouterRoles: Role[] = i === 0 || z < 0.3 ? ['#all'] : z < 0.8 ? [`#region-${int(rp, nRegions)}`] : ['#public'];
    serviceEdgeRouterPolicies.push({ name: `service-edge-router-policy-${pad(i, shape.serviceEdgeRouterPolicies)}`, semantic: 'AnyOf', serviceRoles, edgeRouterRoles });
  }

  identities[worst].roleAttributes = [...new Set([...identities[worst].roleAttributes, ...worstAttrs])].sort();
  return { shape, seed, configs, services, edgeRouters, identities, servicePolicies, edgeRouterPolicies, serviceEdgeRouterPolicies, worstCaseIdentity: worst };
}

// ---- bodies (the same for both writers) -------------------------------------------------------

type Ids = { identities: string[]; services: string[]; edgeRouters: string[]; configs: string[] };

const roleString = (r: Role, ids: Ids) => (typeof r === 'string' ? r : '@' + ids[r.ref][r.index]);

/** Families in write order (references point backwards only), with the API path and body definition. */
const FAMILIES = [
  { key: 'configs', collection: 'configs', path: 'configs', bodyDef: 'configCreate' },
  { key: 'services', collection: 'services', path: 'services', bodyDef: 'serviceCreate' },
  { key: 'edgeRouters', collection: 'edgeRouters', path: 'edge-routers', bodyDef: 'edgeRouterCreate' },
  { key: 'identities', collection: 'identities', path: 'identities', bodyDef: 'identityCreate' },
  { key: 'servicePolicies', collection: 'servicePolicies', path: 'service-policies', bodyDef: 'servicePolicyCreate' },
  { key: 'edgeRouterPolicies', collection: 'edgeRouterPolicies', path: 'edge-router-policies', bodyDef: 'edgeRouterPolicyCreate' },
  { key: 'serviceEdgeRouterPolicies', collection: 'serviceEdgeRouterPolicies', path: 'service-edge-router-policies', bodyDef: 'serviceEdgeRouterPolicyCreate' },
] as const;

type FamilyKey = (typeof FAMILIES)[number]['key'];

function body(family: FamilyKey, item: any, ids: Ids): Record<string, unknown> {
  switch (family) {
    case 'configs':
      return { name: item.name, configTypeId: item.configTypeId, data: item.data };
    case 'services':
      return { name: item.name, roleAttributes: item.roleAttributes, configs: item.configs.map((i: number) => ids.configs[i]), encryptionRequired: item.encryptionRequired };
    case 'edgeRouters':
      return { name: item.name, roleAttributes: item.roleAttributes, isTunnelerEnabled: item.isTunnelerEnabled, cost: item.cost };
    case 'identities':
      return { name: item.name, type: 'Default', isAdmin: false, roleAttributes: item.roleAttributes, enrollment: { ott: true } };
    case 'servicePolicies':
      return { name: item.name, type: item.type, semantic: item.semantic, identityRoles: item.identityRoles.map((r: Role) => roleString(r, ids)), serviceRoles: item.serviceRoles.map((r: Role) => roleString(r, ids)), postureCheckRoles: [] };
    case 'edgeRouterPolicies':
      return { name: item.name, semantic: item.semantic, identityRoles: item.identityRoles.map((r: Role) => roleString(r, ids)), edgeRouterRoles: item.edgeRouterRoles.map((r: Role) => roleString(r, ids)) };
    case 'serviceEdgeRouterPolicies':
      return { name: item.name, semantic: item.semantic, serviceRoles: item.serviceRoles.map((r: Role) => roleString(r, ids)), edgeRouterRoles: item.edgeRouterRoles.map((r: Role) => roleString(r, ids)) };
  }
}

// ---- summary ---------------------------------------------------------------------------------

export interface ModelSummary {
  shape: string;
  seed: number;
  /** How it was written. */
  via: 'store' | 'api';
  counts: Record<FamilyKey, number>;
  /** Entity ids in plan order (index i = the i-th planned entity of that family). */
  ids: Record<FamilyKey, string[]>;
  /** Selected by every service policy and every edge router policy; its name sorts last. */
  worstCaseIdentityId: string;
  worstCaseIdentityName: string;
  /** Service policy counts by type (which identities can dial / bind follows from them). */
  dialPolicies: number;
  bindPolicies: number;
  elapsedMs: number;
}

export interface WriteOptions {
  seed: number;
  onProgress?: (done: number, total: number) => void;
}

function summarize(plan: ModelPlan, via: 'store' | 'api', ids: Record<FamilyKey, string[]>, t0: number): ModelSummary {
  const counts = Object.fromEntries(FAMILIES.map((f) => [f.key, ids[f.key].length])) as Record<FamilyKey, number>;
  return {
    shape: plan.shape.name,
    seed: plan.seed,
    via,
    counts,
    ids,
    worstCaseIdentityId: ids.identities[plan.worstCaseIdentity],
    worstCaseIdentityName: plan.identities[plan.worstCaseIdentity].name,
    dialPolicies: plan.servicePolicies.filter((p) => p.type === 'Dial').length,
    bindPolicies: plan.servicePolicies.filter((p) => p.type === 'Bind').length,
    elapsedMs: Math.round(performance.now() - t0),
  };
}

/**
 * The summary of the model `writeModelToStore` writes for (shape, seed), without writing it: entity
 * ids come from the seed in write order, so a kept copy of a written model needs no file beside it.
 */
export function storeModelSummary(shape: Shape, seed: number): ModelSummary {
  const plan = planModel(shape, seed);
  const nextId = idSource(seed);
  const ids = Object.fromEntries(FAMILIES.map((f) => [f.key, plan[f.key].map(() => nextId())])) as Record<FamilyKey, string[]>;
  return { ...summarize(plan, 'store', ids, performance.now()), elapsedMs: 0 };
}

const total = (plan: ModelPlan) => FAMILIES.reduce((n, f) => n + plan[f.key].length, 0);

// ---- writing into the store ------------------------------------------------------------------

export interface StoreWriteOptions extends WriteOptions {
  /**
   * MESH_* settings as the controller will get them (default: this process's environment). Pass the
   * same ones the controller will start with: MESH_ADMIN_PASSWORD above all — the default admin is
   * created here (a store that holds identities is no first start for the controller), with a random
   * password printed once on stderr when none is set — and MESH_ADDRESS / MESH_ADVERTISED_ADDRESS
   * with the port the controller will listen on, which the enrollment JWTs name as issuer.
   */
  env?: Record<string, string | undefined>;
  /** Records per store write (default 1000). */
  batch?: number;
}

/**
 * Write the model of `shape` into `dataDir` (created if absent) while no controller runs on it.
 * First-start records (default auth policy, built-in config types, the default admin) are created
 * exactly as the controller's first start creates them, since a store that already holds identities
 * is not a first start for the controller. Resolves once everything is durable and the store closed.
 */
export async function writeModelToStore(dataDir: string, shape: Shape, opts: StoreWriteOptions): Promise<ModelSummary> {
  const t0 = performance.now();
  const plan = planModel(shape, opts.seed);
  // The bulk import's writer (src/cli/import.ts): the same creates, grouped, several commits in flight.
  const open = await openOffline(dataDir, opts.env ?? process.env);
  const { app, store, reg } = open;
  const pool = new WorkerPool({ threads: 1, maxQueue: 16, signingCa: { certPem: app.pki.signingCertPem, key: app.pki.signingKey } });
  try {
    // The first-start bootstrap hashes the admin password in the pool.
    Object.assign(app, { pool });
    await bootstrap(app);
    const validator = new BodyValidator('management');
    const writer = new BulkWriter(open, { pool });
    const nextId = idSource(opts.seed);
    const ids: Ids & Record<FamilyKey, string[]> = { configs: [], services: [], edgeRouters: [], identities: [], servicePolicies: [], edgeRouterPolicies: [], serviceEdgeRouterPolicies: [] };
    const all = total(plan);
    let done = 0;
    const batch = Math.max(1, opts.batch ?? 1000);
    for (const fam of FAMILIES) {
      const def = reg.def(fam.collection);
      const items: unknown[] = plan[fam.key];
      for (let start = 0; start < items.length; start += batch) {
        const chunk = items.slice(start, start + batch);
        const bodies = chunk.map((item) => validator.validate(fam.bodyDef, body(fam.key, item, ids), false, true));
        try {
          ids[fam.key].push(...(await writer.create(def, bodies, chunk.map(() => nextId()))));
        } catch (e) {
          throw describe(e instanceof ImportError ? e.error : e, fam.key, start + (e instanceof ImportError ? e.index : 0));
        }
        done += chunk.length;
        opts.onProgress?.(done, all);
      }
      // Policies name the entities before them by id: those must be durable first.
      await writer.drain();
    }
    // As the bulk import leaves it (src/cli/import.ts).
    await store.closeCompacted();
    return summarize(plan, 'store', ids, t0);
  } finally {
    await pool.close();
    await store.close();
  }
}

function describe(e: unknown, family: string, at: number): Error {
  if (e instanceof UniqueViolation) return new Error(`${family}: ${e.collection}.${e.field} "${String(e.value)}" already exists (is a model already written in this data directory?)`);
  if (e instanceof ApiError) return new Error(`${family} #${at}…: ${e.code} ${e.message} ${JSON.stringify((e as { cause?: unknown }).cause ?? '')}`);
  return e instanceof Error ? e : new Error(String(e));
}

// ---- writing through the Management API ------------------------------------------------------

export interface ApiWriteOptions extends WriteOptions {
  /** PEM of the CA bundle that signs the controller's server certificate (`<dataDir>/pki/ca-bundle.pem`). */
  ca: string | Buffer;
  /** Concurrent requests (default 16). */
  concurrency?: number;
  /** Per-request timeout in ms (default 60 s). */
  timeoutMs?: number;
}

/**
 * Create the model of `shape` through `POST /edge/management/v1/<family>` on the controller at
 * `baseUrl` (`https://host:port`), as the admin whose `zt-session` token is given. Families go in
 * dependency order; within one family, `concurrency` requests run at once.
 */
export async function writeModelViaApi(baseUrl: string, adminToken: string, shape: Shape, opts: ApiWriteOptions): Promise<ModelSummary> {
  const t0 = performance.now();
  const plan = planModel(shape, opts.seed);
  const u = new URL(baseUrl);
  const agent = new https.Agent({ keepAlive: true, maxSockets: opts.concurrency ?? 16, ca: opts.ca });
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const post = (p: string, json: unknown) =>
    new Promise<{ status: number; body: any }>((resolve, reject) => {
      const data = Buffer.from(JSON.stringify(json));
      const req = https.request(
        {
          agent, host: u.hostname.replace(/^\[|\]$/g, ''), port: Number(u.port || 443), method: 'POST', path: `/edge/management/v1/${p}`, timeout: timeoutMs,
          headers: { 'zt-session': adminToken, 'content-type': 'application/json', accept: 'application/json', 'content-length': String(data.length) },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let parsed: any;
            try {
              parsed = JSON.parse(text);
            } catch {
              parsed = text;
            }
            resolve({ status: res.statusCode ?? 0, body: parsed });
          });
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error(`POST ${p} timed out after ${timeoutMs} ms`)));
      req.on('error', reject);
      req.end(data);
    });

  try {
    const ids: Ids & Record<FamilyKey, string[]> = { configs: [], services: [], edgeRouters: [], identities: [], servicePolicies: [], edgeRouterPolicies: [], serviceEdgeRouterPolicies: [] };
    const all = total(plan);
    let done = 0;
    let lastReport = 0;
    for (const fam of FAMILIES) {
      const items: unknown[] = plan[fam.key];
      const out: string[] = new Array(items.length);
      let next = 0;
      let failed = false;
      const worker = async () => {
        while (next < items.length && !failed) {
          const i = next++;
          const r = await post(fam.path, body(fam.key, items[i], ids)).catch((e) => {
            failed = true;
            throw e;
          });
          const id = r.body?.data?.id;
          if (r.status !== 201 || typeof id !== 'string') {
            failed = true;
            throw new Error(`POST /${fam.path} (${(items[i] as { name: string }).name}) answered ${r.status}: ${JSON.stringify(r.body).slice(0, 500)}`);
          }
          out[i] = id;
          done++;
          if (opts.onProgress && (done - lastReport >= 100 || done === all)) {
            lastReport = done;
            opts.onProgress(done, all);
          }
        }
      };
      await Promise.all(Array.from({ length: Math.max(1, opts.concurrency ?? 16) }, worker));
      ids[fam.key].push(...out);
    }
    if (lastReport !== done) opts.onProgress?.(done, all);
    return summarize(plan, 'api', ids, t0);
  } finally {
    agent.destroy();
  }
}
