/**
 * The application the API layer serves: every service, as src/app.ts builds it. It extends what
 * the layers below declare they need (`ResourceApp`, `EventsApp`), so their handlers and
 * functions take it as it is, and adds what only the API and the layers above it use.
 *
 * The managers of src/managers/ are members here too, each built in src/app.ts with its
 * collaborators passed in.
 */
import type { ApiName, Operation, OperationEntry, Reply } from '../core/operation.js';
import type { SessionCtx } from '../auth/api-sessions.js';
import type { SigningKeys } from '../auth/tokens.js';
import type { ClusterView } from '../cluster/members.js';
import type { Traces } from '../control/traces.js';
import type { EventsApp } from '../events/context.js';
import type { WorkerPool } from '../pool.js';
import type { ResourceApp } from '../resources/context.js';
import type { Authenticators } from '../managers/authenticators.js';
import type { ControllerSettings } from '../managers/controller-settings.js';
import type { Fabric } from '../managers/fabric.js';
import type { Identities } from '../managers/identities.js';
import type { Logins } from '../managers/logins.js';
import type { Mfa } from '../managers/mfa.js';
import type { OidcSessions } from '../managers/oidc-sessions.js';
import type { PostureResponses } from '../managers/posture-responses.js';
import type { ServiceSessions } from '../managers/service-sessions.js';
import type { Enrollments } from '../managers/enrollments.js';
import type { Issuing } from '../managers/issuing.js';
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
  /** The managers (src/managers/): each family's or flow's rules and writes, which the handlers call. */
  authenticators: Authenticators;
  controllerSettings: ControllerSettings;
  fabric: Fabric;
  identities: Identities;
  logins: Logins;
  mfa: Mfa;
  oidcSessions: OidcSessions;
  postureResponses: PostureResponses;
  serviceSessions: ServiceSessions;
  issuing: Issuing;
  enrollments: Enrollments;
}

export type Ctx = SessionCtx<App>;
export type Entry = OperationEntry<Ctx>;
export type Handler = (ctx: Ctx) => Reply | Promise<Reply>;
export type Op = Operation<Ctx>;
