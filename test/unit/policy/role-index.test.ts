/**
 * Property tests of the role index: after random sequences of entity and policy creates, updates
 * and deletes, the incrementally maintained memberships and the engine's derived access (Dial/Bind
 * services, identity and service edge routers) equal a from-scratch evaluation of the rules
 *. The second test drives a real store, so the change-event path is covered.
 */
import t from 'tap';
import type { Test } from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { RoleIndex, POLICY_SIDES, KINDS, type Kind, type PolicyColl } from '../../../src/policy/role-index.js';
import { PolicyEngine } from '../../../src/policy/engine.js';
import { Store, type CollectionName, type Rec } from '../../../src/store/store.js';
import { createRegistry } from '../../../src/resources/index.js';

/** A small deterministic PRNG (mulberry32), so failures reproduce from the seed. */
function rng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = a;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    int: (n: number) => Math.floor(next() * n),
    pick<T>(xs: T[]): T {
      return xs[Math.floor(next() * xs.length)];
    },
  };
}
type R = ReturnType<typeof rng>;

const ATTRS = ['a', 'b', 'c', 'd'];
const POLICY_KINDS: PolicyColl[] = ['servicePolicies', 'edgeRouterPolicies', 'serviceEdgeRouterPolicies'];

/** The reference rule, evaluated from scratch. */
function selects(roles: string[], anyOf: boolean, id: string, attrs: string[]): boolean {
  if (roles.includes('@' + id) || roles.includes('#all')) return true;
  const want = roles.filter((r) => r.startsWith('#')).map((r) => r.slice(1));
  if (want.length === 0) return false;
  return anyOf ? want.some((w) => attrs.includes(w)) : want.every((w) => attrs.includes(w));
}

function randomAttrs(r: R): string[] {
  return ATTRS.filter(() => r.next() < 0.4);
}

function randomRoles(r: R, existing: string[]): string[] {
  const x = r.next();
  if (x < 0.1) return ['#all'];
  if (x < 0.15) return [];
  const out = new Set<string>();
  const n = 1 + r.int(3);
  for (let i = 0; i < n; i++) {
    if (r.next() < 0.3 && existing.length) out.add('@' + r.pick(existing));
    else out.add('#' + r.pick(ATTRS));
  }
  return [...out].sort();
}

interface Model {
  entities: Record<Kind, Map<string, string[]>>;
  policies: Map<string, { coll: PolicyColl; rec: Record<string, any> }>;
}

function newModel(): Model {
  return { entities: Object.fromEntries(KINDS.map((k) => [k, new Map()])) as Model['entities'], policies: new Map() };
}

/** One random operation, applied to the model; returns what to apply to the system under test. */
type Op =
  | { t: 'entity'; kind: Kind; id: string; attrs: string[] }
  | { t: 'delEntity'; kind: Kind; id: string; pulled: { id: string; coll: PolicyColl; rec: Record<string, any> }[] }
  | { t: 'policy'; coll: PolicyColl; rec: Record<string, any> }
  | { t: 'delPolicy'; id: string };

