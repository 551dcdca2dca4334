/**
 * Router certificates for control channel tests, made with @peculiar/x509 (any validity dates):
 * issued by the test controller's own intermediate CA (read from its data directory), or
 * self-signed. Real keys, real signatures.
 *
 *   const c = await issueRouterCert(srv.dataDir, { cn: 'r1' });                 // valid, our CA
 *   const old = await issueRouterCert(srv.dataDir, { cn: 'r1', expired: true }); // expired
 *   c.certPem, c.keyPem, c.fingerprint
 */
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

const webcrypto = globalThis.crypto;
const ALG = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const DAY = 86_400_000;

export interface TestCert {
  certPem: string;
  keyPem: string;
  fingerprint: string;
}

async function importPkcs8(pem: string): Promise<CryptoKey> {
  const der = crypto.createPrivateKey(pem).export({ type: 'pkcs8', format: 'der' });
  return webcrypto.subtle.importKey('pkcs8', der, ALG, false, ['sign']);
}

export async function issueRouterCert(
  dataDir: string | undefined,
  opts: { cn: string; expired?: boolean; notYetValid?: boolean; ca?: boolean; serverOnly?: boolean },
): Promise<TestCert> {
  const keys = (await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify'])) as CryptoKeyPair;
  const now = Date.now();
  const notBefore = new Date(opts.notYetValid ? now + 10 * DAY : opts.expired ? now - 10 * DAY : now - 60_000);
  const notAfter = new Date(opts.notYetValid ? now + 20 * DAY : opts.expired ? now - 5 * DAY : now + 30 * DAY);
  let issuer = `CN=${opts.cn}`;
  let signingKey = keys.privateKey;
  if (dataDir) {
    const ca = new x509.X509Certificate(fs.readFileSync(path.join(dataDir, 'pki', 'intermediate.cert.pem'), 'utf8'));
    issuer = ca.subject;
    signingKey = await importPkcs8(fs.readFileSync(path.join(dataDir, 'pki', 'intermediate.key.pem'), 'utf8'));
  }
  const extensions: x509.Extension[] = [new x509.BasicConstraintsExtension(opts.ca === true, undefined, true)];
  extensions.push(new x509.ExtendedKeyUsageExtension([opts.serverOnly ? x509.ExtendedKeyUsage.serverAuth : x509.ExtendedKeyUsage.clientAuth]));
  const cert = await x509.X509CertificateGenerator.create(
    {
      serialNumber: crypto.randomBytes(8).toString('hex').replace(/^[89a-f]/, '1'),
      subject: `CN=${opts.cn}`,
      issuer,
      notBefore,
      notAfter,
      signingAlgorithm: ALG,
      publicKey: keys.publicKey,
      signingKey,
      extensions,
    },
    webcrypto,
  );
  const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey));
  const keyPem = crypto.createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' }).export({ type: 'pkcs8', format: 'pem' }) as string;
  return { certPem: cert.toString('pem'), keyPem, fingerprint: crypto.createHash('sha1').update(Buffer.from(cert.rawData)).digest('hex') };
}
