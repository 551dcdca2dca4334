/**
 * Key material for the fleet and the ceilings: device key pairs with PKCS#10 CSRs (what an SDK
 * sends to `POST /enroll?token=…`), and a raw CSR → certificate signer with @peculiar/x509 and the
 * controller's intermediate CA (the "raw CSR signing" ceiling, and the client certificate the raw
 * mutual-TLS handshake ceiling presents).
 *
 *   const dev = await deviceKeys('identity-0042');   // { keyPem, csrPem }
 *   const signer = await CsrSigner.fromPkiDir(dataDir + '/pki');
 *   const certPem = await signer.sign(dev.csrPem);
 */
import 'reflect-metadata'; // @peculiar/x509 needs it loaded first
import * as x509 from '@peculiar/x509';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

const webcrypto: Crypto = globalThis.crypto;
const ALG = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

export interface DeviceKeys {
  keyPem: string;
  csrPem: string;
}

const pem = (der: ArrayBuffer, label: string) =>
  `-----BEGIN ${label}-----\n${Buffer.from(der).toString('base64').replace(/(.{64})/g, '$1\n').replace(/\n$/, '')}\n-----END ${label}-----\n`;

/** A fresh P-256 key and a CSR for `cn` signed with it. */
export async function deviceKeys(cn: string): Promise<DeviceKeys> {
  const keys = (await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify'])) as CryptoKeyPair;
  const csr = await x509.Pkcs10CertificateRequestGenerator.create(
    { name: `CN=${cn.replace(/[,+"\\<>;=]/g, '_')}`, keys, signingAlgorithm: ALG },
    webcrypto,
  );
  const pkcs8 = await webcrypto.subtle.exportKey('pkcs8', keys.privateKey);
  return { keyPem: pem(pkcs8, 'PRIVATE KEY'), csrPem: csr.toString('pem') + '\n' };
}

/** Signs CSRs with a CA's key: parse + verify the CSR, issue a one-day client certificate. */
export class CsrSigner {
  private constructor(
    private readonly caCert: x509.X509Certificate,
    private readonly caKey: CryptoKey,
    readonly caChainPem: string,
  ) {}

  /** The controller's intermediate (signing) CA from a data directory's `pki/`. */
  static async fromPkiDir(pkiDir: string): Promise<CsrSigner> {
    const certPem = fs.readFileSync(path.join(pkiDir, 'intermediate.cert.pem'), 'utf8');
    const keyPem = fs.readFileSync(path.join(pkiDir, 'intermediate.key.pem'), 'utf8');
    const caCert = new x509.X509Certificate(certPem);
    const der = Buffer.from(keyPem.replace(/-----[^-]+-----|\s/g, ''), 'base64');
    const namedCurve = (caCert.publicKey.algorithm as EcKeyAlgorithm).namedCurve ?? 'P-256';
    const caKey = await webcrypto.subtle.importKey('pkcs8', der, { name: 'ECDSA', namedCurve }, false, ['sign']);
    return new CsrSigner(caCert, caKey, certPem);
  }

  async sign(csrPem: string): Promise<string> {
    const csr = new x509.Pkcs10CertificateRequest(csrPem);
    if (!(await csr.verify(webcrypto))) throw new Error('CSR signature does not verify');
    const now = Date.now();
    const serial = randomBytes(16);
    serial[0] &= 0x7f;
    const cert = await x509.X509CertificateGenerator.create(
      {
        serialNumber: serial.toString('hex'),
        subject: csr.subject,
        issuer: this.caCert.subject,
        notBefore: new Date(now - 3600_000),
        notAfter: new Date(now + 86400_000),
        publicKey: await csr.publicKey.export(webcrypto),
        signingKey: this.caKey,
        signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
        extensions: [
          new x509.BasicConstraintsExtension(false, undefined, true),
          new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
          new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.clientAuth], false),
        ],
      },
      webcrypto,
    );
    return cert.toString('pem') + '\n';
  }
}

// ---- DER-template issuing with node:crypto (the fast path of performance-notes.md) -----------

import crypto from 'node:crypto';

/** A DER element: tag byte, header length, content bounds. */
interface Der {
  tag: number;
  start: number;
  contentStart: number;
  end: number;
}

function readDer(buf: Buffer, at: number): Der {
  const tag = buf[at];
  let len = buf[at + 1];
  let p = at + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + buf[p++];
  }
  return { tag, start: at, contentStart: p, end: p + len };
}

