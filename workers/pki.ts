/**
 * PKI tasks: sign CSRs with the controller's signing CA (src/pki/cert-issuer.ts).
 *
 *   pool.run('signCsrs', { caCertPem, caKeyPem, items: [{ csr, profile: 'client', validityMs }] })
 *     → [{ ok: true, pem, fingerprint, notBefore, notAfter, commonName } | { ok: false, reason }]
 *
 * `items` holds the CSRs of every request that reached the pool in one turn of the main thread's
 * event loop (src/pki/sign-csr.ts): one task per group, not per CSR. Each item gets its own result;
 * a bad CSR fails only its own item. The CA key crosses to the worker as PEM text and is parsed
 * into a KeyObject once per worker thread (cached by its text), never per task.
 */
import { createPrivateKey } from 'node:crypto';
import { CertIssuer, type CertProfile } from '../src/pki/cert-issuer.js';
import { CsrError } from '../src/pki/csr.js';

export interface SignCsrItem {
  csr: string;
  profile: CertProfile;
  validityMs: number;
}

export type SignCsrResult =
  | { ok: true; pem: string; fingerprint: string; notBefore: number; notAfter: number; commonName: string }
  | { ok: false; reason: string };

const issuers = new Map<string, CertIssuer>();

function issuerFor(caCertPem: string, caKeyPem: string): CertIssuer {
  const key = caCertPem + caKeyPem;
  let issuer = issuers.get(key);
  if (!issuer) {
    issuer = new CertIssuer(caCertPem, createPrivateKey(caKeyPem));
    issuers.set(key, issuer);
  }
  return issuer;
}

export function signCsrs(input: { caCertPem: string; caKeyPem: string; items: SignCsrItem[] }): SignCsrResult[] {
  const issuer = issuerFor(input.caCertPem, input.caKeyPem);
  const now = Date.now();
  return input.items.map((item) => {
    try {
      const c = issuer.issueFromPem(item.csr, item.profile, item.validityMs, now);
      return { ok: true, pem: c.pem, fingerprint: c.fingerprint, notBefore: c.notBefore, notAfter: c.notAfter, commonName: c.commonName };
    } catch (e) {
      if (e instanceof CsrError) return { ok: false, reason: e.message };
      return { ok: false, reason: `the CSR could not be processed: ${(e as Error).message}` };
    }
  });
}
