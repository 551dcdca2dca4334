/** Reading user-supplied PEM certificates with node's X509Certificate (sync, no extra parsing). */
import crypto from 'node:crypto';
import { errors } from '../core/errors.js';

export interface CertInfo {
  cert: crypto.X509Certificate;
  /** Lower-case hex SHA-1 of the DER, no separators (upstream's fingerprint form). */
  fingerprint: string;
  commonName: string;
  notBefore: number;
  notAfter: number;
  isCa: boolean;
}

const PEM_BLOCK = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

export function splitPem(pem: string): string[] {
  return pem.match(PEM_BLOCK) ?? [];
}

export function fingerprintOf(der: Buffer): string {
  return crypto.createHash('sha1').update(der).digest('hex');
}

/** Parse the first certificate of `pem`; `field` names the body field in the 400 on failure. */
export function parseCert(pem: unknown, field: string): CertInfo {
  if (typeof pem !== 'string') throw errors.field(field, 'must be a PEM encoded certificate', pem);
  const first = splitPem(pem)[0];
  if (!first) throw errors.field(field, 'must be a PEM encoded certificate', pem);
  let cert: crypto.X509Certificate;
  try {
    cert = new crypto.X509Certificate(first);
  } catch (e) {
    throw errors.field(field, `could not parse certificate: ${(e as Error).message}`, pem);
  }
  const cn = /(?:^|\n)CN=([^\n]*)/.exec(cert.subject)?.[1] ?? '';
  return {
    cert,
    fingerprint: fingerprintOf(cert.raw),
    commonName: cn,
    notBefore: Date.parse(cert.validFrom),
    notAfter: Date.parse(cert.validTo),
    isCa: cert.ca,
  };
}
