/**
 * The audit trail against the real server: changes through the APIs become events (who, what,
 * when, fields without secrets) in the JSON-lines file under the data directory, in the search
 * index mesh.audit, and at a webhook — a real HTTP receiver on loopback that checks the
 * HMAC-SHA256 signature, refuses the first delivery (so it is retried), and sees no secret.
 * A webhook that cannot be reached drops events, and /metrics counts them.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import t from 'tap';
import { ADMIN_PASSWORD, startServer } from './helpers/server.js';
import { sleep } from './helpers/assert.js';

const SECRET = 'audit-webhook-secret-0123456789';

interface Received { body: string; signature?: string; answered: number }

async function receiver(t: { teardown(fn: () => unknown): void }, failFirst: number) {
  const got: Received[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const answered = got.length < failFirst ? 500 : 204;
      got.push({ body: Buffer.concat(chunks).toString('utf8'), signature: req.headers['x-mesh-signature'] as string | undefined, answered });
      res.writeHead(answered).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/audit`, got };
}

async function until<T>(what: string, fn: () => T | undefined | Promise<T | undefined>, ms = 15_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

t.test('changes go to the file, the index and the signed webhook, without secrets', async (t) => {
  const hook = await receiver(t, 1);
  const srv = await startServer(t, {
    env: { MESH_AUDIT_WEBHOOK_URL: hook.url, MESH_AUDIT_WEBHOOK_SECRET: SECRET, MESH_AUDIT_WEBHOOK_RETRY_MS: '50' },
  });
  const admin = await srv.login();
  const me = (await admin.get('/current-identity')).body.data;
  const created = await admin.post('/identities', { name: 'audited-device', type: 'Device', isAdmin: false, roleAttributes: ['sensors'] });
  t.equal(created.status, 201);
  const id = created.body.data.id;
  const devicePassword = 'device-password-never-logged';
  t.equal((await admin.post('/authenticators', { method: 'updb', identityId: id, username: 'audited-user', password: devicePassword })).status, 201);
  t.equal((await admin.patch(`/identities/${id}`, { roleAttributes: ['sensors', 'floor-2'] })).status, 200);
  t.equal((await admin.post('/identities', { name: '' })).status, 400, 'a refused change…');
  t.equal((await admin.delete(`/identities/${id}`)).status, 200);
  const listed = await admin.get('/identities');
  t.equal(listed.status, 200);

  // Webhook: the first delivery answered 500 and was retried; every body is signed.
  const events = await until('the webhook to receive the deletion', () => {
    const ok = hook.got.filter((g) => g.answered === 204).flatMap((g) => JSON.parse(g.body).events);
    return ok.some((e: any) => e.action === 'delete' && e.entityId === id) ? ok : undefined;
  });
  t.equal(hook.got[0].answered, 500, 'the first delivery was refused');
  t.ok(hook.got.length >= 2, 'and retried');
  for (const g of hook.got) {
    const expected = 'sha256=' + crypto.createHmac('sha256', SECRET).update(g.body).digest('hex');
    t.equal(g.signature, expected, 'x-mesh-signature is the HMAC-SHA256 of the body');
  }
  const all = hook.got.map((g) => g.body).join('\n');
  t.notMatch(all, devicePassword, 'no password in any webhook body');
  t.notMatch(all, ADMIN_PASSWORD, 'not the admin password either');
  t.notMatch(all, admin.token!, 'no session token');
  t.notOk(events.some((e: any) => e.operation === 'listIdentities' || e.status >= 400), 'reads and refused changes are not events');

  const login = events.find((e: any) => e.operation === 'authenticate');
  t.equal(login?.family, 'api-sessions', 'a login is the creation of an API session');
  t.equal(login?.actor.identityId, me.id, 'by the admin');
  const create = events.find((e: any) => e.operation === 'createIdentity');
  t.match(create, {
    action: 'create', api: 'management', family: 'identities', entityId: id, method: 'POST', status: 201,
    actor: { identityId: me.id, identityName: me.name, address: '127.0.0.1' },
    changes: { name: 'audited-device', type: 'Device', roleAttributes: ['sensors'] },
  }, 'who, what, the fields');
  t.type(create?.actor.apiSessionId, 'string', 'the API session');
  t.ok(Math.abs(Date.parse(create?.['@timestamp']) - Date.now()) < 60_000, 'when');
  const auth = events.find((e: any) => e.operation === 'createAuthenticator');
  t.equal(auth?.changes.password, '[redacted]', 'the password field is redacted');
  t.equal(auth?.changes.username, 'audited-user');
  t.match(events.find((e: any) => e.operation === 'patchIdentity'), { action: 'update', entityId: id, changes: { roleAttributes: ['sensors', 'floor-2'] } });

  // The JSON-lines file.
  const dir = path.join(srv.dataDir, 'audit');
  const file = await until('the audit file', () => fs.readdirSync(dir).find((f) => /^audit-\d{4}-\d{2}-\d{2}\.jsonl$/.test(f)));
  const text = fs.readFileSync(path.join(dir, file), 'utf8');
  const lines = text.trim().split('\n').map((l) => JSON.parse(l));
  t.ok(lines.some((e) => e.operation === 'createIdentity' && e.entityId === id), 'the file holds the events');
  t.equal(lines.length, events.length, 'the same events as the webhook');
  t.notMatch(text, devicePassword, 'no password in the file');
  t.equal(fs.statSync(path.join(dir, file)).mode & 0o777, 0o600, 'the file is readable by its owner only');

  // The search index.
  const found = await until('the mesh.audit index', async () => {
    const r = await srv.raw('POST', '/search/mesh.audit*/_search', Buffer.from(JSON.stringify({ query: { term: { 'entityId.keyword': id } }, size: 10 })), { 'zt-session': admin.token!, 'content-type': 'application/json' });
    return r.body?.hits?.hits?.length >= 3 ? r : undefined;
  });
  t.equal(found.status, 200);
  t.same(new Set(found.body.hits.hits.map((h: any) => h._source.operation)), new Set(['createIdentity', 'patchIdentity', 'deleteIdentity']), 'searchable by entity');
  t.equal(found.body.hits.hits[0]._index, 'mesh.audit');

  const m = (await srv.raw('GET', '/metrics')).text;
  t.match(m, /^mesh_audit_events_total \d+/m);
  t.match(m, new RegExp(`^mesh_audit_webhook_sent_total ${events.length}$`, 'm'), 'every event delivered');
});

