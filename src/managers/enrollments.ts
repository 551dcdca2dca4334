/**
 * Enrollments: the outstanding one-time credentials of identities and routers, and the flows that
 * consume them.
 *
 * Management side: create, refresh, re-enroll an authenticator or an edge router, the CA and
 * network JWTs. Every enrollment JWT is signed and its secrets sealed before the write that stores
 * them (resources/enrollments.ts `newEnrollment`); a write callback only checks and stores.
 *
 * Enroll flows (Client API, no session): one-time token with a CSR (`ott`), with a pre-exchanged
 * certificate (`ottca`), username/password (`updb`), CA auto-enrollment (`ca`), edge and transit
 * routers (`erott`, `trott`), router certificate extension, and enrollment with an external JWT.
 * Each checks the token up front (unknown → INVALID_ENROLLMENT_TOKEN, wrong method →
 * INVALID_ENROLL_METHOD, expired → ENROLLMENT_EXPIRED), does the CPU work (CSR signing, password
 * hashing) in the pool, then in ONE write re-checks that the enrollment still exists, deletes it
 * and creates the credential: two concurrent uses of a token cannot both succeed.
 *
 *   const e = enrollments.outstanding(token, ['ott']);
 *   const cert = await enrollments.enrollOtt(e, csr);
 */
import crypto from 'node:crypto';
import * as jose from 'jose';
import { ApiError, errors } from '../core/errors.js';
import type { Store, Tx, AuthenticatorRecord, EdgeRouterRecord, EnrollmentRecord, ExternalJwtSignerRecord, IdentityRecord } from '../store/store.js';
import { ApiSessions } from '../auth/api-sessions.js';
import { checkUsername } from '../auth/passwords.js';
import { VALIDITY, type Signed } from '../pki/sign-csr.js';
import { fingerprintOf } from '../pki/certs.js';
import { chainsTo, commonName, externalIdOf, isExpired, x509 } from '../pki/chain.js';
import { DEFAULT_AUTH_POLICY_ID } from '../resources/credentials.js';
import {
  enrollmentByToken, enrollmentSecretsAtRest, identityEnrollment, newEnrollment, signedJwt,
  type EnrollmentKeys, type EnrollmentSpec,
} from '../resources/enrollments.js';
import { newId, write } from '../resources/write.js';
import { certAuthenticator, type Issuing } from './issuing.js';


export interface EnrollmentsDeps extends EnrollmentKeys {
  store: Store;
  issuing: Issuing;
  /** The password rules of an identity's auth policy, and the pool's hash (auth/passwords.ts). */
  passwords: { check(identity: IdentityRecord, password: unknown): string; hash(password: string): Promise<string> };
}

/** What `POST /enrollments` asks for. */
export interface EnrollmentRequest {
  method: unknown;
  identityId: unknown;
  caId?: unknown;
  username?: unknown;
  expiresAt: number;
}

/** Where an issued client certificate goes: a router's own records. */
type RouterCollection = 'edgeRouters' | 'routers';

const nonEmpty = (v: unknown): v is string => typeof v === 'string' && v.trim() !== '';

/** End the API sessions opened with an authenticator (it is being removed or replaced). */
function endSessionsOf(tx: Tx, identityId: string, authenticatorId: string) {
  const ids = tx.idsByIndex('apiSessions', 'identityId', identityId).filter((id) => tx.get('apiSessions', id)?.authenticatorId === authenticatorId);
  ApiSessions.deleteInTx(tx, ids);
}

/** Inside the write: the enrollment is still there (a concurrent use did not consume it). */
function consume(tx: Tx, e: EnrollmentRecord) {
  if (!tx.exists('enrollments', e.id)) throw new ApiError('INVALID_ENROLLMENT_TOKEN');
  tx.delete('enrollments', e.id);
}

function requireNoCert(tx: Tx, identityId: string, fingerprint: string) {
  if (tx.findUnique('authenticators', 'fingerprint', fingerprint)) throw new ApiError('CERT_IN_USE');
  for (const aid of tx.idsByIndex('authenticators', 'identityId', identityId)) {
    if (tx.get('authenticators', aid)?.method === 'cert') throw new ApiError('MAX_AUTHENTICATOR_METHODS_REACHED', 'the identity already has a cert authenticator');
  }
}

