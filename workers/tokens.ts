/**
 * Token tasks: compact JWS (ES256) signatures for tokens minted at request rates (sessions), many
 * per task (src/auth/tokens.ts `signInPool`).
 *
 *   pool.run('signTokens', { kid, keyPem, claims: [{ iss, sub, jti, iat, z_t, … }] }) → [token, …]
 *
 * The key crosses as PKCS#8 PEM and is parsed into a KeyObject once per worker thread and key.
 */
import { createPrivateKey, type KeyObject } from 'node:crypto';
import { jwsHeader, signJws, type TokenClaims } from '../src/auth/tokens.js';

const keys = new Map<string, { pem: string; key: KeyObject; header: string }>();

export function signTokens(input: { kid: string; keyPem: string; claims: TokenClaims[] }): string[] {
  let k = keys.get(input.kid);
  if (!k || k.pem !== input.keyPem) {
    // Keys rotate rarely: the few a worker ever saw stay.
    k = { pem: input.keyPem, key: createPrivateKey(input.keyPem), header: jwsHeader(input.kid) };
    keys.set(input.kid, k);
  }
  const { key, header } = k;
  return input.claims.map((c) => signJws(key, header, c));
}
