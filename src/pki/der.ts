/**
 * Just enough DER to read CSRs and certificates and to write certificates from a template
 * (X.690). Reading is strict about lengths (a hostile CSR must never read past its buffer);
 * writing reuses `derTlv` from pkcs7.ts.
 *
 *   const top = readTlv(der, 0);          // { tag: 0x30, start, end, next }
 *   const [cri, alg, sig] = children(der, top);
 */
import { derTlv } from './pkcs7.js';

export { derTlv };

export class DerError extends Error {}

export interface Tlv {
  tag: number;
  /** Offset of the tag byte. */
  offset: number;
  /** Offset of the first content byte. */
  start: number;
  /** Offset just past the content (= offset of the next sibling). */
  end: number;
}

export function readTlv(buf: Uint8Array, offset: number, limit = buf.length): Tlv {
  if (offset + 2 > limit) throw new DerError('truncated');
  const tag = buf[offset];
  if ((tag & 0x1f) === 0x1f) throw new DerError('multi-byte tags are not supported');
  let len = buf[offset + 1];
  let start = offset + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    if (n === 0 || n > 4) throw new DerError('unsupported length');
    if (start + n > limit) throw new DerError('truncated');
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + buf[start + i];
    start += n;
    if (len < 0x80 || (n > 1 && buf[offset + 2] === 0)) throw new DerError('non-minimal length');
  }
  const end = start + len;
  if (end > limit) throw new DerError('truncated');
  return { tag, offset, start, end };
}

/** The TLVs inside a constructed TLV. */
export function children(buf: Uint8Array, parent: Tlv): Tlv[] {
  const out: Tlv[] = [];
  for (let at = parent.start; at < parent.end; ) {
    const t = readTlv(buf, at, parent.end);
    out.push(t);
    at = t.end;
  }
  return out;
}

export function expectTag(t: Tlv | undefined, tag: number, what: string): Tlv {
  if (!t || t.tag !== tag) throw new DerError(`${what}: unexpected structure`);
  return t;
}

/** The whole TLV (header + content) as a Buffer view. */
export function raw(buf: Buffer, t: Tlv): Buffer {
  return buf.subarray(t.offset, t.end);
}

export function content(buf: Buffer, t: Tlv): Buffer {
  return buf.subarray(t.start, t.end);
}

/** Dotted OID text of an OBJECT IDENTIFIER TLV. */
export function oidText(buf: Uint8Array, t: Tlv): string {
  if (t.tag !== 0x06 || t.end === t.start) throw new DerError('expected an OID');
  const parts: number[] = [];
  let v = 0;
  for (let i = t.start; i < t.end; i++) {
    v = v * 128 + (buf[i] & 0x7f);
    if (!(buf[i] & 0x80)) {
      if (parts.length === 0) parts.push(v < 80 ? Math.floor(v / 40) : 2, v < 80 ? v % 40 : v - 80);
      else parts.push(v);
      v = 0;
    }
  }
  return parts.join('.');
}

/** OBJECT IDENTIFIER TLV from dotted text (constants only; computed once per module). */
export function oid(text: string): Buffer {
  const p = text.split('.').map(Number);
  const bytes = [p[0] * 40 + p[1]];
  for (const n of p.slice(2)) {
    const enc = [n & 0x7f];
    for (let x = Math.floor(n / 128); x > 0; x = Math.floor(x / 128)) enc.unshift((x & 0x7f) | 0x80);
    bytes.push(...enc);
  }
  return derTlv(0x06, Buffer.from(bytes));
}

const pad2 = (n: number) => (n < 10 ? '0' : '') + n;

/** RFC 5280 §4.1.2.5: UTCTime through 2049, GeneralizedTime from 2050, always Z and seconds. */
export function derTime(ms: number): Buffer {
  const d = new Date(ms);
  const y = d.getUTCFullYear();
  const rest = pad2(d.getUTCMonth() + 1) + pad2(d.getUTCDate()) + pad2(d.getUTCHours()) + pad2(d.getUTCMinutes()) + pad2(d.getUTCSeconds()) + 'Z';
  if (y >= 1950 && y < 2050) return derTlv(0x17, Buffer.from(pad2(y % 100) + rest, 'latin1'));
  return derTlv(0x18, Buffer.from(String(y).padStart(4, '0') + rest, 'latin1'));
}

export const SEQUENCE = 0x30;
export const SET = 0x31;
export const BOOLEAN_TRUE = Buffer.from('0101ff', 'hex');

export function seq(...parts: Buffer[]): Buffer {
  return derTlv(SEQUENCE, ...parts);
}

export function octetString(b: Buffer): Buffer {
  return derTlv(0x04, b);
}

/** BIT STRING with no unused bits. */
export function bitString(b: Buffer): Buffer {
  return derTlv(0x03, Buffer.from([0]), b);
}

/**
 * PEM blocks with one of `labels`, in order. A linear scan (no backtracking regex): a body made of
 * thousands of BEGIN lines without their END must not cost quadratic time.
 */
export function pemBlocks(text: string, labels: readonly string[]): { label: string; der: Buffer }[] {
  const out: { label: string; der: Buffer }[] = [];
  const noEnd = new Set<string>();
  let at = 0;
  for (;;) {
    const begin = text.indexOf('-----BEGIN ', at);
    if (begin < 0) break;
    const labelEnd = text.indexOf('-----', begin + 11);
    if (labelEnd < 0) break;
    const label = text.slice(begin + 11, labelEnd);
    at = labelEnd + 5;
    if (!/^[A-Z0-9 ]{1,40}$/.test(label) || noEnd.has(label)) continue;
    const endMark = `-----END ${label}-----`;
    const end = text.indexOf(endMark, at);
    if (end < 0) {
      noEnd.add(label);
      continue;
    }
    const body = text.slice(at, end);
    at = end + endMark.length;
    if (!labels.includes(label)) continue;
    const b64 = body.replace(/[\r\n\t ]/g, '');
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(b64) || b64.length === 0) throw new DerError('invalid base64 in PEM block');
    out.push({ label, der: Buffer.from(b64, 'base64') });
  }
  return out;
}

export function toPem(der: Uint8Array, label: string): string {
  const b64 = Buffer.from(der.buffer, der.byteOffset, der.byteLength).toString('base64');
  const lines: string[] = [];
  for (let i = 0; i < b64.length; i += 64) lines.push(b64.slice(i, i + 64));
  return `-----BEGIN ${label}-----\n${lines.join('\n')}\n-----END ${label}-----\n`;
}
