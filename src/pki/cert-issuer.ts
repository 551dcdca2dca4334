/**
 * Issuing certificates from CSRs with a DER template and one node:crypto signature.
 *
 * Measured here (bench/csr-sign.ts, docs/pki.md): @peculiar/x509 builds ~300 certificates/s per
 * core, almost all of it ASN.1 encoding; this template path (CSR parse + verify + encode + sign)
 * is an order of magnitude faster, so it is the issuing path. Everything that does not depend on
 * the request (issuer Name, authority key identifier, algorithm identifier, the fixed extensions)
 * is encoded once per issuer; per certificate only serial, validity, subject, key, SKI and SAN
 * are encoded and the TBS is signed with a KeyObject parsed once.
 *
 * Profiles (RFC 5280): end-entity (basicConstraints CA:false, critical), keyUsage
 * digitalSignature (+ keyEncipherment for RSA keys), critical; extendedKeyUsage clientAuth
 * (`client`) or serverAuth + clientAuth (`server`); SKI (SHA-1 of the key bits), AKI (the
 * issuer's SKI); the CSR's subjectAltName copied. Serial: 126 random bits. notBefore is
 * backdated an hour for clients with slow clocks; notAfter is capped at the issuer's notAfter.
 */
import crypto, { type KeyObject } from 'node:crypto';
import { bitString, BOOLEAN_TRUE, children, content, derTime, derTlv, expectTag, octetString, oid, oidText, readTlv, seq, SEQUENCE, toPem, type Tlv } from './der.js';
import { parseCsr, type ParsedCsr } from './csr.js';

export type CertProfile = 'client' | 'server';

export interface IssuedCert {
  der: Buffer;
  pem: string;
  /** Lower-case hex SHA-1 of the DER (upstream's fingerprint form). */
  fingerprint: string;
  notBefore: number;
  notAfter: number;
  commonName: string;
}

const BACKDATE_MS = 60 * 60 * 1000;

const OID_BC = oid('2.5.29.19');
const OID_KU = oid('2.5.29.15');
const OID_EKU = oid('2.5.29.37');
const OID_SKI = oid('2.5.29.14');
const OID_AKI = oid('2.5.29.35');
const OID_SAN = oid('2.5.29.17');
const EKU_SERVER = oid('1.3.6.1.5.5.7.3.1');
const EKU_CLIENT = oid('1.3.6.1.5.5.7.3.2');

function ext(id: Buffer, critical: boolean, value: Buffer): Buffer {
  return critical ? seq(id, BOOLEAN_TRUE, octetString(value)) : seq(id, octetString(value));
}

/** keyUsage BIT STRING: digitalSignature (bit 0) [+ keyEncipherment (bit 2)]. */
const KU_SIGN = ext(OID_KU, true, Buffer.from('03020780', 'hex'));
const KU_SIGN_ENCIPHER = ext(OID_KU, true, Buffer.from('030205a0', 'hex'));
const BC_LEAF = ext(OID_BC, true, seq());
const EKU: Record<CertProfile, Buffer> = {
  client: ext(OID_EKU, false, seq(EKU_CLIENT)),
  server: ext(OID_EKU, false, seq(EKU_SERVER, EKU_CLIENT)),
};
const VERSION_3 = Buffer.from('a003020102', 'hex');

/** Signature algorithm for the issuer's key: AlgorithmIdentifier DER and node's digest name. */
function signatureAlgorithm(key: KeyObject): { algId: Buffer; hash: string | null } {
  if (key.asymmetricKeyType === 'ec') {
    const curve = key.asymmetricKeyDetails?.namedCurve;
    if (curve === 'secp384r1') return { algId: seq(oid('1.2.840.10045.4.3.3')), hash: 'sha384' };
    if (curve === 'secp521r1') return { algId: seq(oid('1.2.840.10045.4.3.4')), hash: 'sha512' };
    return { algId: seq(oid('1.2.840.10045.4.3.2')), hash: 'sha256' };
  }
  if (key.asymmetricKeyType === 'rsa') return { algId: seq(oid('1.2.840.113549.1.1.11'), Buffer.from('0500', 'hex')), hash: 'sha256' };
  if (key.asymmetricKeyType === 'ed25519') return { algId: seq(oid('1.3.101.112')), hash: null };
  throw new Error(`PKI: cannot sign with a ${key.asymmetricKeyType} key`);
}

