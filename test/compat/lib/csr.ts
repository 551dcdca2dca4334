/** A PEM certificate signing request (EC P-256, openssl CLI), for session-certificate and enrollment rows. */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export function makeCsr(cn: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-csr-'));
  try {
    execFileSync('openssl', [
      'req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
      '-keyout', path.join(dir, 'k.pem'), '-out', path.join(dir, 'r.pem'), '-subj', `/CN=${cn}`,
    ], { stdio: 'ignore' });
    return fs.readFileSync(path.join(dir, 'r.pem'), 'utf8');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** A self-signed EC P-256 client certificate and its key (PEM), e.g. for `proxy.clientCert`. */
export function makeCertAndKey(cn: string): { cert: string; key: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-cert-'));
  try {
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1',
      '-keyout', path.join(dir, 'k.pem'), '-out', path.join(dir, 'c.pem'), '-subj', `/CN=${cn}`,
    ], { stdio: 'ignore' });
    return { cert: fs.readFileSync(path.join(dir, 'c.pem'), 'utf8'), key: fs.readFileSync(path.join(dir, 'k.pem'), 'utf8') };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** A self-signed EC P-256 CA certificate and key (PEM), able to sign leaves with `signLeaf`. */
export function makeCa(cn: string): { cert: string; key: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-ca-'));
  try {
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '30',
      '-keyout', path.join(dir, 'k.pem'), '-out', path.join(dir, 'c.pem'), '-subj', `/CN=${cn}`,
      '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign',
    ], { stdio: 'ignore' });
    return { cert: fs.readFileSync(path.join(dir, 'c.pem'), 'utf8'), key: fs.readFileSync(path.join(dir, 'k.pem'), 'utf8') };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** A leaf certificate (PEM) with common name `cn`, signed by `ca`. */
export function signLeaf(ca: { cert: string; key: string }, cn: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-leaf-'));
  try {
    fs.writeFileSync(path.join(dir, 'ca.pem'), ca.cert);
    fs.writeFileSync(path.join(dir, 'ca.key'), ca.key);
    execFileSync('openssl', [
      'req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes',
      '-keyout', path.join(dir, 'k.pem'), '-out', path.join(dir, 'r.pem'), '-subj', `/CN=${cn}`,
    ], { stdio: 'ignore' });
    execFileSync('openssl', [
      'x509', '-req', '-in', path.join(dir, 'r.pem'), '-CA', path.join(dir, 'ca.pem'), '-CAkey', path.join(dir, 'ca.key'),
      '-CAcreateserial', '-days', '1', '-out', path.join(dir, 'c.pem'),
    ], { stdio: 'ignore' });
    return fs.readFileSync(path.join(dir, 'c.pem'), 'utf8');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
