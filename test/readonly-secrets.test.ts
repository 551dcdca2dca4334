/**
 * Read permissions never open a credential. For each read-only permission (`admin_readonly` and
 * every `family.read`), an identity holding only it walks every readable (GET) operation of both
 * APIs, taken from the operation table so new operations are walked too, with every id the admin
 * can list filled into the paths. Every string of every answer (bodies, headers, and the claims of
 * anything that decodes as a JWT) is collected, then each is tried: as `zt-session` on both APIs,
 * and as an enrollment token on the generic and every method-specific enroll endpoint. None may
 * authenticate anyone but the walker itself. The secrets are there to find: admins with pending
 * updb and ott enrollments, routers with pending enrollments, a standalone enrollment, logged-in
 * admins and a service session.
 */
import t from 'tap';
import { buildOperations } from '../src/api/operations.js';
import { BASE_PATHS } from '../src/api/router.js';
import { createRegistry } from '../src/resources/index.js';
import { PERMISSION_FAMILIES } from '../src/auth/permissions.js';
import { startServer, ADMIN_PASSWORD, type Client, type Server } from './helpers/server.js';
import { Fixture } from './helpers/policy-fixture.js';

const OPS = buildOperations(createRegistry()).filter((o) => o.method === 'get');
const READ_PERMISSIONS = ['admin_readonly', ...[...PERMISSION_FAMILIES, 'ops'].map((f) => `${f}.read`)];
const PASSWORDS = [ADMIN_PASSWORD, 'pw-for-tests-1', 'walker-password-1', 'pending-admin-password-1'];

let srv: Server;
let admin: Client;
/** Strings already tried (walkers read many of the same), with what they opened. */
const tried = new Map<string, string[]>();

/** Every string in a JSON value, and the claims of those that decode as JWTs. */
function collect(v: unknown, out: Set<string>) {
  if (typeof v === 'string') {
    if (out.has(v)) return;
    out.add(v);
    const parts = v.split('.');
    if (parts.length === 3 && parts[0].startsWith('eyJ')) {
      try {
        collect(JSON.parse(Buffer.from(parts[1], 'base64url').toString('utf8')), out);
      } catch {
        // not a JWT after all
      }
    }
    return;
  }
  if (Array.isArray(v)) for (const x of v) collect(x, out);
  else if (v && typeof v === 'object') for (const x of Object.values(v)) collect(x, out);
}

/** Ids to fill `{id}` with, per first path segment: what the admin's list of that segment holds. */
async function idPools(): Promise<Map<string, string[]>> {
  const pools = new Map<string, string[]>();
  for (const op of OPS) {
    const segs = op.path.split('/').filter(Boolean);
    if (segs.length !== 1 || segs[0].includes('{')) continue;
    const key = `${op.api}:${segs[0]}`;
    const c = op.api === 'management' ? admin : new (admin.constructor as typeof Client)(srv, BASE_PATHS[op.api], admin.token);
    const r = await c.get(`/${segs[0]}?limit=500`);
    if (Array.isArray(r.body?.data)) pools.set(key, r.body.data.map((x: { id: string }) => x.id).filter((x: unknown) => typeof x === 'string'));
  }
  return pools;
}

/** What `v` opens, as descriptions (none expected); remembered across walkers. */
async function tryString(v: string): Promise<string[]> {
  const known = tried.get(v);
  if (known) return known;
  const found: string[] = [];
  tried.set(v, found);
  if (PASSWORDS.includes(v) || v.includes('$argon2')) found.push(`password material: ${v}`);
  // A value a header cannot carry cannot be a session token.
  if (/^[\x21-\x7e]+$/.test(v)) {
    for (const api of ['/edge/management/v1', '/edge/client/v1']) {
      const r = await srv.raw('GET', `${api}/current-identity`, undefined, { 'zt-session': v });
      if (r.status !== 401) found.push(`zt-session on ${api}: ${v} → ${r.status}`);
    }
  }
  const json = { 'content-type': 'application/json', accept: 'application/json' };
  // The generic endpoint without a method takes a live token of any method; then each method.
  for (const q of ['', '&method=ott', '&method=ottca', '&method=updb', '&method=erott', '&method=trott']) {
    const r = await srv.raw('POST', `/edge/client/v1/enroll?token=${encodeURIComponent(v)}${q}`, Buffer.from('{}'), json);
    if (r.body?.error?.code !== 'INVALID_ENROLLMENT_TOKEN') found.push(`enrollment token (${q || 'any method'}): ${v} → ${r.status} ${r.body?.error?.code}`);
  }
  for (const path of ['/enroll/ott', '/enroll/ottca', '/enroll/updb', '/enroll/erott']) {
    const r = await srv.raw('POST', `/edge/client/v1${path}?token=${encodeURIComponent(v)}`, Buffer.from(JSON.stringify({ token: v })), json);
    if (r.body?.error?.code !== 'INVALID_ENROLLMENT_TOKEN') found.push(`enrollment token (${path}): ${v} → ${r.status} ${r.body?.error?.code}`);
  }
  return found;
}

