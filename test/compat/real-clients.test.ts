/**
 * What real clients of the upstream API send: `sort=name asc`,
 * `limit=-1`, `limit=1000`, a bare word as a filter, their `zt-session` on every call (also on
 * calls that need none, and a stale one on login), a doubled slash in a path, `GET /` and
 * `GET /version` at the host root with `apiVersions.edge.v1`, `edge-client.v1` and
 * `edge-management.v1` (`path` and `apiBaseUrls`), `edge-oidc.v1` at `/oidc`, and the `OIDC_AUTH`
 * capability (SDKs that see it log in through `/oidc`). Everything inside the API base paths goes through the checking proxy; what
 * lies outside them (host root, doubled slashes prism cannot route) goes directly to the server.
 */
import t from 'tap';
import { startServer, type Server } from '../helpers/server.js';
import { CLIENT_CERT_HEADER, startPrism, type Proxy } from './lib/prism.js';
import { makeCertAndKey } from './lib/csr.js';
import { ExchangeLog } from './lib/exchanges.js';

interface Answer { status: number; body: any; problems: string[] }

/** One exchange through the proxy with plain fetch; returns status, JSON body, and what prism found. */
async function call(log: ExchangeLog, method: string, p: string, token?: string, body?: unknown): Promise<Answer> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (token) headers['zt-session'] = token;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const n = log.exchanges.length;
  await log.fetch(log.proxy.base + p, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const x = log.exchanges[n]!;
  return { status: x.status, body: x.body, problems: x.problems };
}

let srv: Server;
let mgmt: Proxy;
let client: Proxy;
t.before(async () => {
  srv = await startServer(t);
  [mgmt, client] = await Promise.all([startPrism(t, srv, 'management'), startPrism(t, srv, 'client')]);
});

t.test('list parameters real clients send, through the checking proxy', async (t) => {
  const log = new ExchangeLog(mgmt);
  const login = await call(log, 'POST', '/authenticate?method=password', undefined, { username: 'admin', password: 'admin-test-password' });
  t.same(login.problems, [], 'login conforms');
  const token = login.body?.data?.token as string;
  for (const name of ['rc-charlie', 'rc-alpha', 'rc-bravo', 'rc-delta']) {
    const r = await call(log, 'POST', '/identities', token, { name, type: 'User', isAdmin: false });
    t.equal(r.status, 201, `create ${name}`);
  }
  const names = (r: Answer) => (r.body?.data ?? []).map((x: any) => x.name).filter((n: string) => n.startsWith('rc-'));

  const asc = await call(log, 'GET', '/identities?sort=' + encodeURIComponent('name asc'), token);
  t.same(asc.problems, [], 'sort=name asc conforms');
  t.same(names(asc), ['rc-alpha', 'rc-bravo', 'rc-charlie', 'rc-delta'], 'sort=name asc sorts by name ascending');
  const desc = await call(log, 'GET', '/identities?sort=' + encodeURIComponent('name desc'), token);
  t.same(names(desc), ['rc-delta', 'rc-charlie', 'rc-bravo', 'rc-alpha'], 'sort=name desc sorts descending');

  // form encoding (`+` for a space), as browsers' URLSearchParams and the admin console send it
  const plus = await call(log, 'GET', '/identities?sort=name+asc&filter=name+contains+%22rc-%22', token);
  t.same(plus.problems, [], 'sort=name+asc with a +-encoded filter conforms');
  t.same(names(plus), ['rc-alpha', 'rc-bravo', 'rc-charlie', 'rc-delta'], 'sort=name+asc and filter=name+contains+"rc-" read + as a space');
  t.equal(plus.body?.data?.length, 4, 'the +-encoded filter selects the four identities');

  const all = await call(log, 'GET', '/identities?limit=-1', token);
  t.same(all.problems, [], 'limit=-1 conforms');
  t.equal(all.status, 200, 'limit=-1 → 200');
  t.equal(all.body?.data?.length, all.body?.meta?.pagination?.totalCount, 'limit=-1 returns every item');
  t.equal(all.body?.data?.length, 5, 'the default admin and the four identities');

  const big = await call(log, 'GET', '/identities?limit=1000', token);
  t.same(big.problems, [], 'limit=1000 conforms');
  t.equal(big.status, 200, 'limit=1000 → 200');
  t.equal(big.body?.data?.length, 5, 'limit=1000 returns every item');

  const page = await call(log, 'GET', '/identities?limit=2&offset=1&sort=' + encodeURIComponent('name asc'), token);
  t.same(page.problems, [], 'limit/offset with sort conforms');
  t.equal(page.body?.data?.length, 2, 'limit=2 → two items');
  t.match(page.body?.meta?.pagination, { limit: 2, offset: 1, totalCount: 5 }, 'pagination meta');

  const bare = await call(log, 'GET', '/identities?filter=identity', token);
  t.same(bare.problems, [], 'a bare-word filter is answered within the spec');
  t.equal(bare.status, 400, 'bare-word filter → 400');
  t.equal(bare.body?.error?.code, 'INVALID_FILTER', 'bare-word filter → INVALID_FILTER');
});

