/**
 * Certificate issuance for the PKI bootstrap: root CA, intermediate (signing) CA, server cert.
 *
 * Runs only at startup, when something is missing or must be re-issued, so @peculiar/x509's
 * convenience wins over speed here (milliseconds per certificate). bootstrap.ts imports this module
 * lazily, so a controller whose PKI is already on disk never loads @peculiar/x509 at all.
 * (Issuing client certificates from CSRs per request is a different, hot path: see
 * performance-notes.md, a DER template + node:crypto is ~12× faster there.)
 *
 * The WebCrypto provider is passed explicitly to every @peculiar/x509 call instead of calling
 * `cryptoProvider.set()`, so this module never mutates library-global state other modules share.
 */
import 'reflect-metadata'; // @peculiar/x509 (tsyringe) needs it loaded before the library itself
import * as x509 from '@peculiar/x509';
import { createPrivateKey, randomBytes, type KeyObject } from 'node:crypto';

/** Node 20 ships WebCrypto as a global; typed as the DOM `Crypto` that @peculiar/x509 expects. */
const webcrypto: Crypto = globalThis.crypto;

const DAY_MS = 24 * 60 * 60 * 1000;

/** Validity periods. The server certificate gets 2 years: long enough that a controller that is
 *  never restarted does not serve an expired certificate after a year, still under the 825-day
 *  ceiling Apple platforms enforce on TLS server certificates even from private CAs. Renewal
 *  happens at load when less than RENEW_BEFORE_MS remain (bootstrap.ts). */
const VALIDITY_MS = {
  root: 10 * 365 * DAY_MS,
  intermediate: 5 * 365 * DAY_MS,
  server: 2 * 365 * DAY_MS,
} as const;

/** Backdating notBefore tolerates clients whose clocks run behind the controller's. */
const BACKDATE_MS = 60 * 60 * 1000;

const ROOT_CN = 'mesh-controller root CA';
const INTERMEDIATE_CN = 'mesh-controller signing CA';

/** A certificate plus its private key, as the PEM text written to disk and as a KeyObject. */
export interface Issued {
  certPem: string;
  keyPem: string; // PKCS#8
  key: KeyObject;
}

/** An existing CA that signs: its certificate PEM and its private key. */
export interface IssuerMaterial {
  certPem: string;
  key: KeyObject;
}

export interface SubjectAltName {
  type: 'dns' | 'ip';
  value: string;
}

/** ECDSA parameters by curve; hash follows the curve size, as upstream's JWT alg mapping does. */
const CURVES: Record<string, { namedCurve: string; hash: string }> = {
  prime256v1: { namedCurve: 'P-256', hash: 'SHA-256' },
  secp384r1: { namedCurve: 'P-384', hash: 'SHA-384' },
  secp521r1: { namedCurve: 'P-521', hash: 'SHA-512' },
};

const NEW_KEY_ALG = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const NEW_KEY_SIGNING = { name: 'ECDSA', hash: 'SHA-256' } as const;

/**
 * Random positive 128-bit serial (RFC 5280 §4.1.2.2: positive, ≤ 20 octets; CA/B asks ≥ 64 random
 * bits). The top bit is cleared so the INTEGER stays positive without a 0x00 pad, and the next bit
 * set so it never shrinks below 16 octets: 126 random bits, always exactly 16 DER content octets.
 */
function randomSerialHex(): string {
  const b = randomBytes(16);
  b[0] = (b[0]! & 0x7f) | 0x40;
  return b.toString('hex');
}

function toPem(der: ArrayBuffer | Uint8Array, label: string): string {
  const b64 = Buffer.from(der instanceof Uint8Array ? der : new Uint8Array(der)).toString('base64');
  return `-----BEGIN ${label}-----\n${b64.match(/.{1,64}/g)!.join('\n')}\n-----END ${label}-----\n`;
}

function addMs(d: Date, ms: number): Date {
  return new Date(d.getTime() + ms);
}

/** The earlier of two dates: a certificate must not outlive its issuer (chains fail after that). */
function minDate(a: Date, b: Date): Date {
  return a.getTime() <= b.getTime() ? a : b;
}

async function newKeyPair(): Promise<{ keys: CryptoKeyPair; keyPem: string; key: KeyObject }> {
  // Extractable so the key can be written to disk; it becomes a KeyObject right away.
  const keys = (await webcrypto.subtle.generateKey(NEW_KEY_ALG, true, ['sign', 'verify'])) as CryptoKeyPair;
  const pkcs8 = new Uint8Array(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey));
  return { keys, keyPem: toPem(pkcs8, 'PRIVATE KEY'), key: createPrivateKey({ key: Buffer.from(pkcs8), format: 'der', type: 'pkcs8' }) };
}

/**
 * KeyObject → non-extractable WebCrypto signing key plus the signature algorithm it implies.
 * (Node 20 has no KeyObject.toCryptoKey(); the PKCS#8 round trip only happens while issuing.)
 */