t.test('an unreachable webhook: events dropped after their tries, and counted', async (t) => {
  // A port nothing listens on: bind one, note it, close it.
  const probe = http.createServer();
  await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
  const port = (probe.address() as AddressInfo).port;
  await new Promise<void>((r) => probe.close(() => r()));
  const srv = await startServer(t, {
    env: { MESH_AUDIT_WEBHOOK_URL: `http://127.0.0.1:${port}/`, MESH_AUDIT_WEBHOOK_ATTEMPTS: '2', MESH_AUDIT_WEBHOOK_RETRY_MS: '10', MESH_AUDIT_WEBHOOK_QUEUE: '2' },
  });
  const admin = await srv.login();
  for (let i = 0; i < 5; i++) t.equal((await admin.post('/services', { name: `dropped-${i}`, encryptionRequired: true })).status, 201);
  const dropped = await until('dropped events in /metrics', async () => {
    const text = (await srv.raw('GET', '/metrics')).text;
    const n = [...text.matchAll(/^mesh_audit_webhook_dropped_total\{reason="(\w+)"\} (\d+)/gm)].reduce((s, m) => s + Number(m[2]), 0);
    return n >= 6 ? n : undefined;
  });
  t.equal(dropped, 6, 'login and five creates: every event dropped, none lost silently');
  t.equal(fs.readFileSync(path.join(srv.dataDir, 'audit', fs.readdirSync(path.join(srv.dataDir, 'audit'))[0]), 'utf8').trim().split('\n').length, 6, 'the file still has every event');
});