t.test('zt-session on every call, including those that need none', async (t) => {
  for (const proxy of [mgmt, client]) {
    const log = new ExchangeLog(proxy);
    const stale = '00000000-0000-4000-8000-000000000000';
    for (const p of ['/version', '/', '/enumerated-capabilities', '/specs']) {
      const r = await call(log, 'GET', p, stale);
      t.same(r.problems, [], `${proxy.api} ${p} with a stale zt-session conforms`);
      t.equal(r.status, 200, `${proxy.api} ${p} ignores a stale zt-session`);
    }
    // a client re-authenticating still sends its old (expired) session
    const login = await call(log, 'POST', '/authenticate?method=password', stale, { username: 'admin', password: 'admin-test-password' });
    t.same(login.problems, [], `${proxy.api} login with a stale zt-session conforms`);
    t.equal(login.status, 200, `${proxy.api} login with a stale zt-session → 200`);
    const token = login.body?.data?.token as string;
    const me = await call(log, 'GET', '/current-identity', token);
    t.equal(me.status, 200, `${proxy.api} current identity with the new session`);
    t.same(me.problems, [], `${proxy.api} current identity conforms`);
    const v = await call(log, 'GET', '/version', token);
    t.equal(v.status, 200, `${proxy.api} /version with a valid session`);
    const bad = await call(log, 'GET', '/current-identity', stale);
    t.same(bad.problems, [], `${proxy.api} 401 for a stale session conforms`);
    t.equal(bad.status, 401, `${proxy.api} stale session on a secured call → 401`);
  }
});

t.test('/version: API versions and base URLs, no OIDC_AUTH', async (t) => {
  const viaProxy: Record<string, any> = {};
  for (const proxy of [mgmt, client]) {
    const log = new ExchangeLog(proxy);
    const r = await call(log, 'GET', '/version');
    t.same(r.problems, [], `${proxy.api} /version conforms`);
    viaProxy[proxy.api] = r.body?.data;
  }
  const root = await srv.raw('GET', '/version', undefined, { accept: 'application/json', 'zt-session': 'stale' });
  t.equal(root.status, 200, 'GET /version at the host root');
  const rootIndex = await srv.raw('GET', '/', undefined, { accept: 'application/json' });
  t.equal(rootIndex.status, 200, 'GET / at the host root');
  for (const [where, data] of [['host root /version', root.body?.data], ['host root /', rootIndex.body?.data], ['client /version', viaProxy.client], ['management /version', viaProxy.management]] as const) {
    const v = data?.apiVersions;
    const origin = srv.origin;
    t.match(v?.edge?.v1, { path: '/edge/client/v1' }, `${where}: apiVersions.edge.v1.path`);
    t.match(v?.['edge-client']?.v1, { path: '/edge/client/v1' }, `${where}: apiVersions.edge-client.v1.path`);
    t.match(v?.['edge-management']?.v1, { path: '/edge/management/v1' }, `${where}: apiVersions.edge-management.v1.path`);
    t.ok(v?.edge?.v1?.apiBaseUrls?.includes(`${origin}/edge/client/v1`), `${where}: edge.v1.apiBaseUrls has ${origin}/edge/client/v1`);
    t.ok(v?.['edge-client']?.v1?.apiBaseUrls?.includes(`${origin}/edge/client/v1`), `${where}: edge-client.v1.apiBaseUrls`);
    t.ok(v?.['edge-management']?.v1?.apiBaseUrls?.includes(`${origin}/edge/management/v1`), `${where}: edge-management.v1.apiBaseUrls`);
    t.ok(Array.isArray(data?.capabilities), `${where}: capabilities is a list`);
    t.ok(data?.capabilities?.includes('OIDC_AUTH'), `${where}: OIDC_AUTH capability`);
    t.match(v?.['edge-oidc']?.v1, { path: '/oidc' }, `${where}: apiVersions.edge-oidc.v1.path`);
    t.equal(typeof data?.version, 'string', `${where}: version`);
  }
  // the host-root documents are the API's (checked through the proxy above), field for field
  const strip = (d: any) => ({ ...d, buildDate: undefined });
  t.same(strip(root.body?.data), strip(viaProxy.client), 'host root /version is the client API /version');
});

