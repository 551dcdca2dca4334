/**
 * The structural alert checks, read from the policy engine's role index (src/policy/role-index.ts:
 * per policy the entities each role list selects, kept current from change events) instead of the
 * store. Records are read only to name what is alerted on (and the few empty edge router policies,
 * to skip system ones).
 *
 * - `edge-router-policy.selects-nothing`: a policy side with no members.
 * - `service.no-terminators`: services absent from the terminators' `serviceId` index keys.
 * - `service.no-shared-edge-router`, one per service, complete at any size. An identity i may use the edge routers
 *   of the edge router policies (ERPs) selecting it; a service s those of the service edge router
 *   policies selecting it, R(s). Identity i shares a router with s iff some ERP that selects i has
 *   a router in R(s). So each service's "cover" is the list of ERPs whose routers meet R(s)
 *   (services with the same R(s) share one cover, computed once with router bitsets). A cover
 *   holding an ERP that selects every identity (`#all`) covers everybody: nothing more to examine,
 *   which is the case for every service of the "large" model. Otherwise each (Dial policy, cover)
 *   is decided once over the policy's identities — each checked against the cover's ERPs, largest
 *   first — and the identities left uncovered are counted per service (a few named). Identities
 *   selected by the same ERPs and Dial policies (the same signature) are decided alike; grouping by
 *   policy rather than by signature saves computing 100,000 signatures (measured: ~0.3–0.8 s of
 *   Map work at "large", far more than this whole check).
 *
 * Measured at "large" (100k identities, 2k services, 500 routers, 250/250/100 policies):
 * docs/events.md, Alerts.
 */
import type { Rec, Store, CollectionName } from '../store/store.js';
import type { PolicyState, RoleIndex, Side } from '../policy/role-index.js';
import { listed, type Condition, type Findings, type Pacer } from './alert-scan.js';

export const ERP_EMPTY = 'erp-empty:';
export const NO_TERMINATORS = 'no-terminators:';
export const NO_SHARED_ROUTER = 'no-shared-router:';

export const nameOf = (r: Rec | undefined) => (typeof r?.name === 'string' ? r.name : r?.id ?? '?');

/** An edge router policy that grants something: its identities and its routers as a bitset. */
interface Reach {
  policy: PolicyState;
  ids: Side;
  routers: Uint32Array;
  idCount: number;
}

/** The ERPs whose routers meet a service's routers (`all`: one of them selects every identity). */
interface Cover {
  key: string;
  all: boolean;
  reach: Reach[];
  /** `reach` as a bitset over the ERPs' ordinals (for identities checked against many ERPs). */
  reachBits: Uint32Array;
  /** How many routers the service may use. */
  routers: number;
}

/** Bitsets over the edge routers that existed when the scan started (ordinal = position). */
class RouterBits {
  private readonly ordinal = new Map<string, number>();
  readonly words: number;

  constructor(private readonly index: RoleIndex) {
    for (const id of index.entityIds('edgeRouters')) this.ordinal.set(id, this.ordinal.size);
    this.words = words(this.ordinal.size);
  }

  of(side: Side): Uint32Array {
    const b = new Uint32Array(this.words);
    for (const r of this.index.members(side)) {
      const o = this.ordinal.get(r);
      if (o !== undefined) b[o >>> 5] |= 1 << (o & 31);
    }
    return b;
  }
}

const words = (n: number) => Math.max(1, Math.ceil(n / 32));

function meets(a: Uint32Array, b: Uint32Array): boolean {
  for (let i = 0; i < a.length; i++) if (a[i] & b[i]) return true;
  return false;
}

function popcount(b: Uint32Array): number {
  let n = 0;
  for (let v of b) {
    v = v - ((v >>> 1) & 0x55555555);
    v = (v & 0x33333333) + ((v >>> 2) & 0x33333333);
    n += (((v + (v >>> 4)) & 0x0f0f0f0f) * 0x01010101) >>> 24;
  }
  return n;
}

/** What one service's alert reports: the identities left out (counted, a few named) and why. */
interface Stranded {
  count: number;
  sample: string[];
  policies: string[];
  routers: number;
}

/** How many identities and policies an alert names (the rest are counted). */
const SAMPLE = 10;

const byId = (a: { id: string }, b: { id: string }) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

