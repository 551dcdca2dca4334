/**
 * The enroll endpoints of the Client API (no session): one-time token with a
 * CSR (`ott`), with a pre-exchanged certificate (`ottca`), username/password (`updb`), CA
 * auto-enrollment (`ca`), edge and transit routers (`erott`, `trott`), router certificate
 * extension, and the legacy `POST /enroll?method=…&token=…` that dispatches to them.
 *
 * Every flow checks the token up front (unknown → INVALID_ENROLLMENT_TOKEN, wrong method →
 * INVALID_ENROLL_METHOD, expired → ENROLLMENT_EXPIRED), does the CPU work (CSR signing, password
 * hashing) in the pool, then in ONE write re-checks that the enrollment still exists, deletes it
 * and creates the credential: two concurrent uses of a token cannot both succeed.
 */
import type { Ctx, Entry, Handler } from '../../core/context.js';
import type { Reply } from '../../core/operation.js';
import { ApiError, errors } from '../../core/errors.js';
import { empty, ok } from '../../core/envelope.js';
import { newId, write } from '../../resources/write.js';
import type { Tx, EnrollmentRecord, AuthenticatorRecord } from '../../store/store.js';
import { signCsrs, VALIDITY, withChain } from '../../pki/sign-csr.js';
import { chainsTo, commonName, externalIdOf, isExpired, x509 } from '../../pki/chain.js';
import { fingerprintOf } from '../../pki/certs.js';
import { checkPassword, checkUsername, hashPassword } from '../../auth/passwords.js';
import { DEFAULT_AUTH_POLICY_ID } from '../../resources/credentials.js';
import { enrollmentByToken } from '../../resources/enrollments.js';

const nonEmpty = (v: unknown): v is string => typeof v === 'string' && v.trim() !== '';

/** The outstanding enrollment for `token`, checked for method and expiry. */
export function enrollmentFor(ctx: Ctx, token: unknown, methods?: readonly string[]): EnrollmentRecord {
  if (!nonEmpty(token)) throw new ApiError('INVALID_ENROLLMENT_TOKEN', undefined, { field: 'token', reason: 'an enrollment token is required', value: '' });
  const e = enrollmentByToken(ctx.app.store, token.trim());
  if (!e) throw new ApiError('INVALID_ENROLLMENT_TOKEN');
  if (methods && !methods.includes(e.method))
    throw new ApiError('INVALID_ENROLL_METHOD', `the token is for enrollment method ${e.method}, not ${methods.join('/')}`);
  if (e.expiresAt < Date.now()) throw new ApiError('ENROLLMENT_EXPIRED');
  return e;
}

/** Inside the write: the enrollment is still there (a concurrent use did not consume it). */
function consume(tx: Tx, e: EnrollmentRecord) {
  if (!tx.exists('enrollments', e.id)) throw new ApiError('INVALID_ENROLLMENT_TOKEN');
  tx.delete('enrollments', e.id);
}

export function certAuthenticator(identityId: string, certPem: string, fingerprint: string, notAfter: number, extra: Partial<AuthenticatorRecord> = {}): AuthenticatorRecord {
  const now = Date.now();
  return {
    id: newId(), createdAt: now, updatedAt: now, tags: {}, method: 'cert', identityId, certPem, fingerprint,
    certNotAfter: notAfter, isIssuedByNetwork: true, isExtendRequested: false, isKeyRollRequested: false, ...extra,
  };
}

function requireNoCert(tx: Tx, identityId: string, fingerprint: string) {
  if (tx.findUnique('authenticators', 'fingerprint', fingerprint)) throw new ApiError('CERT_IN_USE');
  for (const aid of tx.idsByIndex('authenticators', 'identityId', identityId)) {
    if (tx.get('authenticators', aid)?.method === 'cert') throw new ApiError('MAX_AUTHENTICATOR_METHODS_REACHED', 'the identity already has a cert authenticator');
  }
}

// ---- ott ------------------------------------------------------------------------------------

async function enrollOtt(ctx: Ctx, e: EnrollmentRecord, csr: unknown): Promise<Reply> {
  const [cert] = await signCsrs(ctx.app, [{ csr, profile: 'client', validityMs: VALIDITY.client, field: 'clientCsr' }]);
  await write(ctx.app.store, (tx) => {
    consume(tx, e);
    if (!tx.exists('identities', e.identityId!)) throw new ApiError('INVALID_ENROLLMENT_TOKEN');
    requireNoCert(tx, e.identityId!, cert.fingerprint);
    tx.put('authenticators', certAuthenticator(e.identityId!, cert.pem, cert.fingerprint, cert.notAfter));
  });
  return ok({ cert: withChain(ctx.app, cert.pem), ca: ctx.app.pki.caBundlePem });
}

