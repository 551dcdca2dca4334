/**
 * Compact JWS signing with the controller's server key, synchronously (enrollment JWTs are made
 * inside store writes). `alg` follows the key; `kid` is the hex SHA-1 of the
 * server certificate so upstream SDKs can verify against the certificate they see.
 */
import crypto, { type KeyObject } from 'node:crypto';

const b64url = (b: Buffer | string) => Buffer.from(b).toString('base64url');

export function jwsAlg(key: KeyObject): { alg: string; hash: string; ec: boolean } {
  if (key.asymmetricKeyType === 'ec') {
    const curve = key.asymmetricKeyDetails?.namedCurve;
    if (curve === 'secp384r1') return { alg: 'ES384', hash: 'sha384', ec: true };
    if (curve === 'secp521r1') return { alg: 'ES512', hash: 'sha512', ec: true };
    return { alg: 'ES256', hash: 'sha256', ec: true };
  }
  return { alg: 'RS256', hash: 'sha256', ec: false };
}

export function signJwt(key: KeyObject, kid: string, claims: Record<string, unknown>): string {
  const { alg, hash, ec } = jwsAlg(key);
  const input = `${b64url(JSON.stringify({ alg, kid, typ: 'JWT' }))}.${b64url(JSON.stringify(claims))}`;
  const sig = crypto.sign(hash, Buffer.from(input), ec ? { key, dsaEncoding: 'ieee-p1363' } : key);
  return `${input}.${b64url(sig)}`;
}

/** Decode without verifying (tests and diagnostics). */
export function decodeJwt(jwt: string): { header: any; claims: any } {
  const [h, c] = jwt.split('.');
  return { header: JSON.parse(Buffer.from(h, 'base64url').toString()), claims: JSON.parse(Buffer.from(c, 'base64url').toString()) };
}