/** Point a router (and its tunneler identity) at a new client certificate. */
function setRouterCert(tx: Tx, collection: RouterCollection, routerId: string, cert: Signed) {
  const cur = tx.get(collection, routerId);
  if (!cur) throw new ApiError('INVALID_ENROLLMENT_TOKEN');
  // The router protocol's contract: `fingerprint` = lower-case hex SHA-1 of the client certificate DER, `certPem` its PEM.
  tx.put(collection, { ...cur, fingerprint: cert.fingerprint, certPem: cert.pem, isVerified: true, unverifiedFingerprint: undefined, unverifiedCertPem: undefined, updatedAt: Math.max(Date.now(), cur.updatedAt + 1) });
  if (collection !== 'edgeRouters') return;
  for (const iid of tx.idsByIndex('identities', 'edgeRouterId', routerId)) {
    for (const aid of tx.idsByIndex('authenticators', 'identityId', iid)) {
      if (tx.get('authenticators', aid)?.method === 'cert') tx.delete('authenticators', aid);
    }
    tx.put('authenticators', certAuthenticator(iid, cert.pem, cert.fingerprint, cert.notAfter));
  }
}

/** A new identity made by an enrollment (CA auto-enrollment, external JWT), not through the identity resource. */
function enrolledIdentity(id: string, name: string, authPolicyId: string, roleAttributes: string[], externalId: string | undefined): IdentityRecord {
  const now = Date.now();
  return {
    id, createdAt: now, updatedAt: now, tags: {}, name, typeId: 'Default', isAdmin: false, isDefaultAdmin: false, authPolicyId,
    roleAttributes, defaultHostingCost: 0, defaultHostingPrecedence: 'default', serviceHostingCosts: {}, serviceHostingPrecedences: {},
    ...(externalId !== undefined ? { externalId } : {}),
  };
}

/** `name`, else `name000001`, `name000002`, … : the first not taken. */
function freeName(tx: Tx, name0: string): string {
  let name = name0;
  for (let n = 1; tx.findUnique('identities', 'name', name); n++) name = name0 + String(n).padStart(6, '0');
  return name;
}

/** `[caName]-[commonName]` style names. */
function formatName(format: string, v: Record<string, string>): string {
  return format.replace(/\[(caName|caId|commonName|requestedName|identityId)\]/g, (_m, k: string) => v[k] ?? '');
}

const invalidToken = (why: string) => new ApiError('INVALID_ENROLLMENT_TOKEN', undefined, { code: 'INVALID_ENROLLMENT_TOKEN', message: why });

/** A claim by name or JSON-pointer-like path (`/a/b`, `a.b`). */
function claimAt(claims: Record<string, unknown>, selector: string): unknown {
  const parts = selector.startsWith('/') ? selector.slice(1).split('/') : selector.split('.');
  let v: unknown = claims;
  for (const p of parts) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<string, unknown>)[p];
  }
  return v;
}

export class Enrollments {
  private readonly store: Store;
  /** Remote key sets of external JWT signers, one per endpoint (jose caches and refetches on unknown kids). */
  private readonly jwksSets = new Map<string, ReturnType<typeof jose.createRemoteJWKSet>>();
  private networkJwtCache?: string;

  constructor(private readonly deps: EnrollmentsDeps) {
    this.store = deps.store;
  }

  // ---- management ----------------------------------------------------------------------------

  /** `POST /enrollments`: a new ott, ottca or updb enrollment of an identity that has none of that method. */
  async create(req: EnrollmentRequest): Promise<EnrollmentRecord> {
    const { method, identityId } = req;
    const spec: EnrollmentSpec = { method: method as 'ott', identityId: identityId as string, expiresAt: req.expiresAt };
    if (method === 'ottca') {
      if (typeof req.caId !== 'string' || req.caId === '') throw errors.field('caId', 'caId is required for ottca enrollments', req.caId ?? null);
      spec.caId = req.caId;
    } else if (method === 'updb') {
      spec.username = checkUsername(req.username);
    } else if (method !== 'ott') throw errors.field('method', 'unsupported enrollment method', method);
    const rec = newEnrollment(this.deps, spec);
    return write(this.store, (tx) => {
      if (typeof identityId !== 'string' || !tx.exists('identities', identityId)) throw errors.field('identityId', 'no identity found with the given id', identityId);
      if (spec.caId && !tx.exists('cas', spec.caId)) throw errors.field('caId', 'ca not found', spec.caId);
      if (spec.username && tx.findUnique('authenticators', 'username', spec.username)) throw errors.field('username', 'the username is already in use', spec.username);
      if (identityEnrollment(tx, identityId, spec.method)) throw new ApiError('ENROLLMENT_EXISTS', `the identity already has an outstanding ${spec.method} enrollment`);
      tx.put('enrollments', rec);
      return rec;
    });
  }

