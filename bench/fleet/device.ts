/**
 * One simulated device of the fleet: an identity of the model with an outstanding ott enrollment,
 * its own P-256 key, and what an SDK does with them:
 *
 *   enroll    POST /edge/client/v1/enroll?token=<ott>   body: PEM CSR (application/x-pem-file) → data.cert
 *   login     POST /edge/client/v1/authenticate?method=cert over a new mutual-TLS connection with
 *             that certificate, at the controller's certificate listener → data.token (API session)
 *   services  GET  /edge/client/v1/services?limit=500&offset=… (every page; one `services`
 *             operation per page), configs of the types asked for at login
 *   updates   GET  /edge/client/v1/current-api-session/service-updates → lastChangeAt; a change
 *             makes the device list its services again
 *   dial/bind POST /edge/client/v1/sessions {serviceId, type} for a service whose `permissions`
 *             allow it → 201
 *
 * An answer 401 to a request with a session means the API session is gone (expired or deleted by an
 * admin): the device logs in again with its certificate (`reauth`) and repeats the request once,
 * as SDKs do. A session request refused (400/404) right after the service list changed under the
 * device is a stale view, not an error: it is counted as `sessionStale` and the device re-lists.
 * Every other non-2xx answer, timeout or dropped connection is an error of the operation.
 */
import { performance } from 'node:perf_hooks';
import { createClient, type HttpClient, type HttpResult } from '../lib/http.js';
import { errorCode, transportCode, type OpSink } from '../lib/ops.js';
import type { DeviceKeys } from './pki.js';

export const CLIENT = '/edge/client/v1';

/** What every device shares: where the controller is, how to trust it, where results go. */
export interface FleetContext {
  /** Origin of the listener that serves certificate logins (the mutual-TLS one when there is one). */
  certOrigin: string;
  ca: Buffer;
  stats: OpSink;
  /** Keep-alive client (no client certificate) for enrollments. */
  enrollClient: HttpClient;
  timeoutMs: number;
  /** Config types asked for at login (their configs come with the services). */
  configTypes: string[];
}

interface ServiceView {
  id: string;
  permissions: string[];
}

export class Device {
  certPem?: string;
  client?: HttpClient;
  apiSessionToken?: string;
  apiSessionId?: string;
  services?: ServiceView[];
  /** `lastChangeAt` when the service list was last fetched. */
  servicesChangeAt?: string;
  lastChangeAt?: string;
  private relogin?: Promise<boolean>;

  constructor(
    readonly identityId: string,
    readonly name: string,
    readonly enrollmentToken: string,
    readonly keys: DeviceKeys,
    private readonly fc: FleetContext,
  ) {}

  get enrolled(): boolean {
    return this.certPem !== undefined;
  }

  get loggedIn(): boolean {
    return this.apiSessionToken !== undefined;
  }

  /** One-time-token enrollment with a CSR; keeps the issued certificate chain. */
  async enroll(): Promise<boolean> {
    const t0 = performance.now();
    let r: HttpResult;
    try {
      r = await this.fc.enrollClient.request({
        method: 'POST',
        path: `${CLIENT}/enroll?token=${encodeURIComponent(this.enrollmentToken)}`,
        headers: { 'content-type': 'application/x-pem-file', accept: 'application/json' },
        body: Buffer.from(this.keys.csrPem),
        wantBody: true,
      });
    } catch (e) {
      this.fc.stats.record('enroll', t0, performance.now(), transportCode(e));
      return false;
    }
    const t1 = performance.now();
    if (r.status !== 200) {
      this.fc.stats.record('enroll', t0, t1, errorCode(r.status, r.body));
      return false;
    }
    const cert = json(r)?.data?.cert;
    if (typeof cert !== 'string' || !cert.includes('BEGIN CERTIFICATE')) {
      this.fc.stats.record('enroll', t0, t1, '200 NO_CERTIFICATE_IN_REPLY');
      return false;
    }
    this.fc.stats.record('enroll', t0, t1);
    this.certPem = cert;
    return true;
  }

  /** Certificate login: a new mutual-TLS connection (kept for the device's later requests). */
  async login(op: 'login' | 'reauth' = 'login'): Promise<boolean> {
    if (!this.certPem) return false;
    if (op === 'login' || !this.client) {
      await this.client?.close();
      this.client = await createClient({ origin: this.fc.certOrigin, ca: this.fc.ca, connections: 1, kind: 'https', cert: this.certPem, key: this.keys.keyPem, timeoutMs: this.fc.timeoutMs });
    }
    const t0 = performance.now();
    let r: HttpResult;
    try {
      r = await this.client.request({
        method: 'POST',
        path: `${CLIENT}/authenticate?method=cert`,
        headers: { 'content-type': 'application/json', accept: 'application/json' },
        body: Buffer.from(JSON.stringify({ configTypes: this.fc.configTypes })),
        wantBody: true,
      });
    } catch (e) {
      this.fc.stats.record(op, t0, performance.now(), transportCode(e));
      return false;
    }
    const t1 = performance.now();
    const data = r.status === 200 ? json(r)?.data : undefined;
    if (typeof data?.token !== 'string') {
      this.fc.stats.record(op, t0, t1, r.status === 200 ? '200 NO_TOKEN_IN_REPLY' : errorCode(r.status, r.body));
      this.apiSessionToken = undefined;
      return false;
    }
    this.fc.stats.record(op, t0, t1);
    this.apiSessionToken = data.token;
    this.apiSessionId = data.id;
    return true;
  }

