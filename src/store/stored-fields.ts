/**
 * What the record types (src/store/records.ts) cannot read from a family's declaration or the
 * spec: fields kept in records but never on the wire, fields whose stored shape differs from their
 * wire shape, and collections without a family (signing keys). Collection → field (`?` suffix:
 * may be absent) → TypeScript type, or [type, doc comment]. Read by scripts/generate-record-types.ts only; run it after a
 * change here.
 */
export const STORED_FIELDS: Record<string, Record<string, string | [type: string, doc: string]>> = {
  // The token signing keys' public halves (src/auth/tokens.ts).
  signingKeys: {
    controllerId: ['string', 'The controller that holds the private key.'],
    alg: "'ES256'",
    jwk: ['{ kty: string; crv: string; x: string; y: string }', 'Public key as a JWK (kty, crv, x, y).'],
    'retiredAt?': ['number', 'When another key of the same controller became current; absent while current.'],
  },
  identities: {
    'appData?': ['Record<string, unknown>', 'Absent on router identities (src/resources/routers.ts), rendered as {}.'],
    'edgeRouterId?': ['string', 'Set for the identity that stands for a tunneler-enabled edge router.'],
    'serviceConfigs?': ['{ serviceId: string; configId: string }[]', 'Per-identity service config overrides.'],
    'overrideConfigIds?': ['string[]', 'The config ids of `serviceConfigs`, indexed so a config delete finds its overrides.'],
    'mfa?': ['{ id: string; createdAt: number; updatedAt: number; secret: string; isVerified: boolean; recoveryCodes: string[] }', 'TOTP enrollment (src/auth/mfa.ts): the secret and recovery codes sealed.'],
    'trace?': ['{ enabled: boolean; traceId: string; until: number; channels: string[] }', 'Data-flow tracing (src/control/traces.ts); `until` in epoch ms.'],
    'traceUntil?': ['number', '`trace.until` while the trace is enabled, indexed: a start reads only the traced identities.'],
    'disabledUntil?': 'number | null',
  },
  enrollments: {
    method: 'string',
    token: ['string', 'SHA-256 of the enrollment token (enrollmentByToken).'],
    jwt: ['string', 'The enrollment JWT, sealed.'],
    expiresAt: 'number',
  },
  authenticators: {
    method: 'string',
    identityId: 'string',
    'passwordHash?': ['string', 'updb: the argon2id hash.'],
    'certNotAfter?': ['number', 'notAfter of `certPem` (epoch ms), so certificate login never parses the PEM.'],
    'pendingCertPem?': ['string', 'Extension issued but not yet verified: the new certificate.'],
    'pendingFingerprint?': 'string',
    'failedAttempts?': ['number', 'updb: wrong passwords in a row (src/auth/disable.ts).'],
  },
  authPolicies: {
    primary: [
      '{ cert: { allowed: boolean; allowExpiredCerts: boolean }; extJwt: { allowed: boolean; allowedSigners: string[] }; updb: { allowed: boolean; minPasswordLength: number; maxAttempts: number; lockoutDurationMinutes: number; requireMixedCase: boolean; requireNumberChar: boolean; requireSpecialChar: boolean } }',
      'Completed from the default policy on every write (src/resources/credentials.ts).',
    ],
    secondary: '{ requireTotp: boolean; requireExtJwtSigner: string | null }',
  },
  // The type-specific fields of posture checks (src/resources/posture.ts POSTURE_FIELDS).
  postureChecks: {
    'operatingSystems?': '{ type: string; versions: string[] }[]',
    'process?': '{ osType: string; path: string; hashes?: string[]; signerFingerprint?: string }',
    'processes?': '{ osType: string; path: string; hashes?: string[]; signerFingerprints?: string[] }[]',
    'semantic?': 'string',
    'domains?': 'string[]',
    'macAddresses?': 'string[]',
    'timeoutSeconds?': 'number',
    'promptOnWake?': 'boolean',
    'promptOnUnlock?': 'boolean',
    'ignoreLegacyEndpoints?': 'boolean',
  },
  edgeRouters: {
    ctrlChanListeners: 'Record<string, string[]>',
  },
  routers: {
    ctrlChanListeners: 'Record<string, string[]>',
    'certPem?': 'string',
  },
  sessions: {
    'token?': ['string', 'Never stored: a session token is a signed JWT naming the session.'],
    type: "'Dial' | 'Bind'",
    apiSessionId: 'string',
    serviceId: 'string',
    identityId: 'string',
    'servicePolicyIds?': ['string[]', 'The service policies that granted the session.'],
  },
  edgeRouterPolicies: {
    'systemFor?': ['string', 'The edge router whose system policy this is.'],
  },
  apiSessionCertificates: {
    identityId: 'string',
    certificate: 'string',
  },
  apiSessions: {
    token: ['string', 'SHA-256 (base64url) of the signed token.'],
    'method?': ['string', 'The primary login method (password, cert, ext-jwt): an auth-policy change may end it.'],
    'primarySignerId?': ['string', 'ext-jwt: the signer of the login token (a policy\'s allowedSigners may drop it).'],
    identityId: 'string',
    authenticatorId: 'string',
    ipAddress: 'string',
    configTypes: 'string[]',
    isMfaRequired: 'boolean',
    isMfaComplete: 'boolean',
    lastActivityAt: 'number',
    'mfaPassedAt?': ['number', 'When this session last passed TOTP (authenticate/mfa or enrollment verify); MFA posture reads it.'],
    'extJwtSignerId?': ['string', 'Auth policy `secondary.requireExtJwtSigner` at login: every full request needs a token of this signer.'],
    'oidc?': ['{ clientId: string; refreshJti: string; scopes: string[] }', 'Logged in through OIDC: the client, and the one refresh token of the family still usable.'],
  },
};