async function signerFor(key: KeyObject): Promise<{ signingKey: CryptoKey; signingAlgorithm: EcdsaParams }> {
  const curve = key.asymmetricKeyType === 'ec' ? CURVES[key.asymmetricKeyDetails?.namedCurve ?? ''] : undefined;
  if (!curve) {
    throw new Error(
      `PKI: cannot issue with a ${key.asymmetricKeyType} key` +
        (key.asymmetricKeyDetails?.namedCurve ? ` on ${key.asymmetricKeyDetails.namedCurve}` : '') +
        '; only ECDSA P-256/P-384/P-521 CA keys are supported',
    );
  }
  const pkcs8 = key.export({ format: 'der', type: 'pkcs8' });
  const signingKey = await webcrypto.subtle.importKey('pkcs8', pkcs8, { name: 'ECDSA', namedCurve: curve.namedCurve }, false, ['sign']);
  return { signingKey, signingAlgorithm: { name: 'ECDSA', hash: curve.hash } };
}

/** The issuer's subject (as its exact encoded Name, so issuer/subject match byte for byte), its
 *  key identifier for authorityKeyIdentifier, and its expiry. */
async function issuerInfo(certPem: string): Promise<{ name: x509.Name; aki: x509.AuthorityKeyIdentifierExtension; notAfter: Date }> {
  const cert = new x509.X509Certificate(certPem);
  const ski = cert.getExtension(x509.SubjectKeyIdentifierExtension);
  // Copy the issuer's own SKI when it has one (the identifier chain builders match on); otherwise
  // derive it from the key the same way SKIs are derived (SHA-1 of the public key bits).
  const aki = ski
    ? new x509.AuthorityKeyIdentifierExtension(ski.keyId)
    : await x509.AuthorityKeyIdentifierExtension.create(cert.publicKey, false, webcrypto);
  return { name: cert.subjectName, aki, notAfter: cert.notAfter };
}

/** Self-signed root: CA (critical), keyCertSign + cRLSign, SKI. No pathLen limit, so an
 *  operator may later add a deeper hierarchy under the same anchor. */
export async function createRoot(now = new Date()): Promise<Issued> {
  const { keys, keyPem, key } = await newKeyPair();
  const cert = await x509.X509CertificateGenerator.createSelfSigned(
    {
      serialNumber: randomSerialHex(),
      name: `CN=${ROOT_CN}`,
      notBefore: addMs(now, -BACKDATE_MS),
      notAfter: addMs(now, VALIDITY_MS.root),
      keys,
      signingAlgorithm: NEW_KEY_SIGNING,
      extensions: [
        new x509.BasicConstraintsExtension(true, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, webcrypto),
      ],
    },
    webcrypto,
  );
  return { certPem: cert.toString('pem') + '\n', keyPem, key };
}

/** Intermediate signing CA under `root`: pathLen 0 (it signs only end-entity certs), AKI + SKI.
 *  Capped at the root's expiry. */
export async function createIntermediate(root: IssuerMaterial, now = new Date()): Promise<Issued> {
  const { keys, keyPem, key } = await newKeyPair();
  const issuer = await issuerInfo(root.certPem);
  const cert = await x509.X509CertificateGenerator.create(
    {
      serialNumber: randomSerialHex(),
      subject: `CN=${INTERMEDIATE_CN}`,
      issuer: issuer.name,
      notBefore: addMs(now, -BACKDATE_MS),
      notAfter: minDate(addMs(now, VALIDITY_MS.intermediate), issuer.notAfter),
      publicKey: keys.publicKey,
      ...(await signerFor(root.key)),
      extensions: [
        new x509.BasicConstraintsExtension(true, 0, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, webcrypto),
        issuer.aki,
      ],
    },
    webcrypto,
  );
  return { certPem: cert.toString('pem') + '\n', keyPem, key };
}

/**
 * Server certificate under the intermediate: CA:false, digitalSignature (the only usage an ECDHE
 * + ECDSA handshake needs), EKU serverAuth + clientAuth (the controller also dials out as a TLS
 * client with the same identity, e.g. to routers), SANs as given. Capped at the intermediate's
 * expiry.
 */
export async function createServer(
  intermediate: IssuerMaterial,
  commonName: string,
  sans: readonly SubjectAltName[],
  now = new Date(),
): Promise<Issued> {
  const { keys, keyPem, key } = await newKeyPair();
  const issuer = await issuerInfo(intermediate.certPem);
  const cert = await x509.X509CertificateGenerator.create(
    {
      serialNumber: randomSerialHex(),
      // JsonName form so a host name never gets parsed as an RFC 4514 string (no escaping issues).
      subject: [{ CN: [commonName] }],
      issuer: issuer.name,
      notBefore: addMs(now, -BACKDATE_MS),
      notAfter: minDate(addMs(now, VALIDITY_MS.server), issuer.notAfter),
      publicKey: keys.publicKey,
      ...(await signerFor(intermediate.key)),
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth], false),
        new x509.SubjectAlternativeNameExtension(sans.map((s) => ({ type: s.type, value: s.value })), false),
        await x509.SubjectKeyIdentifierExtension.create(keys.publicKey, false, webcrypto),
        issuer.aki,
      ],
    },
    webcrypto,
  );
  return { certPem: cert.toString('pem') + '\n', keyPem, key };
}
