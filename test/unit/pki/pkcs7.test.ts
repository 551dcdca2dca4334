/**
 * src/pki/pkcs7.ts: the degenerate certs-only SignedData is byte for byte what
 * `openssl crl2pkcs7 -nocrl` writes for the same certificates, openssl reads the certificates
 * back in order, and the EST wrapping is 64-character base64 lines without a trailing newline.
 */
import t from 'tap';
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { derTlv, encodeCertsOnlyPkcs7, wrapBase64 } from '../../../src/pki/pkcs7.js';
import { newCa } from '../../helpers/pki.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-pkcs7-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));

const root = newCa('pkcs7-root');
const leaf = root.sign('pkcs7-leaf').cert;
const certs = [root.cert, leaf];

t.test('same bytes as openssl crl2pkcs7, certificates in order', async (t) => {
  const ours = encodeCertsOnlyPkcs7(certs.map((p) => new crypto.X509Certificate(p).raw));
  certs.forEach((p, i) => fs.writeFileSync(path.join(dir, `c${i}.pem`), p));
  const theirs = execFileSync('openssl', ['crl2pkcs7', '-nocrl', '-certfile', path.join(dir, 'c0.pem'), '-certfile', path.join(dir, 'c1.pem'), '-outform', 'DER']);
  t.ok(ours.equals(theirs), 'byte for byte');
  fs.writeFileSync(path.join(dir, 'ours.p7b'), ours);
  const printed = execFileSync('openssl', ['pkcs7', '-inform', 'DER', '-in', path.join(dir, 'ours.p7b'), '-print_certs'], { encoding: 'utf8' });
  const subjects = [...printed.matchAll(/subject=.*CN\s*=\s*([^\n,]+)/g)].map((m) => m[1].trim());
  t.same(subjects, ['pkcs7-root', 'pkcs7-leaf'], 'openssl reads both back, root first');
});

t.test('DER lengths: short and long forms', async (t) => {
  t.same([...derTlv(0x04, Buffer.alloc(3))], [0x04, 3, 0, 0, 0]);
  const long = derTlv(0x04, Buffer.alloc(300));
  t.same([...long.subarray(0, 4)], [0x04, 0x82, 0x01, 0x2c], '300 = 0x012c in two length bytes');
  t.equal(long.length, 304);
  t.same([...derTlv(0x04, Buffer.alloc(128)).subarray(0, 3)], [0x04, 0x81, 0x80], '128 needs the long form');
});

t.test('EST base64 wrapping', async (t) => {
  const bytes = crypto.randomBytes(200);
  const text = wrapBase64(bytes);
  const lines = text.split('\n');
  t.ok(lines.slice(0, -1).every((l) => l.length === 64), 'full lines of 64 characters');
  t.ok(lines.at(-1)!.length > 0 && lines.at(-1)!.length <= 64, 'a last partial line');
  t.notOk(text.endsWith('\n'), 'no trailing newline');
  t.ok(Buffer.from(lines.join(''), 'base64').equals(bytes), 'decodes to the input');
});
