/**
 * `mesh import` (src/cli/import.ts): identities imported from a JSON-lines file into a stopped
 * controller's data directory read back, enroll and are selected by policies as identities the
 * Management API created from the same bodies; a bad line stops the import there, naming it, with
 * everything before it imported, and the import goes on from that line.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { startServer } from './helpers/server.js';
import { runMesh } from './helpers/cli.js';
import { freePort } from './helpers/ports.js';
import { newCsr } from './helpers/pki.js';

const tmp = (prefix: string) => fs.mkdtempSync(path.join(os.tmpdir(), prefix));

const body = (i: number) => ({
  name: `device-${String(i).padStart(2, '0')}`,
  type: 'Default',
  isAdmin: false,
  roleAttributes: i % 2 ? ['plant-1', 'sensor', 'sensor'] : ['plant-2'],
  enrollment: { ott: true },
  ...(i === 3 ? { externalId: 'ext-3', appData: { rack: 7 } } : {}),
});

/** A record with what differs between two creates of one body replaced by its kind. */
function normalize(rec: any): any {
  const walk = (v: any, key?: string): any => {
    if (key === 'createdAt' || key === 'updatedAt' || key === 'expiresAt') return 'date';
    if (key === 'jwt' || key === 'token' || key === 'id') return 'id';
    if (typeof v === 'string') return v.replace(/\/identities\/[^/]+/, '/identities/ID');
    if (Array.isArray(v)) return v.map((x) => walk(x));
    if (v && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x, k)]));
    return v;
  };
  return walk({ ...rec, name: 'NAME' });
}

