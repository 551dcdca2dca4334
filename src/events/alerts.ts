/**
 * Alerts (`mesh.alerts`): documents the controller writes when it sees a likely
 * configuration problem. Checks run a short while (`alertDebounceMs`) after a change to anything
 * they read (store change events), and every minute for the time-based ones:
 *
 * - `service.no-shared-edge-router`: identities may dial a service (Dial policy) but no edge
 *   router is both reachable by them (edge router policies) and usable for the service (service
 *   edge router policies); one alert per service, counting and naming a few of those identities;
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
import type { EventsApp as App } from './context.js';
import type { ChangeEvent, Rec } from '../store/store.js';
import type { SearchStore } from './search-store.js';
import { Pacer, type Alert, type Findings } from './alert-scan.js';
import { structuralFindings, ERP_EMPTY, NO_SHARED_ROUTER, NO_TERMINATORS } from './alert-structural.js';
import { expiryFindings, CERT, ENROLLMENT_EXPIRED } from './alert-expiry.js';

export type { Alert } from './alert-scan.js';
const ALERT_INDEX = 'mesh.alerts';

const POLICIES = new Set(['servicePolicies', 'edgeRouterPolicies', 'serviceEdgeRouterPolicies']);
/** Entities the policies select: only their existence and role attributes matter to the checks. */
const SELECTED = new Set(['identities', 'services', 'edgeRouters']);

const sameJson = (a: unknown, b: unknown) => JSON.stringify(a ?? []) === JSON.stringify(b ?? []);

/**
 * Which checks a committed change can affect. Only what a check reads counts: an identity's
 * login (envInfo, sdkInfo), an edge router's enrollment (fingerprint) or an enrollment being used
 * (deleted) change no condition, so they start no scan (when the checks read the store, a scan of
 * the large model cost seconds of CPU and a fleet's logins kept one running). An enrollment that
 * expires unused is found by the periodic time-based scan; one consumed after it was alerted is
 * forgotten by that scan too.
 */
export function affectedChecks(events: readonly ChangeEvent[]): { structural: boolean; timeBased: boolean } {
  let structural = false;
  let timeBased = false;
  for (const e of events) {
    const c = e.collection;
    const { before, after }: { before?: Rec; after?: Rec } = e;
    if (c === 'cas') timeBased = true;
    else if (c === 'enrollments') timeBased ||= e.type === 'create' || (e.type === 'update' && before?.expiresAt !== after?.expiresAt);
    else if (POLICIES.has(c)) structural = true;
    else if (SELECTED.has(c)) structural ||= e.type !== 'update' || !sameJson(before?.roleAttributes, after?.roleAttributes);
    else if (c === 'terminators') structural ||= e.type !== 'update' || before?.serviceId !== after?.serviceId;
  }
  return { structural, timeBased };
}

/**
 * Delay before the next scan: the debounce, and at least `spacing` (alertScanSpacing) times the
 * CPU the last scan took, so that scans take at most about 1/(1+spacing) of the controller's time
 * however often the configuration changes (alerts are advisory; the API is not). Since the checks
 * read the in-memory role index (alert-structural.ts), a scan of the "large" model costs a few
 * milliseconds, so alerts follow changes within the debounce; the spacing only matters for
 * pathological models (each identity needing its own check against hundreds of policies).
 */
export function nextScanDelay(debounceMs: number, lastScanMs: number, spacing: number): number {
  return Math.max(debounceMs, Math.round(lastScanMs * spacing));
}

/**
 * Most new alert documents one scan writes. Every family has at most one condition per entity,
 * but a large model can still have thousands of services without terminators or a shared edge
 * router at once; the rest are written by later scans (each scan writes up to this many of the conditions not yet alerted).
 */
export const MAX_NEW_ALERTS = 1000;
/** Documents per search-store write (each is one commit; the scan yields between them). */
const WRITE_CHUNK = 100;

type Kinds = { structural: boolean; timeBased: boolean };

/**
 * Every alert condition of the requested kinds present now, as findings per family (in the order
 * their new conditions get the per-scan document budget: the small families first). Yields to
 * the event loop in slices of about 1 ms (conditions are advisory: a change landing between two
 * slices is seen by the next scan, which it schedules).
 */
export async function detect(app: App, now: number, certExpiryDays: number, kinds: Kinds, pace: Pacer): Promise<Findings[]> {
  const time = kinds.timeBased ? await expiryFindings(app, now, certExpiryDays, pace) : [];
  const structural = kinds.structural ? await structuralFindings(app.policy.index, app.store, pace) : [];
  const order = [CERT, ERP_EMPTY, NO_TERMINATORS, ENROLLMENT_EXPIRED, NO_SHARED_ROUTER];
  return [...time, ...structural].sort((a, b) => order.indexOf(a.prefix) - order.indexOf(b.prefix));
}

