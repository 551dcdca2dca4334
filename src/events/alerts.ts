/**
 * Alerts (`mesh.alerts`, decisions §7): documents the controller writes when it sees a likely
 * configuration problem. Checks run a short while (`alertDebounceMs`) after a change to anything
 * they read (store change events), and every minute for the time-based ones:
 *
 * - `identity.no-shared-edge-router`: an identity may dial a service (Dial policy) but no edge
 *   router is both reachable by the identity (edge router policies) and usable for the service
 *   (service edge router policies);
 * - `service.no-terminators`: a service has no terminators;
 * - `edge-router-policy.selects-nothing`: a (non-system) edge router policy selects no identity
 *   or no edge router;
 * - `certificate.expiring`: a CA, or the controller's own root, intermediate or server
 *   certificate, expires within `alertCertExpiryDays` (severity `error` once expired);
 * - `enrollment.expired`: an enrollment expired unused.
 *
 * An alert is written once when its condition appears; while it persists nothing more is written;
 * once it clears it may be raised again. Which conditions are raised survives restarts (kept in
 * the search store's `state` database).
 */
import crypto from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { App } from '../api/context.js';
import type { ChangeEvent, Rec, Store } from '../store/store.js';
import type { SearchStore } from './search-store.js';

export const ALERT_INDEX = 'mesh.alerts';

export interface Alert {
  key: string;
  alert_type: string;
  event_source_type: string;
  event_source_id: string;
  event_source_name?: string;
  severity: 'info' | 'warning' | 'error';
  message: string;
  logs: string[];
}

const POLICIES = new Set(['servicePolicies', 'edgeRouterPolicies', 'serviceEdgeRouterPolicies']);
/** Entities the policies select: only their existence and role attributes matter to the checks. */
const SELECTED = new Set(['identities', 'services', 'edgeRouters']);

const sameJson = (a: unknown, b: unknown) => JSON.stringify(a ?? []) === JSON.stringify(b ?? []);

/**
 * Which checks a committed change can affect. Only what a check reads counts: an identity's
 * login (envInfo, sdkInfo), an edge router's enrollment (fingerprint) or an enrollment being used
 * (deleted) change no condition, and on a large model a scan costs seconds of CPU, so such
 * changes must not start one. An enrollment that expires unused is found by the periodic
 * time-based scan; one consumed after it was alerted is forgotten by that scan too.
 */
export function affectedChecks(events: readonly ChangeEvent[]): { structural: boolean; timeBased: boolean } {
  let structural = false;
  let timeBased = false;
  for (const e of events) {
    const c = e.collection;
    if (c === 'cas') timeBased = true;
    else if (c === 'enrollments') timeBased ||= e.type === 'create' || (e.type === 'update' && e.before?.expiresAt !== e.after?.expiresAt);
    else if (POLICIES.has(c)) structural = true;
    else if (SELECTED.has(c)) structural ||= e.type !== 'update' || !sameJson(e.before?.roleAttributes, e.after?.roleAttributes);
    else if (c === 'terminators') structural ||= e.type !== 'update' || e.before?.serviceId !== e.after?.serviceId;
  }
  return { structural, timeBased };
}

/**
 * Delay before the next scan: the debounce, and at least SCAN_SPACING times as long as the last
 * scan took, so that scans take at most about 1/(1+SCAN_SPACING) of the controller's time however
 * often the configuration changes (alerts are advisory; the API is not). At 4 a "large" model
 * (100k identities, ~1.3 s per scan) still spent a fifth of its CPU on scans and the scans' slices
 * showed in API p99s; at 20 they cost under 5% and alerts lag changes by at most ~30 s there.
 */
export const SCAN_SPACING = 20;
export function nextScanDelay(debounceMs: number, lastScanMs: number): number {
  return Math.max(debounceMs, Math.round(lastScanMs * SCAN_SPACING));
}

/** Most identity/service pairs examined per scan (the check groups identities to stay far below it). */
const MAX_PAIRS = 200_000;

