/**
 * `POST /enroll/token`: an identity enrolls itself with a JWT from an external JWT signer in
 * `Authorization: Bearer …`, the signer named by the `mesh-token-issuer-id` header or found from
 * the token (the rules: `Enrollments.enrollWithToken`, src/managers/enrollments.ts). With
 * `clientCsr` the reply is `{cert, ca}`; without, `{}` (the identity logs in with such tokens).
 */
import type { Ctx, Entry } from '../context.js';
import type { Reply, WithBody } from '../../core/operation.js';
import type { ClientBodies } from '../../core/bodies.js';
import { ApiError } from '../../core/errors.js';
import { ok } from '../../core/envelope.js';

export async function enrollToken(ctx: WithBody<Ctx, ClientBodies['enrollToken'] | undefined>): Promise<Reply> {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(ctx.req.headers.authorization ?? '');
  if (!m) throw new ApiError('INVALID_ENROLLMENT_TOKEN', undefined, { code: 'INVALID_ENROLLMENT_TOKEN', message: 'an Authorization: Bearer <token> header is required' });
  const { enrollments, issuing } = ctx.app;
  const cert = await enrollments.enrollWithToken(m[1], ctx.req.headers['mesh-token-issuer-id']?.trim(), ctx.body?.clientCsr);
  return cert ? ok({ cert: issuing.withChain(cert.pem), ca: issuing.caBundlePem }) : ok({});
}

export function enrollTokenEntries(): Entry[] {
  return [
    { api: 'client', operationId: 'enrollToken', auth: 'none', limit: 'heavy', body: 'optional', handler: enrollToken },
  ];
}
