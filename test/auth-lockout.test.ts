/**
 * Password lockout (auth policy `maxAttempts` / `lockoutDurationMinutes`) and identity
 * disable/enable against the real controller, including a restart in the middle (both the lock
 * and the failure count are persisted) and the automatic re-enable once `disabledUntil` passes
 * (durations are whole minutes: this controller's are `MINUTE_MS` long, `MESH_MINUTE_MS`, and the
 * file waits about one for it).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { startServer, isError, type Client, type Server } from './helpers/server.js';
import { emptyOk, sleep } from './helpers/assert.js';
import { createUser } from './helpers/users.js';

const root = t;
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-lockout-'));
t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));

/** Long enough for the locks to outlast the restart below on a loaded machine. */
const MINUTE_MS = 40_000;
const env = { MESH_MINUTE_MS: String(MINUTE_MS) };
let srv: Server = await startServer(t, { dataDir, keepData: true, env });
let admin: Client = await srv.login();
const login = (username: string, password: string) => srv.client.post('/authenticate?method=password', { username, password });
const identity = async (id: string) => (await admin.get(`/identities/${id}`)).body.data;
const withToken = (token: string) => new (srv.client.constructor as any)(srv, '/edge/client/v1', token) as Client;

const pol = await admin.post('/auth-policies', {
  name: 'three-strikes',
  primary: {
    cert: { allowed: true, allowExpiredCerts: true },
    extJwt: { allowed: true, allowedSigners: [] },
    updb: { allowed: true, minPasswordLength: 5, maxAttempts: 3, lockoutDurationMinutes: 1, requireMixedCase: false, requireNumberChar: false, requireSpecialChar: false },
  },
  secondary: { requireTotp: false },
});
const policyId = pol.body.data.id as string;

/** When the one-minute locks taken below end: the last test waits for it. */
let unlockAt = 0;
const ids: Record<string, string> = {};

t.test('three wrong passwords lock the identity out, and end its sessions', async (t) => {
  ids.locked = await createUser(admin, 'lock-a', 'right-password', { authPolicyId: policyId });
  const before = await login('lock-a', 'right-password');
  t.equal(before.status, 200, 'logs in');
  const s = withToken(before.body.data.token);
  for (let i = 1; i <= 3; i++) {
    const r = await login('lock-a', 'wrong-password');
    t.ok(isError(r, 401, 'INVALID_AUTH'), `wrong password ${i} → 401`);
  }
  const d = await identity(ids.locked);
  t.equal(d.disabled, true, 'identity disabled');
  t.type(d.disabledAt, 'string', 'disabledAt');
  const span = Date.parse(d.disabledUntil) - Date.parse(d.disabledAt);
  t.equal(span, MINUTE_MS, 'disabledUntil = disabledAt + lockoutDurationMinutes');
  unlockAt = Date.parse(d.disabledUntil);
  t.ok(isError(await login('lock-a', 'right-password'), 401, 'INVALID_AUTH'), 'the right password while locked → 401');
  t.ok(isError(await s.get('/current-api-session'), 401, 'UNAUTHORIZED'), 'the earlier session ended');
  const sessions = await admin.get(`/api-sessions?filter=identity="${ids.locked}"`);
  t.equal(sessions.body.meta.pagination.totalCount, 0, 'no API session left');
});

t.test('right passwords never lock; a success resets the count', async (t) => {
  ids.good = await createUser(admin, 'lock-b', 'right-password', { authPolicyId: policyId });
  for (let i = 1; i <= 4; i++) t.equal((await login('lock-b', 'right-password')).status, 200, `right password ${i} → 200`);
  t.equal((await identity(ids.good)).disabled, false, 'never disabled');

  ids.reset = await createUser(admin, 'lock-c', 'right-password', { authPolicyId: policyId });
  t.equal((await login('lock-c', 'wrong-password')).status, 401);
  t.equal((await login('lock-c', 'wrong-password')).status, 401);
  t.equal((await login('lock-c', 'right-password')).status, 200, 'success in between');
  t.equal((await login('lock-c', 'wrong-password')).status, 401);
  t.equal((await login('lock-c', 'wrong-password')).status, 401);
  t.equal((await identity(ids.reset)).disabled, false, 'count was reset: not disabled');
  t.equal((await login('lock-c', 'right-password')).status, 200, 'still logs in');

  ids.unlimited = await createUser(admin, 'lock-d', 'right-password');
  for (let i = 0; i < 8; i++) await login('lock-d', 'wrong-password');
  t.equal((await identity(ids.unlimited)).disabled, false, 'default policy (maxAttempts 0) never locks');
  t.equal((await login('lock-d', 'right-password')).status, 200);

  // Two strikes now, the third after the restart below.
  ids.persisted = await createUser(admin, 'lock-e', 'right-password', { authPolicyId: policyId });
  t.equal((await login('lock-e', 'wrong-password')).status, 401);
  t.equal((await login('lock-e', 'wrong-password')).status, 401);
});