/** Ids of `collection` a policy role list selects (`#all`, `#attr` with the semantic, `@id`). */
export function selected(store: Store, collection: string, roles: unknown, semantic: unknown): Set<string> {
  const out = new Set<string>();
  if (!Array.isArray(roles)) return out;
  const attrs: string[] = [];
  for (const r of roles) {
    if (typeof r !== 'string') continue;
    if (r === '#all') {
      // Ids only, from the name index: no record is decoded.
      for (const [, id] of store.uniqueEntries(collection, 'name')) out.add(id);
      return out;
    }
    if (r.startsWith('@')) {
      if (store.has(collection, r.slice(1))) out.add(r.slice(1));
    } else if (r.startsWith('#')) attrs.push(r.slice(1));
  }
  if (attrs.length) {
    const sets = attrs.map((a) => store.idsByIndex(collection, 'roleAttributes', a));
    if (String(semantic).toLowerCase() === 'anyof') for (const s of sets) for (const id of s) out.add(id);
    else {
      sets.sort((a, b) => a.length - b.length);
      const rest = sets.slice(1).map((s) => new Set(s));
      for (const id of sets[0]) if (rest.every((s) => s.has(id))) out.add(id);
    }
  }
  return out;
}

function certExpiry(pem: unknown): number | undefined {
  if (typeof pem !== 'string') return undefined;
  try {
    return Date.parse(new crypto.X509Certificate(pem).validTo);
  } catch {
    return undefined;
  }
}

const nameOf = (r: Rec | undefined) => (typeof r?.name === 'string' ? r.name : r?.id ?? '?');

/** Key prefixes of the structural conditions (policies, services, terminators) and the time-based ones. */
export const STRUCTURAL = ['erp-empty:', 'no-shared-router:', 'no-terminators:'];
export const TIME_BASED = ['cert:', 'enrollment-expired:'];

const turn = () => new Promise<void>((r) => setImmediate(r));

/**
 * Every alert condition of the requested kinds present now. Yields to the event loop every few
 * hundred records, so a large store never blocks the API for long (conditions are advisory: a
 * change landing between two turns is seen by the next scan).
 */
export async function detect(app: App, now: number, certExpiryDays: number, kinds: { structural: boolean; timeBased: boolean }): Promise<Alert[]> {
  const alerts: Alert[] = [];
  let steps = 0;
  const pace = async (weight = 1) => {
    steps += weight;
    if (steps >= 500) {
      steps = 0;
      await turn();
    }
  };
  if (kinds.structural) await structural(app, alerts, pace);
  if (kinds.timeBased) await timeBased(app, alerts, pace, now, certExpiryDays);
  return alerts;
}

