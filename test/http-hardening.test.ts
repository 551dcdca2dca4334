/**
 * The wire, as a careful client and an unlucky one see it: both listeners offer the same modern
 * TLS 1.2 suites (forward-secret AEAD only) and TLS 1.3; requests pipelined on one connection are
 * answered in order, or (uWS, a write behind which another request arrived) the connection
 * closes with the write not done, so the client's retry is safe; a request still running when the
 * shutdown grace ends gets a 503 in the upstream envelope, not a cut connection; unknown methods
 * and oversized heads are answered in the envelope where the listener lets us.
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

t.test('unknown methods get 405 with Allow, oversized heads 431 where the listener can answer (docs/limits.md)', async (t) => {
  const head = (m: string, extra = '') => `${m} /edge/management/v1/version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n${extra}\r\n`;
  const body = (text: string) => JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4));
  for (const [listener, port, methods] of [
    // uWebSockets.js passes these two on; it closes the connection itself on PROPFIND, BREW and the like.
    ['API', srv.port, ['TRACE', 'CONNECT']],
    ['certificate', srv.certPort, ['TRACE', 'CONNECT', 'PROPFIND', 'MKCOL', 'BREW', 'QUERY']],
  ] as const) {
    for (const m of methods) {
      const r = await exchange(port, head(m));
      t.same(statuses(r.text), [405], `${listener} ${m} → 405`);
      t.match(r.text, /\r\nallow: GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS\r\n/i, `${listener} ${m}: Allow`);
      if (r.text.includes('\r\n\r\n')) t.equal(body(r.text).error?.code, 'METHOD_NOT_ALLOWED', `${listener} ${m}: the envelope`);
    }
  }
  const big = await exchange(srv.certPort, head('GET', `x-big: ${'a'.repeat(70 * 1024)}\r\n`));
  t.same(statuses(big.text), [431], 'certificate listener: a 70 KiB head → 431');
  t.equal(body(big.text).error?.code, 'REQUEST_HEADERS_TOO_LARGE', 'in the envelope');
  t.ok(big.closedByServer, 'and the connection closed');
  const fits = await exchange(srv.certPort, head('GET', `x-big: ${'a'.repeat(60 * 1024)}\r\n`));
  t.same(statuses(fits.text), [200], 'certificate listener: a 60 KiB head is read');
  const uws = await exchange(srv.port, head('GET', `x-big: ${'a'.repeat(1024 * 1024)}\r\n`));
  t.ok(uws.closedByServer && statuses(uws.text).every((s) => s === 431), `API listener: a 1 MiB head has the connection closed (${statuses(uws.text)})`);
  t.same(statuses((await exchange(srv.port, head('GET'))).text), [200], 'both still serve');
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
