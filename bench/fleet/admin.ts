/**
 * The admins of the fleet run: while devices work, an admin changes the configuration every
 * `intervalMs`, alternating between
 *
 *  - `adminPolicyChange`: a service policy (seeded choice) gets an extra `#svc-group-…` in its
 *    serviceRoles, or loses the one it got earlier (GET + PATCH) — the identities it selects see
 *    their services change (service-updates, re-listing, stale session requests);
 *  - `adminExpireSession`: the API session of a logged-in device is deleted
 *    (`DELETE /api-sessions/{id}`) — that device's next request answers 401 and it logs in again.
 *
 * Every request is recorded in the fleet's OpStats like the devices' ones.
 */
import { performance } from 'node:perf_hooks';
import type { HttpClient } from '../lib/http.js';
import { errorCode, transportCode, type OpSink } from '../lib/ops.js';
import { MGMT } from '../lib/controller.js';
import type { Device } from './device.js';

export interface AdminOptions {
  client: HttpClient;
  token: string;
  stats: OpSink;
  servicePolicyIds: string[];
  /** How many service groups the model has (`svc-group-0` … `svc-group-(n-1)`). */
  serviceGroups: number;
  devices: () => Device[];
  intervalMs: number;
  rand: () => number;
}

export class AdminActor {
  private timer?: NodeJS.Timeout;
  private running?: Promise<void>;
  private turn = 0;
  /** policy id → the attribute this actor added (to take it away again next time). */
  private readonly added = new Map<string, string>();
  changes = 0;
  expired = 0;

  constructor(private readonly o: AdminOptions) {}

  start(): void {
    this.timer = setInterval(() => {
      if (this.running) return; // never more than one admin request chain at a time
      this.running = this.step().finally(() => (this.running = undefined));
    }, this.o.intervalMs);
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.running;
  }

  private headers(json: boolean): Record<string, string> {
    return json ? { 'zt-session': this.o.token, accept: 'application/json', 'content-type': 'application/json' } : { 'zt-session': this.o.token, accept: 'application/json' };
  }

  private async step(): Promise<void> {
    const t = this.turn++;
    if (t % 2 === 0 && this.o.servicePolicyIds.length > 0) await this.changePolicy();
    else await this.expireSession();
  }

  private async changePolicy(): Promise<void> {
    const { client, stats, rand } = this.o;
    const id = this.o.servicePolicyIds[Math.floor(rand() * this.o.servicePolicyIds.length)];
    const t0 = performance.now();
    try {
      const g = await client.request({ method: 'GET', path: `${MGMT}/service-policies/${encodeURIComponent(id)}`, headers: this.headers(false), wantBody: true });
      if (g.status !== 200) return stats.record('adminPolicyChange', t0, performance.now(), errorCode(g.status, g.body));
      const pol = JSON.parse(g.body!.toString('utf8')).data;
      let roles: string[] = pol.serviceRoles ?? [];
      const prev = this.added.get(id);
      if (prev) {
        roles = roles.filter((r) => r !== prev);
        this.added.delete(id);
      } else if (!roles.includes('#all') && !roles.some((r) => r.startsWith('@')) && pol.semantic === 'AnyOf') {
        // AnyOf with attributes only: adding one widens the selection (under AllOf it would narrow it).
        const extra = `#svc-group-${Math.floor(rand() * this.o.serviceGroups)}`;
        if (!roles.includes(extra)) {
          roles = [...roles, extra];
          this.added.set(id, extra);
        }
      } else {
        // Not a policy to widen by attribute: touch its tags instead (an update all the same).
        const r = await client.request({ method: 'PATCH', path: `${MGMT}/service-policies/${encodeURIComponent(id)}`, headers: this.headers(true), body: Buffer.from(JSON.stringify({ tags: { benchTouched: String(Date.now()) } })), wantBody: true });
        this.changes++;
        return stats.record('adminPolicyChange', t0, performance.now(), r.status === 200 ? undefined : errorCode(r.status, r.body));
      }
      const r = await client.request({ method: 'PATCH', path: `${MGMT}/service-policies/${encodeURIComponent(id)}`, headers: this.headers(true), body: Buffer.from(JSON.stringify({ serviceRoles: roles })), wantBody: true });
      this.changes++;
      stats.record('adminPolicyChange', t0, performance.now(), r.status === 200 ? undefined : errorCode(r.status, r.body));
    } catch (e) {
      stats.record('adminPolicyChange', t0, performance.now(), transportCode(e));
    }
  }

  private async expireSession(): Promise<void> {
    const { client, stats, rand } = this.o;
    const live = this.o.devices().filter((d) => d.apiSessionId);
    if (live.length === 0) return;
    const dev = live[Math.floor(rand() * live.length)];
    const t0 = performance.now();
    try {
      const r = await client.request({ method: 'DELETE', path: `${MGMT}/api-sessions/${encodeURIComponent(dev.apiSessionId!)}`, headers: this.headers(false), wantBody: true });
      // 404: the device already replaced that session (it logged in again meanwhile) — not an error.
      if (r.status === 200 || r.status === 404) {
        if (r.status === 200) this.expired++;
        stats.record('adminExpireSession', t0, performance.now());
      } else stats.record('adminExpireSession', t0, performance.now(), errorCode(r.status, r.body));
    } catch (e) {
      stats.record('adminExpireSession', t0, performance.now(), transportCode(e));
    }
  }
}
