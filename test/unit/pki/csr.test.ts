/**
 * CSR parsing and verification (src/pki/csr.ts) for every key encoding it meets: uncompressed EC
 * points of the three curves (handed to node:crypto as a JWK), and what takes the generic DER
 * path (compressed points, RSA, Ed25519); what must be refused (small RSA keys, other curves, a
 * point off its curve, a broken signature, a signature algorithm that does not fit the key); and
 * that the certificate issued from a CSR carries exactly the key the CSR was verified with.
 */
import t, { type Test } from 'tap';
import crypto from 'node:crypto';
import { parseCsr, CsrError } from '../../../src/pki/csr.js';
import { CertIssuer } from '../../../src/pki/cert-issuer.js';
import { bitString, derTlv, oid, seq, toPem } from '../../../src/pki/der.js';
import { newCa } from '../../helpers/pki.js';

const SIG_OIDS: Record<string, string> = {
  sha256: '1.2.840.10045.4.3.2',
  sha384: '1.2.840.10045.4.3.3',
  sha512: '1.2.840.10045.4.3.4',
  'rsa-sha256': '1.2.840.113549.1.1.11',
  ed25519: '1.3.101.112',
};

/** A CSR over `spki` (DER), signed by `key`; `sigAlg` names the signature (default from the key). */
function csrOver(spki: Buffer, key: crypto.KeyObject, opts: { sigAlg?: string; hash?: string | null; cn?: string } = {}): string {
  const name = seq(derTlv(0x31, seq(oid('2.5.4.3'), derTlv(0x0c, Buffer.from(opts.cn ?? 'dev')))));
  const cri = seq(Buffer.from('020100', 'hex'), name, spki, Buffer.from('a000', 'hex'));
  const hash = opts.hash === undefined ? 'sha256' : opts.hash;
  const sig = crypto.sign(hash, cri, key);
  const algOid = opts.sigAlg ?? (key.asymmetricKeyType === 'rsa' ? 'rsa-sha256' : key.asymmetricKeyType === 'ed25519' ? 'ed25519' : (hash ?? 'sha256'));
  const algId = algOid === 'rsa-sha256' ? seq(oid(SIG_OIDS[algOid]), Buffer.from('0500', 'hex')) : seq(oid(SIG_OIDS[algOid]));
  return toPem(seq(cri, algId, bitString(sig)), 'CERTIFICATE REQUEST');
}

function keyCsr(type: 'ec' | 'rsa' | 'ed25519', opts: Record<string, unknown>, hash: string | null = 'sha256') {
  const { privateKey, publicKey } = crypto.generateKeyPairSync(type as any, opts as any) as unknown as crypto.KeyPairKeyObjectResult;
  const spki = publicKey.export({ type: 'spki', format: 'der' });
  return { privateKey, publicKey, spki, csr: csrOver(spki, privateKey, { hash }) };
}

/** SubjectPublicKeyInfo of a P-256 key with its point in compressed form (02/03 || x). */
function compressedSpki(publicKey: crypto.KeyObject): Buffer {
  const raw = publicKey.export({ type: 'spki', format: 'der' }).subarray(-65);
  const point = crypto.ECDH.convertKey(raw, 'prime256v1', undefined, undefined, 'compressed') as Buffer;
  return seq(seq(oid('1.2.840.10045.2.1'), oid('1.2.840.10045.3.1.7')), bitString(point));
}

function rejects(t: Test, csr: string, reason: RegExp, what: string) {
  try {
    parseCsr(csr);
    t.fail(`${what}: accepted`);
  } catch (e) {
    t.ok(e instanceof CsrError, `${what}: CsrError`);
    t.match((e as Error).message, reason, `${what}: ${(e as Error).message}`);
  }
}

t.test('accepted keys, each verified and copied as sent', async (t) => {
  const cases = [
    ['EC P-256', keyCsr('ec', { namedCurve: 'P-256' }, 'sha256')],
    ['EC P-384', keyCsr('ec', { namedCurve: 'P-384' }, 'sha384')],
    ['EC P-521', keyCsr('ec', { namedCurve: 'P-521' }, 'sha512')],
    ['RSA 2048', keyCsr('rsa', { modulusLength: 2048 })],
    ['Ed25519', keyCsr('ed25519', {}, null)],
  ] as const;
  for (const [name, k] of cases) {
    const parsed = parseCsr(k.csr);
    t.ok(parsed.spki.equals(k.spki), `${name}: SPKI kept byte for byte`);
    t.equal(parsed.keyType, k.publicKey.asymmetricKeyType, `${name}: key type`);
    t.equal(parsed.commonName, 'dev', `${name}: common name`);
  }
  const ec = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const spki = compressedSpki(ec.publicKey);
  const parsed = parseCsr(csrOver(spki, ec.privateKey));
  t.ok(parsed.spki.equals(spki), 'compressed P-256 point: accepted (generic path), SPKI kept');
});

t.test('refused keys and signatures', async (t) => {
  rejects(t, keyCsr('rsa', { modulusLength: 1024 }).csr, /at least 2048/, 'RSA 1024');
  rejects(t, keyCsr('ec', { namedCurve: 'secp256k1' }).csr, /unsupported EC curve/, 'secp256k1');
  // A P-256 point moved off the curve: its SPKI still has the canonical header.
  const ec = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const spki = Buffer.from(ec.publicKey.export({ type: 'spki', format: 'der' }));
  spki[spki.length - 1] ^= 1;
  rejects(t, csrOver(spki, ec.privateKey), /public key could not be read/, 'P-256 point off the curve');
  // Signed by another key.
  const other = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
  rejects(t, csrOver(ec.publicKey.export({ type: 'spki', format: 'der' }), other.privateKey), /signature is not valid/, 'signature by another key');
  // An ECDSA key with an RSA signature algorithm.
  rejects(t, csrOver(ec.publicKey.export({ type: 'spki', format: 'der' }), ec.privateKey, { sigAlg: 'rsa-sha256' }), /does not match its key/, 'algorithm that does not fit the key');
  // A P-384 key claiming a SHA-256 signature verifies (the hash is the signer's choice); claiming
  // SHA-384 over a SHA-256 signature does not.
  const p384 = crypto.generateKeyPairSync('ec', { namedCurve: 'P-384' });
  rejects(t, csrOver(p384.publicKey.export({ type: 'spki', format: 'der' }), p384.privateKey, { hash: 'sha256', sigAlg: 'sha384' }), /signature is not valid/, 'wrong hash named');
});

t.test('the certificate carries the verified key', async (t) => {
  const ca = newCa('CSR test CA');
  const issuer = new CertIssuer(ca.cert, crypto.createPrivateKey(ca.key));
  for (const curve of ['P-256', 'P-384', 'P-521']) {
    const { privateKey, csr } = keyCsr('ec', { namedCurve: curve }, curve === 'P-256' ? 'sha256' : curve === 'P-384' ? 'sha384' : 'sha512');
    const cert = new crypto.X509Certificate(issuer.issueFromPem(csr, 'client', 86400_000).pem);
    t.ok(cert.checkPrivateKey(privateKey), `${curve}: certificate is for the CSR's key`);
    t.ok(cert.verify(new crypto.X509Certificate(ca.cert).publicKey), `${curve}: signed by the CA`);
  }
});