t.test('a doubled slash in a path', async (t) => {
  const admin = await srv.login();
  const plain = await admin.get('/terminators');
  const doubled = await admin.get('//terminators');
  t.equal(doubled.status, 200, 'GET /edge/management/v1//terminators → 200');
  t.same(doubled.body?.data, plain.body?.data, 'same list as /terminators');
  const idDoubled = await admin.get('/identities//' + (await admin.get('/current-identity')).body.data.id);
  t.equal(idDoubled.status, 200, 'a doubled slash before an id');
  const clientLogin = await srv.login(undefined, undefined, 'client');
  const cv = await clientLogin.get('//current-identity');
  t.equal(cv.status, 200, 'client API //current-identity → 200');
  const rootDoubled = await srv.raw('GET', '//version', undefined, { accept: 'application/json' });
  t.equal(rootDoubled.status, 200, 'GET //version at the host root');
});

t.test('the checking proxy is not vacuous', async (t) => {
  const log = new ExchangeLog(mgmt);
  const login = await call(log, 'POST', '/authenticate?method=password', undefined, { username: 'admin', password: 'admin-test-password' });
  const token = login.body?.data?.token as string;
  // a request out of spec (createIdentity without its required name) is stopped by prism
  const bad = await call(log, 'POST', '/identities', token, { type: 'User', isAdmin: false });
  t.ok(bad.problems.some((p) => p.includes('answered by prism')), `a request violation is a problem: ${bad.problems[0]?.slice(0, 120)}`);
  // a route the spec does not have
  const unknown = await call(log, 'GET', '/no-such-collection', token);
  t.ok(unknown.problems.length > 0, 'an unknown route is a problem');
  // a response out of spec: the same server behind a spec that demands what /version never has
  const strict = await startPrism(t, srv, 'management', {
    mutate: (doc) => {
      doc.definitions.version.required = ['noSuchField'];
    },
  });
  const strictLog = new ExchangeLog(strict);
  const v = await call(strictLog, 'GET', '/version');
  t.ok(v.problems.some((p) => p.startsWith('violation') && p.includes('noSuchField')), `a response violation is a problem: ${v.problems[0]?.slice(0, 160)}`);
  t.notOk(strictLog.cleanOps().has('management:listVersion'), 'a violating exchange does not count as exercised');
  await strict.stop();
});

t.test('the client-certificate relay is transparent', async (t) => {
  // operations that authenticate by TLS client certificate go through prism and this relay
  const proxy = await startPrism(t, srv, 'client', { clientCerts: true });
  const { cert, key } = makeCertAndKey('compat-relay');
  proxy.clientCert('relay', cert, key);
  const log = new ExchangeLog(proxy);
  const login = await call(log, 'POST', '/authenticate?method=password', undefined, { username: 'admin', password: 'admin-test-password' });
  t.same(login.problems, [], 'login through prism and the relay conforms');
  t.equal(login.status, 200, 'login → 200');
  const n = log.exchanges.length;
  await log.fetch(proxy.base + '/current-identity', { headers: { accept: 'application/json', 'zt-session': login.body?.data?.token, [CLIENT_CERT_HEADER]: 'relay' } });
  t.same(log.exchanges[n]?.problems, [], 'a request presenting a client certificate conforms');
  t.equal(log.exchanges[n]?.status, 200, 'current identity → 200');
  await proxy.stop();
});
