/**
 * The one table of what a request body may hold beyond its type: string lengths, control
 * characters, number ranges, list and map sizes. `BodyValidator` (validate.ts) writes these into
 * the JSON Schemas it compiles from the upstream definitions, so every operation whose body has a
 * property of that name gets the same bound, and a violation is a 400 COULD_NOT_VALIDATE naming
 * the field like any other. docs/limits.md shows this table; test/unit/api/limits.test.ts keeps the
 * two in step.
 *
 * Keys are body property names (`FIELD_LIMITS`, applied wherever the property is written inline)
 * or definition names (`DEFINITION_LIMITS`, for shared definitions properties `$ref`: `roles` is
 * every policy role list). A bound the upstream spec gives itself (envInfo's 255, password's 100,
 * cost's 0..65535) is kept when it is tighter.
 *
 * Example: `FIELD_LIMITS.terminatorStrategy` → `{ maxLength: 255, plain: true }`: a strategy of
 * 256 characters, or one holding a NUL, is refused with cause.field `terminatorStrategy`.
 */
import { MAX_DISABLE_MINUTES } from '../auth/disable.js';

export interface Limit {
  /** Strings: longest accepted, in characters (code points). */
  maxLength?: number;
  /** Strings: no control characters (C0 including NUL, DEL, C1): names and other identifiers. */
  plain?: boolean;
  /** Integers: the meaningful range. */
  minimum?: number;
  maximum?: number;
  /** Lists: most entries. */
  maxItems?: number;
  /** Maps: most keys. */
  maxProperties?: number;
  /** Lists: the bound of each entry; maps: of each value. */
  items?: Limit;
  /** Maps: the bound of each key. */
  keys?: Limit;
}

/** A `name` (no explicit entry needed elsewhere: names are identifiers everywhere). */
export const NAME_MAX_LENGTH = 1024;
/** Any string without an entry: PEM chains, CSRs, JWTs and free text fit. */
export const STRING_MAX_LENGTH = 65536;
/** Any list without an entry. */
export const LIST_MAX_ITEMS = 1000;
/** Integers without an entry: what a double holds exactly (Go reads them as int64). */
export const INTEGER_RANGE = { minimum: -Number.MAX_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER };

/** Policy role lists (`identityRoles`, `serviceRoles`, `edgeRouterRoles`, `postureCheckRoles`, CA `identityRoles`). */
const ROLE_LIST_MAX_ITEMS = 10000;
/** Role attributes of one entity. */
const ATTRIBUTE_LIST_MAX_ITEMS = 1000;
/** Keys of one `tags` or `appData` map. */
const TAG_MAX_KEYS = 1000;

const id: Limit = { maxLength: 1024, plain: true };
const url: Limit = { maxLength: 2048, plain: true };
const short: Limit = { maxLength: 255, plain: true };
const attribute: Limit = { maxLength: NAME_MAX_LENGTH, plain: true };
/** `#attribute` or `@id`. */
const roleEntry: Limit = { maxLength: NAME_MAX_LENGTH + 1, plain: true };
/** Go's time.Duration is int64 nanoseconds: the longest duration in milliseconds. */
const GO_DURATION_MAX_MS = 9_223_372_036_854;
const INT32_MAX = 2_147_483_647;

/** By body property name. */
export const FIELD_LIMITS: Record<string, Limit> = {
  name: { maxLength: NAME_MAX_LENGTH, plain: true },
  // Services, terminators.
  terminatorStrategy: short,
  maxIdleTimeMillis: { minimum: 0, maximum: GO_DURATION_MAX_MS },
  roleAttributes: { maxItems: ATTRIBUTE_LIST_MAX_ITEMS, items: attribute },
  configs: { items: id },
  address: id,
  binding: short,
  service: id,
  router: id,
  identity: id,
  // Identities, authenticators, enrollments.
  externalId: { maxLength: 2048, plain: true },
  authPolicyId: id,
  identityId: id,
  caId: id,
  username: id,
  method: short,
  durationMinutes: { minimum: 0, maximum: MAX_DISABLE_MINUTES },
  // Configs, service configs, sessions.
  configTypeId: id,
  configId: id,
  serviceId: id,
  // External JWT signers.
  kid: id,
  issuer: url,
  audience: url,
  clientId: id,
  claimsProperty: id,
  enrollNameClaimsSelector: id,
  enrollAttributeClaimsSelector: id,
  enrollAuthPolicyId: id,
  scopes: { items: id },
  jwksEndpoint: url,
  externalAuthUrl: url,
  // Auth policies: negative numbers are normalised as upstream does (0, 0, 5); the ceilings are ours.
  allowedSigners: { items: id },
  requireExtJwtSigner: id,
  maxAttempts: { maximum: INT32_MAX },
  lockoutDurationMinutes: { maximum: MAX_DISABLE_MINUTES },
  minPasswordLength: { maximum: 100 }, // passwords are at most 100 characters
  // CAs.
  identityNameFormat: id,
  matcherCriteria: id,
  parserCriteria: id,
  index: { minimum: 0, maximum: 65535 },
  // Controller settings (the OIDC URI lists are checked by src/control/settings.ts: 100 URIs of 2,048).
  controllerId: id,
  // Posture checks (-1: no timeout).
  domains: { items: short },
  macAddresses: { items: { maxLength: 64, plain: true } },
  versions: { items: short },
  path: { maxLength: 4096, plain: true },
  hashes: { items: id },
  signerFingerprint: id,
  signerFingerprints: { items: id },
  timeoutSeconds: { minimum: -1, maximum: INT32_MAX },
  // Client posture responses: `id` is the posture check's.
  id,
  // Identity tracing.
  traceId: short,
  duration: short,
  channels: { items: short },
};

/** By definition name, for properties that `$ref` a shared definition. */
export const DEFINITION_LIMITS: Record<string, Limit> = {
  /** Every policy role list. */
  roles: { maxItems: ROLE_LIST_MAX_ITEMS, items: roleEntry },
  /** `roleAttributes` of identities, edge routers, posture checks. */
  attributes: { maxItems: ATTRIBUTE_LIST_MAX_ITEMS, items: attribute },
  /** `tags` and `appData`: values stay free text (STRING_MAX_LENGTH). */
  subTags: { maxProperties: TAG_MAX_KEYS, keys: { maxLength: NAME_MAX_LENGTH, plain: true } },
  /** Identity `serviceHostingCosts` / `serviceHostingPrecedences`: keys must also name a service (src/resources/identities.ts). */
  terminatorCostMap: { maxProperties: ROLE_LIST_MAX_ITEMS, keys: id },
  terminatorPrecedenceMap: { maxProperties: ROLE_LIST_MAX_ITEMS, keys: id },
};

/** C0 (NUL included), DEL and C1 control characters. */
export const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f-\u009f]/;
