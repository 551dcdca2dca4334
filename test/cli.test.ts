/**
 * The `mesh` command end to end: the real CLI (dist/src/cli/main.js) spawned against a real
 * controller on port 0, with its state in a temporary XDG_CONFIG_HOME. Log in (trusting the CA
 * after its fingerprint), create an identity with its enrollment JWT, enroll it into an identity
 * file, log in with that certificate on the certificate listener; list/get/update/delete through
 * the spec-driven family commands; snapshot; then offline: back up, wipe, restore, reset the
 * admin password, and the restored controller still accepts the enrolled device's certificate.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { ADMIN_PASSWORD, startServer, type Server } from './helpers/server.js';
import { runMesh } from './helpers/cli.js';

const mesh = runMesh;

const tmp = (prefix: string) => fs.mkdtempSync(path.join(os.tmpdir(), prefix));

t.test('help, usage errors and exit codes', async (t) => {
  const xdg = tmp('mesh-cli-');
  t.teardown(() => fs.rmSync(xdg, { recursive: true, force: true }));
  const help = await mesh(xdg, ['--help']);
  t.equal(help.code, 0);
  t.match(help.stdout, /Usage: mesh COMMAND/);
  for (const cmd of ['login', 'list', 'get', 'create', 'update', 'delete', 'enroll', 'snapshot', 'backup', 'restore', 'status', 'admin', 'whoami']) {
    const r = await mesh(xdg, [cmd, '--help']);
    t.equal(r.code, 0, `mesh ${cmd} --help exits 0`);
    t.match(r.stdout, new RegExp(`mesh ${cmd}`), `mesh ${cmd} --help describes it`);
  }
  const props = await mesh(xdg, ['create', 'identity', '--help']);
  t.match(props.stdout, /--type\s+string.*required/, 'create options come from the spec body');
  t.match(props.stdout, /--role-attributes\s+array/);
  const bad: [string[], RegExp][] = [
    [['frobnicate'], /unknown command "frobnicate"/],
    [['list', 'gizmos'], /unknown family "gizmos"/],
    [['list'], /which family/],
    [['create', 'identity', 'x', '--colour', 'blue'], /Unknown option '--colour'/],
    [['backup'], /--data-dir DIR is required/],
    [['enroll', 'nope.jwt'], /--out IDENTITY.json is required/],
    [['login'], /URL is missing/],
    [['admin', 'reset-password', '--data-dir', xdg], /--username U is required/],
  ];
  for (const [args, msg] of bad) {
    const r = await mesh(xdg, args);
    t.equal(r.code, 2, `mesh ${args.join(' ')} → exit 2`);
    t.match(r.stderr, msg, `mesh ${args.join(' ')}: ${r.stderr.split('\n')[0]}`);
    t.notMatch(r.stderr, /\n\s+at /, 'no stack trace');
  }
  const noSession = await mesh(xdg, ['list', 'identities']);
  t.equal(noSession.code, 1);
  t.match(noSession.stderr, /not logged in: run `mesh login <url>` first/);
});

t.test('login, create, enroll, certificate login, families, snapshot, backup, wipe, restore', async (t) => {
  const xdg = tmp('mesh-cli-');
  const deviceXdg = tmp('mesh-cli-device-');
  const work = tmp('mesh-cli-work-');
  const dataDir = tmp('mesh-cli-data-');
  t.teardown(() => {
    for (const d of [xdg, deviceXdg, work, dataDir]) fs.rmSync(d, { recursive: true, force: true });
  });
  let srv: Server = await startServer(undefined, { dataDir, keepData: true });
  t.teardown(() => srv.stop());

  const login = await mesh(xdg, ['login', srv.origin, '-u', 'admin', '-p', ADMIN_PASSWORD, '-y']);
  t.equal(login.code, 0, `login: ${login.stderr}`);
  const rootPem = fs.readFileSync(path.join(dataDir, 'pki', 'ca-bundle.pem'), 'utf8').match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/)![0];
  t.match(login.stderr, new crypto.X509Certificate(rootPem).fingerprint256, 'the CA fingerprint is shown before it is trusted');
  t.match(login.stdout, /logged in to https:\/\/127\.0\.0\.1:\d+ as Default Admin/);
  const sessionFile = path.join(xdg, 'mesh', 'session.json');
  t.ok(fs.existsSync(sessionFile), 'state under $XDG_CONFIG_HOME/mesh');
  t.equal(fs.statSync(sessionFile).mode & 0o777, 0o600, 'the session file is private');
  const wrong = await mesh(xdg + '-wrong', ['login', srv.origin, '-u', 'admin', '-p', 'not-the-password', '-y']);
  t.equal(wrong.code, 1, 'a wrong password fails');
  t.match(wrong.stderr, /401 INVALID_AUTH/);

  const jwtFile = path.join(work, 'sensor-1.jwt');
  const created = await mesh(xdg, ['create', 'identity', 'sensor-1', '--type', 'Device', '--role-attributes', 'sensors,floor-2', '--jwt-out', jwtFile]);
  t.equal(created.code, 0, `create: ${created.stderr}`);
  t.match(created.stdout, /created identity \S+; enrollment JWT written to/);
  t.match(fs.readFileSync(jwtFile, 'utf8'), /^ey[\w-]+\.[\w-]+\.[\w-]+\n$/, 'the JWT file');

  const listed = await mesh(xdg, ['list', 'identities', 'name = "sensor-1"', '--json']);
  t.equal(listed.code, 0, listed.stderr);
  const rows = JSON.parse(listed.stdout);
  t.ok(Array.isArray(rows), '--json prints the data array');
  t.equal(rows.length, 1);
  t.same([...rows[0].roleAttributes].sort(), ['floor-2', 'sensors'], 'array options split on commas');
  const id = rows[0].id;
  const table = await mesh(xdg, ['list', 'identities']);
  t.match(table.stdout, /^id\s+/, 'a table with a header');
  t.match(table.stdout, /sensor-1/);
  t.match(table.stdout, /\d+ of \d+ identities/);
  t.equal((await mesh(xdg, ['update', 'identity', 'sensor-1', '--role-attributes', 'sensors'])).code, 0, 'update by name');
  const got = await mesh(xdg, ['get', 'identity', id, '--json']);
  t.same(JSON.parse(got.stdout).roleAttributes, ['sensors'], 'the update applied');
  const badFilter = await mesh(xdg, ['list', 'identities', 'name ==== 1']);
  t.equal(badFilter.code, 1, 'a bad filter fails');
  t.match(badFilter.stderr, /400/, 'with the controller\'s message');

  // Other families through the same commands.
  t.equal((await mesh(xdg, ['create', 'service', 'cli-svc', '--encryption-required'])).code, 0);
  const svc = JSON.parse((await mesh(xdg, ['get', 'service', 'cli-svc', '--json'])).stdout);
  t.equal(svc.encryptionRequired, true, 'boolean options');
  t.equal((await mesh(xdg, ['create', 'service-policy', 'cli-dial', '--type', 'Dial', '--semantic', 'AnyOf', '--service-roles', `@${svc.id}`, '--identity-roles', '#sensors'])).code, 0);
  t.equal(JSON.parse((await mesh(xdg, ['list', 'service-policies', '--json'])).stdout).length, 1);
  t.equal((await mesh(xdg, ['delete', 'service-policy', 'cli-dial'])).code, 0);
  t.equal(JSON.parse((await mesh(xdg, ['list', 'service-policies', '--json'])).stdout).length, 0, 'deleted');
  // Role fields as people type them: @name is looked up and sent as @id; lists as JSON or commas.
  const byName = await mesh(xdg, ['create', 'service-policy', 'cli-named', '--type', 'Dial', '--semantic', 'AnyOf', '--service-roles', '@cli-svc', '--identity-roles', '["#sensors","@sensor-1"]']);
  t.equal(byName.code, 0, `@name in role fields: ${byName.stderr}`);
  const named = JSON.parse((await mesh(xdg, ['get', 'service-policy', 'cli-named', '--json'])).stdout);
  t.same(named.serviceRoles, [`@${svc.id}`], '@name became @id');
  t.same([...named.identityRoles].sort(), ['#sensors', `@${id}`].sort(), 'a JSON array, its @name resolved');
  t.equal((await mesh(xdg, ['update', 'service-policy', 'cli-named', '--service-roles', `@${svc.id},#other`])).code, 0, 'an existing id stays');
  t.same(JSON.parse((await mesh(xdg, ['get', 'service-policy', 'cli-named', '--json'])).stdout).serviceRoles.sort(), ['#other', `@${svc.id}`].sort());
  const unknown = await mesh(xdg, ['update', 'service-policy', 'cli-named', '--service-roles', '@no-such-service']);
  t.equal(unknown.code, 1, 'an unknown name fails');
  t.match(unknown.stderr, /--service-roles: no service has the name or id "no-such-service"/);
  t.equal((await mesh(xdg, ['update', 'identity', 'sensor-1', '--role-attributes', '["laptops","x"]'])).code, 0);
  t.same(JSON.parse((await mesh(xdg, ['get', 'identity', id, '--json'])).stdout).roleAttributes.sort(), ['laptops', 'x'], 'a JSON array option');
  const badList = await mesh(xdg, ['update', 'identity', 'sensor-1', '--role-attributes', '["laptops",']);
  t.equal(badList.code, 2, 'a broken JSON array is a usage error');
  t.match(badList.stderr, /--role-attributes: .* not one/);
  t.equal((await mesh(xdg, ['update', 'identity', 'sensor-1', '--role-attributes', 'sensors'])).code, 0);
  t.equal((await mesh(xdg, ['delete', 'service-policy', 'cli-named'])).code, 0);
  const missing = await mesh(xdg, ['get', 'service', 'no-such-service']);
  t.equal(missing.code, 1);
  t.match(missing.stderr, /404 NOT_FOUND/);

  // Enroll the device, then log in with its certificate on the certificate listener.
  const idFile = path.join(work, 'sensor-1.json');
  const enrolled = await mesh(deviceXdg, ['enroll', jwtFile, '--out', idFile]);
  t.equal(enrolled.code, 0, `enroll: ${enrolled.stderr}`);
  const identity = JSON.parse(fs.readFileSync(idFile, 'utf8'));
  t.match(identity, { ztAPI: srv.certOrigin.replace('127.0.0.1', identity.ztAPI.includes('localhost') ? 'localhost' : '127.0.0.1'), id: { key: /^pem:-----BEGIN PRIVATE KEY-----/, cert: /^pem:-----BEGIN CERTIFICATE-----/, ca: /^pem:-----BEGIN CERTIFICATE-----/ } });
  t.equal(fs.statSync(idFile).mode & 0o777, 0o600, 'the identity file (with its key) is private');
  const again = await mesh(deviceXdg, ['enroll', jwtFile, '--out', path.join(work, 'again.json')]);
  t.equal(again.code, 1, 'a used token cannot enroll twice');
  const certLogin = await mesh(deviceXdg, ['login', '--identity', idFile, srv.certOrigin]);
  t.equal(certLogin.code, 0, `certificate login: ${certLogin.stderr}`);
  t.match(certLogin.stdout, /as sensor-1 .* with the certificate/);
  const who = await mesh(deviceXdg, ['whoami']);
  t.match(who.stdout, /^sensor-1 \(/, 'the device session works');

  // Snapshot through the API, checked by mesh restore --check.
  const snap = await mesh(xdg, ['snapshot']);
  t.equal(snap.code, 0, snap.stderr);
  const snapName = /snapshot (mesh-backup-\S+\.tar\.gz)/.exec(snap.stdout)?.[1];
  t.ok(snapName, `the snapshot is named: ${snap.stdout}`);
  // Kept outside the data directory, which is wiped below.
  const snapFile = path.join(work, snapName!);
  fs.copyFileSync(path.join(dataDir, 'snapshots', snapName!), snapFile);
  const checked = await mesh(xdg, ['restore', '--check', snapFile]);
  t.equal(checked.code, 0, checked.stderr);
  t.match(checked.stdout, /checksums match/);

  // Offline: refuse to restore or reset while the controller runs; back up; wipe; restore.
  const busy = await mesh(xdg, ['admin', 'reset-password', '--data-dir', dataDir, '--username', 'admin', '--password', 'whatever1']);
  t.equal(busy.code, 1);
  t.match(busy.stderr, /a controller \(pid \d+\) is running on .*; stop it before changing a password/);
  const backupFile = path.join(work, 'backup.tar.gz');
  const b = await mesh(xdg, ['backup', '--data-dir', dataDir, '--out', backupFile]);
  t.equal(b.code, 0, b.stderr);
  await srv.stop();

  // A damaged copy is refused and leaves the target untouched.
  const damaged = path.join(work, 'damaged.tar.gz');
  const bytes = fs.readFileSync(backupFile);
  bytes[Math.floor(bytes.length / 2)] ^= 0xff;
  fs.writeFileSync(damaged, bytes);
  const emptyDir = tmp('mesh-cli-empty-');
  t.teardown(() => fs.rmSync(emptyDir, { recursive: true, force: true }));
  const refused = await mesh(xdg, ['restore', '--data-dir', emptyDir, damaged]);
  t.equal(refused.code, 1, 'a damaged backup is refused');
  t.match(refused.stderr, /not a readable backup|checksum|damaged/);
  t.notOk(fs.existsSync(path.join(emptyDir, 'db')), 'nothing restored');

  fs.rmSync(dataDir, { recursive: true, force: true });
  const restored = await mesh(xdg, ['restore', '--data-dir', dataDir, backupFile]);
  t.equal(restored.code, 0, restored.stderr);
  const over = await mesh(xdg, ['restore', '--data-dir', dataDir, backupFile]);
  t.equal(over.code, 1, 'restoring over a datastore needs --replace');
  const reset = await mesh(xdg, ['admin', 'reset-password', '--data-dir', dataDir, '--username', 'admin', '--password', 'a-new-password-1']);
  t.equal(reset.code, 0, reset.stderr);
  const st = await mesh(xdg, ['status', '--data-dir', dataDir, '--json']);
  t.equal(st.code, 0, st.stderr);
  const info = JSON.parse(st.stdout);
  t.equal(info.running, false);
  t.ok(info.cas.length >= 1, 'the PKI came back');

  srv = await startServer(undefined, { dataDir, keepData: true });
  const relogin = await mesh(xdg, ['login', srv.origin, '-u', 'admin', '-p', 'a-new-password-1', '-y']);
  t.equal(relogin.code, 0, `the reset password works: ${relogin.stderr}`);
  t.equal(JSON.parse((await mesh(xdg, ['get', 'identity', 'sensor-1', '--json'])).stdout).id, id, 'the records came back');
  const deviceAgain = await mesh(deviceXdg, ['login', '--identity', idFile, srv.certOrigin]);
  t.equal(deviceAgain.code, 0, `the enrolled device still logs in after the restore: ${deviceAgain.stderr}`);
  t.match(deviceAgain.stdout, /as sensor-1/);
  await srv.stop();

  // The snapshot the API wrote restores into a working controller too (the password of its time).
  const fromSnapshot = tmp('mesh-cli-snapdata-');
  t.teardown(() => fs.rmSync(fromSnapshot, { recursive: true, force: true }));
  const r2 = await mesh(xdg, ['restore', '--data-dir', fromSnapshot, snapFile]);
  t.equal(r2.code, 0, r2.stderr);
  srv = await startServer(undefined, { dataDir: fromSnapshot, keepData: true });
  t.equal((await mesh(xdg, ['login', srv.origin, '-u', 'admin', '-p', ADMIN_PASSWORD, '-y'])).code, 0, 'log in to the controller restored from the snapshot');
  t.equal(JSON.parse((await mesh(xdg, ['get', 'identity', 'sensor-1', '--json'])).stdout).id, id, 'its records');
  const deviceSnap = await mesh(deviceXdg, ['login', '--identity', idFile, srv.certOrigin]);
  t.equal(deviceSnap.code, 0, `the device logs in there too: ${deviceSnap.stderr}`);
});
