/**
 * The one error catalog. Every failure that reaches a client is an ApiError built here and
 * rendered by `renderError` in envelope.ts, so codes, statuses and messages never drift.
 *
 * Example: `throw errors.notFound('identities', id)` → 404 `NOT_FOUND`.
 */

export interface FieldCause {
  field: string;
  reason: string;
  value: string;
}

export interface NestedCause {
  code?: string;
  message: string;
  data?: unknown;
}

export type ErrorCause = FieldCause | NestedCause;

const catalog = {
  NOT_FOUND: [404, 'The resource requested was not found or is no longer available'],
  UNHANDLED: [500, 'An unhandled error occurred'],
  INVALID_FIELD: [400, 'The field contains an invalid value'],
  ENTITY_CAN_NOT_BE_DELETED: [400, 'The entity requested for delete can not be deleted'],
  ENTITY_CAN_NOT_BE_UPDATED: [400, 'The entity requested for update can not be updated'],
  COULD_NOT_VALIDATE: [400, 'The supplied request contains an invalid document or no valid accept content were available, see cause'],
  UNAUTHORIZED: [401, 'The request could not be completed. The session is not authorized or the credentials are invalid'],
  FORBIDDEN: [403, 'The request is forbidden'],
  INVALID_FILTER: [400, 'The filter query supplied is invalid'],
  INVALID_PAGINATION: [400, 'The pagination properties provided are invalid'],
  INVALID_SORT_IDENTIFIER: [400, 'The sort order supplied is invalid'],
  METHOD_NOT_ALLOWED: [405, 'The resource requested does not support this HTTP verb'],
  COULD_NOT_PARSE_BODY: [400, 'The body of the request could not be parsed'],
  REQUEST_TOO_LARGE: [413, 'The body of the request exceeds the maximum allowed size'],
  REQUEST_HEADERS_TOO_LARGE: [431, 'The request line and headers exceed the maximum allowed size'],
  INVALID_CONTENT_TYPE: [400, 'The content type of the request is not supported'],
  INVALID_AUTH: [401, 'The authentication request failed'],
  INVALID_AUTH_METHOD: [400, 'The authentication method is not supported'],
  CAN_NOT_DELETE_REFERENCED_ENTITY: [409, 'The entity requested for delete is referenced by other entities and can not be deleted'],
  REFERENCED_ENTITY_NOT_FOUND: [400, 'A referenced entity does not exist'],
  INVALID_AUTHENTICATOR_PROPERTIES: [400, 'The authenticator properties are not valid for its method'],
  CAN_NOT_UPDATE_AUTHENTICATOR: [409, 'The authenticator can not be updated in this way'],
  MAX_AUTHENTICATOR_METHODS_REACHED: [409, 'The identity already has an authenticator of this method'],
  CERTIFICATE_IS_NOT_CA: [400, 'The certificate supplied is not a certificate authority'],
  INVALID_CERT_PEM: [400, 'The certificate PEM is invalid'],
  CERT_IN_USE: [409, 'The certificate is already in use by another authenticator or CA'],
  RATE_LIMITED: [429, 'The rate limit has been exceeded. Please try again later'],
  SERVER_TOO_MANY_REQUESTS: [429, 'Too many requests, the server is busy. Please try again later'],
  TIMEOUT: [503, 'The request timed out'],
  SHUTTING_DOWN: [503, 'The controller is shutting down and did not finish this request in time; it may or may not have taken effect'],
  // Fabric API cluster operations on a controller that is not clustered (as upstream without Raft).
  SERVER_NOT_RUNNING_IN_HA_MODE: [400, 'The controller is not running in cluster (HA) mode'],
  CLUSTER_HAS_NO_LEADER: [503, 'The cluster has no leader or can not be reached; the write may not have been made. Please try again later'],
  ENROLLMENT_EXISTS: [409, 'An enrollment of this method already exists for the identity'],
  MFA_EXISTS: [409, 'An MFA enrollment already exists for this identity'],
  MFA_ENROLLMENT_NOT_STARTED: [404, 'MFA enrollment has not been started'],
  MFA_INVALID_TOKEN: [400, 'The MFA code supplied is not valid'],
  MFA_NOT_ENROLLED: [409, 'The identity is not enrolled in MFA'],
  INVALID_BACKING_TOKEN_TYPE: [400, 'The API session is not backed by a token of the required type'],
  INVALID_POSTURE: [409, 'The request failed posture checks'],
  NO_EDGE_ROUTERS_AVAILABLE: [400, 'No edge routers are assigned to both the identity and the service'],
  // PKI and enrollment.
  COULD_NOT_PROCESS_CSR: [400, 'The certificate signing request could not be processed'],
  MISSING_OR_INVALID_CSR: [400, 'A certificate signing request is missing or invalid'],
  INVALID_ENROLLMENT_TOKEN: [400, 'The enrollment token is invalid or has already been used'],
  ENROLLMENT_EXPIRED: [400, 'The enrollment has expired'],
  INVALID_ENROLL_METHOD: [400, 'The enrollment method is invalid or does not match the enrollment'],
  ENROLLMENT_CA_NOT_VALID: [400, 'The CA of the enrollment is not valid for enrollment'],
  ENROLLMENT_NO_VALID_CAS: [400, 'There are no CAs that allow this enrollment'],
  CERT_FAILED_VALIDATION: [400, 'The client certificate failed validation'],
  CERTIFICATE_FAILED_VALIDATION: [400, 'The certificate failed validation'],
  MISSING_CERT_CLAIM: [400, 'The certificate does not hold the claim the CA requires'],
  INVALID_ENROLLMENT_NOT_ALLOWED: [409, 'This enrollment is not allowed by the configuration'],
  INVALID_ENROLLMENT_ALREADY_ENROLLED: [410, 'The token has already been used to enroll'],
  ENROLLMENT_IDENTITY_ALREADY_ENROLLED: [409, 'An identity is already enrolled for this token'],
  CA_ALREADY_VERIFIED: [409, 'The CA has already been verified'],
  EXPECTED_PEM_CERTIFICATE: [400, 'Expected a PEM encoded certificate'],
  COULD_NOT_PARSE_DER_BLOCK: [400, 'The DER block of the certificate could not be parsed'],
  COULD_NOT_PARSE_PEM_BLOCK: [400, 'The PEM block could not be parsed'],
  INVALID_COMMON_NAME: [400, 'The common name of the certificate is not valid'],
  INVALID_CLIENT_CERT: [400, 'The client certificate is not valid'],
  UNSUPPORTED_MEDIA: [415, 'The requested media type is not supported'],
  NOT_ACCEPTABLE: [406, 'No acceptable response content type'],
} as const satisfies Record<string, readonly [number, string]>;

