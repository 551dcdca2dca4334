/**
 * Certificates of the caller and the controller's public keys: extension of a certificate
 * authenticator (extend, then extend-verify), ephemeral certificates of the
 * current API session, the network JWTs, the enrollment JWKS and the enrollment challenge.
 */
import crypto from 'node:crypto';
import type { Ctx, Entry } from '../context.js';
import { errors } from '../../core/errors.js';
import { empty, ok } from '../../core/envelope.js';
import { listRecords } from '../../resources/list.js';
import { type Registry } from '../../resources/registry.js';
import { renderRecord } from '../../resources/render.js';
import type { Rec } from '../../store/store.js';
import { jwsAlg } from '../../pki/jwt.js';

export function enrollCertEntries(reg: Registry): Entry[] {
  const certDef = reg.def('apiSessionCertificates');
  const renderCert = (ctx: Ctx, rec: Rec) => renderRecord(reg, certDef, rec, { store: ctx.app.store, ctx });

  return [
    { api: 'both', operationId: 'extendCurrentIdentityAuthenticator', auth: 'session', limit: 'heavy',
      handler: async (ctx) => {
        // Made with the current certificate on the TLS connection.
        const leaf = ctx.req.peerLeaf ?? ctx.req.peerCertificates?.[0];
        const cert = await ctx.app.issuing.extend(ctx.params.id, ctx.identity!.id, leaf, ctx.body?.clientCertCsr);
        return ok({ clientCert: ctx.app.issuing.withChain(cert.pem), ca: ctx.app.issuing.caBundlePem });
      } },

    { api: 'both', operationId: 'extendVerifyCurrentIdentityAuthenticator', auth: 'session', limit: 'heavy',
      handler: async (ctx) => {
        await ctx.app.issuing.verifyExtension(ctx.params.id, ctx.identity!.id, ctx.body?.clientCert);
        return empty();
      } },

    { api: 'client', operationId: 'createCurrentApiSessionCertificate', auth: 'session', limit: 'heavy',
      handler: async (ctx) => {
        const { rec, cert } = await ctx.app.issuing.createSessionCertificate(ctx.session!.id, ctx.identity!.id, ctx.body?.csr);
        return ok({ id: rec.id, _links: { self: { href: `./current-api-session/certificates/${rec.id}` } }, certificate: ctx.app.issuing.withChain(cert.pem), cas: ctx.app.issuing.caBundlePem }, 201);
      } },
    { api: 'client', operationId: 'listCurrentApiSessionCertificates', auth: 'session',
      handler: (ctx) =>
        listRecords(reg, certDef, ctx, { candidates: ctx.app.store.idsByIndex('apiSessionCertificates', 'apiSessionId', ctx.session!.id) }) },
    { api: 'client', operationId: 'detailCurrentApiSessionCertificate', auth: 'session',
      handler: (ctx) => ok(renderCert(ctx, ctx.app.issuing.ownSessionCertificate(ctx.params.id, ctx.session!.id))) },
    { api: 'client', operationId: 'deleteCurrentApiSessionCertificate', auth: 'session',
      handler: async (ctx) => {
        await ctx.app.issuing.deleteSessionCertificate(ctx.params.id, ctx.session!.id);
        return empty();
      } },

    { api: 'both', operationId: 'listNetworkJWTs', auth: 'none',
      handler: (ctx) => ok([{ name: 'default', token: ctx.app.enrollments.networkJwt() }]) },

    { api: 'client', operationId: 'getEnrollmentJwks', auth: 'none',
      handler: (ctx) => ({ status: 200, body: { keys: [enrollmentJwk(ctx)] } }) },

    { api: 'client', operationId: 'enrollmentChallenge', auth: 'none', limit: 'heavy',
      handler: (ctx) => {
        const { keyId, nonce } = ctx.body ?? {};
        const kid = ctx.app.pki.serverCertSha1Hex;
        if (keyId !== kid) throw errors.field('keyId', 'no enrollment signing key with this id; see GET /enroll/jwks', keyId);
        const key = ctx.app.pki.serverKey;
        const { alg, hash, ec } = jwsAlg(key);
        // JWS-style signature of the nonce text: raw r||s for ECDSA, base64url like a JWS.
        const signature = crypto.sign(hash, Buffer.from(String(nonce)), ec ? { key, dsaEncoding: 'ieee-p1363' } : key).toString('base64url');
        return { status: 200, body: { algorithm: alg, caPool: ctx.app.pki.caBundlePem, kid, signature } };
      } },
  ];
}

/** The public key enrollment JWTs are signed with, as a JWK with its certificate chain. */
function enrollmentJwk(ctx: Ctx): Record<string, unknown> {
  const pki = ctx.app.pki;
  const pub = crypto.createPublicKey(pki.serverKey).export({ format: 'jwk' }) as Record<string, unknown>;
  const der = (pem: string) => new crypto.X509Certificate(pem).raw;
  const serverDer = der(pki.serverCertPem);
  return {
    ...pub,
    kid: pki.serverCertSha1Hex,
    alg: jwsAlg(pki.serverKey).alg,
    use: 'sig',
    x5c: [serverDer.toString('base64'), der(pki.intermediateCertPem).toString('base64')],
    x5t: crypto.createHash('sha1').update(serverDer).digest('base64url'),
    'x5t#S256': crypto.createHash('sha256').update(serverDer).digest('base64url'),
  };
}