  /** A new token, JWT and expiry for an enrollment: the old token dies. */
  async refresh(id: string, expiresAt: number): Promise<void> {
    const e = this.store.get('enrollments', id);
    if (!e) throw errors.notFound();
    // Method and subject never change: what is signed here still fits the record in the write.
    const secrets = enrollmentSecretsAtRest(this.deps, e.method, (e.identityId ?? e.edgeRouterId ?? e.transitRouterId)!, expiresAt);
    await write(this.store, (tx) => {
      const cur = tx.get('enrollments', id);
      if (!cur) throw errors.notFound();
      tx.put('enrollments', { ...cur, ...secrets, updatedAt: Math.max(Date.now(), cur.updatedAt + 1) });
    });
  }

  /**
   * Revert an authenticator to an enrollment of its kind (updb, ottca while its CA exists, else
   * ott): the authenticator and its API sessions end, a prior outstanding enrollment of the same
   * method is replaced.
   */
  async reEnrollAuthenticator(authenticatorId: string, expiresAt: number): Promise<EnrollmentRecord> {
    const specOf = (auth: AuthenticatorRecord, caExists: (id: string) => boolean): EnrollmentSpec => {
      if (auth.method === 'updb') return { method: 'updb', identityId: auth.identityId, username: auth.username, expiresAt };
      if (auth.caId && caExists(auth.caId)) return { method: 'ottca', identityId: auth.identityId, caId: auth.caId, expiresAt };
      return { method: 'ott', identityId: auth.identityId, expiresAt };
    };
    // Signed from the committed authenticator; should its kind have changed by the write (its CA
    // deleted meanwhile), it is signed again.
    for (;;) {
      const auth = this.store.get('authenticators', authenticatorId);
      if (!auth) throw errors.notFound();
      const spec = specOf(auth, (id) => this.store.has('cas', id));
      const rec = newEnrollment(this.deps, spec);
      const done = await write(this.store, (tx) => {
        const cur = tx.get('authenticators', authenticatorId);
        if (!cur) throw errors.notFound();
        const now = specOf(cur, (id) => tx.exists('cas', id));
        if (now.method !== spec.method || now.identityId !== spec.identityId || now.username !== spec.username || now.caId !== spec.caId) return undefined;
        const prior = identityEnrollment(tx, cur.identityId, spec.method);
        if (prior) tx.delete('enrollments', prior.id);
        endSessionsOf(tx, cur.identityId, cur.id);
        tx.delete('authenticators', cur.id);
        tx.put('enrollments', rec);
        return rec;
      });
      if (done) return done;
    }
  }

  /**
   * Re-enroll an edge router: its certificate authentication is removed (the control channel drops
   * a router whose fingerprint no longer matches, and reconnects fail until it enrolls again) and a
   * new erott enrollment replaces any outstanding one.
   */
  async reEnrollEdgeRouter(id: string): Promise<void> {
    const rec = newEnrollment(this.deps, { method: 'erott', edgeRouterId: id });
    await write(this.store, (tx) => {
      const cur = tx.get('edgeRouters', id);
      if (!cur) throw errors.notFound();
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
      tx.put('enrollments', rec);
    });
  }

  /** The CA auto-enrollment JWT: `em: ca`, sub = jti = CA id, no expiry. */
  caJwt(caId: string): string {
    const ca = this.store.get('cas', caId);
    if (!ca) throw errors.notFound();
    const { url, controllers } = this.deps.issuer();
    return signedJwt(this.deps, { em: 'ca', sub: ca.id, jti: ca.id, iss: url + '/', aud: ['mesh-enroller'], ctrls: controllers });
  }

  /** The network JWT (`em: network`): made once, the first time it is asked for (the listeners are bound by then). */
  networkJwt(): string {
    if (!this.networkJwtCache) {
      const { url, controllers } = this.deps.issuer();
      const iss = url + '/';
      this.networkJwtCache = signedJwt(this.deps, { em: 'network', iss, sub: iss, aud: ['mesh-enroller'], jti: crypto.randomUUID(), ctrls: controllers });
    }
    return this.networkJwtCache;
  }

  // ---- enroll flows --------------------------------------------------------------------------

