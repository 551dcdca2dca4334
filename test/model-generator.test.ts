/**
 * The benchmark model generator (scripts/lib/model.ts): the `tiny` shape written straight into a
 * fresh data directory before the controller's first start, and through the Management API of
 * another controller, must give the same model — same counts, and records that read back the same
 * through the Management API (ids, timestamps and enrollment secrets aside).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { ADMIN_PASSWORD, startServer, type Client } from './helpers/server.js';
import { SHAPES, planModel, writeModelToStore, writeModelViaApi } from '../scripts/lib/model.js';
import { freePort } from './helpers/ports.js';

const SEED = 7;
const shape = SHAPES.tiny;
const env = { MESH_ADMIN_PASSWORD: ADMIN_PASSWORD, MESH_ARGON2_MEMORY_KIB: '1024', MESH_ARGON2_ITERATIONS: '1' };

const FAMILIES = [
  ['configs', 'configs'],
  ['services', 'services'],
  ['edgeRouters', 'edge-routers'],
  ['identities', 'identities'],
  ['servicePolicies', 'service-policies'],
  ['edgeRouterPolicies', 'edge-router-policies'],
  ['serviceEdgeRouterPolicies', 'service-edge-router-policies'],
] as const;

async function listAll(c: Client, p: string): Promise<any[]> {
  const out: any[] = [];
  for (let offset = 0; ; offset += 500) {
    const r = await c.get(`/${p}?limit=500&offset=${offset}`);
    if (r.status !== 200) throw new Error(`GET /${p}: ${r.status} ${r.text}`);
    out.push(...r.body.data);
    if (out.length >= r.body.meta.pagination.totalCount) return out;
  }
}

function decodeJwt(jwt: string): any {
  return JSON.parse(Buffer.from(jwt.split('.')[1], 'base64url').toString());
}

/**
 * A record with everything that legitimately differs between two controllers replaced: ids by the
 * names of the entities they denote, timestamps and enrollment secrets by their kind.
 */
function normalize(rec: any, names: Map<string, string>): any {
  const walk = (v: any, key?: string): any => {
    if (typeof v === 'string') {
      if (key === 'createdAt' || key === 'updatedAt' || key === 'expiresAt' || key === 'enrollmentCreatedAt' || key === 'enrollmentExpiresAt') return 'date';
      if (key === 'jwt' || key === 'token' || key === 'enrollmentJwt' || key === 'enrollmentToken') return 'secret';
      if (names.has(v)) return `<${names.get(v)}>`;
      if (v.startsWith('@') && names.has(v.slice(1))) return `@<${names.get(v.slice(1))}>`;
      return v.replace(/\.\/([a-z-]+)\/([^/]+)/, (m, fam, id) => (names.has(id) ? `./${fam}/<${names.get(id)}>` : m));
    }
    // Role lists are stored sorted by id, and the ids differ: compare them as sets.
    if (Array.isArray(v)) {
      const out = v.map((x) => walk(x));
      return key && /Roles(Display)?$/.test(key) ? out.sort((x, y) => (JSON.stringify(x) < JSON.stringify(y) ? -1 : 1)) : out;
    }
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x, k)]));
    return v;
  };
  return walk(rec);
}

