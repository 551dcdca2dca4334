/**
 * Secrets at rest (src/store/sealed.ts): pending enrollment tokens and JWTs, TOTP secrets and MFA
 * recovery codes never reach `db/` or a snapshot in a readable form. Every file under `db/` and
 * `snapshots/` is scanned for the raw bytes of each secret the API handed out; enrollment, MFA
 * login and recovery codes still work, across a restart (the key in `pki/secrets.key` is kept);
 * and a directory written the old way (format 3, secrets in plain text) is sealed by the data
 * format migration at start, after which the same secrets still work.
 */
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import os from 'node:os';
import t, { type Test } from 'tap';
import { generateSync } from 'otplib';
import { startServer, isError, type Client, type Server } from './helpers/server.js';
import { Store } from '../src/store/store.js';
import { Sealer, isSealed, digestOf } from '../src/store/sealed.js';
import { createRegistry } from '../src/resources/index.js';
import { restoreBackup } from '../src/store/snapshot.js';
import { CURRENT_FORMAT } from '../src/store/data-format.js';

const code = (secret: string) => generateSync({ secret, epoch: Math.floor(Date.now() / 1000) });

function filesUnder(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir, { withFileTypes: true, recursive: true }).filter((e) => e.isFile()).map((e) => path.join(e.parentPath, e.name));
}

/** Which of `secrets` appear, as raw bytes, in any file under `dirs` (a snapshot's .tar.gz unpacked). */
function found(dirs: string[], secrets: string[]): string[] {
  const files = dirs.flatMap(filesUnder);
  const hits: string[] = [];
  for (const f of files) {
    const bytes = f.endsWith('.gz') ? zlib.gunzipSync(fs.readFileSync(f)) : fs.readFileSync(f);
    for (const s of secrets) if (bytes.includes(Buffer.from(s))) hits.push(`${s.slice(0, 12)}… in ${path.basename(f)}`);
  }
  return hits;
}

async function loginAs(srv: Server, username: string, password: string): Promise<Client> {
  const r = await srv.client.post('/authenticate?method=password', { username, password });
  if (r.status !== 200) throw new Error(`login ${username}: ${r.status} ${r.text}`);
  return new (srv.client.constructor as any)(srv, '/edge/client/v1', r.body.data.token) as Client;
}

/** Pending enrollments of several kinds and a user with verified MFA; every secret handed out. */
async function populate(t: Test, srv: Server) {
  const admin = await srv.login();
  const ott = (await admin.post('/identities', { name: 'ott-device', type: 'Device', isAdmin: false, enrollment: { ott: true } })).body.data.id;
  const updb = (await admin.post('/identities', { name: 'pw-user', type: 'User', isAdmin: false, enrollment: { updb: 'pw-user' } })).body.data.id;
  const router = (await admin.post('/edge-routers', { name: 'er-1', roleAttributes: [] })).body.data.id;
  const ottE = (await admin.get(`/identities/${ott}`)).body.data.enrollment.ott;
  const updbE = (await admin.get(`/identities/${updb}`)).body.data.enrollment.updb;
  const er = (await admin.get(`/edge-routers/${router}`)).body.data;
  for (const [what, v] of [['ott token', ottE.token], ['updb token', updbE.token], ['router token', er.enrollmentToken]] as const) t.match(v, /^[0-9a-f-]{36}$/, `${what} shown to the admin`);
  t.equal((await admin.get(`/enrollments/${ottE.id}`)).body.data.jwt, ottE.jwt, 'the enrollment JWT reads the same again');
  t.equal((await admin.get(`/enrollments/${ottE.id}`)).body.data.token, ottE.token, 'and its token');

  // A user with verified MFA.
  const mfaUser = (await admin.post('/identities', { name: 'mfa-user', type: 'User', isAdmin: false })).body.data.id;
  t.equal((await admin.post('/authenticators', { method: 'updb', identityId: mfaUser, username: 'mfa-user', password: 'mfa-password-1' })).status, 201);
  const u = await loginAs(srv, 'mfa-user', 'mfa-password-1');
  t.equal((await u.post('/current-identity/mfa')).status, 201, 'MFA enrolled');
  const d = (await u.get('/current-identity/mfa')).body.data;
  const secret = /secret=([A-Z2-7]+)/.exec(d.provisioningUrl)![1];
  t.equal((await u.post('/current-identity/mfa/verify', { code: code(secret) })).status, 200, 'MFA verified');
  const codes: string[] = d.recoveryCodes;
  t.equal(codes.length, 20);
  return {
    admin,
    ottE,
    updbE,
    secret,
    codes,
    secrets: [ottE.token, ottE.jwt, updbE.token, updbE.jwt, er.enrollmentToken, er.enrollmentJwt, secret, ...codes],
  };
}

