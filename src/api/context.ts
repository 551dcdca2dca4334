/**
 * The application the API layer serves: every service, as src/app.ts builds it. It extends what
 * the layers below declare they need (`ResourceApp`, `EventsApp`), so their handlers and
 * functions take it as it is, and adds what only the API and the layers above it use.
 *
 * The managers of src/managers/ (issue #33) are members here too, each built in src/app.ts with
 * its collaborators passed in.
 */
import type { ApiName, Operation, OperationEntry, Reply } from '../core/operation.js';
import type { SessionCtx } from '../auth/api-sessions.js';
import type { SigningKeys } from '../auth/tokens.js';
import type { ClusterView } from '../cluster/members.js';
import type { Traces } from '../control/traces.js';
import type { EventsApp } from '../events/context.js';
import type { WorkerPool } from '../pool.js';
import type { ResourceApp } from '../resources/context.js';
import type { BodyValidator } from './validate.js';

export interface App extends ResourceApp, EventsApp {
  /** The worker threads that hash, sign and verify. */
  pool: WorkerPool;
  /** Token signing keys of every controller (API sessions, sessions); the JWKS. */
  keys: SigningKeys;
  /** Request body validation against each API's spec. */
  validators: Record<ApiName, BodyValidator>;
  /** Identity trace specs in force (`PUT /identities/{id}/trace`), pushed to connected routers. */
  traces: Traces;
  /** Cluster mode, once this controller has announced itself: the live controllers, this one first. */
  cluster?: ClusterView;
}

export type Ctx = SessionCtx<App>;
export type Entry = OperationEntry<Ctx>;
export type Handler = (ctx: Ctx) => Reply | Promise<Reply>;
export type Op = Operation<Ctx>;
