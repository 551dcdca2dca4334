/**
 * What every handler receives: the application and the request being served.
 *
 * Core owns only what lies below it (config, store, logger, this controller's facts: `CoreApp`).
 * The handler context is generic in the application it carries: each layer whose code needs
 * services declares, in its own folder, the application type it needs from the layers below it
 * (`ResourceApp` in resources/context.ts, `EventsApp` in events/context.ts), and the API layer's
 * `App` (api/context.ts) extends them with the rest. A handler written for a lower layer's
 * context is therefore assignable to the API's table. src/app.ts builds the one `App`.
 */
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { Store, IdentityRecord } from '../store/store.js';
import type { Operation, Req } from './operation.js';

export interface CoreApp {
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

/** The operation being served, as a handler sees it (its handler is the router's business). */
export type ServedOperation = Omit<Operation, 'handler'>;

export interface Ctx<A extends CoreApp = CoreApp> {
  app: A;
  req: Req;
  op: ServedOperation;
  params: Record<string, string>;
  /** Parsed and validated body (undefined when none); an operation's handler sees it typed by its
   *  spec (`OperationEntry` in operation.ts, the types in bodies.ts). */
  body: unknown;
  requestId: string;
  /** The API-session token the request presented (zt-session or Bearer). */
  token?: string;
  /** The session's identity record. */
  identity?: IdentityRecord;
}