t.before(async () => {
  srv = await startServer(t);
  admin = await srv.login();
  const f = new Fixture(srv, admin);
  // Admins who have not enrolled yet: their pending tokens would make the finder an admin.
  await f.mk('/identities', { name: 'pending-updb-admin', type: 'User', isAdmin: true, enrollment: { updb: 'pending-admin' } });
  await f.mk('/identities', { name: 'pending-ott-admin', type: 'User', isAdmin: true, enrollment: { ott: true } });
  const plain = await f.mk('/identities', { name: 'pending-plain', type: 'User', isAdmin: false });
  await f.mk('/enrollments', { method: 'ott', identityId: plain, expiresAt: new Date(Date.now() + 3_600_000).toISOString() });
  // A second logged-in admin, routers with pending enrollments, and a service session.
  const other = await f.mk('/identities', { name: 'second-admin', type: 'User', isAdmin: true });
  await f.mk('/authenticators', { identityId: other, method: 'updb', username: 'second-admin', password: 'pending-admin-password-1' });
  await srv.login('second-admin', 'pending-admin-password-1');
  await f.mk('/routers', { name: 'walk-transit' });
  await f.router('walk-edge', ['walk-r']);
  const u = await f.user('walk-user', ['walk-id']);
  const svc = await f.svc('walk-svc', ['walk-svc']);
  await f.sp('walk-dial', 'Dial', ['#walk-id'], ['#walk-svc']);
  await f.erp('walk-erp', ['#walk-id'], ['#walk-r']);
  await f.serp('walk-serp', ['#walk-svc'], ['#walk-r']);
  const s = await u.client.post('/sessions', { serviceId: svc });
  if (s.status !== 201) throw new Error(`session: ${s.status} ${s.text}`);
});

t.test('the fixture holds secrets an admin can read', async (t) => {
  const pending = (await admin.get('/identities?filter=name="pending-updb-admin"')).body.data[0];
  t.match(pending.enrollment.updb.token, /^[0-9a-f-]{36}$/, 'admins see the pending updb token');
  const sessions = (await admin.get('/api-sessions?limit=500')).body.data;
  // API-session tokens are signed and only their SHA-256 is stored: what admins see is a digest.
  t.ok(sessions.length > 0 && sessions.every((s: { token: string }) => /^[A-Za-z0-9_-]{43}$/.test(s.token)), 'admins see API-session token digests');
  const router = (await admin.get('/edge-routers?filter=name="walk-edge"')).body.data[0];
  t.match(router.enrollmentJwt, /^eyJ/, 'admins see a router enrollment JWT');
});

for (const perm of READ_PERMISSIONS) {
  t.test(`${perm}: nothing readable authenticates anyone else`, async (t) => {
    const name = `walker-${perm}`;
    const id = (await admin.post('/identities', { name, type: 'User', isAdmin: false, permissions: [perm] })).body.data.id;
    await admin.post('/authenticators', { method: 'updb', identityId: id, username: name, password: 'walker-password-1' });
    const mgmt = await srv.login(name, 'walker-password-1', 'management');
    const client = await srv.login(name, 'walker-password-1', 'client');
    const pools = await idPools();
    const strings = new Set<string>();
    let walked = 0;
    let answered = 0;
    for (const op of OPS) {
      // The fabric API takes the Management API's session.
      const c = op.api === 'management' ? mgmt : op.api === 'fabric' ? new (mgmt.constructor as typeof Client)(srv, BASE_PATHS.fabric, mgmt.token) : client;
      const segs = op.path.split('/').filter(Boolean);
      const fill = segs.some((s) => s.includes('{')) ? pools.get(`${op.api}:${segs[0]}`) ?? ['made-up-id'] : [''];
      for (const value of fill) {
        const p = op.path.replace(/\{[^}]+\}/g, value);
        const r = await c.get(op.path.includes('{') ? p : `${p}?limit=500`);
        walked++;
        if (r.status === 401) break; // refused before any lookup: no other id answers differently
        answered++;
        collect(r.body, strings);
        if (r.body === undefined) strings.add(r.text);
        for (const h of Object.values(r.headers)) collect(h, strings);
      }
    }
    t.ok(answered > 0, `${walked} requests walked, ${answered} answered, ${strings.size} distinct strings`);
    const own = new Set([mgmt.token, client.token]);
    const todo = [...strings].map((x) => x.trim()).filter((v) => v !== '' && !own.has(v));
    const leaks: string[] = [];
    // A few at a time: the enroll endpoints share the bounded hashing queue.
    const next = () => todo.pop();
    await Promise.all(Array.from({ length: 6 }, async () => {
      for (let v = next(); v !== undefined; v = next()) leaks.push(...(await tryString(v)));
    }));
    t.same(leaks, [], 'no string the walker read authenticates anyone else');
  });
}