t.test('disable and enable', async (t) => {
  ids.dis = await createUser(admin, 'dis-a', 'right-password');
  const s = withToken((await login('dis-a', 'right-password')).body.data.token);
  t.equal((await s.get('/current-api-session')).status, 200);

  t.ok(isError(await admin.post(`/identities/${ids.dis}/disable`, {}), 400, 'COULD_NOT_VALIDATE'), 'durationMinutes missing → 400');
  t.ok(isError(await admin.post(`/identities/${ids.dis}/disable`, { durationMinutes: -1 }), 400, 'COULD_NOT_VALIDATE'), 'negative → 400');
  t.ok(isError(await admin.post(`/identities/${ids.dis}/disable`, { durationMinutes: 'ten' }), 400, 'COULD_NOT_VALIDATE'), 'not a number → 400');
  t.ok(isError(await admin.post(`/identities/${ids.dis}/disable`, { durationMinutes: 1.5 }), 400, 'COULD_NOT_VALIDATE'), 'fraction → 400');
  t.ok(isError(await admin.post('/identities/no-such-identity/disable', { durationMinutes: 0 }), 404, 'NOT_FOUND'), 'unknown identity → 404');
  t.ok(isError(await admin.post('/identities/no-such-identity/enable'), 404, 'NOT_FOUND'), 'enable unknown identity → 404');

  emptyOk(t, await admin.post(`/identities/${ids.dis}/disable`, { durationMinutes: 0 }), 'disable indefinitely');
  const d = await identity(ids.dis);
  t.equal(d.disabled, true, 'disabled');
  t.type(d.disabledAt, 'string', 'disabledAt set');
  t.equal(d.disabledUntil, null, 'disabledUntil null: indefinitely');
  t.ok(isError(await s.get('/current-api-session'), 401, 'UNAUTHORIZED'), 'existing session ended');
  t.ok(isError(await login('dis-a', 'right-password'), 401, 'INVALID_AUTH'), 'login refused');
  const filtered = await admin.get('/identities?filter=disabled = true');
  t.ok(filtered.body.data.some((x: any) => x.id === ids.dis), 'filter disabled = true finds it');

  emptyOk(t, await admin.post(`/identities/${ids.dis}/enable`), 'enable');
  const e = await identity(ids.dis);
  t.equal(e.disabled, false, 'enabled');
  t.equal(e.disabledAt, null, 'disabledAt cleared');
  t.equal(e.disabledUntil, null, 'disabledUntil cleared');
  t.equal((await login('dis-a', 'right-password')).status, 200, 'logs in again');

  // Timed disable: re-enabled automatically (checked after the restart, below).
  ids.timed = await createUser(admin, 'dis-b', 'right-password');
  emptyOk(t, await admin.post(`/identities/${ids.timed}/disable`, { durationMinutes: 1 }), 'disable for a minute');
  const tdis = await identity(ids.timed);
  t.equal(Date.parse(tdis.disabledUntil) - Date.parse(tdis.disabledAt), MINUTE_MS, 'disabledUntil = now + 1 min');
  unlockAt = Math.max(unlockAt, Date.parse(tdis.disabledUntil));
  t.ok(isError(await login('dis-b', 'right-password'), 401, 'INVALID_AUTH'), 'refused while disabled');

  // Identity managers who are not admins may not disable admins.
  await createUser(admin, 'dis-manager', 'right-password', { permissions: ['identity'] });
  await createUser(admin, 'dis-reader', 'right-password', { permissions: ['identity.read'] });
  const adminTarget = (await admin.post('/identities', { name: 'dis-admin-target', type: 'User', isAdmin: true })).body.data.id;
  const manager = await srv.login('dis-manager', 'right-password');
  const reader = await srv.login('dis-reader', 'right-password');
  t.ok(isError(await manager.post(`/identities/${adminTarget}/disable`, { durationMinutes: 0 }), 401, 'UNAUTHORIZED'), 'manager cannot disable an admin');
  t.ok(isError(await reader.post(`/identities/${ids.dis}/disable`, { durationMinutes: 0 }), 401, 'UNAUTHORIZED'), 'identity.read cannot disable');
  t.ok(isError(await reader.post('/identities/made-up/disable', { durationMinutes: 0 }), 401, 'UNAUTHORIZED'), 'permission decided before lookup');
  emptyOk(t, await manager.post(`/identities/${ids.dis}/disable`, { durationMinutes: 0 }), 'manager disables a normal identity');
  emptyOk(t, await manager.post(`/identities/${ids.dis}/enable`), 'and enables it');
  t.equal((await identity(adminTarget)).disabled, false, 'admin untouched');
});

t.test('locks and counts survive a restart', async (t) => {
  await srv.stop();
  // Registered on the root test: this server must outlive this subtest.
  srv = await startServer(root, { dataDir, keepData: true, env });
  admin = await srv.login();
  const locked = await identity(ids.locked);
  t.comment(`restarted ${Date.parse(locked.disabledUntil) - Date.now()} ms before the first lock ends`);
  t.equal(locked.disabled, true, 'still locked after restart');
  t.ok(isError(await login('lock-a', 'right-password'), 401, 'INVALID_AUTH'), 'still refused after restart');
  t.ok(isError(await login('lock-e', 'wrong-password'), 401, 'INVALID_AUTH'), 'third wrong password after restart');
  t.equal((await identity(ids.persisted)).disabled, true, 'the count survived: third strike locks');
  t.ok(isError(await login('dis-b', 'right-password'), 401, 'INVALID_AUTH'), 'timed disable still in force');
});

t.test('re-enabled automatically once the duration passes', async (t) => {
  const wait = unlockAt - Date.now() + 1500;
  if (wait > 0) await sleep(wait);
  const a = await identity(ids.locked);
  t.equal(a.disabled, false, 'lockout over: disabled=false');
  t.equal((await login('lock-a', 'right-password')).status, 200, 'locked identity logs in again');
  t.equal((await identity(ids.timed)).disabled, false, 'timed disable over');
  t.equal((await login('dis-b', 'right-password')).status, 200, 'timed-disabled identity logs in again');
  // The lock reset the count: two more wrong passwords do not lock again.
  await login('lock-a', 'wrong-password');
  await login('lock-a', 'wrong-password');
  t.equal((await identity(ids.locked)).disabled, false, 'count restarted from zero');
});
