/**
 * Worker side of the CSR-signing task (src/pki/csr-task.ts). The signing CA arrives once, as the
 * pool's workerData (src/pool.ts), and is parsed into a KeyObject when the thread starts: a task
 * carries only its CSRs.
 */
import { createPrivateKey } from 'node:crypto';
import { workerData } from 'piscina';
import { CertIssuer } from '../src/pki/cert-issuer.js';
import { signCsrItems, type SignCsrItem, type SignCsrResult, type SigningCaPem } from '../src/pki/csr-task.js';

const ca = (workerData as { signingCa?: SigningCaPem } | undefined)?.signingCa;
const issuer = ca ? new CertIssuer(ca.certPem, createPrivateKey(ca.keyPem)) : undefined;

export function signCsrs(input: { items: SignCsrItem[] }): SignCsrResult[] {
  if (!issuer) throw new Error('this worker pool was started without a signing CA');
  return signCsrItems(issuer, input.items, Date.now());
}
