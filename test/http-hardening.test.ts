/**
 * The wire, as a careful client and an unlucky one see it: both listeners offer the same modern
 * TLS 1.2 suites (forward-secret AEAD only) and TLS 1.3; requests pipelined on one connection are
 * answered in order, or (uWS, a write behind which another request arrived) the connection
 * closes with the write not done, so the client's retry is safe; a request still running when the
 * shutdown grace ends gets a 503 in the upstream envelope, not a cut connection.
 */
import t from 'tap';
import tls from 'node:tls';
import { startServer, ADMIN_PASSWORD, type Server } from './helpers/server.js';

const MODERN = ['ECDHE-ECDSA-AES128-GCM-SHA256', 'ECDHE-ECDSA-AES256-GCM-SHA384', 'ECDHE-ECDSA-CHACHA20-POLY1305'];

/** The TLS 1.2 suites a listener accepts, tried one by one from everything this node knows. */
async function accepted(port: number): Promise<string[]> {
  const out = new Set<string>();
  for (const c of tls.getCiphers()) {
    const name = await new Promise<string | null>((resolve) => {
      const s = tls.connect({ host: '127.0.0.1', port, ciphers: c.toUpperCase(), maxVersion: 'TLSv1.2', rejectUnauthorized: false }, () => {
        resolve(s.getCipher().name);
        s.destroy();
      });
      s.on('error', () => resolve(null));
    });
    if (name) out.add(name);
  }
  return [...out].sort();
}

/** Write `payload` on one TLS connection; what came back until the server closed or 2 s passed. */
function exchange(port: number, payload: string): Promise<{ text: string; closedByServer: boolean }> {
  return new Promise((resolve) => {
    let text = '';
    let closedByServer = true;
    const s = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => s.write(payload));
    s.on('data', (d) => (text += d));
    const timer = setTimeout(() => {
      closedByServer = false;
      s.end();
    }, 2000);
    s.on('close', () => {
      clearTimeout(timer);
      resolve({ text, closedByServer });
    });
    s.on('error', () => {});
  });
}

const statuses = (text: string) => [...text.matchAll(/HTTP\/1\.1 (\d+)/g)].map((m) => Number(m[1]));

let srv: Server;
t.before(async () => {
  srv = await startServer(t);
});

t.test('both listeners offer the same modern suites, and TLS 1.3', async (t) => {
  t.same(await accepted(srv.port), MODERN, 'API listener');
  t.same(await accepted(srv.certPort), MODERN, 'certificate listener');
  for (const port of [srv.port, srv.certPort]) {
    const v = await new Promise<string>((resolve, reject) => {
      const s = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => {
        resolve(s.getProtocol() ?? '');
        s.destroy();
      });
      s.on('error', reject);
    });
    t.equal(v, 'TLSv1.3', `TLS 1.3 on ${port}`);
  }
});

t.test('pipelined requests: answered in order, or the write not done', async (t) => {
  const admin = await srv.login();
  const get = (p: string) => `GET ${p} HTTP/1.1\r\nhost: x\r\nzt-session: ${admin.token}\r\n\r\n`;
  const post = (p: string, body: unknown) => {
    const b = JSON.stringify(body);
    return `POST ${p} HTTP/1.1\r\nhost: x\r\nzt-session: ${admin.token}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(b)}\r\n\r\n${b}`;
  };
  for (const [name, port] of [['API', srv.port], ['certificate', srv.certPort]] as const) {
    const two = await exchange(port, get('/edge/client/v1/version') + get('/edge/management/v1/identities?limit=1'));
    t.same(statuses(two.text), [200, 200], `${name}: two reads, two answers`);
    t.ok(two.text.indexOf('"apiVersions"') < two.text.indexOf('"pagination"'), `${name}: in order`);

    const idName = `pipelined-${name}`;
    const mixed = await exchange(port, post('/edge/management/v1/identities', { name: idName, type: 'User', isAdmin: false }) + get('/edge/client/v1/version'));
    const exists = (await admin.get(`/identities?filter=name="${idName}"`)).body.data.length === 1;
    const got = statuses(mixed.text);
    if (got.length === 2) {
      t.same(got, [201, 200], `${name}: write then read, both answered in order`);
      t.ok(exists, `${name}: and the write was done`);
    } else {
      t.same(got, [], `${name}: no answer at all when refused`);
      t.ok(mixed.closedByServer, `${name}: the connection was closed`);
      t.notOk(exists, `${name}: and the refused write was not done (a retry is safe)`);
      // The retry on a fresh connection.
      t.equal((await admin.post('/identities', { name: idName, type: 'User', isAdmin: false })).status, 201, `${name}: retry succeeds`);
    }
  }
});

t.test('a request still running when the shutdown grace ends gets a 503', async (t) => {
  // Expensive hashing makes a login take long enough to still be running; no grace at all.
  const slow = await startServer(t, { env: { MESH_ARGON2_MEMORY_KIB: '65536', MESH_ARGON2_ITERATIONS: '40', MESH_SHUTDOWN_GRACE_MS: '0', MESH_WORKERS: '1' } });
  const started = performance.now();
  const pending = slow.mgmt.post('/authenticate?method=password', { username: 'admin', password: ADMIN_PASSWORD });
  await new Promise((r) => setTimeout(r, 100));
  slow.proc.kill('SIGTERM');
  const r = await pending;
  t.equal(r.status, 503, `answered ${r.status} after ${Math.round(performance.now() - started)} ms`);
  t.equal(r.body?.error?.code, 'SHUTTING_DOWN', 'in the upstream error envelope');
  t.equal(r.body?.meta?.apiVersion, '0.0.1');
  t.equal(r.headers.connection, 'close', 'and the connection closes');
});