/** MFA login with a TOTP code, the codes shown again, and one recovery code used. */
async function mfaWorks(t: Test, srv: Server, secret: string, codes: string[]) {
  const u = await loginAs(srv, 'mfa-user', 'mfa-password-1');
  t.not((await u.get('/current-identity')).status, 200, 'a partial session until the TOTP code');
  t.equal((await u.post('/authenticate/mfa', { code: code(secret) })).status, 200, 'MFA login with a TOTP code from the same secret');
  t.equal((await u.get('/current-identity')).status, 200, 'fully authenticated');
  const shown = await u.get('/current-identity/mfa/recovery-codes', { headers: { 'mfa-validation-code': code(secret) } });
  t.equal(shown.status, 200, 'recovery codes shown again');
  t.same(shown.body.data.recoveryCodes, codes, 'the same codes');
  const v = await loginAs(srv, 'mfa-user', 'mfa-password-1');
  t.equal((await v.post('/authenticate/mfa', { code: codes[0] })).status, 200, 'a recovery code passes MFA');
  const w = await loginAs(srv, 'mfa-user', 'mfa-password-1');
  t.ok(isError(await w.post('/authenticate/mfa', { code: codes[0] }), 400, 'MFA_INVALID_TOKEN'), 'once only');
}

t.test('nothing readable under db/ or in a snapshot; enroll, MFA and recovery codes still work after a restart', async (t) => {
  const first = await startServer(t, { keepData: true });
  const dataDir = first.dataDir;
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const s = await populate(t, first);
  t.equal((await s.admin.post('/database/snapshot')).status, 200, 'snapshot taken');
  await first.stop();

  const snaps = filesUnder(path.join(dataDir, 'snapshots'));
  t.ok(snaps.length > 0, 'the snapshot is on disk');
  const tarBytes = zlib.gunzipSync(fs.readFileSync(snaps[0]));
  t.ok(tarBytes.includes(Buffer.from('pki/root.key.pem')), 'the scan reads inside the snapshot (it carries the PKI)');
  t.notOk(tarBytes.includes(Buffer.from('pki/secrets.key')), 'but not the sealing key');
  t.same(found([path.join(dataDir, 'db'), path.join(dataDir, 'snapshots')], s.secrets), [], `none of ${s.secrets.length} secrets in db/ or snapshots/`);
  const keyFile = path.join(dataDir, 'pki', 'secrets.key');
  t.equal(fs.statSync(keyFile).mode & 0o777, 0o600, 'pki/secrets.key is 0600');
  const key = fs.readFileSync(keyFile, 'utf8');

  const srv = await startServer(t, { dataDir, keepData: true });
  t.equal(fs.readFileSync(keyFile, 'utf8'), key, 'the key is kept across restarts');
  await mfaWorks(t, srv, s.secret, s.codes);
  t.ok(isError(await srv.client.post('/enroll/updb?token=not-a-token', { password: 'pw-user-password-1' }), 400, 'INVALID_ENROLLMENT_TOKEN'), 'an unknown token is refused');
  t.equal((await srv.client.post(`/enroll/updb?token=${s.updbE.token}`, { password: 'pw-user-password-1' })).status, 200, 'updb enrollment by its token after the restart');
  t.ok(await loginAs(srv, 'pw-user', 'pw-user-password-1'), 'the enrolled user logs in');
  await srv.stop();

  // The snapshot restored elsewhere, without the key: the controller refuses to start, and says why.
  const elsewhere = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-restored-'));
  t.teardown(() => fs.rmSync(elsewhere, { recursive: true, force: true }));
  await restoreBackup(snaps[0], elsewhere);
  t.notOk(fs.existsSync(path.join(elsewhere, 'pki', 'secrets.key')), 'restored without the key');
  const refused = await startServer(undefined, { dataDir: elsewhere, keepData: true }).then(
    (s) => s.stop().then(() => ''),
    (e: Error) => e.message,
  );
  t.match(refused, /secrets\.key does not open the secrets sealed in the datastore/, 'refused with a clear message');
  // With the key put back (as `mesh restore` does over the directory it came from), it opens them.
  fs.copyFileSync(keyFile, path.join(elsewhere, 'pki', 'secrets.key'));
  const back = await startServer(t, { dataDir: elsewhere, keepData: true });
  const again = await back.login();
  t.equal((await again.get(`/enrollments/${s.ottE.id}`)).body.data.jwt, s.ottE.jwt, 'the restored enrollment JWT reads again');
});

