/**
 * Certificates of the caller and the controller's public keys: extension of a certificate
 * authenticator (extend, then extend-verify), ephemeral certificates of the
 * current API session, the network JWTs, the enrollment JWKS and the enrollment challenge.
 */
import crypto from 'node:crypto';
import type { Ctx, Entry } from '../../core/context.js';
import type { Reply } from '../../core/operation.js';
import { ApiError, errors } from '../../core/errors.js';
import { empty, ok } from '../../core/envelope.js';
import { listRecords } from '../../resources/list.js';
import { type Registry } from '../../resources/registry.js';
import { renderRecord } from '../../resources/render.js';
import { newId, write } from '../../resources/write.js';
import type { Rec, AuthenticatorRecord, ApiSessionCertificateRecord } from '../../store/store.js';
import { signCsrs, VALIDITY, withChain } from '../../pki/sign-csr.js';
import { fingerprintOf } from '../../pki/certs.js';
import { pemBlocks } from '../../pki/der.js';
import { jwsAlg, signJwt } from '../../pki/jwt.js';

/** The caller's own certificate authenticator, checked in upstream's order. */
function ownCertAuthenticator(ctx: Ctx): AuthenticatorRecord {
  const auth = ctx.app.store.get('authenticators', ctx.params.id);
  if (!auth) throw errors.notFound();
  if (auth.identityId !== ctx.identity!.id) throw errors.unauthorized();
  if (auth.method !== 'cert' || auth.isIssuedByNetwork !== true)
    throw new ApiError('CAN_NOT_UPDATE_AUTHENTICATOR', 'only certificates issued by this controller can be extended');
  return auth;
}

/** Go's pkix.Name.String() order: most specific RDN first, comma separated. */
export function subjectText(cert: crypto.X509Certificate): string {
  return cert.subject.split('\n').reverse().join(',');
}

const networkJwtCache = new WeakMap<object, string>();

