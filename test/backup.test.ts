/**
 * What a backup keeps working, and that offline changes are audited. A backup holds the public
 * halves of the token signing keys (records in the store) but not their private halves (files in
 * `<dataDir>/signing-keys/`): an API-session token issued before the backup still verifies after
 * its restore, into the same data directory on the same address and into another data directory on
 * another address, while the restored controller signs new tokens with a key of its own. An
 * offline `mesh restore` and `mesh admin reset-password` each leave an audit event, in the day's
 * audit file and, after the next start, in the search index `mesh.audit`.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { ADMIN_PASSWORD, startServer, type Server } from './helpers/server.js';
import { freePort } from './helpers/ports.js';
import { runMesh } from './helpers/cli.js';

const mesh = (args: string[]) => runMesh(os.tmpdir(), args);

const tmp = (prefix: string) => fs.mkdtempSync(path.join(os.tmpdir(), prefix));
const kidOf = (token: string) => JSON.parse(Buffer.from(token.split('.')[0], 'base64url').toString()).kid as string;

async function searchAudit(srv: Server, token: string, operation: string): Promise<any[]> {
  const body = Buffer.from(JSON.stringify({ query: { term: { 'operation.keyword': operation } }, size: 10 }));
  const r = await srv.raw('POST', '/search/mesh.audit*/_search', body, { 'zt-session': token, 'content-type': 'application/json' });
  return (r.body?.hits?.hits ?? []).map((h: any) => h._source);
}

t.test('tokens issued before a backup work after its restore, here and on another address; offline changes are audited', async (t) => {
  const work = tmp('mesh-backup-work-');
  const first = tmp('mesh-backup-a-');
  const second = tmp('mesh-backup-b-');
  t.teardown(() => {
    for (const d of [work, first, second]) fs.rmSync(d, { recursive: true, force: true });
  });
  const portA = await freePort();
  const envA = { MESH_ADDRESS: `127.0.0.1:${portA}`, MESH_CERT_ADDRESS: '127.0.0.1:0' };
  let srv = await startServer(undefined, { dataDir: first, keepData: true, env: envA });
  t.teardown(() => srv.stop());
  const admin = await srv.login();
  const token = admin.token!;
  const oldKid = kidOf(token);
  t.ok(fs.readdirSync(path.join(first, 'signing-keys')).includes(`${oldKid}.pem`), 'the private half is a file of the data directory');

  const backupFile = path.join(work, 'backup.tar.gz');
  const b = await mesh(['backup', '--data-dir', first, '--out', backupFile]);
  t.equal(b.code, 0, b.stderr);
  await srv.stop();
  const listed = await new Promise<string>((resolve) => {
    const p = spawn('tar', ['-tzf', backupFile], { stdio: ['ignore', 'pipe', 'ignore'] });
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.on('close', () => resolve(out));
  });
  t.notMatch(listed, /signing-keys/, 'no private signing key in the backup');
  t.match(listed, /pki\/secrets\.key/, 'the sealing key is in an operator\'s backup');
  t.notMatch(listed, /audit\//, 'nor the audit files');

  // Same data directory, same address.
  const restored = await mesh(['restore', '--replace', '--data-dir', first, backupFile]);
  t.equal(restored.code, 0, restored.stderr);
  const reset = await mesh(['admin', 'reset-password', '--data-dir', first, '--username', 'admin', '--password', 'after-restore-1']);
  t.equal(reset.code, 0, reset.stderr);
  const day = new Date().toISOString().slice(0, 10);
  const lines = fs.readFileSync(path.join(first, 'audit', `audit-${day}.jsonl`), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  const offline = lines.filter((e) => e.api === 'offline');
  t.same(offline.map((e) => e.operation), ['restore', 'resetPassword'], 'both offline changes are in the audit file');
  t.equal(offline[1].changes.password, '[redacted]', 'never the password');
  t.equal(offline[1].changes.username, 'admin');

  srv = await startServer(undefined, { dataDir: first, keepData: true, env: envA });
  t.equal(srv.port, portA, 'the same address');
  let r = await srv.mgmt.get('/current-identity', { headers: { 'zt-session': token } });
  t.equal(r.status, 200, `the old token works after the restore${r.status === 200 ? '' : `: ${r.text}`}`);
  const events = [...(await searchAudit(srv, token, 'restore')), ...(await searchAudit(srv, token, 'resetPassword'))];
  t.same(events.map((e) => e.operation).sort(), ['resetPassword', 'restore'], 'the offline events are searchable after the next start');
  t.match(events.find((e) => e.operation === 'restore'), { api: 'offline', method: 'CLI', path: 'mesh restore', family: 'database', changes: { backup: backupFile } });
  await srv.stop();

  // Another data directory restored from the same backup, on another address: the private key
  // stayed behind, so it signs with a new key and still verifies the old one's tokens.
  const other = await mesh(['restore', '--data-dir', second, backupFile]);
  t.equal(other.code, 0, other.stderr);
  srv = await startServer(undefined, { dataDir: second, keepData: true });
  t.not(srv.port, portA, 'another address');
  r = await srv.mgmt.get('/current-identity', { headers: { 'zt-session': token } });
  t.equal(r.status, 200, `the old token works on the other controller${r.status === 200 ? '' : `: ${r.text}`}`);
  t.equal(r.body.data.name, 'Default Admin');
  const fresh = await srv.login();
  t.not(kidOf(fresh.token!), oldKid, 'new tokens are signed with a new key');
  const keys = (await srv.raw('GET', '/oidc/keys')).body.keys.map((k: any) => k.kid);
  t.ok(keys.includes(oldKid) && keys.includes(kidOf(fresh.token!)), 'the JWKS has both keys');
  await srv.stop();
});
