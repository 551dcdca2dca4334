/** Request bodies several suites send. */

/** An auth policy allowing certificates and passwords (no external JWTs, no TOTP); `updb` overrides password rules. */
export function authPolicyBody(name: string, updb: Record<string, unknown> = {}) {
  return {
    name,
    primary: {
      cert: { allowed: true, allowExpiredCerts: false },
      extJwt: { allowed: false, allowedSigners: [] as string[] },
      updb: { allowed: true, minPasswordLength: 5, requireSpecialChar: false, requireNumberChar: false, requireMixedCase: false, maxAttempts: 0, lockoutDurationMinutes: 0, ...updb },
    },
    secondary: { requireTotp: false, requireExtJwtSigner: null },
  };
}
