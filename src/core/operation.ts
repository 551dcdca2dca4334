/**
 * The Operation type: one value per endpoint. Routing, the served OpenAPI documents and the
 * contract tests all iterate the same table (src/api/operations.ts); nothing registers a route by hand.
 *
 * Example:
 *   { api: 'management', method: 'get', path: '/identities/{id}', operationId: 'detailIdentity',
 *     auth: 'admin', permission: { family: 'identity', action: 'read' }, spec, handler }
 */
import type { ClientOperationId, FabricOperationId, ManagementOperationId } from './operation-ids.js';
import type { ClientBodies, FabricBodies, ManagementBodies } from './bodies.js';
import type { CollectionName, FieldOf } from '../store/store.js';

/** The Edge Client API, the Edge Management API and the fabric API (`/fabric/v1`). */
export type ApiName = 'client' | 'management' | 'fabric';
export type HttpMethod = 'get' | 'post' | 'put' | 'patch' | 'delete';

/**
 * Who may call an operation.
 * - `none`: no credential.
 * - `partial`: any API session, also while MFA or another secondary factor is still pending.
 * - `session`: a fully authenticated API session.
 * - `admin`: Management and fabric APIs; an admin, or a holder of `permission` (see src/auth/permissions.ts).
 */
export type AuthLevel = 'none' | 'partial' | 'session' | 'admin';

export type PermissionAction = 'read' | 'create' | 'update' | 'delete';

/**
 * The identity a write reaches (changes, or gives, takes or ends a way to act as): the router
 * refuses it with 401 unless the caller `dominates` that identity (src/auth/permissions.ts).
 * - `path`: the path's `{id}` is the identity;
 * - `body`: the body's `field` holds its id;
 * - `record`: the path's `{id}` is a record of `collection` whose `field` holds its id;
 * - `referrer`: the identity whose `field` holds the path's `{id}` (an edge router's own identity).
 * Example: `{ from: 'record', collection: 'enrollments', field: 'identityId' }` (refresh an enrollment).
 */
export type Reach =
  | { from: 'path' }
  | { from: 'body'; field: string }
  | { from: 'record'; collection: CollectionName; field: string }
  | { from: 'referrer'; field: FieldOf<'identities'> };

export interface Permission {
  /** Permission family, the resource's singular wire name: `identity`, `service-policy`, `ops`… */
  family: string;
  action: PermissionAction;
}

/** A request as the HTTP adapters hand it over: plain data, copied synchronously from the transport. */
export interface Req {
  method: string;
  /** Path without query, with runs of `/` collapsed. */
  path: string;
  query: URLSearchParams;
  /** Header names lower-cased. */
  headers: Record<string, string>;
  body: Buffer;
  remoteAddress: string;
  /** DER of the TLS client certificate chain, leaf first; only on the mutual-TLS listener. */
  peerCertificates?: Buffer[];
  /** DER of the TLS client certificate alone: much cheaper than the chain (node builds the chain's
   *  object graph), so hot paths that only need the leaf read this. */
  peerLeaf?: Buffer;
  /** Set by the adapter when the client went away; handlers may stop early. */
  aborted: boolean;
}

export interface Reply {
  status: number;
  /** JSON-serialisable value (sent as JSON) or a string/Buffer sent as is with `contentType`. */
  body?: unknown;
  contentType?: string;
  headers?: Record<string, string>;
  /** Called by the adapter once the reply is written or the client went away (a large answer frees its slot then). */
  finished?: () => void;
}

/**
 * A route outside the two upstream APIs, served on the same listeners (`/metrics`, `/search/…`):
 * matched by exact path or by prefix (`/search/` matches everything under it). Its handler does its
 * own authentication; failures thrown as ApiError render as usual.
 */
export interface RawRoute {
  method: string | '*';
  path: string;
  prefix?: boolean;
  handle(req: Req, requestId: string): Reply | Promise<Reply>;
}

/** The (swagger 2.0) operation object that the served spec carries for this operation. */
export interface OperationSpec {
  summary?: string;
  description?: string;
  tags?: string[];
  consumes?: string[];
  produces?: string[];
  parameters?: Record<string, unknown>[];
  responses: Record<string, unknown>;
  /** Each requirement names schemes and their scopes (the JSON documents leave the other schemes out). */
  security?: Partial<Record<string, string[]>>[];
  [extension: string]: unknown;
}

