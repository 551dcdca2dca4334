/**
 * Which routers are connected to this controller right now, and what they reported. The router
 * control channel (channel.ts) reports connects, state reports and disconnects here; every view that
 * shows `isOnline`, `hostname`, `supportedProtocols` or `syncStatus` (edge router and transit router
 * details and lists, current-identity edge routers, service edge routers, session edge routers,
 * policy advice) reads it. Kept in memory only: after a restart every router is offline until it
 * reconnects, which is the truth.
 *
 * Example:
 *   presence.isOnline(routerId)            // true while the router's control channel is up
 *   presence.state(routerId)               // { isOnline, hostname, supportedProtocols, syncStatus }
 */
import { EventEmitter } from 'node:events';

/** Upstream's sync states (api-reference "Edge router"). We use HELLO → IN_PROGRESS → DONE, and DISCONNECTED. */
const SYNC_STATUSES = [
  'SYNC_NEW', 'SYNC_QUEUED', 'SYNC_HELLO', 'SYNC_HELLO_WAIT', 'SYNC_RESYNC_WAIT', 'SYNC_IN_PROGRESS', 'SYNC_DONE',
  'SYNC_UNKNOWN', 'SYNC_DISCONNECTED', 'SYNC_HELLO_TIMEOUT', 'SYNC_ERROR',
] as const;
export type SyncStatus = (typeof SYNC_STATUSES)[number];

export type RouterKind = 'edge' | 'transit';

/** `versionInfo` as upstream renders it on edge routers. */
export interface VersionInfo {
  os: string;
  arch: string;
  version: string;
  revision: string;
  buildDate: string;
}

/** One network interface a router reported (upstream `interface`). */
export interface RouterInterface {
  name: string;
  hardwareAddress: string;
  mtu: number;
  index: number;
  isUp: boolean;
  isRunning: boolean;
  isLoopback: boolean;
  isBroadcast: boolean;
  isMulticast: boolean;
  addresses: string[];
}

export interface RouterConnection {
  routerId: string;
  kind: RouterKind;
  hostname: string;
  /** Protocol → address, as the router reported (`{ tls: 'tls:host:3022' }`). */
  protocols: Record<string, string>;
  connectedAt: number;
  syncStatus: SyncStatus;
  versionInfo?: VersionInfo;
  interfaces?: RouterInterface[];
  /** Where the control channel connects from (for operators; not shown on the wire). */
  remoteAddress?: string;
}

/** What the wire views show about a router's connection. */
export interface RouterLiveState {
  isOnline: boolean;
  hostname: string;
  supportedProtocols: Record<string, string>;
  syncStatus: SyncStatus;
}

const OFFLINE: RouterLiveState = Object.freeze({ isOnline: false, hostname: '', supportedProtocols: Object.freeze({}) as Record<string, string>, syncStatus: 'SYNC_DISCONNECTED' });

export class Presence extends EventEmitter<{ online: [RouterConnection]; offline: [string]; change: [RouterConnection] }> {
  private readonly connected = new Map<string, RouterConnection>();

  isOnline(routerId: string): boolean {
    return this.connected.has(routerId);
  }

  get(routerId: string): RouterConnection | undefined {
    return this.connected.get(routerId);
  }

  /** The live fields every router view renders; the offline values when not connected. */
  state(routerId: string): RouterLiveState {
    const c = this.connected.get(routerId);
    if (!c) return { ...OFFLINE, supportedProtocols: {} };
    return { isOnline: true, hostname: c.hostname, supportedProtocols: { ...c.protocols }, syncStatus: c.syncStatus };
  }

  online(conn: RouterConnection): void {
    this.connected.set(conn.routerId, conn);
    this.emit('online', conn);
  }

  /** A connected router reported new state (hostname, protocols, sync progress). */
  update(routerId: string, patch: Partial<Omit<RouterConnection, 'routerId' | 'kind' | 'connectedAt'>>): void {
    const c = this.connected.get(routerId);
    if (!c) return;
    const next = { ...c, ...patch };
    this.connected.set(routerId, next);
    this.emit('change', next);
  }

  offline(routerId: string): void {
    if (this.connected.delete(routerId)) this.emit('offline', routerId);
  }

  /** Ids of the connected routers. */
  ids(): IterableIterator<string> {
    return this.connected.keys();
  }

  /** Connected routers by kind (metrics). */
  countByKind(): Record<RouterKind, number> {
    const out: Record<RouterKind, number> = { edge: 0, transit: 0 };
    for (const c of this.connected.values()) out[c.kind]++;
    return out;
  }

  get size(): number {
    return this.connected.size;
  }
}
