/**
 * Identity lists are spliced from kept JSON (src/resources/render-cache.ts). Every change that
 * alters an identity's rendering must show in the next list: its own fields, its authenticators,
 * enrollments and API sessions, a renamed auth policy or CA, a temporary disable, and the detail
 * view must always agree with the list entry.
 */
import t from 'tap';
import { startServer, type Client, type Server } from './helpers/server.js';
import { created, type Tap } from './helpers/assert.js';

let srv: Server;
let admin: Client;

t.before(async () => {
  srv = await startServer(t);
  admin = await srv.login();
});

/** The list entry of identity `id` (by name filter), after checking it equals the detail. */
async function entry(t: Tap, id: string, name: string) {
  const l = await admin.get(`/identities?filter=${encodeURIComponent(`name="${name}"`)}`);
  t.equal(l.status, 200);
  t.match(l.headers['content-type'], /^application\/json/);
  t.equal(l.body.data.length, 1, 'one entry');
  const d = await admin.get(`/identities/${id}`);
  t.same(l.body.data[0], d.body.data, 'list entry equals the detail view');
  t.same(Object.keys(l.body.meta), ['pagination', 'filterableFields'], 'meta shape');
  return l.body.data[0];
}

t.test('list entries follow every change they depend on', async (t) => {
  const id = created(t, await admin.post('/identities', { name: 'rc-1', type: 'User', isAdmin: false, roleAttributes: ['a'] }), 'identities');
  let e = await entry(t, id, 'rc-1');
  t.same(e.roleAttributes, ['a']);
  t.same(e.authenticators, {});
  t.same(e.enrollment, {});
  t.equal(e.hasApiSession, false);

  // Own fields (listed twice first, so the second list is served from the kept JSON).
  await entry(t, id, 'rc-1');
  t.equal((await admin.patch(`/identities/${id}`, { roleAttributes: ['b'], tags: { k: 'v' } })).status, 200);
  e = await entry(t, id, 'rc-1');
  t.same(e.roleAttributes, ['b'], 'patched attributes listed');
  t.same(e.tags, { k: 'v' });

  // An enrollment created, then an authenticator: both appear; the login makes hasApiSession true.
  const enr = created(t, await admin.post('/enrollments', { identityId: id, method: 'ott', expiresAt: new Date(Date.now() + 3_600_000).toISOString() }), 'enrollments');
  e = await entry(t, id, 'rc-1');
  t.equal(e.enrollment.ott?.id, enr, 'new enrollment listed');
  t.equal((await admin.delete(`/enrollments/${enr}`)).status, 200);
  e = await entry(t, id, 'rc-1');
  t.same(e.enrollment, {}, 'deleted enrollment gone');
  const auth = created(t, await admin.post('/authenticators', { identityId: id, method: 'updb', username: 'rc-user', password: 'rc-password-1' }), 'authenticators');
  e = await entry(t, id, 'rc-1');
  t.same(e.authenticators.updb, { id: auth, username: 'rc-user' }, 'authenticator listed');
  const user = await srv.login('rc-user', 'rc-password-1', 'client');
  e = await entry(t, id, 'rc-1');
  t.equal(e.hasApiSession, true, 'API session listed');
  t.equal((await user.delete('/current-api-session')).status, 200);
  e = await entry(t, id, 'rc-1');
  t.equal(e.hasApiSession, false, 'ended API session listed');

  // A renamed auth policy shows in every identity's authPolicy ref.
  const pol = created(t, await admin.post('/auth-policies', {
    name: 'rc-policy',
    primary: { cert: { allowed: true, allowExpiredCerts: false }, extJwt: { allowed: false, allowedSigners: [] }, updb: { allowed: true, lockoutDurationMinutes: 0, maxAttempts: 5, minPasswordLength: 5, requireMixedCase: false, requireNumberChar: false, requireSpecialChar: false } },
    secondary: { requireTotp: false },
  }), 'auth-policies');
  t.equal((await admin.patch(`/identities/${id}`, { authPolicyId: pol })).status, 200);
  e = await entry(t, id, 'rc-1');
  t.equal(e.authPolicy.name, 'rc-policy');
  t.equal((await admin.patch(`/auth-policies/${pol}`, { name: 'rc-policy-renamed' })).status, 200);
  e = await entry(t, id, 'rc-1');
  t.equal(e.authPolicy.name, 'rc-policy-renamed', 'renamed policy listed');

  // A temporary disable is listed, and so is the enable.
  t.equal((await admin.post(`/identities/${id}/disable`, { durationMinutes: 30 })).status, 200);
  e = await entry(t, id, 'rc-1');
  t.equal(e.disabled, true, 'disabled listed');
  t.type(e.disabledUntil, 'string');
  t.equal((await admin.post(`/identities/${id}/enable`)).status, 200);
  e = await entry(t, id, 'rc-1');
  t.equal(e.disabled, false, 'enabled listed');

  // Rename and delete.
  t.equal((await admin.patch(`/identities/${id}`, { name: 'rc-2' })).status, 200);
  await entry(t, id, 'rc-2');
  t.equal((await admin.delete(`/identities/${id}`)).status, 200);
  const gone = await admin.get(`/identities?filter=${encodeURIComponent('name="rc-2"')}`);
  t.equal(gone.body.data.length, 0, 'deleted identity not listed');
});

t.test('a page of many entries is valid JSON with the usual envelope', async (t) => {
  for (let i = 0; i < 30; i++) created(t, await admin.post('/identities', { name: `rc-page-${String(i).padStart(2, '0')}`, type: 'User', isAdmin: false }), 'identities');
  for (let round = 0; round < 2; round++) {
    const l = await admin.get(`/identities?filter=${encodeURIComponent('name contains "rc-page-"')}&sort=name asc&limit=25&offset=2`);
    t.equal(l.status, 200);
    t.equal(l.body.data.length, 25);
    t.equal(l.body.data[0].name, 'rc-page-02');
    t.same(l.body.meta.pagination, { limit: 25, offset: 2, totalCount: 30 });
  }
});
