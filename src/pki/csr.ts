/**
 * PKCS#10 certificate signing requests (RFC 2986): parsed by hand from DER and their signature
 * verified with node:crypto (performance-notes: ~4× faster than @peculiar/x509's parser).
 *
 *   const csr = parseCsr(pemText);   // throws CsrError with a reason for anything unusable
 *   csr.subject, csr.spki            // DER, copied into the certificate as is
 *
 * Accepted keys: EC P-256/P-384/P-521, RSA ≥ 2048 bits, Ed25519. Accepted signatures:
 * ECDSA and RSA PKCS#1 v1.5 with SHA-256/384/512, Ed25519. Everything else is "unsupported".
 */
import crypto from 'node:crypto';
import { DerError, children, content, expectTag, oidText, pemBlocks, raw, readTlv, SEQUENCE } from './der.js';

export class CsrError extends Error {}

export interface ParsedCsr {
  /** The subject Name TLV. */
  subject: Buffer;
  /** The SubjectPublicKeyInfo TLV. */
  spki: Buffer;
  /** The subjectPublicKey bits (for the subject key identifier). */
  publicKeyBits: Buffer;
  keyType: 'ec' | 'rsa' | 'ed25519';
  /** The requested subjectAltName extension value (GeneralNames DER), if any. */
  san?: Buffer;
  /** Subject common name, '' when none. */
  commonName: string;
}

const SIG_ALGS: Record<string, { hash: string | null; key: ParsedCsr['keyType'] }> = {
  '1.2.840.10045.4.3.2': { hash: 'sha256', key: 'ec' },
  '1.2.840.10045.4.3.3': { hash: 'sha384', key: 'ec' },
  '1.2.840.10045.4.3.4': { hash: 'sha512', key: 'ec' },
  '1.2.840.113549.1.1.11': { hash: 'sha256', key: 'rsa' },
  '1.2.840.113549.1.1.12': { hash: 'sha384', key: 'rsa' },
  '1.2.840.113549.1.1.13': { hash: 'sha512', key: 'rsa' },
  '1.3.101.112': { hash: null, key: 'ed25519' },
};
const EC_CURVES = new Set(['prime256v1', 'secp384r1', 'secp521r1']);
const OID_EXTENSION_REQUEST = '1.2.840.113549.1.9.14';
const OID_SAN = '2.5.29.17';
const OID_CN = '2.5.4.3';
const MAX_CSR_BYTES = 16 * 1024;

/** The DER of the first CSR in `text` (PEM), or of `text` itself when it is bare base64 DER. */
function csrDer(text: unknown): Buffer {
  if (typeof text !== 'string' || text.trim() === '') throw new CsrError('no CSR was provided');
  let blocks;
  try {
    blocks = pemBlocks(text, ['CERTIFICATE REQUEST', 'NEW CERTIFICATE REQUEST']);
  } catch (e) {
    throw new CsrError(`the CSR is not valid PEM: ${(e as Error).message}`);
  }
  if (blocks.length === 0) throw new CsrError('the CSR must be a PEM block of type CERTIFICATE REQUEST');
  if (blocks.length > 1) throw new CsrError('exactly one CSR must be provided');
  if (blocks[0].der.length > MAX_CSR_BYTES) throw new CsrError('the CSR is too large');
  return blocks[0].der;
}

/**
 * The DER of an uncompressed EC SubjectPublicKeyInfo up to the point's 0x04, by curve: what
 * every common client sends. Such a key is handed to node:crypto as a JWK (its x and y), which
 * skips OpenSSL 3.0's generic DER decoder and the curve lookup (`asymmetricKeyDetails`), together
 * slower than the signature check itself (measured side by side under load: docs/pki.md). OpenSSL still checks
 * that the point is on the curve. The SPKI matches the header byte for byte, so the DER copied
 * into the certificate is exactly the key that was verified; any other encoding (compressed
 * points, RSA, Ed25519) takes the generic path.
 */
const EC_SPKI_HEADERS: { header: Buffer; crv: string; size: number }[] = [
  { header: Buffer.from('3059301306072a8648ce3d020106082a8648ce3d03010703420004', 'hex'), crv: 'P-256', size: 32 },
  { header: Buffer.from('3076301006072a8648ce3d020106052b81040022036200' + '04', 'hex'), crv: 'P-384', size: 48 },
  { header: Buffer.from('30819b301006072a8648ce3d020106052b8104002303818600' + '04', 'hex'), crv: 'P-521', size: 66 },
];

type VerifyKey = crypto.KeyObject | crypto.JsonWebKeyInput;

function publicKeyOf(spki: Buffer): { verifyKey: VerifyKey; keyType: ParsedCsr['keyType'] } {
  for (const { header, crv, size } of EC_SPKI_HEADERS) {
    if (spki.length === header.length + 2 * size && spki.subarray(0, header.length).equals(header)) {
      const x = spki.toString('base64url', header.length, header.length + size);
      const y = spki.toString('base64url', header.length + size);
      return { verifyKey: { key: { kty: 'EC', crv, x, y }, format: 'jwk' }, keyType: 'ec' };
    }
  }
  let key: crypto.KeyObject;
  try {
    key = crypto.createPublicKey({ key: spki, format: 'der', type: 'spki' });
  } catch (e) {
    throw new CsrError(`the CSR public key could not be read: ${(e as Error).message}`);
  }
  const keyType = key.asymmetricKeyType;
  if (keyType === 'ec') {
    if (!EC_CURVES.has(key.asymmetricKeyDetails?.namedCurve ?? '')) throw new CsrError(`unsupported EC curve ${key.asymmetricKeyDetails?.namedCurve}`);
  } else if (keyType === 'rsa') {
    if ((key.asymmetricKeyDetails?.modulusLength ?? 0) < 2048) throw new CsrError('RSA keys must have at least 2048 bits');
  } else if (keyType !== 'ed25519') throw new CsrError(`unsupported key type ${keyType}`);
  return { verifyKey: key, keyType };
}

