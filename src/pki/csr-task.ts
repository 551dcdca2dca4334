/**
 * The CSR-signing task of the worker pool (src/pool.ts `signCsrs`): parse, verify and issue with
 * the controller's signing CA (cert-issuer.ts). Each item gets its own result; a bad CSR fails
 * only its own item.
 *
 *   pool.run('signCsrs', { items: [{ csr, profile: 'client', validityMs }] })
 *     → [{ ok: true, pem, fingerprint, notBefore, notAfter, commonName } | { ok: false, reason }]
 *
 * The signing CA is not part of a task: it reaches each worker once, when the pool starts it
 * (`SigningCaPem`, workers/pki.ts).
 */
import type { CertIssuer, CertProfile } from './cert-issuer.js';
import { CsrError } from './csr.js';

export interface SignCsrItem {
  csr: string;
  profile: CertProfile;
  validityMs: number;
}

export type SignCsrResult =
  | { ok: true; pem: string; fingerprint: string; notBefore: number; notAfter: number; commonName: string }
  | { ok: false; reason: string };

/** The signing CA as it crosses to a worker thread (once per thread, as piscina's workerData). */
export interface SigningCaPem {
  certPem: string;
  /** PKCS#8 PEM. */
  keyPem: string;
}

export function signCsrItems(issuer: CertIssuer, items: SignCsrItem[], now: number): SignCsrResult[] {
  return items.map((item) => {
    try {
      const c = issuer.issueFromPem(item.csr, item.profile, item.validityMs, now);
      return { ok: true, pem: c.pem, fingerprint: c.fingerprint, notBefore: c.notBefore, notAfter: c.notAfter, commonName: c.commonName };
    } catch (e) {
      if (e instanceof CsrError) return { ok: false, reason: e.message };
      return { ok: false, reason: `the CSR could not be processed: ${(e as Error).message}` };
    }
  });
}