function children(buf: Buffer, el: Der): Der[] {
  const out: Der[] = [];
  for (let p = el.contentStart; p < el.end; ) {
    const c = readDer(buf, p);
    out.push(c);
    p = c.end;
  }
  return out;
}

function derLen(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  while (n > 0) {
    bytes.unshift(n & 0xff);
    n = Math.floor(n / 256);
  }
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

const tlv = (tag: number, ...parts: Buffer[]) => {
  const body = Buffer.concat(parts);
  return Buffer.concat([Buffer.from([tag]), derLen(body.length), body]);
};

const utcTime = (d: Date) => tlv(0x17, Buffer.from(d.toISOString().replace(/[-:T]/g, '').slice(2, 14) + 'Z'));

/** ecdsa-with-SHA256 AlgorithmIdentifier. */
const ECDSA_SHA256 = Buffer.from('300a06082a8648ce3d040302', 'hex');

/**
 * CSR → client certificate with a fixed DER template and node:crypto: parse the CSR's DER, verify
 * its signature, splice its subject and public key into the template, sign with the CA key object.
 * (What performance-notes.md measured at ~4,000/s per core; the ceiling for a controller that issues
 * this way.)
 */
export class DerCsrSigner {
  private readonly issuer: Buffer;
  private readonly extensions: Buffer;

  private constructor(private readonly caKey: crypto.KeyObject, caCertPem: string) {
    const der = new crypto.X509Certificate(caCertPem).raw;
    const cert = readDer(der, 0);
    const tbs = children(der, cert)[0];
    const f = children(der, tbs);
    // tbs: [0] version, serial, sigAlg, issuer, validity, subject, ... → the CA's subject is our issuer.
    const subject = f[0].tag === 0xa0 ? f[5] : f[4];
    this.issuer = der.subarray(subject.start, subject.end);
    this.extensions = tlv(
      0xa3,
      tlv(
        0x30,
        tlv(0x30, Buffer.from('0603551d13', 'hex'), Buffer.from('0101ff', 'hex'), tlv(0x04, Buffer.from('3000', 'hex'))), // basicConstraints CA:false, critical
        tlv(0x30, Buffer.from('0603551d0f', 'hex'), Buffer.from('0101ff', 'hex'), tlv(0x04, Buffer.from('030205a0', 'hex'))), // keyUsage digitalSignature|keyEncipherment
        tlv(0x30, Buffer.from('0603551d25', 'hex'), tlv(0x04, Buffer.from('300a06082b06010505070302', 'hex'))), // extKeyUsage clientAuth
      ),
    );
  }

  static fromPkiDir(pkiDir: string): DerCsrSigner {
    const certPem = fs.readFileSync(path.join(pkiDir, 'intermediate.cert.pem'), 'utf8');
    const key = crypto.createPrivateKey(fs.readFileSync(path.join(pkiDir, 'intermediate.key.pem')));
    return new DerCsrSigner(key, certPem);
  }

  sign(csrPem: string): string {
    const der = Buffer.from(csrPem.replace(/-----[^-]+-----|\s/g, ''), 'base64');
    const csr = readDer(der, 0);
    const [info, , sig] = children(der, csr);
    const [, subject, spki] = children(der, info);
    const publicKey = crypto.createPublicKey({ key: der.subarray(spki.start, spki.end), format: 'der', type: 'spki' });
    const signature = der.subarray(sig.contentStart + 1, sig.end); // BIT STRING: skip the unused-bits byte
    if (!crypto.verify('sha256', der.subarray(info.start, info.end), publicKey, signature)) throw new Error('CSR signature does not verify');
    const serial = crypto.randomBytes(16);
    serial[0] &= 0x7f;
    serial[0] |= 0x01;
    const now = Date.now();
    const tbs = tlv(
      0x30,
      Buffer.from('a003020102', 'hex'), // v3
      tlv(0x02, serial),
      ECDSA_SHA256,
      this.issuer,
      tlv(0x30, utcTime(new Date(now - 3600_000)), utcTime(new Date(now + 86400_000))),
      der.subarray(subject.start, subject.end),
      der.subarray(spki.start, spki.end),
      this.extensions,
    );
    const certSig = crypto.sign('sha256', tbs, this.caKey);
    const cert = tlv(0x30, tbs, ECDSA_SHA256, tlv(0x03, Buffer.from([0]), certSig));
    return `-----BEGIN CERTIFICATE-----\n${cert.toString('base64').replace(/(.{64})/g, '$1\n').replace(/\n$/, '')}\n-----END CERTIFICATE-----\n`;
  }
}