export type ErrorCode = keyof typeof catalog;

export class ApiError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message?: string,
    readonly errorCause?: ErrorCause,
    readonly headers?: Record<string, string>,
  ) {
    super(message ?? catalog[code][1]);
    this.status = catalog[code][0];
  }
}

/** Stringify a field value the way upstream does (`fmt %v`): strings raw, everything else JSON. */
export function causeValue(value: unknown): string {
  if (value === undefined) return '';
  if (typeof value === 'string') return value.length > 256 ? value.slice(0, 256) + '…' : value;
  const s = JSON.stringify(value) ?? String(value);
  return s.length > 256 ? s.slice(0, 256) + '…' : s;
}

/**
 * Retry-After (seconds) of a 429 or 503 whose source does not know better: every such answer
 * carries one (renderError, and the router for raw routes), so a client backs off instead of
 * retrying at once. A queue's refusal says when it expects a slot (Limiter), the MFA brake when
 * its window ends, a cluster write how long an etcd election takes (cluster/errors.ts).
 */
export const RETRY_AFTER_SECONDS: Readonly<Record<number, number>> = { 429: 1, 503: 2 };

/** The Retry-After a reply of `status` carries by default, or undefined when it takes none. */
export const defaultRetryAfter = (status: number): string | undefined => {
  const s = RETRY_AFTER_SECONDS[status];
  return s === undefined ? undefined : String(s);
};

/** Whole seconds, at least 1, of a wait in ms: the Retry-After value for it. */
export const retryAfterSeconds = (ms: number): number => Math.max(1, Math.ceil(ms / 1000));

export const errors = {
  notFound: (entity?: string, id?: string) =>
    new ApiError('NOT_FOUND', undefined, entity && id !== undefined ? { code: 'NOT_FOUND', message: `${entity} with id ${id} not found` } : undefined),
  unauthorized: (headers?: Record<string, string>) => new ApiError('UNAUTHORIZED', undefined, undefined, headers),
  invalidAuth: () => new ApiError('INVALID_AUTH'),
  field: (field: string, reason: string, value?: unknown) =>
    new ApiError('COULD_NOT_VALIDATE', undefined, { field, reason, value: causeValue(value) }),
  parseBody: (reason: string) => new ApiError('COULD_NOT_PARSE_BODY', undefined, { code: 'COULD_NOT_PARSE_BODY', message: reason }),
  invalidFilter: (reason: string) => new ApiError('INVALID_FILTER', undefined, { code: 'INVALID_FILTER', message: reason }),
  invalidPagination: (field: string, value: unknown) =>
    new ApiError('INVALID_PAGINATION', undefined, { field, reason: `${field} must be an integer`, value: causeValue(value) }),
  invalidSort: (reason: string) => new ApiError('INVALID_SORT_IDENTIFIER', undefined, { code: 'INVALID_SORT_IDENTIFIER', message: reason }),
  referenced: (field: string, reason: string, value?: unknown) =>
    new ApiError('CAN_NOT_DELETE_REFERENCED_ENTITY', undefined, { field, reason, value: causeValue(value) }),
  cannotDelete: (reason: string) => new ApiError('ENTITY_CAN_NOT_BE_DELETED', undefined, { code: 'ENTITY_CAN_NOT_BE_DELETED', message: reason }),
  cannotUpdate: (reason: string) => new ApiError('ENTITY_CAN_NOT_BE_UPDATED', undefined, { code: 'ENTITY_CAN_NOT_BE_UPDATED', message: reason }),
  methodNotAllowed: () => new ApiError('METHOD_NOT_ALLOWED'),
  tooLarge: (limit: number) => new ApiError('REQUEST_TOO_LARGE', `The body of the request exceeds the maximum allowed size of ${limit} bytes`),
  /** 429 RATE_LIMITED; `retryAfter` seconds when the refuser knows when there will be room. */
  rateLimited: (retryAfter?: number) =>
    new ApiError('RATE_LIMITED', undefined, undefined, retryAfter === undefined ? undefined : { 'retry-after': String(retryAfter) }),
  shuttingDown: () => new ApiError('SHUTTING_DOWN'),
  unhandled: () => new ApiError('UNHANDLED'),
};
