/**
 * src/pki/jwt.ts: the algorithm follows the key (ES256/384/512 by curve, RS256), and the compact
 * JWS it signs verifies with node:crypto and with jose (an independent implementation) under the
 * public key, carries the kid and the claims, and fails verification once altered.
 */
import t from 'tap';
import crypto from 'node:crypto';
import { compactVerify, jwtVerify } from 'jose';
import { decodeJwt, jwsAlg, signJwt } from '../../../src/pki/jwt.js';

const keys = {
  ES256: crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' }),
  ES384: crypto.generateKeyPairSync('ec', { namedCurve: 'P-384' }),
  ES512: crypto.generateKeyPairSync('ec', { namedCurve: 'P-521' }),
  RS256: crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }),
};

for (const [alg, { privateKey, publicKey }] of Object.entries(keys)) {
  t.test(alg, async (t) => {
    t.equal(jwsAlg(privateKey).alg, alg, 'the algorithm follows the key');
    const claims = { iss: 'https://ctrl.example', sub: 'identity-1', exp: Math.floor(Date.now() / 1000) + 60, em: 'ott' };
    const jwt = signJwt(privateKey, 'kid-1', claims);
    const { header, claims: decoded } = decodeJwt(jwt);
    t.same(header, { alg, kid: 'kid-1', typ: 'JWT' });
    t.same(decoded, claims);
    const verified = await jwtVerify(jwt, publicKey, { algorithms: [alg] });
    t.same(verified.payload, claims, 'jose verifies it');
    const [h, c, s] = jwt.split('.');
    const { hash, ec } = jwsAlg(privateKey);
    const ok = crypto.verify(hash, Buffer.from(`${h}.${c}`), ec ? { key: publicKey, dsaEncoding: 'ieee-p1363' } : publicKey, Buffer.from(s, 'base64url'));
    t.ok(ok, 'node:crypto verifies the raw signature');
    const forged = `${h}.${Buffer.from(JSON.stringify({ ...claims, sub: 'admin' })).toString('base64url')}.${s}`;
    await t.rejects(compactVerify(forged, publicKey), 'changed claims fail verification');
    const other = alg === 'RS256' ? crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey : crypto.generateKeyPairSync('ec', { namedCurve: (privateKey.asymmetricKeyDetails as any).namedCurve }).publicKey;
    await t.rejects(compactVerify(jwt, other), 'another key does not verify it');
  });
}