  /** The outstanding enrollment for `token`, checked for method and expiry. */
  outstanding(token: unknown, methods?: readonly string[]): EnrollmentRecord {
    if (!nonEmpty(token)) throw new ApiError('INVALID_ENROLLMENT_TOKEN', undefined, { field: 'token', reason: 'an enrollment token is required', value: '' });
    const e = enrollmentByToken(this.store, token.trim());
    if (!e) throw new ApiError('INVALID_ENROLLMENT_TOKEN');
    if (methods && !methods.includes(e.method))
      throw new ApiError('INVALID_ENROLL_METHOD', `the token is for enrollment method ${e.method}, not ${methods.join('/')}`);
    if (e.expiresAt < Date.now()) throw new ApiError('ENROLLMENT_EXPIRED');
    return e;
  }

  /** ott: the CSR signed into the identity's certificate authenticator. */
  async enrollOtt(e: EnrollmentRecord, csr: unknown): Promise<Signed> {
    const [cert] = await this.deps.issuing.sign([{ csr, profile: 'client', validityMs: VALIDITY.client, field: 'clientCsr' }]);
    await write(this.store, (tx) => {
      consume(tx, e);
      if (!tx.exists('identities', e.identityId!)) throw new ApiError('INVALID_ENROLLMENT_TOKEN');
      requireNoCert(tx, e.identityId!, cert.fingerprint);
      tx.put('authenticators', certAuthenticator(e.identityId!, cert.pem, cert.fingerprint, cert.notAfter));
    });
    return cert;
  }

  /** erott / trott: client and server certificates for the router. */
  async enrollRouter(e: EnrollmentRecord, clientCsr: unknown, serverCsr: unknown): Promise<{ client: Signed; server: Signed }> {
    for (const [field, v] of [['certCsr', clientCsr], ['serverCertCsr', serverCsr]] as const) {
      if (!nonEmpty(v)) throw new ApiError('MISSING_OR_INVALID_CSR', undefined, { field, reason: `${field} is required`, value: '' });
    }
    const [client, server] = await this.signRouterCsrs(clientCsr, serverCsr);
    await write(this.store, (tx) => {
      consume(tx, e);
      if (e.method === 'erott') setRouterCert(tx, 'edgeRouters', e.edgeRouterId!, client);
      else setRouterCert(tx, 'routers', e.transitRouterId!, client);
    });
    return { client, server };
  }

  /** A router renews its certificates with the client certificate it connects with (`leaf`). */
  async extendRouter(leaf: Buffer | undefined, clientCsr: unknown, serverCsr: unknown): Promise<{ client: Signed; server: Signed }> {
    if (!leaf) throw errors.unauthorized();
    const fp = fingerprintOf(leaf);
    let found: { collection: RouterCollection; id: string } | undefined;
    for (const collection of ['edgeRouters', 'routers'] as const) {
      const id = this.store.idsByIndex(collection, 'fingerprint', fp)[0];
      if (id) found = { collection, id };
    }
    if (!found) throw errors.unauthorized();
    for (const [field, v] of [['certCsr', clientCsr], ['serverCertCsr', serverCsr]] as const) {
      if (!nonEmpty(v)) throw new ApiError('COULD_NOT_PROCESS_CSR', undefined, { field, reason: `${field} must be a PEM encoded CSR`, value: '' });
    }
    const [client, server] = await this.signRouterCsrs(clientCsr, serverCsr);
    const { collection, id } = found;
    await write(this.store, (tx) => {
      const cur = tx.get(collection, id);
      if (!cur || cur.fingerprint !== fp) throw errors.unauthorized();
      setRouterCert(tx, collection, id, client);
    });
    return { client, server };
  }

  private signRouterCsrs(clientCsr: unknown, serverCsr: unknown): Promise<Signed[]> {
    return this.deps.issuing.sign([
      { csr: clientCsr, profile: 'client', validityMs: VALIDITY.router, field: 'certCsr' },
      { csr: serverCsr, profile: 'server', validityMs: VALIDITY.router, field: 'serverCertCsr' },
    ]);
  }

