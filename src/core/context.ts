/**
 * What every handler receives: the application and the request being served.
 *
 * The application's services that live above this layer (worker pool, PKI, API sessions, body
 * validators, rate limits, router presence, policy engine, traces, signing keys, cluster) are
 * declared by the module that provides each, as a member of `Services` (and the caller's API
 * session, by the session registry, as a member of `Ctx`):
 *
 *   declare module '../core/context.js' {
 *     interface Services { policy: PolicyEngine }
 *   }
 *
 * so this layer names none of them and every import points down; src/app.ts builds the whole.
 */
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { Store, IdentityRecord } from '../store/store.js';
import type { Operation, OperationEntry, Reply, Req } from './operation.js';

/** The services of the layers above, one member per providing module (see above). */
export interface Services {}

export interface App extends Services {
  config: Config;
  store: Store;
  log: Logger;
  /** This controller's stable id (`GET /controllers`, per-controller settings); kept in the data directory. */
  controllerId: string;
  /** Epoch ms of this process's start (service-update floor). */
  startedAt: number;
  /** Controller build version, e.g. `v0.1.0`, with its git revision and build date. */
  version: string;
  revision: string;
  buildDate: string;
  /** Random per-process id sent as `mesh-instance-id`. */
  instanceId: string;
  /** `https://<advertised host:port>` */
  baseUrl: string;
  /** `https://<advertised host:cert port>`: the mutual-TLS listener, the `iss` of enrollment JWTs. */
  certBaseUrl: string;
}

export interface Ctx {
  app: App;
  req: Req;
  op: Operation<Ctx>;
  params: Record<string, string>;
  /** Parsed and validated JSON body (undefined when none). */
  body: any;
  requestId: string;
  /** The API-session token the request presented (zt-session or Bearer). */
  token?: string;
  /** The session's identity record. */
  identity?: IdentityRecord;
}

export type Op = Operation<Ctx>;
export type Entry = OperationEntry<Ctx>;
export type Handler = (ctx: Ctx) => Reply | Promise<Reply>;