/** Fields of a certificate's TBS that issuing needs: subject Name, SPKI, SKI extension value. */
function tbsParts(der: Buffer): { subject: Buffer; keyBits: Buffer; ski?: Buffer } {
  const cert = expectTag(readTlv(der, 0), SEQUENCE, 'certificate');
  const tbs = expectTag(children(der, cert)[0], SEQUENCE, 'tbsCertificate');
  const f = children(der, tbs);
  const i = f[0].tag === 0xa0 ? 1 : 0;
  const subject = f[i + 4];
  const spki = f[i + 5];
  const keyBits = content(der, children(der, spki)[1]).subarray(1);
  let ski: Buffer | undefined;
  const extsWrap = f.find((t: Tlv) => t.tag === 0xa3);
  if (extsWrap) {
    for (const e of children(der, children(der, extsWrap)[0])) {
      const parts = children(der, e);
      if (oidText(der, parts[0]) === '2.5.29.14') {
        const v = parts[parts.length - 1];
        const inner = readTlv(der, v.start, v.end);
        ski = Buffer.from(content(der, inner));
      }
    }
  }
  return { subject: Buffer.from(der.subarray(subject.offset, subject.end)), keyBits: Buffer.from(keyBits), ski };
}

function serial(): Buffer {
  const b = crypto.randomBytes(16);
  b[0] = (b[0] & 0x7f) | 0x40;
  return derTlv(0x02, b);
}

/** An issuing CA: its certificate and key, with everything constant pre-encoded. */
export class CertIssuer {
  private readonly issuerName: Buffer;
  private readonly aki: Buffer;
  private readonly algId: Buffer;
  private readonly hash: string | null;
  private readonly issuerNotAfter: number;
  readonly caPem: string;

  constructor(caCertPem: string, private readonly key: KeyObject) {
    const ca = new crypto.X509Certificate(caCertPem);
    this.caPem = ca.toString();
    const parts = tbsParts(ca.raw);
    this.issuerName = parts.subject;
    const keyId = parts.ski ?? crypto.createHash('sha1').update(parts.keyBits).digest();
    this.aki = ext(OID_AKI, false, seq(derTlv(0x80, keyId)));
    ({ algId: this.algId, hash: this.hash } = signatureAlgorithm(key));
    this.issuerNotAfter = Date.parse(ca.validTo);
  }

  /** Parse, verify and sign a PEM CSR. Throws CsrError when the CSR is unusable. */
  issueFromPem(csrPem: unknown, profile: CertProfile, validityMs: number, now = Date.now()): IssuedCert {
    return this.issue(parseCsr(csrPem), profile, validityMs, now);
  }

  issue(csr: ParsedCsr, profile: CertProfile, validityMs: number, now = Date.now()): IssuedCert {
    const notBefore = Math.floor((now - BACKDATE_MS) / 1000) * 1000;
    const notAfter = Math.floor(Math.min(now + validityMs, this.issuerNotAfter) / 1000) * 1000;
    const extensions = [
      BC_LEAF,
      csr.keyType === 'rsa' ? KU_SIGN_ENCIPHER : KU_SIGN,
      EKU[profile],
      ext(OID_SKI, false, octetString(crypto.hash('sha1', csr.publicKeyBits, 'buffer'))),
      this.aki,
    ];
    if (csr.san) extensions.push(ext(OID_SAN, false, csr.san));
    const tbs = seq(
      VERSION_3,
      serial(),
      this.algId,
      this.issuerName,
      seq(derTime(notBefore), derTime(notAfter)),
      csr.subject,
      csr.spki,
      derTlv(0xa3, seq(...extensions)),
    );
    const sig = crypto.sign(this.hash, tbs, this.key);
    const der = seq(tbs, this.algId, bitString(sig));
    return {
      der,
      pem: toPem(der, 'CERTIFICATE'),
      fingerprint: crypto.hash('sha1', der, 'hex'),
      notBefore,
      notAfter,
      commonName: csr.commonName,
    };
  }
}
