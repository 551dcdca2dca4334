/**
 * Controller membership: each controller keeps `P/members/<controller id>` alive under an etcd
 * lease (a few seconds' TTL, kept alive by the client), holding what `GET /controllers` shows of
 * it and the addresses routers and clients reach it at. A controller that dies (or is cut off from
 * etcd) drops out when its lease expires. The list is read from etcd every second, so it trails by
 * at most that; a change is told to `changed` listeners (the control channel tells its routers).
 */
import type { Etcd3, Lease } from 'etcd3';
import type { Logger } from 'pino';

/** Cluster mode: the live controllers, this one first (what handlers read as `app.cluster`). */
export interface ClusterView {
  members(): Member[];
}

/** What a controller publishes about itself. */
export interface Member {
  id: string;
  name: string;
  certPem: string;
  fingerprint: string;
  ctrlAddress: string;
  baseUrl: string;
  certBaseUrl: string;
  startedAt: number;
  joinedAt: number;
  versionInfo: Record<string, string>;
}

const LEASE_TTL_S = 5;
const REFRESH_MS = 1000;

export class Members {
  private lease?: Lease;
  private timer?: NodeJS.Timeout;
  private known = new Map<string, Member>();
  private closed = false;
  /** Called when the live controllers change (one joined, left, or moved its addresses). */
  readonly changed: (() => void)[] = [];
  /** Called with each new lease (the first, and after a lost one): what hangs on it is put again. */
  readonly registered: ((lease: Lease) => void)[] = [];

  /** The lease this controller's leased keys (membership, router presence) hang on. */
  get currentLease(): Lease | undefined {
    return this.lease;
  }

  constructor(
    private readonly client: Etcd3,
    private readonly prefix: string,
    private readonly self: Member,
    private readonly log: Logger,
  ) {
    this.known.set(self.id, self);
  }

  private get dir() {
    return `${this.prefix}/members/`;
  }

  async start(): Promise<void> {
    await this.register();
    await this.refresh();
    this.timer = setInterval(() => void this.refresh(), REFRESH_MS);
    this.timer.unref();
  }

  /** Put our record under a fresh lease; a lost lease (etcd unreachable past the TTL) registers again. */
  private async register(): Promise<void> {
    while (!this.closed) {
      try {
        const lease = this.client.lease(LEASE_TTL_S, { autoKeepAlive: true });
        lease.on('lost', (err) => {
          if (this.closed) return;
          this.log.warn({ err: String(err?.message ?? err) }, 'cluster: membership lease lost; registering again');
          setTimeout(() => void this.register(), 500).unref();
        });
        await lease.put(this.dir + this.self.id).value(JSON.stringify(this.self));
        this.lease = lease;
        for (const f of this.registered) f(lease);
        return;
      } catch (e) {
        this.log.warn({ err: String((e as Error).message) }, 'cluster: could not register this controller; retrying');
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
  }

  private async refresh(): Promise<void> {
    try {
      const all = await this.client.getAll().prefix(this.dir).strings();
      const next = new Map<string, Member>();
      for (const v of Object.values(all)) {
        try {
          const m = JSON.parse(v) as Member;
          if (typeof m.id === 'string') next.set(m.id, m);
        } catch {
          // Not ours: ignored.
        }
      }
      next.set(this.self.id, this.self);
      const key = (m: Map<string, Member>) => JSON.stringify([...m.values()].map((x) => [x.id, x.ctrlAddress, x.baseUrl]).sort());
      const moved = key(next) !== key(this.known);
      this.known = next;
      if (moved) for (const f of this.changed) f();
    } catch {
      // etcd unreachable: keep the last list (readiness reports the outage).
    }
  }

  /** Live controllers, this one first. */
  list(): Member[] {
    return [this.self, ...[...this.known.values()].filter((m) => m.id !== this.self.id).sort((a, b) => a.id.localeCompare(b.id))];
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearInterval(this.timer);
    // Leave at once rather than when the lease expires.
    await this.lease?.revoke().catch(() => undefined);
  }
}
