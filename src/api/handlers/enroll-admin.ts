/**
 * Management side of enrollment: create and refresh enrollments, verify a CA and serve its
 * enrollment JWT, revert an authenticator to an enrollment, flag a certificate authenticator for
 * extension, re-enroll an edge router. The rules and writes are the enrollments and issuing
 * managers' (src/managers/); these handlers read the request and render the reply.
 */
import type { Entry } from '../context.js';
import { ApiError, errors } from '../../core/errors.js';
import { created, empty } from '../../core/envelope.js';
import { type Registry } from '../../resources/registry.js';

/** A future `expiresAt` from a validated body (format checked by the schema). */
function futureExpiry(value: unknown, field = 'expiresAt'): number {
  const at = typeof value === 'string' ? Date.parse(value) : NaN;
  if (!Number.isFinite(at)) throw errors.field(field, `${field} is required`, value ?? null);
  if (at <= Date.now()) throw errors.field(field, `${field} must be in the future`, value);
  return at;
}

export function enrollAdminEntries(_reg: Registry): Entry[] {
  return [
    { api: 'management', operationId: 'createEnrollment', auth: 'admin', permission: { family: 'enrollment', action: 'create' }, reaches: { from: 'body', field: 'identityId' },
      handler: async (ctx) => {
        const body = ctx.body ?? {};
        const expiresAt = futureExpiry(body.expiresAt);
        const rec = await ctx.app.enrollments.create({ method: body.method, identityId: body.identityId, caId: body.caId, username: body.username, expiresAt });
        return created(rec.id, `./enrollments/${rec.id}`);
      } },

    { api: 'management', operationId: 'refreshEnrollment', auth: 'admin', permission: { family: 'enrollment', action: 'update' }, reaches: { from: 'record', collection: 'enrollments', field: 'identityId' },
      handler: async (ctx) => {
        const id = ctx.params.id;
        if (!ctx.app.store.has('enrollments', id)) throw errors.notFound();
        await ctx.app.enrollments.refresh(id, futureExpiry(ctx.body?.expiresAt));
        // SPEC: createEnvelope (CTRL answers empty); the id lets clients re-read the enrollment.
        return { ...created(id, `./enrollments/${id}`), status: 200 };
      } },

    { api: 'management', operationId: 'verifyCa', auth: 'admin', permission: { family: 'ca', action: 'update' }, body: 'raw',
      handler: async (ctx) => {
        ctx.app.issuing.unverifiedCa(ctx.params.id);
        // The body is read here (its entry's `body: 'raw'`), after the checks above: PEM text.
        const media = (ctx.req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
        if (media && media !== 'text/plain' && media !== 'application/x-pem-file')
          throw new ApiError('INVALID_CONTENT_TYPE', `content type ${media} is not accepted here; send text/plain`);
        await ctx.app.issuing.verifyCa(ctx.params.id, ctx.req.body.toString('utf8'));
        return empty();
      } },

    { api: 'management', operationId: 'getCaJwt', auth: 'admin', permission: { family: 'ca', action: 'read' },
      handler: (ctx) => ({ status: 200, body: ctx.app.enrollments.caJwt(ctx.params.id), contentType: 'application/jwt' }) },

    { api: 'management', operationId: 'reEnrollAuthenticator', auth: 'admin', permission: null, reaches: { from: 'record', collection: 'authenticators', field: 'identityId' },
      handler: async (ctx) => {
        if (!ctx.app.store.has('authenticators', ctx.params.id)) throw errors.notFound();
        const rec = await ctx.app.enrollments.reEnrollAuthenticator(ctx.params.id, futureExpiry(ctx.body?.expiresAt));
        return created(rec.id, `./enrollments/${rec.id}`);
      } },

    { api: 'management', operationId: 'requestExtendAuthenticator', auth: 'admin', permission: null, reaches: { from: 'record', collection: 'authenticators', field: 'identityId' },
      handler: async (ctx) => {
        await ctx.app.issuing.requestExtend(ctx.params.id, ctx.body?.rollKeys === true);
        return empty();
      } },

    { api: 'management', operationId: 'reEnrollEdgeRouter', auth: 'admin', permission: { family: 'router', action: 'update' }, reaches: { from: 'referrer', field: 'edgeRouterId' },
      handler: async (ctx) => {
        await ctx.app.enrollments.reEnrollEdgeRouter(ctx.params.id);
        return empty();
      } },
  ];
}
