/** What every handler receives: the application's services and the request being served. */
import type { Member } from '../cluster/members.js';
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { Store, Rec } from '../store/store.js';
import type { WorkerPool } from '../pool.js';
import type { Pki } from '../pki/bootstrap.js';
import type { ApiSessions, ApiSession } from '../auth/api-sessions.js';
import type { ApiName, Operation, Req } from './operation.js';
import type { BodyValidator } from './validate.js';
import type { Presence } from '../control/presence.js';
import type { AuthServices } from '../auth/services.js';
import type { PolicyEngine } from '../policy/engine.js';
import type { Traces } from '../control/traces.js';
import type { SigningKeys } from '../auth/tokens.js';

export interface App {
  config: Config;
  store: Store;
  pool: WorkerPool;
  sessions: ApiSessions;
  log: Logger;
  pki: Pki;
  validators: Record<ApiName, BodyValidator>;
  /** External JWT verification and the rate-limiting queues (issue #6). */
  auth: AuthServices;
  /** Routers connected over the control channel (isOnline). */
  presence: Presence;
  /** The role index and everything derived from it (issue #4). */
  policy: PolicyEngine;
  /** Identity trace specs in force (`PUT /identities/{id}/trace`), pushed to connected routers. */
  traces: Traces;
  /** This controller's stable id (`GET /controllers`, per-controller settings); kept in the data directory. */
  controllerId: string;
  /** Token signing keys of every controller (API sessions, sessions); the JWKS. */
  keys: SigningKeys;
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
  /** Cluster mode: the live controllers (src/cluster/members.ts), this one first. */
  cluster?: { members(): Member[] };
}

export interface Ctx {
  app: App;
  req: Req;
  op: Operation<Ctx>;
  params: Record<string, string>;
  /** Parsed and validated JSON body (undefined when none). */
  body: any;
  requestId: string;
  session?: ApiSession;
  /** The API-session token the request presented (zt-session or Bearer). */
  token?: string;
  /** The session's identity record. */
  identity?: Rec;
}

export type Op = Operation<Ctx>;
