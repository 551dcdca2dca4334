/**
 * Session (dial/bind) tokens checked the way a router would, written from the format alone
 * (docs/auth.md) rather than with the controller's code: `<batch JWS>~<claims>~<proof>`, the batch
 * JWS verified with the JWKS (jose), the claims' place under its signed Merkle root checked as
 * RFC 9162 §2.1.3.2 says. Also makes such tokens with a given key (to re-sign claims in tests).
 */
import crypto from 'node:crypto';
import { jwtVerify, SignJWT, type JWTPayload, type JWTVerifyGetKey } from 'jose';

const sha256 = (...parts: (Buffer | string)[]) => {
  const h = crypto.createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest();
};
const leafHash = (claims: string) => sha256(Buffer.from([0]), claims);
const nodeHash = (l: Buffer, r: Buffer) => sha256(Buffer.from([1]), l, r);

/** The claims of a session token whose batch signature and inclusion proof hold; throws otherwise. */
export async function verifySessionToken(token: string, jwks: JWTVerifyGetKey): Promise<JWTPayload> {
  const [jws, claims, proof, ...rest] = token.split('~');
  if (proof === undefined || rest.length > 0) throw new Error('not a session token');
  const { payload: batch } = await jwtVerify(jws, jwks);
  if (batch.z_t !== 'session-batch') throw new Error('not a session batch');
  const raw = Buffer.from(proof, 'base64url');
  let fn = raw.readUInt32BE(0);
  let sn = (batch.z_n as number) - 1;
  if (fn > sn) throw new Error('index out of the tree');
  let r = leafHash(claims);
  for (let at = 4; at < raw.length; at += 32) {
    const p = raw.subarray(at, at + 32);
    if (sn === 0) throw new Error('proof too long');
    if (fn % 2 === 1 || fn === sn) {
      r = nodeHash(p, r);
      while (fn % 2 === 0 && fn !== 0) {
        fn >>= 1;
        sn >>= 1;
      }
    } else r = nodeHash(r, p);
    fn >>= 1;
    sn >>= 1;
  }
  if (sn !== 0 || r.toString('base64url') !== batch.z_root) throw new Error('claims not under the signed root');
  const payload = JSON.parse(Buffer.from(claims, 'base64url').toString('utf8')) as JWTPayload;
  if (typeof payload.exp === 'number' && payload.exp * 1000 <= Date.now()) throw new Error('expired');
  return payload;
}

/** A session token for `claims` alone (a batch of one) signed with `key` under `kid`. */
export async function signSessionToken(key: CryptoKey, kid: string, claims: Record<string, unknown>): Promise<string> {
  const encoded = Buffer.from(JSON.stringify(claims)).toString('base64url');
  const batch = await new SignJWT({ iss: claims.iss as string, iat: claims.iat as number, exp: claims.exp as number, z_t: 'session-batch', z_n: 1, z_root: leafHash(encoded).toString('base64url') })
    .setProtectedHeader({ alg: 'ES256', kid, typ: 'JWT' })
    .sign(key);
  return `${batch}~${encoded}~${Buffer.alloc(4).toString('base64url')}`;
}