function randomOp(r: R, m: Model, n: number): Op {
  const x = r.next();
  if (x < 0.45) {
    const kind = r.pick(KINDS);
    const ids = [...m.entities[kind].keys()];
    const id = ids.length && r.next() < 0.5 ? r.pick(ids) : `${kind[0]}${n}`;
    const attrs = randomAttrs(r);
    m.entities[kind].set(id, attrs);
    return { t: 'entity', kind, id, attrs };
  }
  if (x < 0.55) {
    const kind = r.pick(KINDS);
    const ids = [...m.entities[kind].keys()];
    if (ids.length === 0) return randomOp(r, m, n);
    const id = r.pick(ids);
    m.entities[kind].delete(id);
    // Deleting an entity pulls its @id from every policy (the store does it in the same write).
    const pulled: { id: string; coll: PolicyColl; rec: Record<string, any> }[] = [];
    for (const [pid, p] of m.policies) {
      let changed = false;
      const rec = { ...p.rec };
      for (const [field, k] of POLICY_SIDES[p.coll]) {
        if (k !== kind || !(rec[field] as string[]).includes('@' + id)) continue;
        rec[field] = (rec[field] as string[]).filter((x) => x !== '@' + id);
        changed = true;
      }
      if (changed) {
        p.rec = rec;
        pulled.push({ id: pid, coll: p.coll, rec });
      }
    }
    return { t: 'delEntity', kind, id, pulled };
  }
  if (x < 0.9 || m.policies.size === 0) {
    const pids = [...m.policies.keys()];
    const existing = pids.length && r.next() < 0.5 ? r.pick(pids) : undefined;
    const coll = existing ? m.policies.get(existing)!.coll : r.pick(POLICY_KINDS);
    const rec: Record<string, any> = { id: existing ?? `p${n}`, semantic: r.next() < 0.5 ? 'AllOf' : 'AnyOf', type: r.next() < 0.5 ? 'Dial' : 'Bind' };
    for (const [field, kind] of POLICY_SIDES[coll]) rec[field] = randomRoles(r, [...m.entities[kind].keys()]);
    m.policies.set(rec.id, { coll, rec });
    return { t: 'policy', coll, rec };
  }
  const id = r.pick([...m.policies.keys()]);
  m.policies.delete(id);
  return { t: 'delPolicy', id };
}

/** Expected members of one policy side, from scratch. */
function expectedMembers(m: Model, coll: PolicyColl, rec: Record<string, any>, field: string, kind: Kind): string[] {
  const anyOf = rec.semantic === 'AnyOf';
  return [...m.entities[kind]].filter(([id, attrs]) => selects(rec[field], anyOf, id, attrs)).map(([id]) => id).sort();
}

/** Expected derived access, from scratch. */
function expectedAccess(m: Model) {
  const members = (coll: PolicyColl, rec: Record<string, any>, kind: Kind) => {
    const field = POLICY_SIDES[coll].find(([, k]) => k === kind)![0];
    return new Set(expectedMembers(m, coll, rec, field, kind));
  };
  const dial = new Map<string, Set<string>>();
  const bind = new Map<string, Set<string>>();
  const idRouters = new Map<string, Set<string>>();
  const svcRouters = new Map<string, Set<string>>();
  const add = (map: Map<string, Set<string>>, k: string, v: string) => (map.get(k) ?? map.set(k, new Set()).get(k)!).add(v);
  for (const { coll, rec } of m.policies.values()) {
    if (coll === 'servicePolicies') {
      const svcs = members(coll, rec, 'services');
      for (const i of members(coll, rec, 'identities')) for (const s of svcs) add(rec.type === 'Bind' ? bind : dial, i, s);
    } else if (coll === 'edgeRouterPolicies') {
      const rs = members(coll, rec, 'edgeRouters');
      for (const i of members(coll, rec, 'identities')) for (const x of rs) add(idRouters, i, x);
    } else {
      const rs = members(coll, rec, 'edgeRouters');
      for (const s of members(coll, rec, 'services')) for (const x of rs) add(svcRouters, s, x);
    }
  }
  return { dial, bind, idRouters, svcRouters };
}

const sorted = (s: Iterable<string> | undefined) => [...(s ?? [])].sort();