t.test('imported identities are API-created identities', async (t) => {
  const home = tmp('mesh-import-home-');
  const dataDir = tmp('mesh-import-');
  t.teardown(() => {
    fs.rmSync(home, { recursive: true, force: true });
    fs.rmSync(dataDir, { recursive: true, force: true });
  });
  // Fixed ports: the enrollment JWTs name the certificate listener the controller will have.
  const env = { MESH_ADDRESS: `127.0.0.1:${await freePort()}`, MESH_CERT_ADDRESS: `127.0.0.1:${await freePort()}` };
  const first = await startServer(undefined, { dataDir, env, keepData: true });
  const fleet = path.join(home, 'fleet.jsonl');
  fs.writeFileSync(fleet, Array.from({ length: 30 }, (_, i) => JSON.stringify(body(i))).join('\n') + '\n\n');
  const mesh = (args: string[]) => runMesh(home, args, env);

  const busy = await mesh(['import', '--data-dir', dataDir, fleet]);
  t.equal(busy.code, 1, 'refused while the controller runs');
  t.match(busy.stderr, /is running on .*stop it before importing/);
  await first.stop();

  // Groups of 7: several groups committing at once, a group ending mid-file.
  const r = await mesh(['import', '--data-dir', dataDir, fleet, '--batch', '7']);
  t.equal(r.code, 0, `import → exit 0 (${r.stderr})`);
  t.match(r.stdout, /^imported 30 identities from /);

  // A bad line stops the import there; the lines before it are imported; --from-line goes on.
  const more = path.join(home, 'more.jsonl');
  fs.writeFileSync(more, [{ ...body(40) }, { ...body(41), name: 'device-05' }, { ...body(42) }].map((b) => JSON.stringify(b)).join('\n'));
  const dup = await mesh(['import', '--data-dir', dataDir, more, '--batch', '10']);
  t.equal(dup.code, 1, 'a duplicate name fails the import');
  t.match(dup.stderr, /more\.jsonl line 2: COULD_NOT_VALIDATE: duplicate value 'device-05' in unique index on identities store \(field name\)\n1 identities before it are imported; fix the line and go on with --from-line 2/);
  fs.writeFileSync(more, [{ ...body(40) }, { ...body(41) }, { ...body(42) }].map((b) => JSON.stringify(b)).join('\n'));
  const resumed = await mesh(['import', '--data-dir', dataDir, more, '--from-line', '2']);
  t.equal(resumed.code, 0, `resumed from line 2 (${resumed.stderr})`);
  t.match(resumed.stdout, /^imported 2 identities/);
  const bad = path.join(home, 'bad.jsonl');
  fs.writeFileSync(bad, `${JSON.stringify(body(50))}\n{"name": "x", "type": "Default"}\n{oops\n`);
  const invalid = await mesh(['import', '--data-dir', dataDir, bad]);
  t.equal(invalid.code, 1);
  t.match(invalid.stderr, /bad\.jsonl line 2: COULD_NOT_VALIDATE: .*isAdmin/, 'a body the API refuses is refused with its reason');
  const notJson = await mesh(['import', '--data-dir', dataDir, bad, '--from-line', '3']);
  t.match(notJson.stderr, /bad\.jsonl line 3: not JSON/);
  t.match(notJson.stderr, /0 identities before it are imported/);

  const srv = await startServer(t, { dataDir, env });
  const admin = await srv.login();
  const list = await admin.get('/identities?limit=500&filter=' + encodeURIComponent('name contains "device-"'));
  t.equal(list.body.meta.pagination.totalCount, 34, 'every imported identity is listed (30 + 1 + 2 + 1)');

  // Read back as the API created the same body.
  const imported = list.body.data.find((x: any) => x.name === 'device-03');
  const viaApi = await admin.post('/identities', { ...body(3), name: 'api-03', externalId: 'ext-api-3' });
  t.equal(viaApi.status, 201);
  const detail = async (id: string) => (await admin.get(`/identities/${id}`)).body.data;
  const [a, b] = [await detail(imported.id), await detail(viaApi.body.data.id)];
  t.same(normalize({ ...a, externalId: 'X' }), normalize({ ...b, externalId: 'X' }), 'detail of an imported identity = of an API-created one');
  t.same(a.roleAttributes, ['plant-1', 'sensor'], 'role attributes stored as the API stores them');
  const claims = JSON.parse(Buffer.from(a.enrollment.ott.jwt.split('.')[1], 'base64url').toString());
  t.same({ sub: claims.sub, jti: claims.jti, iss: claims.iss }, { sub: a.id, jti: a.enrollment.ott.token, iss: srv.certOrigin }, 'the ott JWT names the identity and the certificate listener');

  // Unique indexes hold imported values.
  const sameName = await admin.post('/identities', { ...body(7) });
  t.equal(sameName.status, 400, 'an imported name is taken');
  const sameExt = await admin.post('/identities', { ...body(99), externalId: 'ext-3' });
  t.equal(sameExt.status, 400, 'an imported externalId is taken');

  // Role attributes feed the role index: a policy on #plant-1 selects the imported identities.
  const attrs = (await admin.get('/identity-role-attributes?limit=500')).body.data;
  t.ok(attrs.includes('plant-1') && attrs.includes('sensor'), 'imported role attributes are in use');
  const svc = await admin.post('/services', { name: 'telemetry', encryptionRequired: true });
  const pol = await admin.post('/service-policies', { name: 'plant-1-dial', type: 'Dial', semantic: 'AnyOf', identityRoles: ['#plant-1'], serviceRoles: [`@${svc.body.data.id}`] });
  t.equal(pol.status, 201);
  const selected = (await admin.get(`/service-policies/${pol.body.data.id}/identities?limit=500`)).body.data.map((x: any) => x.name).sort();
  const expected = [...list.body.data.filter((x: any) => x.roleAttributes.includes('plant-1')).map((x: any) => x.name), 'api-03'].sort();
  t.same(selected, expected, 'the policy selects exactly the identities carrying #plant-1');
  t.equal(selected.length, 16 + 1, 'the odd devices of the first file, device-41, api-03');

  // The ott enrollment enrolls: a certificate comes back and the enrollment is consumed.
  const enrolled = await srv.client.post('/enroll/ott', { token: a.enrollment.ott.token, clientCsr: newCsr('device-03').csr });
  t.equal(enrolled.status, 200, `enroll with an imported token → 200 (${enrolled.text.slice(0, 200)})`);
  const after = await detail(imported.id);
  t.same(after.enrollment, {}, 'enrollment consumed');
  t.ok(after.authenticators.cert?.fingerprint, 'a certificate authenticator replaces it');
});