// ---- routers --------------------------------------------------------------------------------

/** Point a router (and its tunneler identity) at a new client certificate. */
function setRouterCert(tx: Tx, collection: 'edgeRouters' | 'routers', routerId: string, certPem: string, fingerprint: string, notAfter: number) {
  const cur = tx.get(collection, routerId);
  if (!cur) throw new ApiError('INVALID_ENROLLMENT_TOKEN');
  // The router protocol's contract: `fingerprint` = lower-case hex SHA-1 of the client certificate DER, `certPem` its PEM.
  tx.put(collection, { ...cur, fingerprint, certPem, isVerified: true, unverifiedFingerprint: undefined, unverifiedCertPem: undefined, updatedAt: Math.max(Date.now(), cur.updatedAt + 1) });
  if (collection !== 'edgeRouters') return;
  for (const iid of tx.idsByIndex('identities', 'edgeRouterId', routerId)) {
    for (const aid of tx.idsByIndex('authenticators', 'identityId', iid)) {
      if (tx.get('authenticators', aid)?.method === 'cert') tx.delete('authenticators', aid);
    }
    tx.put('authenticators', certAuthenticator(iid, certPem, fingerprint, notAfter));
  }
}

async function enrollRouter(ctx: Ctx, e: EnrollmentRecord, clientCsr: unknown, serverCsr: unknown): Promise<Reply> {
  for (const [field, v] of [['certCsr', clientCsr], ['serverCertCsr', serverCsr]] as const) {
    if (!nonEmpty(v)) throw new ApiError('MISSING_OR_INVALID_CSR', undefined, { field, reason: `${field} is required`, value: '' });
  }
  const [client, server] = await signCsrs(ctx.app, [
    { csr: clientCsr, profile: 'client', validityMs: VALIDITY.router, field: 'certCsr' },
    { csr: serverCsr, profile: 'server', validityMs: VALIDITY.router, field: 'serverCertCsr' },
  ]);
  await write(ctx.app.store, (tx) => {
    consume(tx, e);
    if (e.method === 'erott') setRouterCert(tx, 'edgeRouters', e.edgeRouterId!, client.pem, client.fingerprint, client.notAfter);
    else setRouterCert(tx, 'routers', e.transitRouterId!, client.pem, client.fingerprint, client.notAfter);
  });
  return ok({ ca: ctx.app.pki.caBundlePem, cert: withChain(ctx.app, client.pem), serverCert: withChain(ctx.app, server.pem) });
}

/** `POST /enroll/extend/router`: the router's current client certificate on the TLS connection. */
const extendRouter: Handler = async (ctx) => {
  const leaf = ctx.req.peerLeaf ?? ctx.req.peerCertificates?.[0];
  if (!leaf) throw errors.unauthorized();
  const fp = fingerprintOf(leaf);
  const store = ctx.app.store;
  let found: { collection: 'edgeRouters' | 'routers'; id: string } | undefined;
  for (const collection of ['edgeRouters', 'routers'] as const) {
    const id = store.idsByIndex(collection, 'fingerprint', fp)[0];
    if (id) found = { collection, id };
  }
  if (!found) throw errors.unauthorized();
  const body = ctx.body ?? {};
  for (const field of ['certCsr', 'serverCertCsr']) {
    if (!nonEmpty(body[field])) throw new ApiError('COULD_NOT_PROCESS_CSR', undefined, { field, reason: `${field} must be a PEM encoded CSR`, value: '' });
  }
  const [client, server] = await signCsrs(ctx.app, [
    { csr: body.certCsr, profile: 'client', validityMs: VALIDITY.router, field: 'certCsr' },
    { csr: body.serverCertCsr, profile: 'server', validityMs: VALIDITY.router, field: 'serverCertCsr' },
  ]);
  await write(store, (tx) => {
    const cur = tx.get(found!.collection, found!.id);
    if (!cur || cur.fingerprint !== fp) throw errors.unauthorized();
    setRouterCert(tx, found!.collection, found!.id, client.pem, client.fingerprint, client.notAfter);
  });
  return ok({ ca: ctx.app.pki.caBundlePem, cert: withChain(ctx.app, client.pem), serverCert: withChain(ctx.app, server.pem) });
};

