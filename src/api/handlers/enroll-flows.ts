/**
 * The enroll endpoints of the Client API (no session): one-time token with a
 * CSR (`ott`), with a pre-exchanged certificate (`ottca`), username/password (`updb`), CA
 * auto-enrollment (`ca`), edge and transit routers (`erott`, `trott`), router certificate
 * extension, and the legacy `POST /enroll?method=…&token=…` that dispatches to them. The flows
 * and their rules are the enrollments manager's (src/managers/enrollments.ts); these handlers
 * read the token, body and TLS client certificate and render the reply.
 */
import type { Ctx, Entry } from '../context.js';
import type { Reply, WithBody } from '../../core/operation.js';
import type { ClientBodies } from '../../core/bodies.js';
import { ApiError } from '../../core/errors.js';
import { empty, ok } from '../../core/envelope.js';
import type { EnrollmentRecord } from '../../store/store.js';
import type { Signed } from '../../pki/sign-csr.js';

/** The reply of an identity's certificate enrollment. */
function certReply(ctx: Ctx, cert: Signed): Reply {
  return ok({ cert: ctx.app.issuing.withChain(cert.pem), ca: ctx.app.issuing.caBundlePem });
}

/** The reply of a router's enrollment or extension. */
function routerReply(ctx: Ctx, { client, server }: { client: Signed; server: Signed }): Reply {
  const { issuing } = ctx.app;
  return ok({ ca: issuing.caBundlePem, cert: issuing.withChain(client.pem), serverCert: issuing.withChain(server.pem) });
}

/** The client certificate chain of the mutual-TLS listener, leaf first (none on the API listener). */
const peerChain = (ctx: Ctx): Buffer[] => ctx.req.peerCertificates ?? [];

const enrollOtt = async (ctx: Ctx, e: EnrollmentRecord, csr: unknown) => certReply(ctx, await ctx.app.enrollments.enrollOtt(e, csr));
const enrollRouter = async (ctx: Ctx, e: EnrollmentRecord, clientCsr: unknown, serverCsr: unknown) => routerReply(ctx, await ctx.app.enrollments.enrollRouter(e, clientCsr, serverCsr));

async function enrollOttCa(ctx: Ctx, e: EnrollmentRecord): Promise<Reply> {
  await ctx.app.enrollments.enrollOttCa(e, peerChain(ctx));
  return empty();
}

async function enrollCa(ctx: Ctx, requestedName?: unknown): Promise<Reply> {
  await ctx.app.enrollments.enrollCa(peerChain(ctx), requestedName);
  return empty();
}

async function enrollUpdb(ctx: Ctx, e: EnrollmentRecord, body: { username?: unknown; password?: unknown }): Promise<Reply> {
  return ok({ username: await ctx.app.enrollments.enrollUpdb(e, body.username, body.password) });
}

/** `POST /enroll/extend/router`: the router's current client certificate on the TLS connection. */
const extendRouter = async (ctx: WithBody<Ctx, ClientBodies['extendRouterEnrollment']>) => {
  const body = ctx.body;
  return routerReply(ctx, await ctx.app.enrollments.extendRouter(ctx.req.peerLeaf ?? ctx.req.peerCertificates?.[0], body.certCsr, body.serverCertCsr));
};

// ---- the legacy generic endpoint ------------------------------------------------------------

/** Accept header allows a JSON reply (absent, `*\/*`, `application/*`, or anything JSON). */
function acceptsJson(accept: string | undefined): boolean {
  if (!accept) return true;
  return accept.split(',').some((part) => {
    const m = part.split(';')[0].trim().toLowerCase();
    return m === '*/*' || m === 'application/*' || m === 'application/json' || m.endsWith('+json');
  });
}