export async function structuralFindings(index: RoleIndex, store: Store, pace: Pacer): Promise<Findings[]> {
  const bits = new RouterBits(index);

  // Edge router policies: the empty ones are alerted; the others are what identities reach.
  const empty: Condition[] = [];
  const reach: Reach[] = [];
  for (const p of index.policiesIn('edgeRouterPolicies')) {
    const ids = p.sides.get('identities')!;
    const routers = p.sides.get('edgeRouters')!;
    const idCount = index.memberCount(ids);
    const routerCount = index.memberCount(routers);
    if (pace.due(1 + routerCount / 8)) await pace.yield();
    if (idCount > 0 && routerCount > 0) reach.push({ policy: p, ids, routers: bits.of(routers), idCount });
    else {
      const c = emptyPolicy(store, p.id, idCount, routerCount);
      if (c) empty.push(c);
    }
  }
  // Policies selecting every identity first, then the largest: the likeliest to cover an identity.
  reach.sort((a, b) => Number(b.ids.all) - Number(a.ids.all) || b.idCount - a.idCount);
  const reachOrdinal = new Map(reach.map((r, i) => [r.policy, i]));
  const reachWords = words(reach.length);

  // Service edge router policies: the routers each service may use. Those selecting every
  // service (`#all`) are merged once, not once per service (at "large": 17 of them × 2,000).
  const serviceRouters = new Map<string, Uint32Array>();
  const everyService = new Uint32Array(bits.words);
  for (const q of index.policiesIn('serviceEdgeRouterPolicies')) {
    const routers = q.sides.get('edgeRouters')!;
    if (index.memberCount(routers) === 0) continue;
    const b = bits.of(routers);
    const services = q.sides.get('services')!;
    if (services.all) {
      for (let i = 0; i < b.length; i++) everyService[i] |= b[i];
      continue;
    }
    for (const sid of services.members) {
      if (pace.due()) await pace.yield();
      const cur = serviceRouters.get(sid);
      if (!cur) serviceRouters.set(sid, b.slice());
      else for (let i = 0; i < cur.length; i++) cur[i] |= b[i];
    }
  }

  const covers = new Map<string, Cover>();
  const coverOfService = new Map<string, Cover>();
  const coverOf = (sid: string): Cover => {
    let c = coverOfService.get(sid);
    if (c) return c;
    const own = serviceRouters.get(sid);
    const sr = own ? own.map((w, i) => w | everyService[i]) : everyService;
    const key = sr.join(',');
    c = covers.get(key);
    if (!c) {
      c = { key, all: false, reach: [], reachBits: new Uint32Array(reachWords), routers: popcount(sr) };
      for (let i = 0; i < reach.length; i++) {
        const r = reach[i];
        if (!meets(r.routers, sr)) continue;
        if (r.ids.all) {
          c.all = true;
          c.reach = [];
          break;
        }
        c.reach.push(r);
        c.reachBits[i >>> 5] |= 1 << (i & 31);
      }
      covers.set(key, c);
    }
    coverOfService.set(sid, c);
    return c;
  };
  // An identity against a cover of a few ERPs: a membership test each. Against more: a bitset of
  // the ERPs selecting each identity, filled once per scan from the ERPs' members (hundreds of
  // thousands at shape "large", cheaper than asking the index per identity), then one AND per check.
  let erpsOf: Map<string, Uint32Array> | undefined;
  const fillErpsOf = async () => {
    erpsOf = new Map();
    for (let i = 0; i < reach.length; i++) {
      if (reach[i].ids.all) continue;
      for (const iid of reach[i].ids.members) {
        if (pace.due()) await pace.yield();
        let b = erpsOf.get(iid);
        if (!b) erpsOf.set(iid, (b = new Uint32Array(reachWords)));
        b[i >>> 5] |= 1 << (i & 31);
      }
    }
  };
  const noErps = new Uint32Array(reachWords);
  const covered = (iid: string, c: Cover) =>
    c.all || (c.reach.length <= 4 || !erpsOf ? c.reach.some((r) => index.isMember(r.ids, iid)) : meets(erpsOf.get(iid) ?? noErps, c.reachBits));

  // Dial policies: the services whose cover may leave some of the policy's identities out.
  const exposed = new Map<string, PolicyState[]>();
  const dials = [...index.policiesIn('servicePolicies')].filter((p) => p.type === 'Dial').sort(byId);
  for (const p of dials) {
    if (index.memberCount(p.sides.get('identities')!) === 0) continue;
    for (const sid of index.members(p.sides.get('services')!)) {
      if (pace.due(4)) await pace.yield();
      if (coverOf(sid).all) continue;
      const list = exposed.get(sid);
      if (list) list.push(p);
      else exposed.set(sid, [p]);
    }
  }
  // Each (Dial policy, cover) decided once, over every identity of the policy: no cap.
  const bad = new Map<string, string[]>();
  for (const sid of exposed.keys()) {
    if (coverOf(sid).reach.length > 4) {
      await fillErpsOf();
      break;
    }
  }
  const badOf = async (p: PolicyState, c: Cover): Promise<string[]> => {
    const k = `${p.id}\u0000${c.key}`;
    let list = bad.get(k);
    if (!list) {
      list = [];
      for (const iid of index.members(p.sides.get('identities')!)) {
        if (pace.due(c.reach.length <= 4 ? 1 + c.reach.length / 4 : 2)) await pace.yield();
        if (!covered(iid, c)) list.push(iid);
      }
      bad.set(k, list);
    }
    return list;
  };
  // One condition per service, not per identity/service pair (a model of 3,000 identities and 1,800
  // services once had 1.5 million): how many identities are left out, a few of them by name, and
  // the Dial policies that let them in. Services with the same cover and Dial policies share one
  // summary; an identity in several of those policies is counted once, with one Set at a time.
  const summaries = new Map<string, Stranded>();
  const strandedOf = new Map<string, Stranded>();
  for (const [sid, ps] of exposed) {
    const c = coverOf(sid);
    const key = `${c.key}\u0000${ps.map((p) => p.id).join('\u0000')}`;
    let s = summaries.get(key);
    if (!s) {
      s = { count: 0, sample: [], policies: [], routers: c.routers };
      const seen = ps.length > 1 ? new Set<string>() : undefined;
      for (const p of ps) {
        const list = await badOf(p, c);
        if (list.length) s.policies.push(p.id);
        for (const iid of list) {
          if (seen) {
            if (pace.due()) await pace.yield();
            if (seen.has(iid)) continue;
            seen.add(iid);
          }
          s.count++;
          if (s.sample.length < SAMPLE) s.sample.push(iid);
        }
      }
      summaries.set(key, s);
    }
    if (s.count > 0) strandedOf.set(sid, s);
  }

  const named = (collection: CollectionName, ids: readonly string[], total: number) =>
    ids.map((id) => `${nameOf(store.get(collection, id))} (${id})`).join(', ') + (total > ids.length ? `, and ${total - ids.length} more` : '');
  function* serviceConditions(): Generator<Condition> {
    for (const [sid, s] of strandedOf) {
      const key = `${NO_SHARED_ROUTER}${sid}`;
      yield {
        key,
        alert: () => {
          const svc = store.get('services', sid);
          if (!svc) return undefined;
          return {
            key,
            alert_type: 'service.no-shared-edge-router',
            event_source_type: 'service',
            event_source_id: sid,
            event_source_name: nameOf(svc),
            severity: 'warning',
            message: `${s.count} ${s.count === 1 ? 'identity' : 'identities'} may dial service ${nameOf(svc)} but ${s.count === 1 ? 'shares' : 'share'} no edge router with it`,
            logs: [
              `identities left out: ${s.count}`,
              `some of them: ${named('identities', s.sample, s.count)}`,
              `service policies letting them dial: ${named('servicePolicies', s.policies.slice(0, SAMPLE), s.policies.length)}`,
              `edge routers the service may use: ${s.routers}`,
            ],
          };
        },
      };
    }
  }
  const sharedRouter: Findings = {
    prefix: NO_SHARED_ROUTER,
    conditions: { [Symbol.iterator]: serviceConditions },
    count: strandedOf.size,
    // `<service>`; keys of the former per-pair form (`<identity>:<service>`) no longer hold, so
    // they are cleared once.
    holds: (key) => strandedOf.has(key.slice(NO_SHARED_ROUTER.length)),
  };

  // Services without terminators: the terminators' serviceId index keys are the services with one.
  const terminated = new Set<string>();
  for (const k of store.indexKeys('terminators', 'serviceId')) terminated.add(String(k));
  const lonely: Condition[] = [];
  for (const sid of index.entityIds('services')) {
    if (pace.due()) await pace.yield();
    if (!terminated.has(sid)) lonely.push(noTerminators(store, sid));
  }

  return [listed(ERP_EMPTY, empty), listed(NO_TERMINATORS, lonely), sharedRouter];
}

