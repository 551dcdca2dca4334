/**
 * What the resource families need of the application, from the layers below them, and the
 * handler context of their operations. Where a family needs a capability of a higher layer (the
 * worker pool hashes passwords, cluster membership names the controllers) it names only that
 * capability here, and the composition (src/app.ts) passes the real thing. The API layer's `App`
 * (src/api/context.ts) extends this, so these handlers join its table as they are.
 */
import type { OperationEntry, Reply } from '../core/operation.js';
import type { SessionCtx } from '../auth/api-sessions.js';
import type { AuthServices } from '../auth/services.js';
import type { PasswordApp } from '../auth/passwords.js';
import type { Presence } from '../control/presence.js';
import type { Pki } from '../pki/bootstrap.js';
import type { PolicyEngine } from '../policy/engine.js';

export interface ResourceApp extends PasswordApp {
  auth: AuthServices;
  pki: Pki;
  presence: Presence;
  policy: PolicyEngine;
  /** Cluster mode: the live controllers, whose addresses enrollment JWTs name (cluster/, above this layer). */
  cluster?: { members(): { certBaseUrl: string }[] };
}

export type Ctx = SessionCtx<ResourceApp>;
export type Entry = OperationEntry<Ctx>;
export type Handler = (ctx: Ctx) => Reply | Promise<Reply>;