const genericEnroll = async (ctx: WithBody<Ctx, ClientBodies['enroll']>): Promise<Reply> => {
  const jsonOk = acceptsJson(ctx.req.headers.accept);
  const pemOk = /application\/x-pem-file/i.test(ctx.req.headers.accept ?? '');
  try {
    const body = ctx.body;
    // Legacy clients also send `token` and `csr`, which the spec's body does not name: read as unknown.
    const fields: Record<string, unknown> = typeof body === 'string' ? { clientCsr: body } : body ?? {};
    const asked = ctx.req.query.get('method') ?? '';
    if (asked === 'ca') return await enrollCa(ctx, fields.name);
    const known = ['ott', 'ottca', 'updb', 'erott', 'trott'];
    if (asked !== '' && !known.includes(asked)) throw new ApiError('INVALID_ENROLL_METHOD', `unknown enrollment method ${asked}`);
    const e = ctx.app.enrollments.outstanding(ctx.req.query.get('token') ?? fields.token, asked ? [asked] : undefined);
    let reply: Reply;
    switch (e.method) {
      case 'ott':
        reply = await enrollOtt(ctx, e, fields.clientCsr ?? fields.csr);
        if (!jsonOk && pemOk) return { status: 200, body: (reply.body as { data: { cert: string } }).data.cert, contentType: 'application/x-pem-file' };
        break;
      case 'ottca':
        reply = await enrollOttCa(ctx, e);
        break;
      case 'updb':
        reply = await enrollUpdb(ctx, e, fields);
        break;
      default:
        reply = await enrollRouter(ctx, e, fields.certCsr ?? fields.clientCsr, fields.serverCertCsr ?? fields.serverCsr);
    }
    if (!jsonOk) throw new ApiError('UNSUPPORTED_MEDIA');
    return reply;
  } catch (err) {
    // No JSON error body can be sent to a client that accepts none.
    if (!jsonOk && err instanceof ApiError) return { status: 406, body: '', contentType: 'text/plain' };
    throw err;
  }
};

export function enrollFlowEntries(): Entry[] {
  return [
    { api: 'client', operationId: 'enroll', auth: 'none', limit: 'heavy',
      handler: genericEnroll },
    { api: 'client', operationId: 'enrollOtt', auth: 'none', limit: 'heavy',
      handler: async (ctx) => {
        const body = ctx.body ?? {};
        const e = ctx.app.enrollments.outstanding(body.token ?? ctx.req.query.get('token'), ['ott']);
        return enrollOtt(ctx, e, body.clientCsr);
      } },
    { api: 'client', operationId: 'enrollOttCa', auth: 'none', limit: 'heavy', body: 'optional',
      handler: async (ctx) => {
        const e = ctx.app.enrollments.outstanding(ctx.body?.token ?? ctx.req.query.get('token'), ['ottca']);
        return enrollOttCa(ctx, e);
      } },
    { api: 'client', operationId: 'enrollUpdb', auth: 'none', limit: 'heavy',
      handler: async (ctx) => {
        // `token` is not in the spec's body; the query's is the one clients send.
        const body: { token?: unknown; username?: unknown; password?: unknown } = ctx.body;
        const e = ctx.app.enrollments.outstanding(ctx.req.query.get('token') ?? body.token, ['updb']);
        return enrollUpdb(ctx, e, body);
      } },
    { api: 'client', operationId: 'enrollCa', auth: 'none', limit: 'heavy',
      handler: (ctx) => enrollCa(ctx, undefined) },
    { api: 'client', operationId: 'enrollErOtt', auth: 'none', limit: 'heavy',
      handler: async (ctx) => {
        // The generic endpoint's names (`certCsr`, `serverCertCsr`) are accepted here too, beyond the spec's body.
        const body: ClientBodies['enrollErOtt'] & { certCsr?: unknown; serverCertCsr?: unknown } = ctx.body;
        const e = ctx.app.enrollments.outstanding(body.token ?? ctx.req.query.get('token'), ['erott']);
        return enrollRouter(ctx, e, body.clientCsr ?? body.certCsr, body.serverCsr ?? body.serverCertCsr);
      } },
    { api: 'client', operationId: 'extendRouterEnrollment', auth: 'none', limit: 'heavy',
      handler: extendRouter },
  ];
}
