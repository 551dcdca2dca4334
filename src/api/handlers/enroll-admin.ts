/**
 * Management side of enrollment: create and refresh
 * enrollments, verify a CA and serve its enrollment JWT, revert an authenticator to an
 * enrollment, flag a certificate authenticator for extension, re-enroll an edge router.
 */
import crypto from 'node:crypto';
import type { Ctx, Entry } from '../../core/context.js';
import type { Reply } from '../../core/operation.js';
import { ApiError, errors } from '../../core/errors.js';
import { created, empty } from '../../core/envelope.js';
import { type Registry } from '../../resources/registry.js';
import { write } from '../../resources/write.js';
import type { Tx, CaRecord, EdgeRouterRecord } from '../../store/store.js';
import { createEnrollmentInTx, identityEnrollment, refreshEnrollmentInTx, type EnrollmentSpec } from '../../resources/enrollments.js';
import { checkUsername } from '../../auth/passwords.js';
import { ApiSessions } from '../../auth/api-sessions.js';
import { signJwt } from '../../pki/jwt.js';
import { DerError, pemBlocks } from '../../pki/der.js';
import { commonName, issued, x509 } from '../../pki/chain.js';

/** A future `expiresAt` from a validated body (format checked by the schema). */
export function futureExpiry(value: unknown, field = 'expiresAt'): number {
  const at = typeof value === 'string' ? Date.parse(value) : NaN;
  if (!Number.isFinite(at)) throw errors.field(field, `${field} is required`, value ?? null);
  if (at <= Date.now()) throw errors.field(field, `${field} must be in the future`, value);
  return at;
}

/** End the API sessions opened with an authenticator (it is being removed or replaced). */
export function endSessionsOf(tx: Tx, identityId: string, authenticatorId: string) {
  const ids = tx.idsByIndex('apiSessions', 'identityId', identityId).filter((id) => tx.get('apiSessions', id)?.authenticatorId === authenticatorId);
  ApiSessions.deleteInTx(tx, ids);
}

/** The CA auto-enrollment JWT: `em: ca`, sub = jti = CA id, no expiry. */
export function caJwt(ctx: Ctx, ca: CaRecord): string {
  const iss = ctx.app.certBaseUrl + '/';
  return signJwt(ctx.app.pki.serverKey, ctx.app.pki.serverCertSha1Hex, { em: 'ca', sub: ca.id, jti: ca.id, iss, aud: ['mesh-enroller'], ctrls: ctx.app.cluster?.members().map((m) => m.certBaseUrl) ?? [ctx.app.certBaseUrl] });
}

