/**
 * PKI issuing: CSRs signed in the worker pool into client and server certificates, and the
 * certificate records made with them: the extension of a certificate authenticator (extend, then
 * verify), an API session's ephemeral certificates, the flag an admin sets to ask for an
 * extension, and the verification of a third-party CA.
 *
 *   const [client, server] = await issuing.sign([{ csr, profile: 'client' }, { csr: s, profile: 'server' }]);
 *   reply({ cert: issuing.withChain(client.pem), ca: issuing.caBundlePem });
 */
import crypto from 'node:crypto';
import { ApiError, errors, type ErrorCode } from '../core/errors.js';
import type { Store, AuthenticatorRecord, ApiSessionCertificateRecord, CaRecord } from '../store/store.js';
import type { WorkerPool } from '../pool.js';
import type { Pki } from '../pki/bootstrap.js';
import { VALIDITY, type SignRequest, type Signed } from '../pki/sign-csr.js';
import type { SignCsrItem, SignCsrResult } from '../pki/csr-task.js';
import { fingerprintOf } from '../pki/certs.js';
import { DerError, pemBlocks } from '../pki/der.js';
import { commonName, issued, x509 } from '../pki/chain.js';
import { newId, write } from '../resources/write.js';


export interface IssuingDeps {
  store: Store;
  pool: WorkerPool;
  /** The signing CA's certificate (sent with every issued leaf) and the trust bundle. */
  pki: Pick<Pki, 'signingCertPem' | 'caBundlePem'>;
}

/** A certificate authenticator issued now (enrollment, extension of a router, token enrollment). */
export function certAuthenticator(identityId: string, certPem: string, fingerprint: string, notAfter: number, extra: Partial<AuthenticatorRecord> = {}): AuthenticatorRecord {
  const now = Date.now();
  return {
    id: newId(), createdAt: now, updatedAt: now, tags: {}, method: 'cert', identityId, certPem, fingerprint,
    certNotAfter: notAfter, isIssuedByNetwork: true, isExtendRequested: false, isKeyRollRequested: false, ...extra,
  };
}

/** Go's pkix.Name.String() order: most specific RDN first, comma separated. */
export function subjectText(cert: crypto.X509Certificate): string {
  return cert.subject.split('\n').reverse().join(',');
}

/**
 * Most CSRs in one pool task. One task per CSR cost more CPU per enrollment (main thread and
 * worker, wake-ups included) than signing inline on a 2-core machine (docs/pki.md). So the CSRs of
 * every request that reaches `sign` in one turn of the event loop share a task; past 16 a burst
 * becomes several tasks, so that every worker takes part.
 */
const MAX_BATCH = 16;

interface Waiting {
  items: SignCsrItem[];
  resolve: (out: SignCsrResult[]) => void;
  reject: (e: unknown) => void;
}

export class Issuing {
  /** CSRs waiting for the next pool task (see MAX_BATCH). */
  private waiting: Waiting[] = [];
  private scheduled = false;

  constructor(private readonly deps: IssuingDeps) {}

  /** Root + intermediate: what clients verify issued certificates with. */
  get caBundlePem(): string {
    return this.deps.pki.caBundlePem;
  }

  /** The chain returned with issued certificates: leaf + signing CA. */
  withChain(leafPem: string): string {
    return leafPem + this.deps.pki.signingCertPem;
  }

