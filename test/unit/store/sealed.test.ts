/**
 * src/store/sealed.ts: the key file is made once (0600, 256 bits) and kept; sealed values open
 * with the same key only, differ each time (random IV), refuse tampering, and values written
 * before sealing pass through.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { SEALED_KEY_FILE, Sealer, digestOf, isSealed } from '../../../src/store/sealed.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-sealed-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));

t.test('the key file', async (t) => {
  const pki = path.join(dir, 'pki');
  const a = Sealer.forPkiDir(pki);
  const file = path.join(pki, SEALED_KEY_FILE);
  t.equal(fs.statSync(file).mode & 0o777, 0o600, 'readable by the owner alone');
  t.equal(Buffer.from(fs.readFileSync(file, 'utf8').trim(), 'base64').length, 32, '256 bits');
  const b = Sealer.forPkiDir(pki);
  t.equal(b.open(a.seal('kept')), 'kept', 'the same key next time');
  const bad = path.join(dir, 'bad');
  fs.mkdirSync(bad);
  fs.writeFileSync(path.join(bad, SEALED_KEY_FILE), Buffer.alloc(16).toString('base64'));
  t.throws(() => Sealer.forPkiDir(bad), /expected a base64 256-bit key/, 'a short key is refused');
});

t.test('seal and open', async (t) => {
  const s = Sealer.forPkiDir(path.join(dir, 'one'));
  const other = Sealer.forPkiDir(path.join(dir, 'two'));
  const secret = 'JBSWY3DPEHPK3PXP — ünïcödé';
  const x = s.seal(secret);
  const y = s.seal(secret);
  t.ok(isSealed(x) && !x.includes('JBSWY3DP'), 'sealed, the plain text not in it');
  t.not(x, y, 'a fresh IV each time');
  t.equal(s.open(x), secret);
  t.throws(() => other.open(x), 'another key does not open it');
  const raw = Buffer.from(x.slice('sealed:v1:'.length), 'base64url');
  raw[raw.length - 1] ^= 1;
  t.throws(() => s.open('sealed:v1:' + raw.toString('base64url')), 'a changed byte is refused');
  t.equal(s.open('written-before-sealing'), 'written-before-sealing', 'an unsealed value passes through');
  t.notOk(isSealed('plain'));
  t.equal(digestOf('token'), '3c469e9d6c5875d37a43f353d4f88e61fcf812c66eee3457465a40b0da4153e0', 'SHA-256 hex');
});