  /**
   * A request with the API session: 401 → log in again and repeat once. Records `op` (the time
   * includes a re-login, as the user experiences it). Returns the answer on 2xx, else undefined.
   */
  private async call(op: string, method: string, path: string, body?: unknown, expect?: (status: number) => 'ok' | 'defer' | 'error', deferred?: (t0: number, t1: number, code: string) => void): Promise<HttpResult | undefined> {
    if (!this.client || !this.apiSessionToken) return undefined;
    const t0 = performance.now();
    const send = () =>
      this.client!.request({
        method,
        path,
        headers: body === undefined ? { 'zt-session': this.apiSessionToken!, accept: 'application/json' } : { 'zt-session': this.apiSessionToken!, accept: 'application/json', 'content-type': 'application/json' },
        body: body === undefined ? undefined : Buffer.from(JSON.stringify(body)),
        wantBody: true,
      });
    let r: HttpResult;
    try {
      const used = this.apiSessionToken;
      r = await send();
      if (r.status === 401) {
        // Concurrent requests of this device that all met the 401 share one re-login, and a request
        // sent with a token that was already replaced just goes again with the new one.
        const relogin = this.apiSessionToken !== used ? Promise.resolve(this.apiSessionToken !== undefined) : (this.relogin ??= this.login('reauth').finally(() => (this.relogin = undefined)));
        if (!(await relogin)) {
          this.fc.stats.record(op, t0, performance.now(), '401 (re-login failed)');
          return undefined;
        }
        r = await send();
      }
    } catch (e) {
      this.fc.stats.record(op, t0, performance.now(), transportCode(e));
      return undefined;
    }
    const t1 = performance.now();
    const verdict = expect ? expect(r.status) : r.status >= 200 && r.status < 300 ? 'ok' : 'error';
    if (verdict === 'ok') this.fc.stats.record(op, t0, t1);
    else if (verdict === 'defer') deferred!(t0, t1, errorCode(r.status, r.body));
    else this.fc.stats.record(op, t0, t1, errorCode(r.status, r.body));
    return verdict === 'ok' ? r : undefined;
  }

  /** Every page of the device's services. */
  async listServices(): Promise<boolean> {
    const out: ServiceView[] = [];
    const changeAt = this.lastChangeAt;
    for (let offset = 0; ; offset += 500) {
      const r = await this.call('services', 'GET', `${CLIENT}/services?limit=500&offset=${offset}`);
      if (!r) return false;
      const b = json(r);
      for (const s of b?.data ?? []) out.push({ id: s.id, permissions: Array.isArray(s.permissions) ? s.permissions : [] });
      const total = b?.meta?.pagination?.totalCount;
      if (!Array.isArray(b?.data) || b.data.length === 0 || typeof total !== 'number' || offset + 500 >= total) break;
    }
    this.services = out;
    this.servicesChangeAt = changeAt;
    return true;
  }

  /** Poll for service changes; list the services again when they changed. */
  async pollUpdates(): Promise<boolean> {
    const r = await this.call('serviceUpdates', 'GET', `${CLIENT}/current-api-session/service-updates`);
    if (!r) return false;
    const at = json(r)?.data?.lastChangeAt;
    const changed = typeof at === 'string' && at !== this.lastChangeAt;
    if (typeof at === 'string') this.lastChangeAt = at;
    if (changed || !this.services) return this.listServices();
    return true;
  }

  /** A Dial or Bind session for one of the services the device may use that way (seeded choice). */
  async createSession(type: 'Dial' | 'Bind', pick: (n: number) => number): Promise<'done' | 'none' | 'failed'> {
    if (!this.services && !(await this.listServices())) return 'failed';
    const usable = this.services!.filter((s) => s.permissions.includes(type));
    if (usable.length === 0) return 'none';
    const svc = usable[pick(usable.length)];
    const seenChange = this.servicesChangeAt;
    const op = type === 'Dial' ? 'sessionDial' : 'sessionBind';
    let refused: [number, number, string] | undefined;
    const r = await this.call(
      op, 'POST', `${CLIENT}/sessions`, { serviceId: svc.id, type },
      (status) => (status === 201 || status === 200 ? 'ok' : status === 400 || status === 404 ? 'defer' : 'error'),
      (t0, t1, code) => (refused = [t0, t1, code]),
    );
    if (r) return 'done';
    if (!refused) return 'failed';
    // Refused: a stale view only if the services changed since the device listed them.
    const before = this.lastChangeAt;
    await this.pollUpdates();
    const [t0, t1, code] = refused;
    if (this.lastChangeAt !== seenChange || before !== seenChange) {
      this.fc.stats.record('sessionStale', t0, t1);
      return 'done';
    }
    this.fc.stats.record(op, t0, t1, `${code} (no policy change since the service list)`);
    return 'failed';
  }

  async close(): Promise<void> {
    await this.client?.close().catch(() => {});
    this.client = undefined;
  }
}

function json(r: HttpResult): any {
  if (!r.body || r.body.length === 0) return undefined;
  try {
    return JSON.parse(r.body.toString('utf8'));
  } catch {
    return undefined;
  }
}