export class Alerts {
  private timer?: NodeJS.Timeout;
  private periodic?: NodeJS.Timeout;
  private running?: Promise<void>;
  private closed = false;
  /** What the next scan evaluates: structural checks follow changes; time-based ones run each minute. */
  private wanted: Kinds = { structural: false, timeBased: false };
  /** CPU the last scan took (ms: the sum of its slices, without the waits between them). */
  private lastScanMs = 0;
  /** Raised conditions: key → when raised. A copy of the search store's `state` database, read once. */
  private readonly raised = new Map<string, number>();
  private readonly onChange = (events: ChangeEvent[]) => {
    const kinds = affectedChecks(events);
    if (kinds.structural || kinds.timeBased) this.schedule(kinds);
  };

  constructor(
    private readonly app: App,
    private readonly search: SearchStore,
    private readonly opts: { debounceMs: number; scanSpacing: number; certExpiryDays: number },
  ) {
    for (const { key, value } of search.state.getRange({})) this.raised.set(key, value);
  }

  start() {
    this.app.store.on('change', this.onChange);
    this.schedule({ structural: true, timeBased: true });
    this.periodic = setInterval(() => this.schedule({ structural: false, timeBased: true }), 60_000);
    this.periodic.unref();
  }

  private schedule(kinds: Kinds) {
    this.wanted.structural ||= kinds.structural;
    this.wanted.timeBased ||= kinds.timeBased;
    // A scan in progress picks the request up when it ends.
    if (this.closed || this.timer || this.running) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.scan();
    }, nextScanDelay(this.opts.debounceMs, this.lastScanMs, this.opts.scanSpacing));
    this.timer.unref();
  }

  /** Detect, write what is new, forget what cleared. One scan at a time; requests during one run after it. */
  private scan(): Promise<void> {
    if (this.running) return this.running;
    const kinds = this.wanted;
    this.wanted = { structural: false, timeBased: false };
    const pace = new Pacer();
    this.running = this.doScan(kinds, pace)
      .catch((err) => this.app.log.error({ err }, 'alert scan failed'))
      .finally(() => {
        this.lastScanMs = pace.busyMs;
        this.app.log.debug({ kinds, cpuMs: Math.round(pace.busyMs * 10) / 10 }, 'alert scan');
        this.running = undefined;
        if ((this.wanted.structural || this.wanted.timeBased) && !this.closed) this.schedule(this.wanted);
      });
    return this.running;
  }

  private async doScan(kinds: Kinds, pace: Pacer) {
    if (this.closed || (!kinds.structural && !kinds.timeBased)) return;
    const now = Date.now();
    const found = await detect(this.app, now, this.opts.certExpiryDays, kinds, pace);
    if (this.closed) return;
    // New conditions, up to the per-scan budget; documents are built (and records read) only for those.
    const fresh: Alert[] = [];
    let capped = false;
    for (const f of found) {
      for (const c of f.conditions) {
        if (pace.due(4)) await pace.yield();
        if (this.raised.has(c.key)) continue;
        if (fresh.length >= MAX_NEW_ALERTS) {
          capped = true;
          break;
        }
        const a = c.alert();
        if (a) fresh.push(a);
      }
    }
    if (capped) this.app.log.warn({ written: fresh.length, present: Object.fromEntries(found.map((f) => [f.prefix.slice(0, -1), f.count])) }, `alerts: more than ${MAX_NEW_ALERTS} new conditions; the rest are written by later scans`);
    // Raised conditions of the families evaluated that no longer hold.
    const families = new Map(found.map((f) => [f.prefix, f]));
    const cleared: string[] = [];
    for (const key of this.raised.keys()) {
      if (pace.due(4)) await pace.yield();
      const f = families.get(key.slice(0, key.indexOf(':') + 1));
      if (f && !f.holds(key)) cleared.push(key);
    }
    // The scan's CPU ends here; what follows mostly waits for commits.
    pace.finish();
    const ts = new Date(now).toISOString();
    for (let i = 0; i < fresh.length; i += WRITE_CHUNK) {
      await this.search.bulk(
        fresh.slice(i, i + WRITE_CHUNK).map(({ key, ...a }) => ({
          op: 'index' as const,
          index: ALERT_INDEX,
          source: { '@timestamp': ts, ...a, controller_id: this.app.instanceId, controller_address: this.app.config.advertisedAddress },
        })),
      );
    }
    if (fresh.length || cleared.length) {
      const state = this.search.state;
      await this.search.env.batch(() => {
        for (const a of fresh) state.put(a.key, now);
        for (const k of cleared) state.remove(k);
      });
      for (const a of fresh) this.raised.set(a.key, now);
      for (const k of cleared) this.raised.delete(k);
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