async function structural(app: App, alerts: Alert[], pace: (w?: number) => Promise<void>) {
  const store = app.store;

  // Edge router policies: which identities reach which edge routers.
  const routersOf = new Map<string, Set<string>>(); // identity → edge routers
  const groupOf = new Map<string, string[]>(); // identity → policies it is in
  for (const p of store.scan('edgeRouterPolicies')) {
    const ids = selected(store, 'identities', p.identityRoles, p.semantic);
    const routers = selected(store, 'edgeRouters', p.edgeRouterRoles, p.semantic);
    await pace(1 + (ids.size * routers.size) / 100);
    if (!p.isSystem && (ids.size === 0 || routers.size === 0)) {
      alerts.push({
        key: `erp-empty:${p.id}`,
        alert_type: 'edge-router-policy.selects-nothing',
        event_source_type: 'edge-router-policy',
        event_source_id: p.id,
        event_source_name: nameOf(p),
        severity: 'warning',
        message: `edge router policy ${nameOf(p)} selects no ${ids.size === 0 ? 'identities' : 'edge routers'}`,
        logs: [`identityRoles: ${JSON.stringify(p.identityRoles ?? [])}`, `edgeRouterRoles: ${JSON.stringify(p.edgeRouterRoles ?? [])}`, `identities selected: ${ids.size}`, `edge routers selected: ${routers.size}`],
      });
    }
    for (const i of ids) {
      let s = routersOf.get(i);
      if (!s) routersOf.set(i, (s = new Set()));
      for (const r of routers) s.add(r);
      const g = groupOf.get(i);
      if (g) g.push(p.id);
      else groupOf.set(i, [p.id]);
    }
  }
  // Service edge router policies: which edge routers serve which services.
  const serviceRouters = new Map<string, Set<string>>();
  for (const p of store.scan('serviceEdgeRouterPolicies')) {
    const services = selected(store, 'services', p.serviceRoles, p.semantic);
    const routers = selected(store, 'edgeRouters', p.edgeRouterRoles, p.semantic);
    await pace(1 + (services.size * routers.size) / 100);
    for (const s of services) {
      let set = serviceRouters.get(s);
      if (!set) serviceRouters.set(s, (set = new Set()));
      for (const r of routers) set.add(r);
    }
  }
  // Dial policies: identity × service pairs without a common edge router. Identities in the same
  // edge router policies reach the same routers, so each (group, service) is decided once.
  const decided = new Map<string, boolean>();
  const reported = new Set<string>();
  // Each identity's group key once, not once per identity/service pair.
  const groupKey = new Map<string, string>();
  for (const [iid, g] of groupOf) groupKey.set(iid, g.join(','));
  let pairs = 0;
  for (const p of store.scan('servicePolicies')) {
    if (p.type !== 'Dial') continue;
    const services = selected(store, 'services', p.serviceRoles, p.semantic);
    if (services.size === 0) continue;
    const identities = selected(store, 'identities', p.identityRoles, p.semantic);
    for (const sid of services) {
      const sr = serviceRouters.get(sid);
      for (const iid of identities) {
        if (++pairs > MAX_PAIRS) break;
        await pace(0.1);
        const pairKey = `${iid}/${sid}`;
        if (reported.has(pairKey)) continue;
        const gk = `${groupKey.get(iid) ?? ''}/${sid}`;
        let shared = decided.get(gk);
        if (shared === undefined) {
          const ir = routersOf.get(iid);
          shared = false;
          if (ir && sr) for (const r of ir) if (sr.has(r)) { shared = true; break; }
          decided.set(gk, shared);
        }
        if (shared) continue;
        reported.add(pairKey);
        const ident = store.get('identities', iid);
        const svc = store.get('services', sid);
        alerts.push({
          key: `no-shared-router:${iid}:${sid}`,
          alert_type: 'identity.no-shared-edge-router',
          event_source_type: 'identity',
          event_source_id: iid,
          event_source_name: nameOf(ident),
          severity: 'warning',
          message: `identity ${nameOf(ident)} may dial service ${nameOf(svc)} but shares no edge router with it`,
          logs: [
            `service policy: ${nameOf(p)} (${p.id})`,
            `service: ${nameOf(svc)} (${sid})`,
            `edge routers the identity may use: ${routersOf.get(iid)?.size ?? 0}`,
            `edge routers the service may use: ${sr?.size ?? 0}`,
          ],
        });
      }
    }
  }
  if (pairs > MAX_PAIRS) app.log.warn({ pairs }, 'alerts: too many identity/service pairs; the shared edge router check was cut short');

  for (const s of store.scan('services')) {
    await pace();
    if (store.idsByIndex('terminators', 'serviceId', s.id).length > 0) continue;
    alerts.push({
      key: `no-terminators:${s.id}`,
      alert_type: 'service.no-terminators',
      event_source_type: 'service',
      event_source_id: s.id,
      event_source_name: nameOf(s),
      severity: 'warning',
      message: `service ${nameOf(s)} has no terminators`,
      logs: ['no router or hosting identity terminates this service, so dials to it fail'],
    });
  }

}

async function timeBased(app: App, alerts: Alert[], pace: (w?: number) => Promise<void>, now: number, certExpiryDays: number) {
  const store = app.store;
  const horizon = now + certExpiryDays * 86_400_000;
  const certAlert = (key: string, type: string, id: string, name: string, expires: number | undefined) => {
    if (expires === undefined || expires > horizon) return;
    const expired = expires <= now;
    alerts.push({
      key: `cert:${key}:${expires}`,
      alert_type: 'certificate.expiring',
      event_source_type: type,
      event_source_id: id,
      event_source_name: name,
      severity: expired ? 'error' : 'warning',
      message: expired ? `${type} certificate ${name} expired at ${new Date(expires).toISOString()}` : `${type} certificate ${name} expires at ${new Date(expires).toISOString()}`,
      logs: [`not after: ${new Date(expires).toISOString()}`, `warning window: ${certExpiryDays} days`],
    });
  };
  for (const ca of store.scan('cas')) {
    await pace();
    certAlert(`ca:${ca.id}`, 'ca', ca.id, nameOf(ca), certExpiry(ca.certPem));
  }
  const pki = app.pki;
  certAlert('controller:root', 'controller', app.instanceId, 'root CA', certExpiry(pki.rootCertPem));
  certAlert('controller:intermediate', 'controller', app.instanceId, 'intermediate CA', certExpiry(pki.intermediateCertPem));
  certAlert('controller:server', 'controller', app.instanceId, 'server', certExpiry(pki.serverCertPem));

  for (const e of store.scan('enrollments')) {
    await pace();
    if (typeof e.expiresAt !== 'number' || e.expiresAt > now) continue;
    const owner = e.identityId ? store.get('identities', e.identityId) : e.edgeRouterId ? store.get('edgeRouters', e.edgeRouterId) : e.transitRouterId ? store.get('routers', e.transitRouterId) : undefined;
    const ownerType = e.identityId ? 'identity' : e.edgeRouterId ? 'edge router' : 'router';
    alerts.push({
      key: `enrollment-expired:${e.id}`,
      alert_type: 'enrollment.expired',
      event_source_type: 'enrollment',
      event_source_id: e.id,
      event_source_name: `${e.method} enrollment of ${ownerType} ${nameOf(owner)}`,
      severity: 'info',
      message: `the ${e.method} enrollment of ${ownerType} ${nameOf(owner)} expired unused at ${new Date(e.expiresAt).toISOString()}`,
      logs: [`enrollment: ${e.id}`, `method: ${e.method}`, `${ownerType}: ${nameOf(owner)} (${e.identityId ?? e.edgeRouterId ?? e.transitRouterId})`],
    });
  }
}

