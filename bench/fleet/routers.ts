/**
 * Simulated edge routers for the fleet run, on the control channel
 * (docs/router-protocol.md), with the router side the router simulator uses
 * (`bench/lib/router-client.ts`, `bench/lib/router-enroll.ts`). `bench/router-sim.ts` itself is a
 * command-line benchmark (it runs when imported), so the fleet drives the same pieces directly.
 *
 * For each of the model's edge routers asked for, `startRouters`:
 *   routerEnroll   reads its erott token (GET /edge-routers/<id>, enrollmentToken), makes a fresh key
 *                  and client + server CSRs, POST /edge/client/v1/enroll/erott → certificate chain;
 *   routerConnect  opens wss://…/ctrl/v1 and completes hello → challenge → proof → welcome → synced
 *                  (the hello carries hostname, protocols and versionInfo);
 * and then, during the mix, every router answers the controller's heartbeats and sends a `state`
 * report every `reportIntervalMs` (`routerReport`). `verifyOnline()` checks through the Management
 * API that every simulated router is listed `isOnline=true` with the hostname it reported.
 * `stop()` says bye and closes every connection, and tells how many were connected, how many
 * reports went out, and every error (an unexpected close of a connected router is one).
 */
import { performance } from 'node:perf_hooks';
import type { HttpClient } from '../lib/http.js';
import { requestJson } from '../lib/http.js';
import { MGMT } from '../lib/controller.js';
import { transportCode, type OpSink } from '../lib/ops.js';
import { RouterClient } from '../lib/router-client.js';
import { enrollRouter, routerCsrs } from '../lib/router-enroll.js';

export interface RouterFleetReport {
  /** Routers that completed the control channel handshake. */
  connected: number;
  /** Of them, still connected when the fleet stopped them. */
  connectedAtStop: number;
  /** State reports sent during the run. */
  reports: number;
  /** Routers the Management API listed online with their reported hostname (at verifyOnline). */
  onlineInApi?: number;
  errors: Record<string, number>;
}

export interface RouterFleetStatus {
  simulated: boolean;
  /** Why not, when not. */
  reason?: string;
  requested: number;
  report?: RouterFleetReport;
}

interface SimRouter {
  id: string;
  hostname: string;
  client?: RouterClient;
  /** Set once the fleet itself closes the connection (a close before that is an error). */
  stopping: boolean;
}

export class RouterFleet {
  private readonly routers: SimRouter[];
  private readonly errors: Record<string, number> = {};
  private reports = 0;
  private onlineInApi?: number;
  private timer?: NodeJS.Timeout;
  private stopped = false;

  constructor(
    private readonly opts: {
      /** https://127.0.0.1:<port> of the controller API (the control channel is on the same listener). */
      origin: string;
      ca: Buffer;
      http: HttpClient;
      adminToken: string;
      edgeRouterIds: string[];
      stats: () => OpSink;
      concurrency: number;
      reportIntervalMs: number;
    },
  ) {
    this.routers = opts.edgeRouterIds.map((id, i) => ({ id, hostname: `er${i}.fleet.sim`, stopping: false }));
  }

  private error(code: string): void {
    this.errors[code] = (this.errors[code] ?? 0) + 1;
  }