export function enrollAdminEntries(_reg: Registry): Entry[] {
  return [
    { api: 'management', operationId: 'createEnrollment', auth: 'admin', permission: { family: 'enrollment', action: 'create' }, reaches: { from: 'body', field: 'identityId' },
      handler: async (ctx) => {
        const body = ctx.body ?? {};
        const expiresAt = futureExpiry(body.expiresAt);
        const method = body.method as 'ott' | 'ottca' | 'updb';
        const spec: EnrollmentSpec = { method, identityId: body.identityId, expiresAt };
        if (method === 'ottca') {
          if (typeof body.caId !== 'string' || body.caId === '') throw errors.field('caId', 'caId is required for ottca enrollments', body.caId ?? null);
          spec.caId = body.caId;
        } else if (method === 'updb') {
          spec.username = checkUsername(body.username);
        } else if (method !== 'ott') throw errors.field('method', 'unsupported enrollment method', method);
        const rec = await write(ctx.app.store, (tx) => {
          if (typeof body.identityId !== 'string' || !tx.exists('identities', body.identityId))
            throw errors.field('identityId', 'no identity found with the given id', body.identityId);
          if (spec.caId && !tx.exists('cas', spec.caId)) throw errors.field('caId', 'ca not found', spec.caId);
          if (spec.username && tx.findUnique('authenticators', 'username', spec.username)) throw errors.field('username', 'the username is already in use', spec.username);
          if (identityEnrollment(tx, body.identityId, method)) throw new ApiError('ENROLLMENT_EXISTS', `the identity already has an outstanding ${method} enrollment`);
          return createEnrollmentInTx(ctx.app, tx, spec);
        });
        return created(rec.id, `./enrollments/${rec.id}`);
      } },

    { api: 'management', operationId: 'refreshEnrollment', auth: 'admin', permission: { family: 'enrollment', action: 'update' }, reaches: { from: 'record', collection: 'enrollments', field: 'identityId' },
      handler: async (ctx) => {
        const id = ctx.params.id;
        if (!ctx.app.store.has('enrollments', id)) throw errors.notFound();
        const expiresAt = futureExpiry(ctx.body?.expiresAt);
        await write(ctx.app.store, (tx) => {
          const e = tx.get('enrollments', id);
          if (!e) throw errors.notFound();
          refreshEnrollmentInTx(ctx.app, tx, e, expiresAt);
        });
        // SPEC: createEnvelope (CTRL answers empty); the id lets clients re-read the enrollment.
        return { ...created(id, `./enrollments/${id}`), status: 200 };
      } },

    { api: 'management', operationId: 'verifyCa', auth: 'admin', permission: { family: 'ca', action: 'update' }, body: 'raw',
      handler: async (ctx) => {
        const ca = ctx.app.store.get('cas', ctx.params.id);
        if (!ca) throw errors.notFound();
        if (ca.isVerified) throw new ApiError('CA_ALREADY_VERIFIED');
        // The body is read here (its entry's `body: 'raw'`), after the checks above: PEM text.
        const media = (ctx.req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
        if (media && media !== 'text/plain' && media !== 'application/x-pem-file')
          throw new ApiError('INVALID_CONTENT_TYPE', `content type ${media} is not accepted here; send text/plain`);
        const text = ctx.req.body.toString('utf8');
        let blocks;
        try {
          blocks = pemBlocks(text, ['CERTIFICATE', 'CERTIFICATE REQUEST', 'PRIVATE KEY', 'EC PRIVATE KEY', 'RSA PRIVATE KEY', 'PUBLIC KEY', 'X509 CRL', 'PKCS7']);
        } catch (e) {
          throw new ApiError('COULD_NOT_PARSE_PEM_BLOCK', undefined, { code: 'COULD_NOT_PARSE_PEM_BLOCK', message: (e as DerError).message });
        }
        if (blocks.length === 0) {
          if (/-----BEGIN [A-Z0-9 ]+-----/.test(text)) throw new ApiError('EXPECTED_PEM_CERTIFICATE');
          throw errors.parseBody('the body must be a PEM encoded certificate');
        }
        if (blocks[0].label !== 'CERTIFICATE') throw new ApiError('EXPECTED_PEM_CERTIFICATE');
        let cert: crypto.X509Certificate;
        try {
          cert = new crypto.X509Certificate(blocks[0].der);
        } catch (e) {
          throw new ApiError('COULD_NOT_PARSE_DER_BLOCK', undefined, { code: 'COULD_NOT_PARSE_DER_BLOCK', message: (e as Error).message });
        }
        if (!issued(cert, x509(ca.certPem))) throw new ApiError('CERTIFICATE_FAILED_VALIDATION', 'the certificate is not signed by the CA');
        if (commonName(cert) !== ca.verificationToken)
          throw new ApiError('INVALID_COMMON_NAME', undefined, { field: 'commonName', reason: 'the common name must equal the verification token of the CA', value: commonName(cert) });
        await write(ctx.app.store, (tx) => {
          const cur = tx.get('cas', ca.id);
          if (!cur) throw errors.notFound();
          if (cur.isVerified) throw new ApiError('CA_ALREADY_VERIFIED');
          tx.put('cas', { ...cur, isVerified: true, updatedAt: Math.max(Date.now(), cur.updatedAt + 1) });
        });
        return empty();
      } },

    { api: 'management', operationId: 'getCaJwt', auth: 'admin', permission: { family: 'ca', action: 'read' },
      handler: (ctx) => {
        const ca = ctx.app.store.get('cas', ctx.params.id);
        if (!ca) throw errors.notFound();
        return { status: 200, body: caJwt(ctx, ca), contentType: 'application/jwt' };
      } },

    { api: 'management', operationId: 'reEnrollAuthenticator', auth: 'admin', permission: null, reaches: { from: 'record', collection: 'authenticators', field: 'identityId' },
      handler: async (ctx) => {
        const auth = ctx.app.store.get('authenticators', ctx.params.id);
        if (!auth) throw errors.notFound();
        const expiresAt = futureExpiry(ctx.body?.expiresAt);
        const rec = await write(ctx.app.store, (tx) => {
          const cur = tx.get('authenticators', ctx.params.id);
          if (!cur) throw errors.notFound();
          let spec: EnrollmentSpec;
          if (cur.method === 'updb') spec = { method: 'updb', identityId: cur.identityId, username: cur.username, expiresAt };
          else if (cur.caId && tx.exists('cas', cur.caId)) spec = { method: 'ottca', identityId: cur.identityId, caId: cur.caId, expiresAt };
          else spec = { method: 'ott', identityId: cur.identityId, expiresAt };
          // A prior outstanding enrollment of the same method is replaced by this one.
          const prior = identityEnrollment(tx, cur.identityId, spec.method);
          if (prior) tx.delete('enrollments', prior.id);
          endSessionsOf(tx, cur.identityId, cur.id);
          tx.delete('authenticators', cur.id);
          return createEnrollmentInTx(ctx.app, tx, spec);
        });
        return created(rec.id, `./enrollments/${rec.id}`);
      } },

    { api: 'management', operationId: 'requestExtendAuthenticator', auth: 'admin', permission: null, reaches: { from: 'record', collection: 'authenticators', field: 'identityId' },
      handler: async (ctx) => {
        const rollKeys = ctx.body?.rollKeys === true;
        await write(ctx.app.store, (tx) => {
          const cur = tx.get('authenticators', ctx.params.id);
          if (!cur) throw errors.notFound();
          if (cur.method !== 'cert') throw new ApiError('FORBIDDEN', 'the authenticator is not certificate based and can not be extended');
          const now = Date.now();
          tx.put('authenticators', { ...cur, isExtendRequested: true, isKeyRollRequested: rollKeys, extendRequestedAt: now, updatedAt: Math.max(now, cur.updatedAt + 1) });
        });
        return empty();
      } },

    { api: 'management', operationId: 'reEnrollEdgeRouter', auth: 'admin', permission: { family: 'router', action: 'update' }, reaches: { from: 'referrer', field: 'edgeRouterId' },
      handler: async (ctx) => {
        await write(ctx.app.store, (tx) => {
          const cur = tx.get('edgeRouters', ctx.params.id);
          if (!cur) throw errors.notFound();
          // Certificate authentication removed: the control channel drops a router whose
          // fingerprint no longer matches, and reconnects fail until it enrolls again.
          const next: EdgeRouterRecord = { ...cur, isVerified: false, updatedAt: Math.max(Date.now(), cur.updatedAt + 1) };
          for (const k of ['fingerprint', 'certPem', 'unverifiedFingerprint', 'unverifiedCertPem'] as const) delete next[k];
          tx.put('edgeRouters', next);
          for (const eid of tx.idsByIndex('enrollments', 'edgeRouterId', cur.id)) tx.delete('enrollments', eid);
          for (const iid of tx.idsByIndex('identities', 'edgeRouterId', cur.id)) {
            for (const aid of tx.idsByIndex('authenticators', 'identityId', iid)) {
              const a = tx.get('authenticators', aid);
              if (a?.method !== 'cert') continue;
              endSessionsOf(tx, iid, aid);
              tx.delete('authenticators', aid);
            }
          }
          createEnrollmentInTx(ctx.app, tx, { method: 'erott', edgeRouterId: cur.id });
        });
        return empty();
      } },
  ];
}