t.test('role index memberships equal a from-scratch evaluation', async (t) => {
  let checks = 0;
  for (let seed = 1; seed <= 40; seed++) {
    const r = rng(seed);
    const m = newModel();
    // Odd seeds hold every set as a bitset from its first member, even seeds as the defaults do.
    const idx = new RoleIndex({ minDense: seed % 2 ? 1 : undefined });
    for (let n = 0; n < 120; n++) {
      const op = randomOp(r, m, n);
      if (op.t === 'entity') idx.upsertEntity(op.kind, op.id, op.attrs);
      else if (op.t === 'delEntity') {
        for (const p of op.pulled) idx.upsertPolicy(p.coll, p.rec as { id: string });
        idx.deleteEntity(op.kind, op.id);
      } else if (op.t === 'policy') idx.upsertPolicy(op.coll, op.rec as { id: string });
      else idx.deletePolicy(op.id);
      // Every side of every policy.
      for (const [pid, { coll, rec }] of m.policies) {
        const p = idx.policy(pid);
        if (!p) {
          t.fail(`seed ${seed} step ${n}: policy ${pid} missing`);
          return;
        }
        for (const [field, kind] of POLICY_SIDES[coll]) {
          const got = sorted(idx.members(p.sides.get(kind)!));
          const want = expectedMembers(m, coll, rec, field, kind);
          checks++;
          if (JSON.stringify(got) !== JSON.stringify(want)) {
            t.same(got, want, `seed ${seed} step ${n} (${op.t}): ${pid}.${field}`);
            return;
          }
        }
      }
      // And the reverse direction: which policies select each entity.
      for (const kind of KINDS) {
        for (const [id] of m.entities[kind]) {
          const got = sorted([...idx.sidesOf(kind, id)].map((s) => s.policy.id));
          const want = sorted(
            [...m.policies].filter(([, { coll, rec }]) => POLICY_SIDES[coll].some(([f, k]) => k === kind && expectedMembers(m, coll, rec, f, kind).includes(id))).map(([pid]) => pid),
          );
          checks++;
          if (JSON.stringify(got) !== JSON.stringify(want)) {
            t.same(got, want, `seed ${seed} step ${n}: policies of ${kind}/${id}`);
            return;
          }
        }
      }
      t.equal(idx.policyCount(), m.policies.size);
    }
  }
  t.ok(checks > 10_000, `${checks} comparisons`);
});