export class Alerts {
  private timer?: NodeJS.Timeout;
  private periodic?: NodeJS.Timeout;
  private running?: Promise<void>;
  private closed = false;
  /** What the next scan evaluates: structural checks follow changes; time-based ones run each minute. */
  private wanted = { structural: false, timeBased: false };
  /** How long the last scan took (ms, wall time including its yields). */
  private lastScanMs = 0;
  private readonly onChange = (events: ChangeEvent[]) => {
    const kinds = affectedChecks(events);
    if (kinds.structural || kinds.timeBased) this.schedule(kinds);
  };

  constructor(
    private readonly app: App,
    private readonly search: SearchStore,
    private readonly opts: { debounceMs: number; certExpiryDays: number },
  ) {}

  start() {
    this.app.store.on('change', this.onChange);
    this.schedule({ structural: true, timeBased: true });
    this.periodic = setInterval(() => this.schedule({ structural: false, timeBased: true }), 60_000);
    this.periodic.unref();
  }

  private schedule(kinds: { structural: boolean; timeBased: boolean }) {
    this.wanted.structural ||= kinds.structural;
    this.wanted.timeBased ||= kinds.timeBased;
    // A scan in progress picks the request up when it ends.
    if (this.closed || this.timer || this.running) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.scan();
    }, nextScanDelay(this.opts.debounceMs, this.lastScanMs));
    this.timer.unref();
  }

  /** Detect, write what is new, forget what cleared. One scan at a time; requests during one run after it. */
  private scan(): Promise<void> {
    if (this.running) return this.running;
    const kinds = this.wanted;
    this.wanted = { structural: false, timeBased: false };
    const started = performance.now();
    this.running = this.doScan(kinds)
      .catch((err) => this.app.log.error({ err }, 'alert scan failed'))
      .finally(() => {
        this.lastScanMs = performance.now() - started;
        this.running = undefined;
        if ((this.wanted.structural || this.wanted.timeBased) && !this.closed) this.schedule(this.wanted);
      });
    return this.running;
  }

  private async doScan(kinds: { structural: boolean; timeBased: boolean }) {
    if (this.closed || (!kinds.structural && !kinds.timeBased)) return;
    const now = Date.now();
    const found = await detect(this.app, now, this.opts.certExpiryDays, kinds);
    if (this.closed) return;
    const state = this.search.state;
    const current = new Set(found.map((a) => a.key));
    const fresh = found.filter((a) => state.get(a.key) === undefined);
    // Only conditions of the kinds evaluated can have cleared.
    const prefixes = [...(kinds.structural ? STRUCTURAL : []), ...(kinds.timeBased ? TIME_BASED : [])];
    const cleared = ([...state.getKeys()] as string[]).filter((k) => !current.has(k) && prefixes.some((p) => k.startsWith(p)));
    if (fresh.length) {
      const ts = new Date(now).toISOString();
      await this.search.bulk(
        fresh.map(({ key, ...a }) => ({
          op: 'index' as const,
          index: ALERT_INDEX,
          source: { '@timestamp': ts, ...a, controller_id: this.app.instanceId, controller_address: this.app.config.advertisedAddress },
        })),
      );
    }
    if (fresh.length || cleared.length) {
      await this.search.env.batch(() => {
        for (const a of fresh) state.put(a.key, now);
        for (const k of cleared) state.remove(k);
      });
    }
  }

  async close() {
    this.closed = true;
    this.app.store.off('change', this.onChange);
    if (this.timer) clearTimeout(this.timer);
    if (this.periodic) clearInterval(this.periodic);
    await this.running;
  }
}