function emptyPolicy(store: Store, id: string, idCount: number, routerCount: number): Condition | undefined {
  const p = store.get('edgeRouterPolicies', id);
  if (!p || p.isSystem) return undefined;
  const alert = {
    key: `${ERP_EMPTY}${p.id}`,
    alert_type: 'edge-router-policy.selects-nothing',
    event_source_type: 'edge-router-policy',
    event_source_id: p.id,
    event_source_name: nameOf(p),
    severity: 'warning' as const,
    message: `edge router policy ${nameOf(p)} selects no ${idCount === 0 ? 'identities' : 'edge routers'}`,
    logs: [`identityRoles: ${JSON.stringify(p.identityRoles ?? [])}`, `edgeRouterRoles: ${JSON.stringify(p.edgeRouterRoles ?? [])}`, `identities selected: ${idCount}`, `edge routers selected: ${routerCount}`],
  };
  return { key: alert.key, alert: () => alert };
}

function noTerminators(store: Store, sid: string): Condition {
  const key = `${NO_TERMINATORS}${sid}`;
  return {
    key,
    alert: () => {
      const s = store.get('services', sid);
      if (!s) return undefined;
      return {
        key,
        alert_type: 'service.no-terminators',
        event_source_type: 'service',
        event_source_id: sid,
        event_source_name: nameOf(s),
        severity: 'warning',
        message: `service ${nameOf(s)} has no terminators`,
        logs: ['no router or hosting identity terminates this service, so dials to it fail'],
      };
    },
  };
}
