/**
 * The pool's `newEnrollments` task (workers/enrollments.ts), what the bulk import makes a group's
 * enrollments with: records of the same shape as `newEnrollment` makes on the calling thread,
 * their JWTs signed with the server key (verifying against the server certificate, `kid` its
 * SHA-1) and sealed with the data directory's key, the token stored as the digest of the JWT's `jti`.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { loadOrCreatePki } from '../../../src/pki/bootstrap.js';
import { WorkerPool } from '../../../src/pool.js';
import { newEnrollment, type EnrollmentKeys, type EnrollmentSpec } from '../../../src/resources/enrollments.js';
import { Sealer, digestOf, isSealed } from '../../../src/store/sealed.js';
import type { Store } from '../../../src/store/store.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-new-enrollments-'));
const pool = new WorkerPool({ threads: 1, maxQueue: 4 });
t.teardown(async () => {
  await pool.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

t.test('a group made in a worker is what newEnrollment makes', async (t) => {
  const pkiDir = path.join(dir, 'pki');
  const pki = await loadOrCreatePki(pkiDir, { advertisedHost: 'localhost' });
  const sealer = Sealer.forPkiDir(pkiDir);
  const issuer = { url: 'https://ctrl.example:1281', controllers: ['https://ctrl.example:1281', 'https://other.example:1281'] };
  const lifetimeMs = 3 * 60_000;
  const expiresAt = Date.now() + 86_400_000;
  const specs: EnrollmentSpec[] = [
    { method: 'ott', identityId: 'id-1' },
    { method: 'updb', identityId: 'id-2', username: 'user-2' },
    { method: 'ott', identityId: 'id-3', expiresAt },
  ];
  const before = Date.now();
  const made = await pool.run('newEnrollments', { specs, serverKey: pki.serverKey, kid: pki.serverCertSha1Hex, issuer, lifetimeMs, pkiDir });
  t.equal(made.length, specs.length, 'one record per spec, in order');

  const keys: EnrollmentKeys = { pki, store: { sealer } as Pick<Store, 'sealer'> as Store, issuer: () => issuer, lifetimeMs };
  const here = newEnrollment(keys, specs[1]);
  t.same(Object.keys(made[1]).sort(), Object.keys(here).sort(), 'the same fields as one made on this thread');

  const publicKey = new crypto.X509Certificate(pki.serverCertPem).publicKey;
  const ids = new Set<string>();
  for (const [k, rec] of made.entries()) {
    const spec = specs[k];
    t.match(rec, { method: spec.method, identityId: spec.identityId, tags: {} }, `${spec.identityId}: method and subject`);
    t.equal(rec.username, spec.username, `${spec.identityId}: username`);
    ids.add(rec.id);
    t.ok(isSealed(rec.jwt), `${spec.identityId}: the JWT is stored sealed`);
    const jwt = sealer.open(rec.jwt);
    const [h, c, sig] = jwt.split('.');
    const ok = crypto.verify('sha256', Buffer.from(`${h}.${c}`), { key: publicKey, dsaEncoding: 'ieee-p1363' }, Buffer.from(sig, 'base64url'));
    t.ok(ok, `${spec.identityId}: the signature verifies against the server certificate`);
    const header = JSON.parse(Buffer.from(h, 'base64url').toString());
    const claims = JSON.parse(Buffer.from(c, 'base64url').toString());
    t.same(header, { alg: 'ES256', kid: pki.serverCertSha1Hex, typ: 'JWT' }, `${spec.identityId}: header`);
    t.match(claims, { em: spec.method, sub: spec.identityId, iss: issuer.url, ctrls: issuer.controllers, aud: [''] }, `${spec.identityId}: claims`);
    t.equal(rec.token, digestOf(claims.jti), `${spec.identityId}: the stored token is the digest of the jti`);
    t.equal(claims.exp, Math.floor(rec.expiresAt / 1000), `${spec.identityId}: exp is the expiry`);
    if (spec.expiresAt) t.equal(rec.expiresAt, spec.expiresAt, `${spec.identityId}: the expiry given`);
    else t.ok(rec.expiresAt >= before + lifetimeMs && rec.expiresAt <= Date.now() + lifetimeMs, `${spec.identityId}: expiry after the lifetime`);
  }
  t.equal(ids.size, specs.length, 'distinct ids');
  t.equal(new Set(made.map((r) => r.token)).size, specs.length, 'distinct tokens');
});