/** Parse and verify a PEM CSR. */
export function parseCsr(text: unknown): ParsedCsr {
  const der = csrDer(text);
  try {
    return parseCsrDer(der);
  } catch (e) {
    if (e instanceof CsrError) throw e;
    if (e instanceof DerError) throw new CsrError(`the CSR could not be parsed: ${e.message}`);
    throw new CsrError(`the CSR could not be processed: ${(e as Error).message}`);
  }
}

function parseCsrDer(der: Buffer): ParsedCsr {
  const top = expectTag(readTlv(der, 0), SEQUENCE, 'CSR');
  if (top.end !== der.length) throw new CsrError('trailing data after the CSR');
  const [criT, algT, sigT, ...extra] = children(der, top);
  if (extra.length) throw new CsrError('unexpected fields in the CSR');
  expectTag(criT, SEQUENCE, 'certificationRequestInfo');
  expectTag(algT, SEQUENCE, 'signatureAlgorithm');
  expectTag(sigT, 0x03, 'signature');
  const algOid = oidText(der, expectTag(children(der, algT)[0], 0x06, 'signatureAlgorithm'));
  const alg = SIG_ALGS[algOid];
  if (!alg) throw new CsrError(`unsupported CSR signature algorithm ${algOid}`);

  const [verT, subjT, spkiT, attrT, ...more] = children(der, criT);
  if (more.length) throw new CsrError('unexpected fields in certificationRequestInfo');
  expectTag(verT, 0x02, 'version');
  if (verT.end - verT.start !== 1 || der[verT.start] !== 0) throw new CsrError('unsupported CSR version');
  expectTag(subjT, SEQUENCE, 'subject');
  expectTag(spkiT, SEQUENCE, 'subjectPublicKeyInfo');

  const spki = raw(der, spkiT);
  const { verifyKey, keyType } = publicKeyOf(spki);
  if (keyType !== alg.key) throw new CsrError('the CSR signature algorithm does not match its key');

  const sigBits = content(der, sigT);
  if (sigBits.length < 2 || sigBits[0] !== 0) throw new CsrError('malformed CSR signature');
  let good = false;
  try {
    good = crypto.verify(alg.hash, raw(der, criT), verifyKey, sigBits.subarray(1));
  } catch (e) {
    // A JWK point that is not on its curve is only found here (the DER path finds it on import).
    if ((e as { code?: string }).code === 'ERR_CRYPTO_INVALID_JWK') throw new CsrError(`the CSR public key could not be read: ${(e as Error).message}`);
    good = false;
  }
  if (!good) throw new CsrError('the CSR signature is not valid');

  const [, keyBitsT] = children(der, spkiT);
  const publicKeyBits = content(der, expectTag(keyBitsT, 0x03, 'subjectPublicKey')).subarray(1);

  let san: Buffer | undefined;
  if (attrT) {
    if (attrT.tag !== 0xa0) throw new CsrError('malformed CSR attributes');
    for (const a of children(der, attrT)) {
      const [typeT, valuesT] = children(der, expectTag(a, SEQUENCE, 'attribute'));
      if (oidText(der, expectTag(typeT, 0x06, 'attribute type')) !== OID_EXTENSION_REQUEST) continue;
      const exts = children(der, expectTag(valuesT, 0x31, 'attribute values'))[0];
      for (const ext of children(der, expectTag(exts, SEQUENCE, 'extensions'))) {
        const parts = children(der, expectTag(ext, SEQUENCE, 'extension'));
        if (oidText(der, expectTag(parts[0], 0x06, 'extension id')) !== OID_SAN) continue;
        const value = expectTag(parts[parts.length - 1], 0x04, 'extension value');
        const names = readTlv(der, value.start, value.end);
        if (names.tag !== SEQUENCE || names.end !== value.end) throw new CsrError('malformed subjectAltName in the CSR');
        children(der, names); // every GeneralName must be well-formed
        san = Buffer.from(content(der, value));
      }
    }
  }
  return {
    subject: Buffer.from(raw(der, subjT)),
    spki: Buffer.from(spki),
    publicKeyBits: Buffer.from(publicKeyBits),
    keyType,
    san,
    commonName: commonNameOf(der, subjT),
  };
}

/** The first CN of a Name TLV ('' when none). */
function commonNameOf(der: Buffer, name: ReturnType<typeof readTlv>): string {
  for (const rdn of children(der, name)) {
    for (const atv of children(der, rdn)) {
      const [typeT, valueT] = children(der, atv);
      if (typeT && valueT && oidText(der, typeT) === OID_CN) return content(der, valueT).toString(valueT.tag === 0x1e ? 'utf16le' : 'utf8');
    }
  }
  return '';
}