// ---- updb -----------------------------------------------------------------------------------

async function enrollUpdb(ctx: Ctx, e: EnrollmentRecord, body: any): Promise<Reply> {
  const identity = ctx.app.store.get('identities', e.identityId!);
  if (!identity) throw new ApiError('INVALID_ENROLLMENT_TOKEN');
  const username = checkUsername(e.username ?? body?.username);
  const passwordHash = await hashPassword(ctx.app, checkPassword(ctx.app, identity, body?.password));
  await write(ctx.app.store, (tx) => {
    consume(tx, e);
    for (const aid of tx.idsByIndex('authenticators', 'identityId', e.identityId)) {
      if (tx.get('authenticators', aid)?.method === 'updb') throw new ApiError('MAX_AUTHENTICATOR_METHODS_REACHED', 'the identity already has a updb authenticator');
    }
    if (tx.findUnique('authenticators', 'username', username)) throw errors.field('username', 'the username is already in use', username);
    const now = Date.now();
    tx.put('authenticators', { id: newId(), createdAt: now, updatedAt: now, tags: {}, method: 'updb', identityId: e.identityId!, username, passwordHash });
  });
  return ok({ username });
}

// ---- ottca and CA auto-enrollment -----------------------------------------------------------

function peerChain(ctx: Ctx): Buffer[] {
  const chain = ctx.req.peerCertificates ?? [];
  if (chain.length === 0) throw new ApiError('CERT_FAILED_VALIDATION', 'a client certificate must be presented over mutual TLS (the certificate listener)');
  return chain;
}

async function enrollOttCa(ctx: Ctx, e: EnrollmentRecord): Promise<Reply> {
  const chain = peerChain(ctx);
  const ca = e.caId ? ctx.app.store.get('cas', e.caId) : undefined;
  if (!ca || !ca.isVerified || !ca.isOttCaEnrollmentEnabled) throw new ApiError('ENROLLMENT_CA_NOT_VALID');
  const leaf = x509(chain[0]);
  if (isExpired(leaf) || !chainsTo(chain, x509(ca.certPem))) throw new ApiError('CERTIFICATE_FAILED_VALIDATION', 'the client certificate is not signed by the CA of the enrollment');
  const fingerprint = fingerprintOf(chain[0]);
  await write(ctx.app.store, (tx) => {
    consume(tx, e);
    if (!tx.exists('identities', e.identityId!)) throw new ApiError('INVALID_ENROLLMENT_TOKEN');
    requireNoCert(tx, e.identityId!, fingerprint);
    tx.put('authenticators', certAuthenticator(e.identityId!, leaf.toString(), fingerprint, Date.parse(leaf.validTo), { isIssuedByNetwork: false, caId: ca.id }));
  });
  return empty();
}

/** `[caName]-[commonName]` style names. */
function formatName(format: string, v: Record<string, string>): string {
  return format.replace(/\[(caName|caId|commonName|requestedName|identityId)\]/g, (_m, k: string) => v[k] ?? '');
}

async function enrollCa(ctx: Ctx, requestedName?: unknown): Promise<Reply> {
  const chain = peerChain(ctx);
  const store = ctx.app.store;
  const cas = [...store.scan('cas')].filter((c) => c.isVerified && c.isAutoCaEnrollmentEnabled);
  if (cas.length === 0) throw new ApiError('ENROLLMENT_NO_VALID_CAS');
  const leaf = x509(chain[0]);
  const ca = isExpired(leaf) ? undefined : cas.find((c) => chainsTo(chain, x509(c.certPem)));
  if (!ca) throw new ApiError('CERT_FAILED_VALIDATION');
  const fingerprint = fingerprintOf(chain[0]);
  let externalId: string | undefined;
  if (ca.externalIdClaim) {
    externalId = externalIdOf(leaf, ca.externalIdClaim);
    if (!externalId) throw new ApiError('MISSING_CERT_CLAIM');
  }
  const identityId = newId();
  const name0 = formatName(ca.identityNameFormat || '[caName]-[commonName]', {
    caName: ca.name, caId: ca.id, commonName: commonName(leaf), identityId,
    requestedName: typeof requestedName === 'string' && requestedName !== '' ? requestedName : identityId,
  }) || identityId;
  await write(store, (tx) => {
    if (tx.findUnique('authenticators', 'fingerprint', fingerprint)) throw new ApiError('CERT_IN_USE');
    if (externalId !== undefined && tx.findUnique('identities', 'externalId', externalId)) throw new ApiError('CERT_IN_USE', 'an identity with the external id of this certificate already exists');
    // Collisions get a six-digit counter: name, name000001, name000002, …
    let name = name0;
    for (let n = 1; tx.findUnique('identities', 'name', name); n++) name = name0 + String(n).padStart(6, '0');
    const now = Date.now();
    tx.put('identities', {
      id: identityId, createdAt: now, updatedAt: now, tags: {}, name, typeId: 'Default', isAdmin: false, isDefaultAdmin: false,
      authPolicyId: DEFAULT_AUTH_POLICY_ID, roleAttributes: [...(ca.identityRoles ?? [])].sort(), defaultHostingCost: 0,
      defaultHostingPrecedence: 'default', serviceHostingCosts: {}, serviceHostingPrecedences: {}, ...(externalId !== undefined ? { externalId } : {}),
    });
    // With an externalIdClaim, logins resolve the identity by external id; otherwise by the pinned certificate.
    if (externalId === undefined) tx.put('authenticators', certAuthenticator(identityId, leaf.toString(), fingerprint, Date.parse(leaf.validTo), { isIssuedByNetwork: false, caId: ca.id }));
  });
  return empty();
}