  /** updb: a password authenticator; the username is the enrollment's, else the one given. */
  async enrollUpdb(e: EnrollmentRecord, username: unknown, password: unknown): Promise<string> {
    const identity = this.store.get('identities', e.identityId!);
    if (!identity) throw new ApiError('INVALID_ENROLLMENT_TOKEN');
    const name = checkUsername(e.username ?? username);
    const passwordHash = await this.deps.passwords.hash(this.deps.passwords.check(identity, password));
    await write(this.store, (tx) => {
      consume(tx, e);
      for (const aid of tx.idsByIndex('authenticators', 'identityId', e.identityId!)) {
        if (tx.get('authenticators', aid)?.method === 'updb') throw new ApiError('MAX_AUTHENTICATOR_METHODS_REACHED', 'the identity already has a updb authenticator');
      }
      if (tx.findUnique('authenticators', 'username', name)) throw errors.field('username', 'the username is already in use', name);
      const now = Date.now();
      tx.put('authenticators', { id: newId(), createdAt: now, updatedAt: now, tags: {}, method: 'updb', identityId: e.identityId!, username: name, passwordHash });
    });
    return name;
  }

  /** ottca: the certificate presented over mutual TLS (`chain`, leaf first), signed by the enrollment's CA. */
  async enrollOttCa(e: EnrollmentRecord, chain: Buffer[]): Promise<void> {
    requireChain(chain);
    const ca = e.caId ? this.store.get('cas', e.caId) : undefined;
    if (!ca || !ca.isVerified || !ca.isOttCaEnrollmentEnabled) throw new ApiError('ENROLLMENT_CA_NOT_VALID');
    const leaf = x509(chain[0]);
    if (isExpired(leaf) || !chainsTo(chain, x509(ca.certPem))) throw new ApiError('CERTIFICATE_FAILED_VALIDATION', 'the client certificate is not signed by the CA of the enrollment');
    const fingerprint = fingerprintOf(chain[0]);
    await write(this.store, (tx) => {
      consume(tx, e);
      if (!tx.exists('identities', e.identityId!)) throw new ApiError('INVALID_ENROLLMENT_TOKEN');
      requireNoCert(tx, e.identityId!, fingerprint);
      tx.put('authenticators', certAuthenticator(e.identityId!, leaf.toString(), fingerprint, Date.parse(leaf.validTo), { isIssuedByNetwork: false, caId: ca.id }));
    });
  }

  /** CA auto-enrollment: a new identity for a certificate signed by a verified CA that allows it. */
  async enrollCa(chain: Buffer[], requestedName?: unknown): Promise<void> {
    requireChain(chain);
    const cas = [...this.store.scan('cas')].filter((c) => c.isVerified && c.isAutoCaEnrollmentEnabled);
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
    await write(this.store, (tx) => {
      if (tx.findUnique('authenticators', 'fingerprint', fingerprint)) throw new ApiError('CERT_IN_USE');
      if (externalId !== undefined && tx.findUnique('identities', 'externalId', externalId)) throw new ApiError('CERT_IN_USE', 'an identity with the external id of this certificate already exists');
      tx.put('identities', enrolledIdentity(identityId, freeName(tx, name0), DEFAULT_AUTH_POLICY_ID, [...(ca.identityRoles ?? [])].sort(), externalId));
      // With an externalIdClaim, logins resolve the identity by external id; otherwise by the pinned certificate.
      if (externalId === undefined) tx.put('authenticators', certAuthenticator(identityId, leaf.toString(), fingerprint, Date.parse(leaf.validTo), { isIssuedByNetwork: false, caId: ca.id }));
    });
  }

  // ---- enrollment with an external JWT -------------------------------------------------------

