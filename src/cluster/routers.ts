/**
 * Router presence across the cluster: which controller holds which router. A router connected to
 * this controller is published as `P/routers/<router id>` under this controller's membership lease
 * (with what it reported: hostname, protocols, sync status); the routers others hold come from a
 * watch on `P/routers/` into the same Presence every view reads, so a router is online on every
 * controller. When a controller dies its lease expires and its routers go offline everywhere; a
 * router that reconnects to another controller is published by that one (its put replaces the key
 * and the lease it hangs on) and is online again cluster-wide. Heartbeats never go through etcd:
 * only connects, state reports and disconnects.
 */
import type { Etcd3, Lease } from 'etcd3';
import { prefixEnd, watchPrefix } from './watch.js';
import type { Logger } from 'pino';
import type { Presence, RouterConnection } from '../control/presence.js';
import type { Members } from './members.js';

interface Published extends RouterConnection {
  controllerId: string;
}

export class SharedPresence {
  /** Routers in Presence because another controller holds them. */
  private readonly remote = new Set<string>();
  /** Set while this class itself changes Presence, so those changes are not published back. */
  private applying = false;
  private watch?: { close(): void };
  private closed = false;

  constructor(
    private readonly client: Etcd3,
    private readonly prefix: string,
    private readonly controllerId: string,
    private readonly presence: Presence,
    private readonly members: Members,
    private readonly log: Logger,
  ) {}

  private get dir() {
    return `${this.prefix}/routers/`;
  }

  async start(): Promise<void> {
    this.presence.on('online', (c) => this.local(c));
    this.presence.on('change', (c) => this.local(c));
    this.presence.on('offline', (id) => {
      if (this.applying || this.closed || this.remote.has(id)) return;
      void this.unpublish(id);
    });
    // A new lease (after a lost one) carries none of our routers: publish them again.
    this.members.registered.push((lease) => {
      for (const id of this.presence.ids()) if (!this.remote.has(id)) void this.publish(this.presence.get(id)!, lease);
    });
    await this.follow();
  }

  /**
   * List every published router, then watch from that revision. A watch etcd cancels (it resumes
   * from a revision compacted meanwhile: with no router changes its revision never moved) lists again.
   */
  private async follow(): Promise<void> {
    const res = await this.client.kv.range({ key: Buffer.from(this.dir), range_end: Buffer.from(prefixEnd(this.dir)) });
    const listed = new Set<string>();
    for (const kv of res.kvs) {
      listed.add(kv.key.toString().slice(this.dir.length));
      this.apply(kv.key.toString(), kv.value.toString());
    }
    for (const id of [...this.remote]) if (!listed.has(id)) this.apply(this.dir + id, undefined);
    this.watch = watchPrefix(this.client, this.dir, Number(res.header.revision) + 1, {
      events: (events) => {
        for (const ev of events) this.apply(ev.kv.key.toString(), ev.type === 'Put' ? ev.kv.value.toString() : undefined);
      },
      compacted: () => {
        const again = async (): Promise<void> => {
          if (this.closed) return;
          try {
            await this.follow();
          } catch {
            setTimeout(() => void again(), 1000).unref();
          }
        };
        void again();
      },
    });
  }

  private local(c: RouterConnection) {
    if (this.applying || this.closed) return;
    if (this.remote.delete(c.routerId)) {
      // It was held elsewhere and has now connected here.
    }
    const lease = this.members.currentLease;
    if (lease) void this.publish(c, lease);
  }

  private async publish(c: RouterConnection, lease: Lease) {
    try {
      await lease.put(this.dir + c.routerId).value(JSON.stringify({ ...c, controllerId: this.controllerId } satisfies Published));
    } catch (e) {
      this.log.warn({ routerId: c.routerId, err: String((e as Error).message) }, 'cluster: could not publish router presence; trying again');
      // etcd unreachable (no quorum): publish the latest state once it answers again, while the
      // router is still connected here.
      setTimeout(() => {
        const now = this.presence.get(c.routerId);
        const current = this.members.currentLease;
        if (!this.closed && now && !this.remote.has(c.routerId) && current) void this.publish(now, current);
      }, 1000).unref();
    }
  }

  /** Remove the key only while it is still ours: a router that moved on is another controller's key. */
  private async unpublish(id: string) {
    const lease = this.members.currentLease;
    if (!lease) return;
    try {
      const leaseId = await lease.grant();
      await this.client.kv.txn({
        compare: [{ key: Buffer.from(this.dir + id), target: 'Lease', result: 'Equal', lease: leaseId }],
        success: [{ request_delete_range: { key: Buffer.from(this.dir + id) } }],
        failure: [],
      });
    } catch (e) {
      this.log.warn({ routerId: id, err: String((e as Error).message) }, 'cluster: could not withdraw router presence');
    }
  }

  private apply(key: string, value: string | undefined) {
    const id = key.slice(this.dir.length);
    let rec: Published | undefined;
    if (value !== undefined) {
      try {
        rec = JSON.parse(value) as Published;
      } catch {
        return;
      }
    }
    this.applying = true;
    try {
      if (!rec || rec.controllerId === this.controllerId) {
        // Gone (lease expired, or withdrawn), or ours: drop the copy of another controller's router.
        if (this.remote.delete(id)) this.presence.offline(id);
        return;
      }
      // Held by another controller. A router this controller still believes connected is left to
      // its own channel (which drops it on the next missed heartbeat).
      if (this.presence.isOnline(id) && !this.remote.has(id)) return;
      const { controllerId: _, ...conn } = rec;
      this.remote.add(id);
      this.presence.online(conn);
    } finally {
      this.applying = false;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    this.watch?.close();
  }
}
