/**
 * Signing CSRs for the API: runs `signCsrs` (workers/pki.ts) in the worker pool and turns an
 * unusable CSR into 400 COULD_NOT_PROCESS_CSR (or the code the caller names).
 *
 *   const [client, server] = await signCsrs(app, [{ csr, profile: 'client' }, { csr: s, profile: 'server' }]);
 */
import type { App } from '../api/context.js';
import { ApiError, type ErrorCode } from '../api/errors.js';
import type { CertProfile } from './issuer.js';

const DAY_MS = 24 * 60 * 60 * 1000;

/** Validity of issued certificates by use. */
export const VALIDITY = {
  /** Identity client certificates (ott enrollment, extension). */
  client: 365 * DAY_MS,
  /** Router client and server certificates (erott/trott, router extension). */
  router: 365 * DAY_MS,
  /** Ephemeral certificates of an API session. */
  apiSession: 12 * 60 * 60 * 1000,
} as const;

export interface SignRequest {
  csr: unknown;
  profile: CertProfile;
  validityMs?: number;
  /** Body field named in the error cause. */
  field?: string;
}

export interface Signed {
  pem: string;
  fingerprint: string;
  notBefore: number;
  notAfter: number;
  commonName: string;
}

const keyPems = new WeakMap<object, string>();

export async function signCsrs(app: App, reqs: SignRequest[], code: ErrorCode = 'COULD_NOT_PROCESS_CSR'): Promise<Signed[]> {
  for (const r of reqs) {
    if (typeof r.csr !== 'string' || r.csr.trim() === '')
      throw new ApiError(code, undefined, { field: r.field ?? 'csr', reason: 'a PEM encoded certificate signing request is required', value: '' });
  }
  let caKeyPem = keyPems.get(app.pki);
  if (!caKeyPem) {
    caKeyPem = app.pki.signingKey.export({ type: 'pkcs8', format: 'pem' }) as string;
    keyPems.set(app.pki, caKeyPem);
  }
  const out = await app.pool.run('signCsrs', {
    caCertPem: app.pki.signingCertPem,
    caKeyPem,
    items: reqs.map((r) => ({ csr: r.csr as string, profile: r.profile, validityMs: r.validityMs ?? VALIDITY.client })),
  });
  return out.map((res, i) => {
    if (!res.ok) throw new ApiError(code, undefined, { field: reqs[i].field ?? 'csr', reason: res.reason, value: '' });
    return res;
  });
}

/** The chain returned with issued client certificates: leaf + signing CA. */
export function withChain(app: App, leafPem: string): string {
  return leafPem + app.pki.signingCertPem;
}