t.test('a directory written the old way is sealed by the migration, and its secrets still work', async (t) => {
  const first = await startServer(t, { keepData: true });
  const dataDir = first.dataDir;
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const s = await populate(t, first);
  await first.stop();

  // Rewrite the records as format 3 wrote them: plain token and JWT, plain MFA secret and codes.
  const sealer = Sealer.forPkiDir(path.join(dataDir, 'pki'));
  const store = new Store(path.join(dataDir, 'db'), createRegistry().collectionSpecs());
  await store.write((tx) => {
    for (const e of store.scan('enrollments')) {
      const jwt = sealer.open(e.jwt);
      const token = JSON.parse(Buffer.from(jwt.split('.')[1], 'base64url').toString()).jti;
      tx.put('enrollments', { ...e, token, jwt });
    }
    for (const i of store.scan('identities')) {
      if (i.mfa) tx.put('identities', { ...i, mfa: { ...i.mfa, secret: sealer.open(i.mfa.secret), recoveryCodes: i.mfa.recoveryCodes.map((c: string) => sealer.open(c)) } });
    }
  });
  t.equal(store.findUnique('enrollments', 'token', s.ottE.token)?.jwt, s.ottE.jwt, 'the old form: the token and JWT in plain text');
  await store.close();
  fs.writeFileSync(path.join(dataDir, 'format.json'), JSON.stringify({ format: 3 }) + '\n');

  const srv = await startServer(t, { dataDir, keepData: true });
  t.equal(JSON.parse(fs.readFileSync(path.join(dataDir, 'format.json'), 'utf8')).format, CURRENT_FORMAT, 'migrated to the current format');
  const admin = await srv.login();
  t.equal((await admin.get(`/enrollments/${s.ottE.id}`)).body.data.jwt, s.ottE.jwt, 'the admin reads the same JWT');
  t.equal((await admin.get(`/enrollments/${s.ottE.id}`)).body.data.token, s.ottE.token, 'and token');
  await mfaWorks(t, srv, s.secret, s.codes);
  t.equal((await srv.client.post(`/enroll/updb?token=${s.updbE.token}`, { password: 'pw-user-password-1' })).status, 200, 'updb enrollment by the token issued before the migration');
  t.equal((await admin.post('/database/snapshot')).status, 200, 'snapshot taken');
  await srv.stop();

  const after = new Store(path.join(dataDir, 'db'), createRegistry().collectionSpecs());
  const left = [...after.scan('enrollments')];
  t.ok(left.length >= 2, 'pending enrollments left');
  t.ok(left.every((e) => isSealed(e.jwt) && /^[0-9a-f]{64}$/.test(e.token)), 'every enrollment: JWT sealed, token a digest');
  t.ok(after.findUnique('enrollments', 'token', digestOf(s.ottE.token)), 'found by the digest of its token');
  const mfa = [...after.scan('identities')].find((i) => i.name === 'mfa-user')!.mfa!;
  t.ok(isSealed(mfa.secret) && mfa.recoveryCodes.every(isSealed), 'the MFA secret and recovery codes sealed');
  await after.close();
  // The records are sealed; the snapshot taken after the migration is written from them.
  t.same(found([path.join(dataDir, 'snapshots')], s.secrets), [], 'nothing readable in the snapshot taken after the migration');
});
