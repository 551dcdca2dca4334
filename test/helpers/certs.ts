/** Test certificates: a self-signed EC P-256 certificate (a CA or a leaf) made with the openssl CLI. */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export function selfSignedCert(cn: string, ca: boolean): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-cert-'));
  try {
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', path.join(dir, 'k.pem'),
      '-out', path.join(dir, 'c.pem'), '-subj', `/CN=${cn}`, '-days', '30',
      '-addext', ca ? 'basicConstraints=critical,CA:TRUE' : 'basicConstraints=critical,CA:FALSE',
      ...(ca ? ['-addext', 'keyUsage=critical,keyCertSign,cRLSign'] : []),
    ], { stdio: 'ignore' });
    return fs.readFileSync(path.join(dir, 'c.pem'), 'utf8');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