// ---- the legacy generic endpoint ------------------------------------------------------------

/** Accept header allows a JSON reply (absent, `*\/*`, `application/*`, or anything JSON). */
function acceptsJson(accept: string | undefined): boolean {
  if (!accept) return true;
  return accept.split(',').some((part) => {
    const m = part.split(';')[0].trim().toLowerCase();
    return m === '*/*' || m === 'application/*' || m === 'application/json' || m.endsWith('+json');
  });
}

const genericEnroll: Handler = async (ctx) => {
  const jsonOk = acceptsJson(ctx.req.headers.accept);
  const pemOk = /application\/x-pem-file/i.test(ctx.req.headers.accept ?? '');
  try {
    const body = ctx.body;
    const fields: Record<string, any> = typeof body === 'string' ? { clientCsr: body } : body && typeof body === 'object' ? body : {};
    const asked = ctx.req.query.get('method') ?? '';
    if (asked === 'ca') return await enrollCa(ctx, fields.name);
    const known = ['ott', 'ottca', 'updb', 'erott', 'trott'];
    if (asked !== '' && !known.includes(asked)) throw new ApiError('INVALID_ENROLL_METHOD', `unknown enrollment method ${asked}`);
    const e = enrollmentFor(ctx, ctx.req.query.get('token') ?? fields.token, asked ? [asked] : undefined);
    let reply: Reply;
    switch (e.method) {
      case 'ott':
        reply = await enrollOtt(ctx, e, fields.clientCsr ?? fields.csr);
        if (!jsonOk && pemOk) return { status: 200, body: (reply.body as any).data.cert, contentType: 'application/x-pem-file' };
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
        const e = enrollmentFor(ctx, body.token ?? ctx.req.query.get('token'), ['ott']);
        return enrollOtt(ctx, e, body.clientCsr);
      } },
    { api: 'client', operationId: 'enrollOttCa', auth: 'none', limit: 'heavy', body: 'optional',
      handler: async (ctx) => {
        const body = ctx.body && typeof ctx.body === 'object' ? ctx.body : {};
        const e = enrollmentFor(ctx, body.token ?? ctx.req.query.get('token'), ['ottca']);
        return enrollOttCa(ctx, e);
      } },
    { api: 'client', operationId: 'enrollUpdb', auth: 'none', limit: 'heavy',
      handler: async (ctx) => {
        const body = ctx.body ?? {};
        const e = enrollmentFor(ctx, ctx.req.query.get('token') ?? body.token, ['updb']);
        return enrollUpdb(ctx, e, body);
      } },
    { api: 'client', operationId: 'enrollCa', auth: 'none', limit: 'heavy',
      handler: (ctx) => enrollCa(ctx, undefined) },
    { api: 'client', operationId: 'enrollErOtt', auth: 'none', limit: 'heavy',
      handler: async (ctx) => {
        const body = ctx.body ?? {};
        const e = enrollmentFor(ctx, body.token ?? ctx.req.query.get('token'), ['erott']);
        return enrollRouter(ctx, e, body.clientCsr ?? body.certCsr, body.serverCsr ?? body.serverCertCsr);
      } },
    { api: 'client', operationId: 'extendRouterEnrollment', auth: 'none', limit: 'heavy',
      handler: extendRouter },
  ];
}
