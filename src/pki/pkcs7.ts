/**
 * Degenerate PKCS#7 / CMS "certs-only" SignedData (RFC 5652 §5, RFC 8551 §3.2.2), the body of
 * `GET /.well-known/est/cacerts` (RFC 7030 §4.1.3).
 *
 * Why hand-written: @peculiar/x509's `X509Certificates.export()` emits an encapsulated content
 * with an *empty eContent OCTET STRING*; a degenerate certs-only message has the eContent
 * **absent** (that is what `openssl crl2pkcs7 -nocrl` and upstream's Go encoder produce). The
 * structure is tiny and fixed, so a few lines of DER are simpler than bending a library, and the
 * test pins it byte-for-byte against `openssl crl2pkcs7`.
 *
 *   ContentInfo ::= SEQUENCE {
 *     contentType  OID 1.2.840.113549.1.7.2 (signedData),
 *     content      [0] EXPLICIT SignedData }
 *   SignedData ::= SEQUENCE {
 *     version           INTEGER 1,
 *     digestAlgorithms  SET {} ,
 *     encapContentInfo  SEQUENCE { eContentType OID 1.2.840.113549.1.7.1 (data) },   -- no eContent
 *     certificates      [0] IMPLICIT { cert, cert, ... },
 *     signerInfos       SET {} }
 *
 * Certificate order: kept as given (root first), not DER-sorted as a strict SET OF would be.
 * OpenSSL deliberately models this field as an ordered SEQUENCE OF for the same reason, and
 * consumers treat it as an unordered pool anyway.
 */

/** DER definite-length encoding of `len`. */
function derLength(len: number): Buffer {
  if (len < 0x80) return Buffer.from([len]);
  const bytes: number[] = [];
  for (let n = len; n > 0; n = Math.floor(n / 256)) bytes.unshift(n & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

/** One DER TLV: tag byte, length, content. */
export function derTlv(tag: number, ...content: Buffer[]): Buffer {
  const body = Buffer.concat(content);
  return Buffer.concat([Buffer.from([tag]), derLength(body.length), body]);
}

// Pre-encoded constants (OID TLVs, INTEGER 1, empty SET).
const OID_SIGNED_DATA = Buffer.from('06092a864886f70d010702', 'hex');
const OID_DATA = Buffer.from('06092a864886f70d010701', 'hex');
const INTEGER_ONE = Buffer.from('020101', 'hex');
const EMPTY_SET = Buffer.from('3100', 'hex');

const SEQUENCE = 0x30;
const CONTEXT_0_CONSTRUCTED = 0xa0;

/** DER bytes of a degenerate certs-only SignedData holding `certsDer` in the given order. */
export function encodeCertsOnlyPkcs7(certsDer: readonly Uint8Array[]): Buffer {
  const signedData = derTlv(
    SEQUENCE,
    INTEGER_ONE,
    EMPTY_SET, // digestAlgorithms: nothing is signed
    derTlv(SEQUENCE, OID_DATA), // encapContentInfo without eContent = "degenerate"
    derTlv(CONTEXT_0_CONSTRUCTED, ...certsDer.map((c) => Buffer.from(c.buffer, c.byteOffset, c.byteLength))),
    EMPTY_SET, // signerInfos
  );
  return derTlv(SEQUENCE, OID_SIGNED_DATA, derTlv(CONTEXT_0_CONSTRUCTED, signedData));
}

/**
 * The EST wire form: base64 wrapped in 64-character lines joined by `\n`, no trailing newline
 * (what upstream sends).
 */
export function wrapBase64(der: Uint8Array): string {
  const b64 = Buffer.from(der.buffer, der.byteOffset, der.byteLength).toString('base64');
  const lines: string[] = [];
  for (let i = 0; i < b64.length; i += 64) lines.push(b64.slice(i, i + 64));
  return lines.join('\n');
}