export function enrollCertEntries(reg: Registry): Entry[] {
  const certDef = reg.def('apiSessionCertificates');
  const renderCert = (ctx: Ctx, rec: Rec) => {
    const out = renderRecord(reg, certDef, rec, { store: ctx.app.store, ctx });
    return out;
  };
  const ownSessionCert = (ctx: Ctx): ApiSessionCertificateRecord => {
    const rec = ctx.app.store.get('apiSessionCertificates', ctx.params.id);
    if (!rec || rec.apiSessionId !== ctx.session!.id) throw errors.notFound();
    return rec;
  };

  return [
    { api: 'both', operationId: 'extendCurrentIdentityAuthenticator', auth: 'session', limit: 'heavy',
      handler: async (ctx) => {
        const auth = ownCertAuthenticator(ctx);
        // Made with the current certificate on the TLS connection.
        const leaf = ctx.req.peerLeaf ?? ctx.req.peerCertificates?.[0];
        if (!leaf || fingerprintOf(leaf) !== auth.fingerprint) throw errors.unauthorized();
        const [cert] = await signCsrs(ctx.app, [{ csr: ctx.body?.clientCertCsr, profile: 'client', validityMs: VALIDITY.client, field: 'clientCertCsr' }]);
        await write(ctx.app.store, (tx) => {
          const cur = tx.get('authenticators', auth.id);
          if (!cur || cur.fingerprint !== auth.fingerprint) throw errors.unauthorized();
          // A second extension before verification replaces the pending certificate.
          tx.put('authenticators', { ...cur, pendingCertPem: cert.pem, pendingFingerprint: cert.fingerprint, updatedAt: Math.max(Date.now(), cur.updatedAt + 1) });
        });
        return ok({ clientCert: withChain(ctx.app, cert.pem), ca: ctx.app.pki.caBundlePem });
      } },

    { api: 'both', operationId: 'extendVerifyCurrentIdentityAuthenticator', auth: 'session', limit: 'heavy',
      handler: async (ctx) => {
        const auth = ownCertAuthenticator(ctx);
        if (!auth.pendingFingerprint) throw new ApiError('CAN_NOT_UPDATE_AUTHENTICATOR', 'there is no pending certificate extension to verify');
        let cert: crypto.X509Certificate | undefined;
        try {
          const first = typeof ctx.body?.clientCert === 'string' ? pemBlocks(ctx.body.clientCert, ['CERTIFICATE'])[0] : undefined;
          cert = first ? new crypto.X509Certificate(first.der) : undefined;
        } catch {
          cert = undefined;
        }
        if (!cert || fingerprintOf(cert.raw) !== auth.pendingFingerprint)
          throw new ApiError('INVALID_CLIENT_CERT', undefined, { field: 'clientCert', reason: 'must be the certificate returned by the extension request', value: '' });
        const old = auth.certPem ? new crypto.X509Certificate(auth.certPem) : undefined;
        const rolled = !old || !old.publicKey.equals(cert.publicKey);
        await write(ctx.app.store, (tx) => {
          const cur = tx.get('authenticators', auth.id);
          if (!cur || cur.pendingFingerprint !== auth.pendingFingerprint) throw new ApiError('CAN_NOT_UPDATE_AUTHENTICATOR', 'the pending extension changed; extend again');
          const next: AuthenticatorRecord = {
            ...cur, certPem: cur.pendingCertPem, fingerprint: cur.pendingFingerprint, certNotAfter: Date.parse(cert!.validTo),
            isExtendRequested: false, isKeyRollRequested: false, lastExtendRolledKeys: rolled, updatedAt: Math.max(Date.now(), cur.updatedAt + 1),
          };
          delete next.pendingCertPem;
          delete next.pendingFingerprint;
          delete next.extendRequestedAt;
          tx.put('authenticators', next);
        });
        return empty();
      } },

    { api: 'client', operationId: 'createCurrentApiSessionCertificate', auth: 'session', limit: 'heavy',
      handler: async (ctx) => {
        const [cert] = await signCsrs(ctx.app, [{ csr: ctx.body?.csr, profile: 'client', validityMs: VALIDITY.apiSession, field: 'csr' }]);
        const x = new crypto.X509Certificate(cert.pem);
        const now = Date.now();
        const rec: ApiSessionCertificateRecord = {
          id: newId(), createdAt: now, updatedAt: now, tags: {}, apiSessionId: ctx.session!.id, identityId: ctx.identity!.id,
          certificate: cert.pem, fingerprint: cert.fingerprint, subject: subjectText(x), validFrom: cert.notBefore, validTo: cert.notAfter,
        };
        await write(ctx.app.store, (tx) => {
          if (!tx.exists('apiSessions', ctx.session!.id)) throw errors.unauthorized();
          tx.put('apiSessionCertificates', rec);
        });
        return ok({ id: rec.id, _links: { self: { href: `./current-api-session/certificates/${rec.id}` } }, certificate: withChain(ctx.app, cert.pem), cas: ctx.app.pki.caBundlePem }, 201);
      } },
    { api: 'client', operationId: 'listCurrentApiSessionCertificates', auth: 'session',
      handler: (ctx) =>
        listRecords(reg, certDef, ctx, { candidates: ctx.app.store.idsByIndex('apiSessionCertificates', 'apiSessionId', ctx.session!.id) }) },
    { api: 'client', operationId: 'detailCurrentApiSessionCertificate', auth: 'session',
      handler: (ctx) => ok(renderCert(ctx, ownSessionCert(ctx))) },
    { api: 'client', operationId: 'deleteCurrentApiSessionCertificate', auth: 'session',
      handler: async (ctx) => {
        const rec = ownSessionCert(ctx);
        await write(ctx.app.store, (tx) => {
          if (!tx.exists('apiSessionCertificates', rec.id)) throw errors.notFound();
          tx.delete('apiSessionCertificates', rec.id);
        });
        return empty();
      } },

    { api: 'both', operationId: 'listNetworkJWTs', auth: 'none',
      handler: (ctx) => {
        let token = networkJwtCache.get(ctx.app);
        if (!token) {
          const iss = ctx.app.certBaseUrl + '/';
          token = signJwt(ctx.app.pki.serverKey, ctx.app.pki.serverCertSha1Hex, { em: 'network', iss, sub: iss, aud: ['mesh-enroller'], jti: crypto.randomUUID(), ctrls: ctx.app.cluster?.members().map((m) => m.certBaseUrl) ?? [ctx.app.certBaseUrl] });
          networkJwtCache.set(ctx.app, token);
        }
        return ok([{ name: 'default', token }]);
      } },

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
