/**
 * Key pairs, CSRs, self-signed certificates and third-party CAs for the PKI tests, made with the
 * openssl CLI (and, for certificates with chosen validity such as expired ones, with the
 * controller's own template issuer over a test CA key).
 *
 *   const { key, csr } = newCsr('device-1');
 *   const ca = newCa('Test CA');  const leaf = ca.sign('user-1');   // { cert, key }
 */
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CertIssuer } from '../../src/pki/cert-issuer.js';
import { parseCsr } from '../../src/pki/csr.js';

function inTemp<T>(fn: (dir: string) => T): T {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-pki-'));
  try {
    return fn(dir);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

export interface KeyCsr {
  key: string;
  csr: string;
}

/** A new key (EC P-256 unless `rsa`) and a CSR for it; `sans` like `DNS:r1.example,IP:127.0.0.1`. */
export function newCsr(cn: string, opts: { sans?: string; rsa?: boolean } = {}): KeyCsr {
  return inTemp((dir) => {
    const k = path.join(dir, 'k.pem');
    const r = path.join(dir, 'r.csr');
    execFileSync('openssl', [
      'req', '-new', '-newkey', opts.rsa ? 'rsa:2048' : 'ec', ...(opts.rsa ? [] : ['-pkeyopt', 'ec_paramgen_curve:P-256']), '-nodes',
      '-keyout', k, '-out', r, '-subj', `/CN=${cn}`, ...(opts.sans ? ['-addext', `subjectAltName=${opts.sans}`] : []),
    ], { stdio: 'ignore' });
    return { key: fs.readFileSync(k, 'utf8'), csr: fs.readFileSync(r, 'utf8') };
  });
}

/** A CSR for an existing key (key rolling off: extension with the same key). */
export function csrForKey(key: string, cn: string): string {
  return inTemp((dir) => {
    const k = path.join(dir, 'k.pem');
    fs.writeFileSync(k, key);
    return execFileSync('openssl', ['req', '-new', '-key', k, '-subj', `/CN=${cn}`], { encoding: 'utf8' });
  });
}

export interface TestCa {
  cert: string;
  key: string;
  /** A client certificate signed by this CA for a new key. */
  sign(cn: string, opts?: { sans?: string; validFromMs?: number; validityMs?: number }): { cert: string; key: string };
}

/** A self-signed EC P-256 certificate, a CA (keyCertSign, cRLSign) or a leaf, valid 30 days, and its key. */
function selfSigned(cn: string, ca: boolean): { cert: string; key: string } {
  return inTemp((dir) => {
    const k = path.join(dir, 'k.pem');
    const c = path.join(dir, 'c.pem');
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', k, '-out', c, '-subj', `/CN=${cn}`,
      '-days', '30', '-addext', ca ? 'basicConstraints=critical,CA:TRUE' : 'basicConstraints=critical,CA:FALSE',
      ...(ca ? ['-addext', 'keyUsage=critical,keyCertSign,cRLSign'] : []),
    ], { stdio: 'ignore' });
    return { cert: fs.readFileSync(c, 'utf8'), key: fs.readFileSync(k, 'utf8') };
  });
}

/** The PEM of a self-signed certificate (a CA or a leaf) whose key nobody needs. */
export function selfSignedCert(cn: string, ca: boolean): string {
  return selfSigned(cn, ca).cert;
}

/** A self-signed CA (EC P-256) that can sign client certificates, with any validity. */
export function newCa(cn: string): TestCa {
  const { cert, key } = selfSigned(cn, true);
  return { cert, key, sign: (leafCn, opts = {}) => issueWith(cert, key, leafCn, opts) };
}

/** A client certificate for a new key, signed by `caCert`/`caKey`, valid from `validFromMs` for `validityMs`. */
export function issueWith(caCert: string, caKey: string, cn: string, opts: { sans?: string; validFromMs?: number; validityMs?: number } = {}): { cert: string; key: string } {
  const { key, csr } = newCsr(cn, { sans: opts.sans });
  const issuer = new CertIssuer(caCert, crypto.createPrivateKey(caKey));
  // The issuer backdates notBefore by an hour; `now` is chosen so the window starts at validFromMs.
  const start = opts.validFromMs ?? Date.now();
  const c = issuer.issue(parseCsr(csr), 'client', (opts.validityMs ?? 30 * 86400_000) - 3600_000, start + 3600_000);
  return { cert: c.pem, key };
}

/** A certificate whose subject CN is `cn`, signed by the CA (CA verification). */
export function verificationCert(ca: TestCa, token: string): string {
  return ca.sign(token).cert;
}

export function fingerprint(pem: string): string {
  return crypto.createHash('sha1').update(new crypto.X509Certificate(pem).raw).digest('hex');
}

export function opensslVerify(caFile: string, certPem: string, purpose = 'sslclient'): string {
  return inTemp((dir) => {
    const f = path.join(dir, 'c.pem');
    fs.writeFileSync(f, certPem);
    return execFileSync('openssl', ['verify', '-CAfile', caFile, '-purpose', purpose, f], { encoding: 'utf8' });
  });
}
