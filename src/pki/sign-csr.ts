/**
 * What a request for a certificate asks and gets: the CSR, its profile and validity, and the
 * issued certificate. The pool's `signCsrs` task (csr-task.ts) does the signing; the issuing
 * manager (src/managers/issuing.ts) sends it there and turns an unusable CSR into a 400.
 */
import type { CertProfile } from './cert-issuer.js';

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
