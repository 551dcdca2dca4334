/**
 * Router authentication by proof of possession. uWS never shows a client certificate to
 * JavaScript, so the router presents its certificate chain in `hello`, the controller answers with a
 * random nonce, and the router signs `proofPayload(nonce, …)` with the private key of that
 * certificate. Accepted when:
 *   - the leaf is issued (name and signature) by this controller's signing (intermediate) CA,
 *   - it is within its validity dates, is not a CA, and allows client authentication when it
 *     names extended key usages at all,
 *   - its SHA-1 fingerprint equals the `fingerprint` of an edge or transit router record
 *     (set by erott/trott enrollment and router certificate extension; cleared by re-enroll),
 *   - the signature verifies with the leaf's public key.
 * A chain with extra certificates after the leaf is accepted: only the leaf is checked, against the
 * intermediate we hold, so nothing the router sends can add a trust anchor.
 */
import crypto from 'node:crypto';

export class AuthError extends Error {
  constructor(readonly code: string, message: string) {
    super(message);
  }
}

const PEM_BLOCK = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;
const CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';
const ANY_EKU = '2.5.29.37.0';

export interface RouterCert {
  cert: crypto.X509Certificate;
  /** Lower-case hex SHA-1 of the DER, no separators: the router record's `fingerprint` form. */
  fingerprint: string;
  notAfter: number;
}

export class RouterAuthenticator {
  private readonly issuer: crypto.X509Certificate;

  /** `signingCertPem`: the intermediate CA that issues router certificates at enrollment. */
  constructor(signingCertPem: string) {
    this.issuer = new crypto.X509Certificate(signingCertPem);
  }

  /** Parse and check the presented chain's leaf; throws AuthError (never anything else). */
  checkChain(chainPem: string, now = Date.now()): RouterCert {
    const first = chainPem.match(PEM_BLOCK)?.[0];
    if (!first) throw new AuthError('INVALID_CERTIFICATE', 'certChain must hold a PEM certificate');
    let cert: crypto.X509Certificate;
    try {
      cert = new crypto.X509Certificate(first);
    } catch {
      throw new AuthError('INVALID_CERTIFICATE', 'the router certificate could not be parsed');
    }
    if (cert.ca) throw new AuthError('INVALID_CERTIFICATE', 'a CA certificate cannot authenticate a router');
    let issued = false;
    try {
      issued = cert.checkIssued(this.issuer) && cert.verify(this.issuer.publicKey);
    } catch {
      issued = false;
    }
    if (!issued) throw new AuthError('UNKNOWN_CERTIFICATE', 'the router certificate was not issued by this controller');
    const notBefore = Date.parse(cert.validFrom);
    const notAfter = Date.parse(cert.validTo);
    if (!(now >= notBefore)) throw new AuthError('CERTIFICATE_NOT_YET_VALID', 'the router certificate is not valid yet');
    if (!(now <= notAfter)) throw new AuthError('CERTIFICATE_EXPIRED', 'the router certificate has expired');
    const eku = cert.keyUsage;
    if (Array.isArray(eku) && eku.length > 0 && !eku.includes(CLIENT_AUTH) && !eku.includes(ANY_EKU))
      throw new AuthError('INVALID_CERTIFICATE', 'the router certificate does not allow client authentication');
    return { cert, fingerprint: crypto.createHash('sha1').update(cert.raw).digest('hex'), notAfter };
  }

  /** Does `signature` sign `payload` with the certificate's key? SHA-256 (EdDSA: pure); ECDSA DER or raw r‖s. */
  verifyProof(rc: RouterCert, payload: Buffer, signature: Buffer): boolean {
    const key = rc.cert.publicKey;
    const type = key.asymmetricKeyType;
    try {
      if (type === 'ed25519' || type === 'ed448') return crypto.verify(null, payload, key, signature);
      if (type === 'ec') {
        return crypto.verify('sha256', payload, key, signature) || crypto.verify('sha256', payload, { key, dsaEncoding: 'ieee-p1363' }, signature);
      }
      if (type === 'rsa') return crypto.verify('sha256', payload, key, signature);
      if (type === 'rsa-pss') return crypto.verify('sha256', payload, { key, padding: crypto.constants.RSA_PKCS1_PSS_PADDING }, signature);
    } catch {
      return false;
    }
    return false;
  }
}
