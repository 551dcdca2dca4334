/**
 * Simulated routers for the fleet run, through the router simulator of the operations issue (#7),
 * `bench/router-sim.ts`, when it is there. The fleet expects it to export
 *
 *   startRouterFleet(opts: {
 *     origin: string;            // https://127.0.0.1:<port> of the controller API
 *     ca: Buffer;                // CA bundle that verifies the controller
 *     adminToken: string;        // Management API session (to read enrollment JWTs, …)
 *     edgeRouterIds: string[];   // the model's edge routers to enroll, connect and report as
 *     log?: (s: string) => void;
 *   }): Promise<{ stop(): Promise<RouterFleetReport> }>
 *
 * with `RouterFleetReport = { connected: number; errors: Record<string, number>; [k: string]: unknown }`.
 * Without the module, or without that export, routers are reported as not simulated (and why) —
 * never as simulated.
 */
import fs from 'node:fs';
import path from 'node:path';
import { ROOT } from '../lib/controller.js';

export interface RouterFleetReport {
  connected: number;
  errors: Record<string, number>;
  [k: string]: unknown;
}

export interface RouterFleetStatus {
  simulated: boolean;
  /** Why not, when not. */
  reason?: string;
  requested: number;
  report?: RouterFleetReport;
}

export interface RouterFleetHandle {
  stop(): Promise<RouterFleetStatus>;
}

/** Whether the router simulator is there (without starting it): undefined when it is, else why not. */
export function routerSimMissing(): string | undefined {
  return fs.existsSync(path.join(ROOT, 'dist', 'bench', 'router-sim.js')) ? undefined : 'bench/router-sim.ts (issue #7) is not in this tree';
}

export async function startRouters(opts: { origin: string; ca: Buffer; adminToken: string; edgeRouterIds: string[]; log: (s: string) => void }): Promise<RouterFleetHandle> {
  const requested = opts.edgeRouterIds.length;
  const notSimulated = (reason: string): RouterFleetHandle => ({ stop: async () => ({ simulated: false, reason, requested }) });
  if (requested === 0) return notSimulated('no routers requested (--routers 0)');
  const file = path.join(ROOT, 'dist', 'bench', 'router-sim.js');
  const missing = routerSimMissing();
  if (missing) return notSimulated(missing);
  let mod: Record<string, unknown>;
  try {
    mod = await import(file);
  } catch (e) {
    return notSimulated(`bench/router-sim.js failed to load: ${(e as Error).message}`);
  }
  const start = mod.startRouterFleet;
  if (typeof start !== 'function') return notSimulated(`bench/router-sim.js exports no startRouterFleet() (exports: ${Object.keys(mod).join(', ') || 'none'})`);
  const handle = (await start({ origin: opts.origin, ca: opts.ca, adminToken: opts.adminToken, edgeRouterIds: opts.edgeRouterIds, log: opts.log })) as { stop(): Promise<RouterFleetReport> };
  return {
    stop: async () => ({ simulated: true, requested, report: await handle.stop() }),
  };
}