/** A policy engine on a real store in a temporary directory, closed and removed after the test. */
function engineOnTempStore(t: Test) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-index-'));
  const store = new Store(dir, createRegistry().collectionSpecs());
  const engine = new PolicyEngine(store, { sweepMs: 3_600_000 });
  t.teardown(async () => {
    engine.close();
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return { store, engine };
}

t.test('engine access through a real store equals a from-scratch evaluation', async (t) => {
  const { store, engine } = engineOnTempStore(t);
  const COLL: Record<Kind, CollectionName> = { identities: 'identities', services: 'services', edgeRouters: 'edgeRouters', postureChecks: 'postureChecks' };
  const r = rng(7);
  const m = newModel();
  let compared = 0;
  for (let n = 0; n < 400; n++) {
    const op = randomOp(r, m, n);
    const now = Date.now();
    await store.write((tx) => {
      if (op.t === 'entity') {
        const prev = tx.get(COLL[op.kind], op.id);
        tx.put(COLL[op.kind], { ...(prev ?? { createdAt: now, name: `${op.kind}-${op.id}`, tags: {} }), id: op.id, updatedAt: now, roleAttributes: op.attrs } as Rec);
      } else if (op.t === 'delEntity') {
        for (const p of op.pulled) tx.put<CollectionName>(p.coll, { ...(tx.get(p.coll, p.id) as Rec), ...p.rec, updatedAt: now });
        tx.delete(COLL[op.kind], op.id);
      } else if (op.t === 'policy') {
        const prev = tx.get(op.coll, op.rec.id);
        tx.put<CollectionName>(op.coll, { ...(prev ?? { createdAt: now, name: `policy-${op.rec.id}`, tags: {} }), ...op.rec, updatedAt: now } as Rec);
      } else tx.delete(findColl(store, op.id), op.id);
    });
    if (n % 20 !== 19) continue;
    const want = expectedAccess(m);
    for (const [iid] of m.entities.identities) {
      // Per service (the service's policies) and per identity (its sorted list) must both agree.
      const services = [...m.entities.services.keys()];
      const dial = services.filter((s) => engine.hasAccess(iid, s, 'Dial'));
      const bind = services.filter((s) => engine.hasAccess(iid, s, 'Bind'));
      t.same(sorted(dial), sorted(want.dial.get(iid)), `step ${n}: dial of ${iid}`);
      t.same(sorted(bind), sorted(want.bind.get(iid)), `step ${n}: bind of ${iid}`);
      t.same(engine.accessibleServices(iid), sorted(new Set([...dial, ...bind])), `step ${n}: services of ${iid}`);
      t.same(sorted(engine.identityRouters(iid)), sorted(want.idRouters.get(iid)), `step ${n}: routers of ${iid}`);
      compared++;
    }
    for (const [sid] of m.entities.services) t.same(sorted(engine.serviceRoutersOf(sid)), sorted(want.svcRouters.get(sid)), `step ${n}: routers of service ${sid}`);
  }
  t.ok(compared > 50, `${compared} identity comparisons`);
  // A fresh engine built from the same store agrees with the incrementally maintained one.
  const rebuilt = new PolicyEngine(store, { sweepMs: 3_600_000 });
  for (const [iid] of m.entities.identities) t.same(sorted(rebuilt.accessibleServices(iid)), sorted(engine.accessibleServices(iid)), `rebuild agrees for ${iid}`);
  rebuilt.close();
});

function findColl(store: Store, id: string): CollectionName {
  for (const c of POLICY_KINDS) if (store.get(c, id)) return c;
  throw new Error(`policy ${id} not found`);
}

t.test('engine tracks sessions and follows their deletion', async (t) => {
  const { store, engine } = engineOnTempStore(t);
  const now = Date.now();
  // Fixture records: only the fields the engine reads.
  const base = (id: string, name: string): Rec => ({ id, name, createdAt: now, updatedAt: now, tags: {} });
  await store.write((tx) => {
    tx.put<CollectionName>('identities', { ...base('I', 'i'), roleAttributes: ['x'] });
    tx.put<CollectionName>('services', { ...base('S', 's'), roleAttributes: ['y'], configs: [] });
    tx.put<CollectionName>('servicePolicies', { ...base('P', 'p'), type: 'Dial', semantic: 'AllOf', identityRoles: ['#x'], serviceRoles: ['#y'], postureCheckRoles: [] });
    tx.put<CollectionName>('apiSessions', { ...base('A', 'a'), identityId: 'I', token: 'tok-a' });
    tx.put<CollectionName>('sessions', { ...base('X', 'x'), identityId: 'I', apiSessionId: 'A', serviceId: 'S', type: 'Dial', token: 'tok-x' });
  });
  t.ok(engine.updateTimes.isLive('I'), 'identity with an API session is live');
  t.equal(engine.sessions.find('A', 'S', 'Dial'), 'X', 'session found by (API session, service, type)');
  t.equal(engine.sessions.find('A', 'S', 'Bind'), undefined, 'not for another type');
  t.same(engine.permissions('I', 'S'), ['Dial']);
  // What identity disable does (ApiSessions.endForIdentityInTx), minus the API sessions.
  const removed = await store.write((tx) => {
    const ids = tx.idsByIndex('sessions', 'identityId', 'I');
    for (const id of ids) tx.delete('sessions', id);
    return ids.length;
  });
  t.equal(removed, 1, 'one session removed');
  t.equal(store.get('sessions', 'X'), undefined, 'gone from the store');
  t.equal(engine.sessions.find('A', 'S', 'Dial'), undefined, 'and from the engine');
  // Losing access removes sessions (revalidation after the bump).
  await store.write((tx) => tx.put<CollectionName>('sessions', { ...base('X2', 'x2'), identityId: 'I', apiSessionId: 'A', serviceId: 'S', type: 'Dial', token: 'tok-x2' }));
  await store.write((tx) => tx.put<CollectionName>('identities', { ...base('I', 'i'), roleAttributes: [] }));
  t.ok(engine.sessions.doomed.has('X2'), 'hidden at once');
  for (let i = 0; i < 100 && store.get('sessions', 'X2'); i++) await new Promise((r) => setTimeout(r, 10));
  t.equal(store.get('sessions', 'X2'), undefined, 'deleted when the access went');
  t.same(engine.permissions('I', 'S'), ['Invalid']);
});