  /**
   * An identity enrolls itself with a JWT from an external JWT signer. The signer is the one
   * named by `issuerId` (the `mesh-token-issuer-id` header), else the one whose `kid` matches the
   * token header, else the one whose `issuer` matches `iss`; it must be enabled, and the token
   * must verify against its certificate or JWKS with its issuer and audience.
   *
   * With `csr` (signer `enrollToCertEnabled`): a new identity with a cert authenticator, and its
   * certificate returned. Without (signer `enrollToTokenEnabled`): a new identity that logs in with
   * such tokens (ext-jwt). The identity gets `externalId` = the signer's claim (`claimsProperty`,
   * default `sub`), a name from `enrollNameClaimsSelector` (default: that claim; collisions get a
   * counter), role attributes from `enrollAttributeClaimsSelector`, and the auth policy
   * `enrollAuthPolicyId`. A token whose identity already exists → 409.
   */
  async enrollWithToken(token: string, issuerId: string | undefined, csr: unknown): Promise<Signed | undefined> {
    const signer = this.findSigner(token, issuerId);
    const claims = await this.verify(signer, token);
    const claimName = signer.claimsProperty || 'sub';
    const externalId = claimAt(claims, claimName);
    if (typeof externalId !== 'string' || externalId === '') throw invalidToken(`the token has no ${claimName} claim`);
    const wantsCert = typeof csr === 'string' && csr.trim() !== '';
    if (wantsCert ? !signer.enrollToCertEnabled : !signer.enrollToTokenEnabled)
      throw new ApiError('INVALID_ENROLLMENT_NOT_ALLOWED', `the signer does not allow enrolling to ${wantsCert ? 'certificate' : 'token'} credentials`);
    const store = this.store;
    if (store.findUnique('identities', 'externalId', externalId) || (!signer.useExternalId && store.get('identities', externalId)))
      throw new ApiError('ENROLLMENT_IDENTITY_ALREADY_ENROLLED');

    const nameClaim = signer.enrollNameClaimsSelector ? claimAt(claims, signer.enrollNameClaimsSelector) : undefined;
    const name0 = typeof nameClaim === 'string' && nameClaim !== '' ? nameClaim : externalId;
    const attrClaim = signer.enrollAttributeClaimsSelector ? claimAt(claims, signer.enrollAttributeClaimsSelector) : undefined;
    const attrs = (Array.isArray(attrClaim) ? attrClaim : typeof attrClaim === 'string' ? [attrClaim] : [])
      .filter((a): a is string => typeof a === 'string' && a !== '' && a[0] !== '#' && a[0] !== '@');
    const cert = wantsCert ? (await this.deps.issuing.sign([{ csr, profile: 'client', validityMs: VALIDITY.client, field: 'clientCsr' }]))[0] : undefined;
    await write(store, (tx) => {
      if (tx.findUnique('identities', 'externalId', externalId)) throw new ApiError('ENROLLMENT_IDENTITY_ALREADY_ENROLLED');
      if (cert && tx.findUnique('authenticators', 'fingerprint', cert.fingerprint)) throw new ApiError('CERT_IN_USE');
      const policy = signer.enrollAuthPolicyId && tx.exists('authPolicies', signer.enrollAuthPolicyId) ? signer.enrollAuthPolicyId : DEFAULT_AUTH_POLICY_ID;
      const id = newId();
      tx.put('identities', enrolledIdentity(id, freeName(tx, name0), policy, [...new Set(attrs)].sort(), externalId));
      if (cert) tx.put('authenticators', certAuthenticator(id, cert.pem, cert.fingerprint, cert.notAfter));
    });
    return cert;
  }

  private findSigner(token: string, issuerId: string | undefined): ExternalJwtSignerRecord {
    let signer: ExternalJwtSignerRecord | undefined;
    if (issuerId) signer = this.store.get('externalJwtSigners', issuerId);
    else {
      let header: jose.ProtectedHeaderParameters;
      let claims: jose.JWTPayload;
      try {
        header = jose.decodeProtectedHeader(token);
        claims = jose.decodeJwt(token);
      } catch {
        throw invalidToken('the token is not a JWT; name its issuer with the mesh-token-issuer-id header');
      }
      if (header.kid) signer = this.store.findUnique('externalJwtSigners', 'kid', header.kid);
      if (!signer && typeof claims.iss === 'string') signer = this.store.findUnique('externalJwtSigners', 'issuer', claims.iss);
    }
    if (!signer) throw invalidToken('no external JWT signer matches the token');
    if (!signer.enabled) throw invalidToken('the external JWT signer of the token is disabled');
    return signer;
  }

  private async verify(signer: ExternalJwtSignerRecord, token: string): Promise<jose.JWTPayload> {
    const opts: jose.JWTVerifyOptions = { issuer: signer.issuer };
    if (signer.audience) opts.audience = signer.audience;
    try {
      if (signer.certPem) {
        const key = crypto.createPublicKey(signer.certPem);
        return (await jose.jwtVerify(token, key, opts)).payload;
      }
      let set = this.jwksSets.get(signer.jwksEndpoint!);
      if (!set) this.jwksSets.set(signer.jwksEndpoint!, (set = jose.createRemoteJWKSet(new URL(signer.jwksEndpoint!), { timeoutDuration: 5000 })));
      return (await jose.jwtVerify(token, set, opts)).payload;
    } catch (e) {
      throw invalidToken(`the token did not verify: ${(e as Error).message}`);
    }
  }
}

/** ottca and CA auto-enrollment need the client certificate of the mutual-TLS listener. */
function requireChain(chain: Buffer[]) {
  if (chain.length === 0) throw new ApiError('CERT_FAILED_VALIDATION', 'a client certificate must be presented over mutual TLS (the certificate listener)');
}
