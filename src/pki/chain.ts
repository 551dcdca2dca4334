/**
 * Client certificate chains presented over mutual TLS: does a chain lead to a given CA, and
 * what external id does a certificate carry (CA `externalIdClaim`).
 *
 *   chainsTo(peerDer, caCert)   → true when the leaf is signed by the CA, directly or through
 *                                 intermediates the client sent (each link name- and signature-checked)
 *   externalIdOf(leaf, claim)   → the id, or undefined when the certificate lacks the claim
 */
import crypto from 'node:crypto';

/** Parsed certificates, cached by DER (CAs and frequently seen leaves are parsed once). */
const parsed = new Map<string, crypto.X509Certificate>();

export function x509(der: Buffer | string): crypto.X509Certificate {
  const key = typeof der === 'string' ? der : der.toString('base64');
  let c = parsed.get(key);
  if (!c) {
    c = new crypto.X509Certificate(der);
    if (parsed.size > 10_000) parsed.clear();
    parsed.set(key, c);
  }
  return c;
}

export function issued(child: crypto.X509Certificate, parent: crypto.X509Certificate): boolean {
  try {
    return child.checkIssued(parent) && child.verify(parent.publicKey);
  } catch {
    return false;
  }
}

/** Is the leaf (`chain[0]`) signed by `ca`, directly or through the intermediates in `chain`? */
export function chainsTo(chain: readonly Buffer[], ca: crypto.X509Certificate, now = Date.now()): boolean {
  if (chain.length === 0) return false;
  let cur = x509(chain[0]);
  const rest = chain.slice(1).map((d) => x509(d));
  for (let depth = 0; depth <= rest.length; depth++) {
    if (issued(cur, ca)) return true;
    const next = rest.find((c) => c !== cur && c.ca && issued(cur, c) && Date.parse(c.validTo) > now);
    if (!next) return false;
    cur = next;
  }
  return false;
}

export function isExpired(cert: crypto.X509Certificate, now = Date.now()): boolean {
  return Date.parse(cert.validTo) < now || Date.parse(cert.validFrom) > now + 5 * 60_000;
}

export function commonName(cert: crypto.X509Certificate): string {
  return /(?:^|\n)CN=([^\n]*)/.exec(cert.subject)?.[1] ?? '';
}

export interface ExternalIdClaim {
  location?: 'COMMON_NAME' | 'SAN_URI' | 'SAN_EMAIL' | null;
  matcher?: 'ALL' | 'PREFIX' | 'SUFFIX' | 'SCHEME' | null;
  matcherCriteria?: string | null;
  parser?: 'NONE' | 'SPLIT' | null;
  parserCriteria?: string | null;
  index?: number | null;
}

/** SAN values of one kind (`URI`, `email`), as node prints them. */
function sanValues(cert: crypto.X509Certificate, kind: 'URI' | 'email'): string[] {
  const san = cert.subjectAltName ?? '';
  const out: string[] = [];
  // node quotes values holding separators: `URI:"a, b"`; split on `, ` outside quotes.
  for (const m of san.matchAll(/(\w[\w ]*):("(?:[^"\\]|\\.)*"|[^,]*)(?:, |$)/g)) {
    if (m[1] !== kind) continue;
    out.push(m[2].startsWith('"') ? JSON.parse(m[2]) : m[2]);
  }
  return out;
}

/** The external id a CA's `externalIdClaim` reads from a certificate (upstream's semantics). */
export function externalIdOf(cert: crypto.X509Certificate, claim: ExternalIdClaim): string | undefined {
  const candidates =
    claim.location === 'COMMON_NAME' ? [commonName(cert)].filter(Boolean) : claim.location === 'SAN_URI' ? sanValues(cert, 'URI') : claim.location === 'SAN_EMAIL' ? sanValues(cert, 'email') : [];
  const criteria = claim.matcherCriteria ?? '';
  const matched = candidates.filter((v) => {
    switch (claim.matcher ?? 'ALL') {
      case 'PREFIX':
        return v.startsWith(criteria);
      case 'SUFFIX':
        return v.endsWith(criteria);
      case 'SCHEME':
        return v.toLowerCase().startsWith(criteria.toLowerCase() + ':');
      default:
        return true;
    }
  });
  const value = matched[0];
  if (value === undefined) return undefined;
  if ((claim.parser ?? 'NONE') === 'SPLIT') {
    const parts = value.split(claim.parserCriteria ?? '');
    const i = claim.index ?? 0;
    return i >= 0 && i < parts.length && parts[i] !== '' ? parts[i] : undefined;
  }
  return value;
}