  /** Enroll (erott) and connect every router, `concurrency` at a time; resolves when all tried. */
  async start(): Promise<void> {
    const H = { accept: 'application/json', 'zt-session': this.opts.adminToken };
    const wsUrl = this.opts.origin.replace(/^https:/, 'wss:') + '/ctrl/v1';
    let next = 0;
    const one = async (r: SimRouter) => {
      const stats = this.opts.stats();
      let t0 = performance.now();
      let certChain: string;
      let keyPem: string;
      try {
        const d = await requestJson(this.opts.http, 'GET', `${MGMT}/edge-routers/${encodeURIComponent(r.id)}`, H);
        const token = d.body?.data?.enrollmentToken;
        if (d.status !== 200 || typeof token !== 'string') {
          stats.record('routerEnroll', t0, performance.now(), `${d.status} NO_ENROLLMENT_TOKEN`);
          return;
        }
        const keys = await routerCsrs(`fleet-${r.id}`, r.hostname);
        certChain = (await enrollRouter(this.opts.http, 'edge', token, keys)).certChain;
        keyPem = keys.keyPem;
      } catch (e) {
        const m = /enrollment failed: (\d+)/.exec((e as Error).message);
        stats.record('routerEnroll', t0, performance.now(), m ? `${m[1]} ENROLLMENT_FAILED` : transportCode(e));
        return;
      }
      stats.record('routerEnroll', t0, performance.now());
      t0 = performance.now();
      const client = new RouterClient({
        url: wsUrl,
        ca: this.opts.ca,
        certChain,
        key: keyPem,
        hostname: r.hostname,
        protocols: { tls: `tls:${r.hostname}:3022`, wss: `wss:${r.hostname}:3023` },
        versionInfo: { os: 'linux', arch: 'amd64', version: 'v0.0.0-fleet', revision: 'fleet', buildDate: new Date().toISOString() },
      });
      try {
        await client.connect();
      } catch (e) {
        const info = e as { code?: number; error?: { code: string } };
        stats.record('routerConnect', t0, performance.now(), `${info.code ?? 'ERR'} ${info.error?.code ?? 'REFUSED'}`);
        return;
      }
      stats.record('routerConnect', t0, performance.now());
      r.client = client;
      client.once('closed', (info: { code: number; reason: string; error?: { code: string } }) => {
        if (!r.stopping) this.error(`routerClosed: ${info.code} ${info.error?.code ?? info.reason}`);
      });
    };
    await Promise.all(
      Array.from({ length: Math.min(this.opts.concurrency, this.routers.length) }, async () => {
        while (next < this.routers.length && !this.stopped) await one(this.routers[next++]);
      }),
    );
    // State reports while the fleet runs: what a router sends when its addresses change.
    let round = 0;
    this.timer = setInterval(() => {
      round++;
      for (const r of this.routers) {
        if (!r.client?.welcome || r.client.closedInfo) continue;
        const t = performance.now();
        r.client.report({ hostname: r.hostname, protocols: { tls: `tls:${r.hostname}:3022`, wss: `wss:${r.hostname}:${3023 + (round % 2)}` } });
        this.opts.stats().record('routerReport', t, performance.now());
        this.reports++;
      }
    }, this.opts.reportIntervalMs);
  }

  get connected(): number {
    return this.routers.filter((r) => r.client?.welcome).length;
  }

  /** Through the Management API: every connected router online, with the hostname it reported. */
  async verifyOnline(): Promise<{ online: number; expected: number }> {
    const H = { accept: 'application/json', 'zt-session': this.opts.adminToken };
    const mine = this.routers.filter((r) => r.client?.welcome && !r.client.closedInfo);
    let online = 0;
    for (let i = 0; i < mine.length; i += 100) {
      const batch = mine.slice(i, i + 100);
      const filter = encodeURIComponent(`id in [${batch.map((r) => JSON.stringify(r.id)).join(',')}] and isOnline=true`);
      const res = await requestJson(this.opts.http, 'GET', `${MGMT}/edge-routers?limit=100&filter=${filter}`, H);
      if (res.status !== 200) {
        this.error(`routerVerify: ${res.status}`);
        continue;
      }
      const host = new Map(batch.map((r) => [r.id, r.hostname]));
      for (const er of res.body?.data ?? []) if (er.isOnline === true && er.hostname === host.get(er.id)) online++;
    }
    this.onlineInApi = online;
    return { online, expected: mine.length };
  }

  async stop(): Promise<RouterFleetReport> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    const connectedAtStop = this.routers.filter((r) => r.client?.welcome && !r.client.closedInfo).length;
    await Promise.all(
      this.routers.map(async (r) => {
        r.stopping = true;
        await r.client?.close();
      }),
    );
    return { connected: this.connected, connectedAtStop, reports: this.reports, onlineInApi: this.onlineInApi, errors: { ...this.errors } };
  }
}