t.test('tiny model: written to the store and through the API, the same model reads back', async (t) => {
  // The store writer signs enrollment JWTs for the address the controller will listen on.
  const port = await freePort();
  const certPort = await freePort();
  const addrs = { MESH_ADDRESS: `127.0.0.1:${port}`, MESH_CERT_ADDRESS: `127.0.0.1:${certPort}` };
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-model-test-'));
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const progress: [number, number][] = [];
  const viaStore = await writeModelToStore(dataDir, shape, {
    seed: SEED,
    env: { ...env, ...addrs },
    batch: 5,
    onProgress: (d, n) => progress.push([d, n]),
  });
  const planned = 2 * shape.services + shape.services + shape.edgeRouters + shape.identities + shape.servicePolicies + shape.edgeRouterPolicies + shape.serviceEdgeRouterPolicies;
  t.ok(progress.length > 1, 'progress reported per batch');
  t.same(progress[progress.length - 1], [planned, planned], 'progress ends at the total');
  t.ok(progress.every(([d], i) => i === 0 || d > progress[i - 1][0]), 'progress increases');

  const a = await startServer(t, { dataDir, env: addrs, keepData: true });
  const adminA = await a.login(); // the default admin was created by the generator's first-start bootstrap
  const b = await startServer(t);
  const adminB = await b.login();
  const viaApi = await writeModelViaApi(b.origin, adminB.token!, shape, { seed: SEED, ca: b.ca, concurrency: 4 });

  for (const s of [viaStore, viaApi]) {
    t.same(s.counts, {
      configs: 2 * shape.services, services: shape.services, edgeRouters: shape.edgeRouters, identities: shape.identities,
      servicePolicies: shape.servicePolicies, edgeRouterPolicies: shape.edgeRouterPolicies, serviceEdgeRouterPolicies: shape.serviceEdgeRouterPolicies,
    }, `${s.via}: summary counts`);
    t.equal(s.dialPolicies + s.bindPolicies, shape.servicePolicies);
    t.ok(s.dialPolicies > 0 && s.bindPolicies > 0, 'both Dial and Bind policies');
  }

  const byFamily: Record<string, [any[], any[]]> = {};
  for (const [key, p] of FAMILIES) {
    const [la, lb] = await Promise.all([listAll(adminA, p), listAll(adminB, p)]);
    byFamily[key] = [la, lb];
    // Identities: the model plus the default admin; everything else: the model only.
    const extra = key === 'identities' ? 1 : 0;
    t.equal(la.length, viaStore.counts[key] + extra, `store-written ${p}: count through the API`);
    t.equal(lb.length, viaApi.counts[key] + extra, `API-written ${p}: count`);
    const idsA = new Set(la.map((r) => r.id));
    t.ok(viaStore.ids[key].every((id) => idsA.has(id)), `store-written ${p}: every summary id is listed`);
    const idsB = new Set(lb.map((r) => r.id));
    t.ok(viaApi.ids[key].every((id) => idsB.has(id)), `API-written ${p}: every summary id is listed`);
  }

  // Records: identical modulo ids, timestamps and secrets.
  const namesOf = (i: 0 | 1) => {
    const m = new Map<string, string>();
    for (const [key] of FAMILIES) for (const r of byFamily[key][i]) m.set(r.id, r.name);
    for (const r of byFamily.identities[i]) if (r.authPolicy) m.set(r.authPolicyId, r.authPolicy.name);
    return m;
  };
  const [namesA, namesB] = [namesOf(0), namesOf(1)];
  for (const [key, p] of FAMILIES) {
    const [la, lb] = byFamily[key];
    const mapB = new Map(lb.map((r) => [r.name, r]));
    let same = 0;
    for (const ra of la) {
      if (ra.isDefaultAdmin) continue;
      const rb = mapB.get(ra.name);
      if (!rb) {
        t.fail(`${p} ${ra.name}: missing in the API-written model`);
        continue;
      }
      // The authenticator/enrollment ids inside identities are different entities on each side.
      const na = normalize(ra, namesA);
      const nb = normalize(rb, namesB);
      if (key === 'identities') {
        for (const n of [na, nb]) n.enrollment.ott.id = 'enrollment-id';
      }
      if (JSON.stringify(na) === JSON.stringify(nb)) same++;
      else t.same(na, nb, `${p} ${ra.name}: same record both ways`);
    }
    t.equal(same, viaStore.counts[key], `${p}: every record identical both ways`);
  }

  // Identity records as the API creates them: an outstanding ott enrollment with a JWT for this controller.
  // The JWT names the mutual-TLS listener: where an SDK enrolls and logs in with its certificate.
  for (const [list, srvOrigin] of [[byFamily.identities[0], a.certOrigin], [byFamily.identities[1], b.certOrigin]] as const) {
    const model = list.filter((r) => !r.isDefaultAdmin);
    t.ok(model.every((r) => r.typeId === 'Default' && r.isAdmin === false && r.authPolicyId === 'default'), 'identities: Default type, not admin, default auth policy');
    t.ok(model.every((r) => typeof r.enrollment?.ott?.token === 'string' && typeof r.enrollment.ott.jwt === 'string'), 'identities: ott enrollment present');
    const claims = decodeJwt(model[0].enrollment.ott.jwt);
    t.equal(claims.em, 'ott');
    t.equal(claims.sub, model[0].id, 'jwt subject is the identity');
    t.equal(claims.iss, srvOrigin, 'jwt issuer is the controller the identity lives on');
    t.equal(claims.jti, model[0].enrollment.ott.token);
  }
  const enrollments = await listAll(adminA, 'enrollments');
  t.equal(enrollments.filter((e) => e.method === 'ott').length, shape.identities, 'one ott enrollment per identity (indexed and listed)');
  t.equal(enrollments.filter((e) => e.method === 'erott').length, shape.edgeRouters, 'one erott enrollment per edge router');
  const routersA = byFamily.edgeRouters[0];
  t.ok(routersA.every((r) => typeof r.enrollmentJwt === 'string' && r.isVerified === false), 'edge routers: outstanding enrollment, not verified');

  // Services carry their two configs.
  const configsA = new Map(byFamily.configs[0].map((c) => [c.id, c]));
  t.ok(byFamily.services[0].every((s) => s.configs.length === 2 && new Set(s.configs.map((id: string) => configsA.get(id)?.configTypeId)).size === 2), 'services: an intercept.v1 and a host.v1 config each');

  // Indexes are in place: role attribute and name filters answer from the store.
  const worst = byFamily.identities[0].find((r) => r.id === viaStore.worstCaseIdentityId);
  t.ok(worst, 'worst-case identity exists');
  const names = byFamily.identities[0].filter((r) => !r.isDefaultAdmin).map((r) => r.name as string).sort();
  t.equal(worst.name, names[names.length - 1], 'worst-case identity name sorts last');
  t.equal(viaStore.worstCaseIdentityName, worst.name);
  const attr = worst.roleAttributes[0];
  const byAttr = await adminA.get(`/identities?filter=${encodeURIComponent(`anyOf(roleAttributes) = "${attr}"`)}&limit=500`);
  t.equal(byAttr.status, 200);
  t.equal(byAttr.body.data.length, byFamily.identities[0].filter((r) => r.roleAttributes.includes(attr)).length, 'role attribute index answers');
  const byName = await adminA.get(`/identities?filter=${encodeURIComponent(`name = "${worst.name}"`)}`);
  t.same(byName.body.data.map((r: any) => r.id), [worst.id], 'name index answers');

  // The worst case is selected by every service policy and every edge router policy (semantics: @id
  // entries always select; otherwise AllOf needs every #attribute, AnyOf one; #all selects all).
  const selects = (pol: any) => {
    const roles: string[] = pol.identityRoles;
    if (roles.includes('#all') || roles.includes('@' + worst.id)) return true;
    const attrs = roles.filter((r) => r.startsWith('#')).map((r) => r.slice(1));
    if (attrs.length === 0) return false;
    return pol.semantic === 'AllOf' ? attrs.every((x) => worst.roleAttributes.includes(x)) : attrs.some((x) => worst.roleAttributes.includes(x));
  };
  t.ok(byFamily.servicePolicies[0].every(selects), 'every service policy selects the worst-case identity');
  t.ok(byFamily.edgeRouterPolicies[0].every(selects), 'every edge router policy selects the worst-case identity');
  // ... and policies are selective: the others are not in all of them.
  const other = byFamily.identities[0].find((r) => !r.isDefaultAdmin && r.id !== worst.id);
  const othersIn = byFamily.servicePolicies[0].filter((p) => {
    const roles: string[] = p.identityRoles;
    if (roles.includes('#all') || roles.includes('@' + other.id)) return true;
    const attrs = roles.filter((r) => r.startsWith('#')).map((r) => r.slice(1));
    return attrs.length > 0 && (p.semantic === 'AllOf' ? attrs.every((x) => other.roleAttributes.includes(x)) : attrs.some((x) => other.roleAttributes.includes(x)));
  }).length;
  t.ok(othersIn < shape.servicePolicies, `an ordinary identity is in some service policies only (${othersIn}/${shape.servicePolicies})`);
  const kinds = byFamily.servicePolicies[0].map((p) => p.identityRoles.join(' '));
  t.ok(kinds.some((k) => k === '#all'), 'some policy selects #all');
  t.ok(kinds.some((k) => k.includes('@')), 'some policy selects by @id');
  t.ok(kinds.some((k) => /^#group-/.test(k)), 'some policy selects by #attribute');
});

t.test('same seed, same model; another seed, another model', async (t) => {
  t.same(planModel(shape, 3), planModel(shape, 3), 'plan is a function of shape and seed');
  t.notSame(planModel(shape, 3).identities, planModel(shape, 4).identities, 'a different seed gives different attributes');
  const dirs = [0, 1].map(() => fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-model-test-')));
  t.teardown(() => dirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));
  const r1 = await writeModelToStore(dirs[0], shape, { seed: 3, env });
  const r2 = await writeModelToStore(dirs[1], shape, { seed: 3, env });
  t.same(r1.ids, r2.ids, 'direct writes draw the same ids from the same seed');
  t.equal(r1.worstCaseIdentityId, r2.worstCaseIdentityId);
  await t.rejects(writeModelToStore(dirs[0], shape, { seed: 3, env }), /already exists/, 'writing a model twice into one store is refused, not half-applied');
});

t.test('bad shapes are refused before anything is written', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-model-test-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  await t.rejects(writeModelToStore(dir, { ...shape, identities: 0 }, { seed: 1, env }), /identities must be a positive integer/);
  t.notOk(fs.existsSync(path.join(dir, 'db')), 'no store created');
});

t.test('every shape plans as promised: sizes, unique names, the worst case in every policy', async (t) => {
  t.same(Object.keys(SHAPES).sort(), ['huge', 'large', 'many-services', 'medium', 'small', 'tiny']);
  t.match(SHAPES.medium, { identities: 5000, services: 100, edgeRouters: 100, servicePolicies: 50, edgeRouterPolicies: 50, serviceEdgeRouterPolicies: 25 });
  t.match(SHAPES.large, { identities: 100_000, services: 2000, edgeRouters: 500, servicePolicies: 250, edgeRouterPolicies: 250, serviceEdgeRouterPolicies: 100 });
  t.match(SHAPES.huge, { ...SHAPES.large, name: 'huge', identities: 1_000_000 });
  t.match(SHAPES['many-services'], { identities: 16_000, services: 10_000, edgeRouters: 100, servicePolicies: 100, edgeRouterPolicies: 100, serviceEdgeRouterPolicies: 100 });
  for (const s of Object.values(SHAPES)) {
    const p = planModel(s, 1);
    t.equal(p.identities.length, s.identities, `${s.name}: identities`);
    t.equal(p.services.length, s.services, `${s.name}: services`);
    t.equal(p.configs.length, 2 * s.services, `${s.name}: configs`);
    t.equal(p.edgeRouters.length, s.edgeRouters, `${s.name}: edge routers`);
    t.equal(p.servicePolicies.length, s.servicePolicies, `${s.name}: service policies`);
    t.equal(p.edgeRouterPolicies.length, s.edgeRouterPolicies, `${s.name}: edge router policies`);
    t.equal(p.serviceEdgeRouterPolicies.length, s.serviceEdgeRouterPolicies, `${s.name}: service edge router policies`);
    for (const fam of ['identities', 'services', 'configs', 'edgeRouters', 'servicePolicies', 'edgeRouterPolicies', 'serviceEdgeRouterPolicies'] as const) {
      const names = (p[fam] as { name: string }[]).map((x) => x.name);
      if (new Set(names).size !== names.length) t.fail(`${s.name}: ${fam} names repeat`);
    }
    const w = p.worstCaseIdentity;
    const names = p.identities.map((x) => x.name);
    t.equal(names[w], [...names].sort()[names.length - 1], `${s.name}: the worst case sorts last`);
    const selects = (pol: { semantic: string; identityRoles?: unknown[] }, i: number) => {
      const roles = pol.identityRoles ?? [];
      if (roles.includes('#all') || roles.some((r) => typeof r === 'object' && (r as { index: number }).index === i)) return true;
      const attrs = roles.filter((r): r is string => typeof r === 'string').map((r) => r.slice(1));
      const have = p.identities[i].roleAttributes;
      return attrs.length > 0 && (pol.semantic === 'AllOf' ? attrs.every((a) => have.includes(a)) : attrs.some((a) => have.includes(a)));
    };
    t.ok(p.servicePolicies.every((pol) => selects(pol, w)), `${s.name}: every service policy selects the worst case`);
    t.ok(p.edgeRouterPolicies.every((pol) => selects(pol, w)), `${s.name}: every edge router policy selects the worst case`);
    // Selective: a sample of ordinary identities is in a few service policies each, not all.
    const sample = Array.from({ length: Math.min(200, s.identities - 1) }, (_, k) => Math.floor((k * (s.identities - 1)) / Math.min(200, s.identities - 1)));
    const inPolicies = sample.map((i) => p.servicePolicies.filter((pol) => selects(pol, i)).length);
    const mean = inPolicies.reduce((a, b) => a + b, 0) / inPolicies.length;
    t.ok(inPolicies.every((n) => n >= 1), `${s.name}: every sampled identity is in some service policy (#all)`);
    if (s.servicePolicies >= 20) t.ok(mean < s.servicePolicies / 4, `${s.name}: an identity is in ${mean.toFixed(1)} of ${s.servicePolicies} service policies on average`);
  }
});
