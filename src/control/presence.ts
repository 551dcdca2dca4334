/**
 * Which routers are connected to this controller right now. The router control channel
 * (issue #7) reports connects and disconnects here; every view that shows `isOnline`
 * (edge router lists, current-identity edge routers, service edge routers, policy advice) reads it.
 *
 * Example: `presence.isOnline(routerId)` → true while the router's control channel is up.
 */
import { EventEmitter } from 'node:events';

export interface RouterConnection {
  routerId: string;
  hostname: string;
  /** Protocol → address, as the router reported (`{ tls: 'tls:host:3022' }`). */
  protocols: Record<string, string>;
  connectedAt: number;
}

export class Presence extends EventEmitter<{ online: [RouterConnection]; offline: [string] }> {
  private readonly connected = new Map<string, RouterConnection>();

  isOnline(routerId: string): boolean {
    return this.connected.has(routerId);
  }

  get(routerId: string): RouterConnection | undefined {
    return this.connected.get(routerId);
  }

  online(conn: RouterConnection): void {
    this.connected.set(conn.routerId, conn);
    this.emit('online', conn);
  }

  offline(routerId: string): void {
    if (this.connected.delete(routerId)) this.emit('offline', routerId);
  }

  get size(): number {
    return this.connected.size;
  }
}