  /**
   * Sign CSRs in the pool; an unusable CSR is a 400 COULD_NOT_PROCESS_CSR (or `code`) naming the
   * request's field. Each caller gets only its own results, whatever task they travelled in.
   */
  async sign(reqs: SignRequest[], code: ErrorCode = 'COULD_NOT_PROCESS_CSR'): Promise<Signed[]> {
    for (const r of reqs) {
      if (typeof r.csr !== 'string' || r.csr.trim() === '')
        throw new ApiError(code, undefined, { field: r.field ?? 'csr', reason: 'a PEM encoded certificate signing request is required', value: '' });
    }
    const items = reqs.map((r) => ({ csr: r.csr as string, profile: r.profile, validityMs: r.validityMs ?? VALIDITY.client }));
    const out = await new Promise<SignCsrResult[]>((resolve, reject) => {
      this.waiting.push({ items, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
    return out.map((res, i) => {
      if (!res.ok) throw new ApiError(code, undefined, { field: reqs[i].field ?? 'csr', reason: res.reason, value: '' });
      return res;
    });
  }

  private flush() {
    this.scheduled = false;
    const waiting = this.waiting.splice(0);
    for (let i = 0; i < waiting.length; ) {
      const group: Waiting[] = [];
      let n = 0;
      while (i < waiting.length && (n === 0 || n + waiting[i].items.length <= MAX_BATCH)) {
        n += waiting[i].items.length;
        group.push(waiting[i++]);
      }
      this.run(group);
    }
  }

  private run(group: Waiting[]) {
    const items = group.length === 1 ? group[0].items : group.flatMap((w) => w.items);
    this.deps.pool.run('signCsrs', { items }).then(
      (out) => {
        let at = 0;
        for (const w of group) {
          w.resolve(out.slice(at, at + w.items.length));
          at += w.items.length;
        }
      },
      // A full pool queue (429) or a failed worker fails every request of the task.
      (e) => {
        for (const w of group) w.reject(e);
      },
    );
  }

  // ---- certificate authenticators ------------------------------------------------------------

  /** The caller's own certificate authenticator issued by this controller, checked in upstream's order. */
  private ownCertAuthenticator(id: string, identityId: string): AuthenticatorRecord {
    const auth = this.deps.store.get('authenticators', id);
    if (!auth) throw errors.notFound();
    if (auth.identityId !== identityId) throw errors.unauthorized();
    if (auth.method !== 'cert' || auth.isIssuedByNetwork !== true)
      throw new ApiError('CAN_NOT_UPDATE_AUTHENTICATOR', 'only certificates issued by this controller can be extended');
    return auth;
  }

  /**
   * Extension, first step: a new certificate for the caller's authenticator, held as pending until
   * verified. `leaf`: the certificate on the TLS connection, which must be the current one.
   */
  async extend(authenticatorId: string, identityId: string, leaf: Buffer | undefined, csr: unknown): Promise<Signed> {
    const auth = this.ownCertAuthenticator(authenticatorId, identityId);
    if (!leaf || fingerprintOf(leaf) !== auth.fingerprint) throw errors.unauthorized();
    const [cert] = await this.sign([{ csr, profile: 'client', validityMs: VALIDITY.client, field: 'clientCertCsr' }]);
    await write(this.deps.store, (tx) => {
      const cur = tx.get('authenticators', auth.id);
      if (!cur || cur.fingerprint !== auth.fingerprint) throw errors.unauthorized();
      // A second extension before verification replaces the pending certificate.
      tx.put('authenticators', { ...cur, pendingCertPem: cert.pem, pendingFingerprint: cert.fingerprint, updatedAt: Math.max(Date.now(), cur.updatedAt + 1) });
    });
    return cert;
  }

  /** Extension, second step: the client shows the pending certificate; it replaces the current one. */
  async verifyExtension(authenticatorId: string, identityId: string, clientCert: unknown): Promise<void> {
    const auth = this.ownCertAuthenticator(authenticatorId, identityId);
    if (!auth.pendingFingerprint) throw new ApiError('CAN_NOT_UPDATE_AUTHENTICATOR', 'there is no pending certificate extension to verify');
    let cert: crypto.X509Certificate | undefined;
    try {
      const first = typeof clientCert === 'string' ? pemBlocks(clientCert, ['CERTIFICATE'])[0] : undefined;
      cert = first ? new crypto.X509Certificate(first.der) : undefined;
    } catch {
      cert = undefined;
    }
    if (!cert || fingerprintOf(cert.raw) !== auth.pendingFingerprint)
      throw new ApiError('INVALID_CLIENT_CERT', undefined, { field: 'clientCert', reason: 'must be the certificate returned by the extension request', value: '' });
    const old = auth.certPem ? new crypto.X509Certificate(auth.certPem) : undefined;
    const rolled = !old || !old.publicKey.equals(cert.publicKey);
    const notAfter = Date.parse(cert.validTo);
    await write(this.deps.store, (tx) => {
      const cur = tx.get('authenticators', auth.id);
      if (!cur || cur.pendingFingerprint !== auth.pendingFingerprint) throw new ApiError('CAN_NOT_UPDATE_AUTHENTICATOR', 'the pending extension changed; extend again');
      const next: AuthenticatorRecord = {
        ...cur, certPem: cur.pendingCertPem, fingerprint: cur.pendingFingerprint, certNotAfter: notAfter,
        isExtendRequested: false, isKeyRollRequested: false, lastExtendRolledKeys: rolled, updatedAt: Math.max(Date.now(), cur.updatedAt + 1),
      };
      delete next.pendingCertPem;
      delete next.pendingFingerprint;
      delete next.extendRequestedAt;
      tx.put('authenticators', next);
    });
  }

  /** An admin asks the holder of a certificate authenticator to extend it (at its next login), optionally with a new key. */
  async requestExtend(authenticatorId: string, rollKeys: boolean): Promise<void> {
    await write(this.deps.store, (tx) => {
      const cur = tx.get('authenticators', authenticatorId);
      if (!cur) throw errors.notFound();
      if (cur.method !== 'cert') throw new ApiError('FORBIDDEN', 'the authenticator is not certificate based and can not be extended');
      const now = Date.now();
      tx.put('authenticators', { ...cur, isExtendRequested: true, isKeyRollRequested: rollKeys, extendRequestedAt: now, updatedAt: Math.max(now, cur.updatedAt + 1) });
    });
  }

  // ---- API session certificates --------------------------------------------------------------

  /** An ephemeral certificate of an API session (it ends with the session). */
  async createSessionCertificate(apiSessionId: string, identityId: string, csr: unknown): Promise<{ rec: ApiSessionCertificateRecord; cert: Signed }> {
    const [cert] = await this.sign([{ csr, profile: 'client', validityMs: VALIDITY.apiSession, field: 'csr' }]);
    const now = Date.now();
    const rec: ApiSessionCertificateRecord = {
      id: newId(), createdAt: now, updatedAt: now, tags: {}, apiSessionId, identityId, certificate: cert.pem, fingerprint: cert.fingerprint,
      subject: subjectText(new crypto.X509Certificate(cert.pem)), validFrom: cert.notBefore, validTo: cert.notAfter,
    };
    await write(this.deps.store, (tx) => {
      if (!tx.exists('apiSessions', apiSessionId)) throw errors.unauthorized();
      tx.put('apiSessionCertificates', rec);
    });
    return { rec, cert };
  }

  /** A certificate of the caller's API session; another session's is not found. */
  ownSessionCertificate(id: string, apiSessionId: string): ApiSessionCertificateRecord {
    const rec = this.deps.store.get('apiSessionCertificates', id);
    if (!rec || rec.apiSessionId !== apiSessionId) throw errors.notFound();
    return rec;
  }

  async deleteSessionCertificate(id: string, apiSessionId: string): Promise<void> {
    const rec = this.ownSessionCertificate(id, apiSessionId);
    await write(this.deps.store, (tx) => {
      if (!tx.exists('apiSessionCertificates', rec.id)) throw errors.notFound();
      tx.delete('apiSessionCertificates', rec.id);
    });
  }

  // ---- third-party CAs -----------------------------------------------------------------------

  /** Refused before the body is read: the CA exists and is not verified yet. */
  unverifiedCa(caId: string): CaRecord {
    const ca = this.deps.store.get('cas', caId);
    if (!ca) throw errors.notFound();
    if (ca.isVerified) throw new ApiError('CA_ALREADY_VERIFIED');
    return ca;
  }

  /** Proof of possession: `pem` is a certificate the CA signed whose common name is the CA's verification token. */
  async verifyCa(caId: string, pem: string): Promise<void> {
    const ca = this.unverifiedCa(caId);
    let blocks;
    try {
      blocks = pemBlocks(pem, ['CERTIFICATE', 'CERTIFICATE REQUEST', 'PRIVATE KEY', 'EC PRIVATE KEY', 'RSA PRIVATE KEY', 'PUBLIC KEY', 'X509 CRL', 'PKCS7']);
    } catch (e) {
      throw new ApiError('COULD_NOT_PARSE_PEM_BLOCK', undefined, { code: 'COULD_NOT_PARSE_PEM_BLOCK', message: (e as DerError).message });
    }
    if (blocks.length === 0) {
      if (/-----BEGIN [A-Z0-9 ]+-----/.test(pem)) throw new ApiError('EXPECTED_PEM_CERTIFICATE');
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
    await write(this.deps.store, (tx) => {
      const cur = tx.get('cas', ca.id);
      if (!cur) throw errors.notFound();
      if (cur.isVerified) throw new ApiError('CA_ALREADY_VERIFIED');
      tx.put('cas', { ...cur, isVerified: true, updatedAt: Math.max(Date.now(), cur.updatedAt + 1) });
    });
  }
}