export interface Operation<C = unknown> {
  api: ApiName;
  method: HttpMethod;
  /** Path relative to the API base path, with `{param}` placeholders, as in the upstream spec. */
  path: string;
  operationId: string;
  auth: AuthLevel;
  permission?: Permission;
  /** Set on writes that reach an identity (see Reach). */
  reaches?: Reach;
  spec: OperationSpec;
  /** Name of the swagger definition the JSON body must satisfy, if any. */
  bodyDefinition?: string;
  /** Body is an array of this definition (bulk operations). */
  bodyIsArray?: boolean;
  /** The spec marks the body parameter required (an empty body is then a 400). */
  bodyRequired?: boolean;
  /** Inline body schema, when the spec has no definition for it. */
  bodySchema?: Record<string, unknown>;
  handler: (ctx: C) => Reply | Promise<Reply>;
}

/** The bounded queue an expensive operation waits in: logins and code checks, or signing/hashing/rendering. */
export type RateLimit = 'auth' | 'heavy';

/**
 * How the body is read:
 * - `spec`: as the spec's body parameter says (required or not, validated against its schema);
 * - `optional`: validated, but accepted empty although the spec marks it required;
 * - `raw`: neither required nor validated; the handler reads `req.body` itself.
 */
export type BodyRule = 'spec' | 'optional' | 'raw';

/** Who may call it. `permission` matters at the admin level only: null there means admins alone. */
export type Guard =
  | { auth: 'none' | 'partial' | 'session'; permission?: null }
  | { auth: 'admin'; permission: Permission | null };

/** An operation served on both APIs alike (the caller's own resources, versions, specs, logins). */
export type SharedOperationId = ClientOperationId & ManagementOperationId;

type Handler<C> = (ctx: C) => Reply | Promise<Reply>;

/** The handler context `C` (whose `body` is `unknown`) with the body the router validated. */
export type WithBody<C, B> = C & { body: B };

/**
 * One member per operation that takes a body, its handler typed with that body as the entry's
 * `body` rule reads it (`optional` and `raw` may leave it undefined), and one for all the
 * operations without a body: an entry's `operationId` picks its handler's type.
 */
type Targets<C, Api, Ids extends string, Bodies> =
  | { [Id in keyof Bodies & Ids]:
      | { api: Api; operationId: Id; body?: 'spec'; handler: Handler<WithBody<C, Bodies[Id]>> }
      | { api: Api; operationId: Id; body: 'optional' | 'raw'; handler: Handler<WithBody<C, Bodies[Id] | undefined>> } }[keyof Bodies & Ids]
  | { api: Api; operationId: Exclude<Ids, keyof Bodies>; body?: BodyRule; handler: Handler<WithBody<C, undefined>> };

/** The bodies of the operations served alike on both APIs. */
type SharedBodies = { [Id in SharedOperationId & keyof ClientBodies & keyof ManagementBodies]: ClientBodies[Id] & ManagementBodies[Id] };

type EntryCommon = Guard & {
  /** The identity this write reaches, for the containment check (see Reach). */
  reaches?: Reach;
  /** The bounded queue it waits in; none when absent. */
  limit?: RateLimit;
};

/**
 * One line of the operation table: which spec operation, what guards it, what runs it. The table
 * is joined with the specs at start-up (src/api/operations.ts), which adds method, path and the
 * body's schema; `api: 'both'` stands for one entry on each API. `body` says how the body is read
 * (`spec` when absent), and the handler's `ctx.body` has the type of that operation's body:
 *   { api: 'management', operationId: 'createIdentity', …, handler: (ctx) => ctx.body.name }
 */
export type OperationEntry<C> = EntryCommon &
  (
    | Targets<C, 'client', ClientOperationId, ClientBodies>
    | Targets<C, 'management', ManagementOperationId, ManagementBodies>
    | Targets<C, 'fabric', FabricOperationId, FabricBodies>
    | Targets<C, 'both', SharedOperationId, SharedBodies>
  );

/**
 * An entry for an operationId known only as a union (a family's standard operations), whose
 * handler reads the body as `unknown`. Such a handler accepts every operation's body, so this is
 * an `OperationEntry`; the compiler cannot see it (it does not check an object against each of
 * hundreds of union members), hence the one cast here.
 */
export function entryOfAnyOperation<C>(
  e: EntryCommon & { api: 'management'; operationId: ManagementOperationId; body?: BodyRule; handler: Handler<C> },
): OperationEntry<C> {
  return e as OperationEntry<C>;
}
