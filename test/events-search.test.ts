/**
 * Events in search indices against the real server: `/search` on the API listener
 * with basic credentials and permissions, `_bulk` ingest of firewall usage, the seed's `_search`
 * request shape (time range with `now-24h`, nested `terms` with `order`/`size`, `sum`
 * sub-aggregations, `.keyword` fields, `size: 0`) including the top-talkers query, alerts raised
 * by the controller for configuration problems, retention, persistence across a restart, and the
 * `scripts/top-talkers` command.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { startServer, type Client, type Res, type Server } from './helpers/server.js';
import { createUser } from './helpers/users.js';
import { RFC3339, sleep } from './helpers/assert.js';
import { selfSignedCert } from './helpers/pki.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const basic = (u: string, p: string) => 'Basic ' + Buffer.from(`${u}:${p}`).toString('base64');
const ADMIN = basic('admin', 'admin-test-password');

function search(srv: Server, method: string, p: string, body?: unknown, auth = ADMIN, extra: Record<string, string> = {}): Promise<Res> {
  const raw = body === undefined ? undefined : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
  const headers: Record<string, string> = { ...(auth ? { authorization: auth } : {}), ...extra };
  if (raw && !headers['content-type']) headers['content-type'] = typeof body === 'string' ? 'application/x-ndjson' : 'application/json';
  return srv.raw(method, '/search' + p, raw, headers);
}

const ndjson = (lines: unknown[]) => lines.map((l) => JSON.stringify(l)).join('\n') + '\n';
const ago = (ms: number) => new Date(Date.now() - ms).toISOString();
const H = 3_600_000;

/** The seed's top-talkers query: last 24 hours, by firewall then source address, ordered by summed usage. */
const topTalkers = (by: 'tx' | 'rx', size = 10) => ({
  query: { bool: { filter: [{ range: { '@timestamp': { format: 'strict_date_optional_time', gte: 'now-24h', lte: 'now' } } }] } },
  aggs: {
    firewalls: {
      terms: { field: 'zfw.source_id.keyword', order: { [by]: 'desc' }, size },
      aggs: {
        [by]: { sum: { field: `zfw.usage.circuit.${by}` } },
        sources: {
          terms: { field: 'zfw.saddr.keyword', order: { [by]: 'desc' }, size },
          aggs: { tx: { sum: { field: 'zfw.usage.circuit.tx' } }, rx: { sum: { field: 'zfw.usage.circuit.rx' } } },
        },
      },
    },
  },
  size: 0,
});

async function identityWithPassword(admin: Client, name: string, permissions: string[]) {
  await createUser(admin, name, `${name}-password`, { permissions });
  return basic(name, `${name}-password`);
}

async function until<T>(what: string, fn: () => Promise<T | undefined>): Promise<T> {
  for (let i = 0; i < 300; i++) {
    const v = await fn();
    if (v !== undefined) return v;
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what}`);
}

t.test('search API: credentials, permissions, ingest and the seed queries', async (t) => {
  const srv = await startServer(t, { env: { MESH_ALERT_DEBOUNCE_MS: '50' } });
  const admin = await srv.login();
  let reader = await identityWithPassword(admin, 'ops-reader', ['ops.read']);
  const writer = await identityWithPassword(admin, 'ops-writer', ['ops.update']);
  const nobody = await identityWithPassword(admin, 'no-perms', []);

  t.test('credentials and permissions', async (t) => {
    const none = await search(srv, 'GET', '/zfw.events*/_search', { size: 0 }, '');
    t.equal(none.status, 401, 'no credentials → 401');
    t.equal(none.body?.error?.type, 'security_exception', 'Elasticsearch error shape');
    t.equal(none.body?.status, 401);
    t.match(String(none.headers['www-authenticate']), /^Basic realm=/, 'asks for basic credentials');
    t.equal((await search(srv, 'GET', '/_search', { size: 0 }, basic('admin', 'wrong-password'))).status, 401, 'wrong password → 401');
    t.equal((await search(srv, 'GET', '/_search', { size: 0 }, basic('nobody-at-all', 'whatever'))).status, 401, 'unknown user → 401');
    t.equal((await search(srv, 'GET', '/_search', { size: 0 }, 'Basic !!!')).status, 401, 'malformed header → 401');
    const denied = await search(srv, 'GET', '/_search', { size: 0 }, nobody);
    t.equal(denied.status, 403, 'no ops permission → 403');
    t.equal(denied.body?.error?.type, 'security_exception');
    t.equal((await search(srv, 'GET', '/_search', { size: 0 }, reader)).status, 200, 'ops.read may search');
    t.equal((await search(srv, 'POST', '/_bulk', ndjson([{ index: { _index: 'zfw.events' } }, { a: 1 }]), reader)).status, 403, 'ops.read may not ingest');
    t.equal((await search(srv, 'GET', '/_search', { size: 0 }, writer)).status, 403, 'ops.update may not search');
    t.equal((await search(srv, 'GET', '/_search', { size: 0 }, '', { 'zt-session': admin.token! })).status, 200, 'an admin zt-session works too');
    t.equal((await search(srv, 'GET', '/_search', { size: 0 }, '', { 'zt-session': 'not-a-token' })).status, 401, 'a bad zt-session → 401');
    t.equal((await search(srv, 'GET', '/_search', { size: 0 }, '', { authorization: `Bearer ${admin.token!}` })).status, 200, 'the admin token as Bearer works too');
    t.equal((await search(srv, 'GET', '/_search', { size: 0 }, '', { authorization: 'Bearer not.a.token' })).status, 401, 'a bad Bearer token → 401');
    // Cached verification must not outlive a password change.
    const rd = (await admin.get('/authenticators?filter=' + encodeURIComponent('username = "ops-reader"'))).body.data[0];
    t.equal((await admin.patch(`/authenticators/${rd.id}`, { password: 'changed-password' })).status, 200, 'password changed');
    t.equal((await search(srv, 'GET', '/_search', { size: 0 }, reader)).status, 401, 'the old password stops working at once');
    reader = basic('ops-reader', 'changed-password');
    t.equal((await search(srv, 'GET', '/_search', { size: 0 }, reader)).status, 200, 'the new one works');
  });

  // Firewall usage: nested and dotted documents, two firewalls, inside and outside the last 24 hours.
  const usage = [
    { '@timestamp': ago(1 * H), zfw: { source_id: 'fw-a', saddr: '10.0.0.1', daddr: '1.1.1.1', dport: 443, usage: { circuit: { tx: 1000, rx: 10 } } } },
    { '@timestamp': ago(2 * H), zfw: { source_id: 'fw-a', saddr: '10.0.0.1', daddr: '8.8.8.8', dport: 53, usage: { circuit: { tx: 500, rx: 700 } } } },
    { '@timestamp': ago(3 * H), 'zfw.source_id': 'fw-a', 'zfw.saddr': '10.0.0.2', 'zfw.dport': 22, 'zfw.usage.circuit.tx': 4000, 'zfw.usage.circuit.rx': 5 },
    { '@timestamp': ago(4 * H), zfw: { source_id: 'fw-b', saddr: '10.1.0.9', dport: 443, usage: { circuit: { tx: 300, rx: 9000 } } } },
    { '@timestamp': ago(5 * H), zfw: { source_id: 'fw-b', saddr: '10.1.0.8', dport: 443, usage: { circuit: { tx: 200, rx: 100 } } } },
    // Outside the window, and without a timestamp: never in a time-filtered answer.
    { '@timestamp': ago(72 * H), zfw: { source_id: 'fw-c', saddr: '10.2.0.1', usage: { circuit: { tx: 99999, rx: 99999 } } } },
    { zfw: { source_id: 'fw-d', saddr: '10.3.0.1', usage: { circuit: { tx: 88888, rx: 88888 } } } },
  ];

  t.test('bulk ingest', async (t) => {
    const lines: unknown[] = [];
    for (const d of usage) lines.push({ index: { _index: 'zfw.events-2026.11' } }, d);
    lines.push({ create: { _index: 'zfw.events-2026.11', _id: 'fixed-id' } }, { '@timestamp': ago(30 * H), zfw: { source_id: 'fw-e', saddr: '10.9.9.9' } });
    lines.push({ create: { _index: 'zfw.events-2026.11', _id: 'fixed-id' } }, { '@timestamp': ago(30 * H) });
    lines.push({ index: { _index: 'zfw.events-2026.11' } }, { '@timestamp': 'not a date' });
    lines.push({ index: { _index: 'mesh.alerts' } }, { message: 'spoofed' });
    lines.push({ index: { _index: 'Bad Name' } }, { a: 1 });
    lines.push({ update: { _index: 'zfw.events-2026.11', _id: 'fixed-id' } }, { doc: { a: 1 } });
    const r = await search(srv, 'POST', '/_bulk', ndjson(lines), writer);
    t.equal(r.status, 200, `bulk → 200 (${r.text.slice(0, 200)})`);
    t.equal(r.body.errors, true, 'errors: true when an item failed');
    const items = r.body.items as Record<string, any>[];
    t.equal(items.length, usage.length + 6, 'one item per action');
    for (const it of items.slice(0, usage.length)) {
      t.equal(it.index.status, 201, 'document created');
      t.equal(it.index.result, 'created');
      t.type(it.index._id, 'string');
    }
    const rest = items.slice(usage.length);
    t.equal(rest[0].create.status, 201, 'create with an _id');
    t.equal(rest[0].create._id, 'fixed-id');
    t.equal(rest[1].create.status, 409, 'create of an existing _id → 409');
    t.equal(rest[1].create.error.type, 'version_conflict_engine_exception');
    t.equal(rest[2].index.status, 400, 'unparsable @timestamp → 400 item');
    t.equal(rest[3].index.status, 403, 'the controller-only alert index is refused');
    t.equal(rest[4].index.status, 400, 'invalid index name → 400 item');
    t.equal(rest[4].index.error.type, 'invalid_index_name_exception');
    t.equal(rest[5].update.status, 400, 'update → 400 item');

    const bad = await search(srv, 'POST', '/_bulk', '{"index":{}}\n{"a":1}\n', writer);
    t.equal(bad.status, 400, 'no index anywhere → 400');
    t.equal((await search(srv, 'POST', '/_bulk', 'not json\n', writer)).status, 400, 'malformed action line → 400');
    t.equal((await search(srv, 'POST', '/_bulk', '{"explode":{}}\n', writer)).status, 400, 'unknown action → 400');

    const one = await search(srv, 'POST', '/zfw.events-2026.11/_doc', { '@timestamp': ago(6 * H), zfw: { source_id: 'fw-b', saddr: '10.1.0.8', usage: { circuit: { tx: 1, rx: 1 } } } }, writer);
    t.equal(one.status, 201, `single document → 201 (${one.text})`);
    t.equal(one.body.result, 'created');
    usage.push({ '@timestamp': ago(6 * H), zfw: { source_id: 'fw-b', saddr: '10.1.0.8', dport: 0, usage: { circuit: { tx: 1, rx: 1 } } } });

    const cat = await search(srv, 'GET', '/_cat/indices?format=json', undefined, reader);
    t.same(cat.body.find((i: any) => i.index === 'zfw.events-2026.11')?.['docs.count'], String(usage.length + 1), '_cat/indices counts the documents');
  });

  t.test('the seed top-talkers query, as written, by transmit and by receive', async (t) => {
    // Expected answer, computed from the documents of the last 24 hours.
    const recent = usage.filter((d: any) => d['@timestamp'] && Date.parse(d['@timestamp']) > Date.now() - 24 * H);
    const get = (d: any, k: string) => d.zfw?.[k] ?? d[`zfw.${k}`];
    const u = (d: any, k: 'tx' | 'rx') => d.zfw?.usage?.circuit?.[k] ?? d[`zfw.usage.circuit.${k}`] ?? 0;
    for (const by of ['tx', 'rx'] as const) {
      const r = await search(srv, 'GET', '/zfw.events*/_search?pretty', topTalkers(by), reader);
      t.equal(r.status, 200, `${by}: 200 (${r.text.slice(0, 300)})`);
      t.ok(r.text.includes('\n  "took"'), '?pretty indents the answer');
      t.equal(r.body.hits.total.value, recent.length, 'hits.total counts only the last 24 hours');
      t.same(r.body.hits.hits, [], 'size 0: no hits, aggregations only');
      t.equal(r.body.timed_out, false);
      const fws = [...new Set(recent.map((d) => get(d, 'source_id')))].map((fw) => {
        const docs = recent.filter((d) => get(d, 'source_id') === fw);
        const sources = [...new Set(docs.map((d) => get(d, 'saddr')))].map((s) => {
          const sd = docs.filter((d) => get(d, 'saddr') === s);
          return { key: s, doc_count: sd.length, tx: sd.reduce((n, d) => n + u(d, 'tx'), 0), rx: sd.reduce((n, d) => n + u(d, 'rx'), 0) };
        });
        sources.sort((a, b) => b[by] - a[by]);
        return { key: fw, doc_count: docs.length, total: docs.reduce((n, d) => n + u(d, by), 0), sources };
      });
      fws.sort((a, b) => b.total - a.total);
      const buckets = r.body.aggregations.firewalls.buckets;
      t.same(buckets.map((b: any) => b.key), fws.map((f) => f.key), `${by}: firewalls ordered by summed ${by}`);
      t.same(buckets.map((b: any) => b[by].value), fws.map((f) => f.total), `${by}: sums per firewall`);
      for (const [i, f] of fws.entries()) {
        t.same(
          buckets[i].sources.buckets.map((b: any) => ({ key: b.key, doc_count: b.doc_count, tx: b.tx.value, rx: b.rx.value })),
          f.sources,
          `${by}: sources of ${f.key} with their sums, ordered`,
        );
      }
      t.equal(r.body.aggregations.firewalls.sum_other_doc_count, 0);
    }
    // `size` limits buckets; what is left out is counted.
    const top1 = await search(srv, 'GET', '/zfw.events*/_search', topTalkers('tx', 1), reader);
    t.equal(top1.body.aggregations.firewalls.buckets.length, 1, 'terms size 1 → one bucket');
    t.ok(top1.body.aggregations.firewalls.sum_other_doc_count > 0, 'sum_other_doc_count counts the rest');
  });

  t.test('request shapes and errors as Elasticsearch answers them', async (t) => {
    const textAgg = await search(srv, 'GET', '/zfw.events*/_search', { size: 0, aggs: { x: { terms: { field: 'zfw.source_id' } } } }, reader);
    t.equal(textAgg.status, 400, 'terms on a text field (no .keyword) → 400');
    t.equal(textAgg.body.error.type, 'illegal_argument_exception');
    const missing = await search(srv, 'GET', '/no-such-index/_search', { size: 0 }, reader);
    t.equal(missing.status, 404, 'a named index that does not exist → 404');
    t.equal(missing.body.error.type, 'index_not_found_exception');
    const none = await search(srv, 'GET', '/nothing-here*/_search', { size: 0 }, reader);
    t.equal(none.status, 200, 'a wildcard matching nothing → 200');
    t.equal(none.body.hits.total.value, 0);
    t.equal((await search(srv, 'GET', '/_search', '{"size": ', reader, { 'content-type': 'application/json' })).status, 400, 'malformed JSON → 400');
    const unknown = await search(srv, 'GET', '/_search', { query: { frobnicate: {} } }, reader);
    t.equal(unknown.status, 400, 'unknown query → 400');
    t.equal(unknown.body.error.type, 'parsing_exception');
    t.equal((await search(srv, 'GET', '/_search', { size: 20000 }, reader)).status, 400, 'result window too large → 400');
    t.equal((await search(srv, 'GET', '/_search', { query: { range: { '@timestamp': { gte: 'now-1x' } } } }, reader)).status, 400, 'bad date math → 400');
    t.equal((await search(srv, 'GET', '/_search', { aggs: { a: { sum: { field: 'zfw.saddr.keyword' } } } }, reader)).status, 400, 'sum over a keyword → 400');

    // Hits: term on a keyword, sort by time, _source filtering.
    const hits = await search(srv, 'POST', '/zfw.events*/_search', {
      query: { bool: { filter: [{ term: { 'zfw.source_id.keyword': 'fw-a' } }, { range: { '@timestamp': { gte: 'now-1d/d', lte: 'now' } } }] } },
      sort: [{ '@timestamp': { order: 'desc' } }],
      _source: ['zfw'],
      size: 2,
    }, reader);
    t.equal(hits.status, 200, `hits query → 200 (${hits.text.slice(0, 200)})`);
    t.equal(hits.body.hits.total.value, 3, 'three fw-a documents');
    t.equal(hits.body.hits.hits.length, 2, 'size 2');
    const times = hits.body.hits.hits.map((h: any) => h.sort[0]);
    t.ok(times[0] > times[1], 'newest first; sort values are epoch ms');
    t.equal(hits.body.hits.hits[0]._index, 'zfw.events-2026.11');
    t.same(Object.keys(hits.body.hits.hits[0]._source), ['zfw'], '_source filtered');
    // Query by `?source=` (GET without a body), `_count`, `match`, `terms`, `exists`, must_not.
    const src = encodeURIComponent(JSON.stringify({ query: { terms: { 'zfw.dport': [22, 53] } }, size: 0 }));
    const bySource = await search(srv, 'GET', `/zfw.events*/_search?source=${src}&source_content_type=application/json`, undefined, reader);
    t.equal(bySource.body.hits.total.value, 2, '?source= carries the query; numeric terms');
    const count = await search(srv, 'GET', '/zfw.events*/_count', { query: { bool: { must: [{ exists: { field: 'zfw.daddr' } }], must_not: [{ match: { 'zfw.saddr': '10.0.0.1' } }] } } }, reader);
    t.same(count.body.count, 0, '_count with exists and must_not');
    const hist = await search(srv, 'GET', '/zfw.events*/_search', { size: 0, query: { range: { '@timestamp': { gte: 'now-24h' } } }, aggs: { h: { date_histogram: { field: '@timestamp', fixed_interval: '1h' }, aggs: { tx: { sum: { field: 'zfw.usage.circuit.tx' } } } } } }, reader);
    t.equal(hist.status, 200, 'date_histogram');
    t.ok(hist.body.aggregations.h.buckets.every((b: any) => RFC3339.test(b.key_as_string) && typeof b.key === 'number'), 'histogram buckets keyed by time');
  });

  t.test('alerts raised by the controller for configuration problems', async (t) => {
    const svc = (await admin.post('/services', { name: 'lonely-service', encryptionRequired: true, roleAttributes: ['web'] })).body.data.id;
    const dialer = (await admin.post('/identities', { name: 'dialer', type: 'User', isAdmin: false, roleAttributes: ['dialers'] })).body.data.id;
    await admin.post('/service-policies', { name: 'dial-web', type: 'Dial', semantic: 'AnyOf', identityRoles: ['#dialers'], serviceRoles: ['#web'] });
    const erp = (await admin.post('/edge-router-policies', { name: 'empty-erp', semantic: 'AnyOf', identityRoles: ['#nobody-has-this'], edgeRouterRoles: ['#all'] })).body.data.id;
    const ca = (await admin.post('/cas', { name: 'short-lived-ca', certPem: selfSignedCert('Short Lived CA', true), identityRoles: [], isAuthEnabled: false, isAutoCaEnrollmentEnabled: false, isOttCaEnrollmentEnabled: false })).body.data.id;

    const alerts = async (q: unknown) => (await search(srv, 'GET', '/mesh.alert*/_search', q, reader)).body;
    const byType = (type: string, id: string) => ({ query: { bool: { filter: [{ term: { 'alert_type.keyword': type } }, { term: { 'event_source_id.keyword': id } }] } }, size: 10 });
    const first = await until('the no-terminators alert', async () => {
      const r = await alerts(byType('service.no-terminators', svc));
      return r.hits.total.value > 0 ? r.hits.hits[0]._source : undefined;
    });
    t.match(first['@timestamp'], RFC3339, '@timestamp');
    t.equal(first.event_source_type, 'service', 'event_source_type');
    t.equal(first.severity, 'warning', 'severity');
    t.match(first.message, /lonely-service has no terminators/, 'message');
    t.ok(Array.isArray(first.logs) && first.logs.length > 0, 'logs');
    const pair = await until('the no-shared-edge-router alert', async () => {
      const r = await alerts(byType('service.no-shared-edge-router', svc));
      return r.hits.total.value > 0 ? r.hits.hits[0]._source : undefined;
    });
    t.match(pair.message, /1 identity may dial service lonely-service but shares no edge router with it/);
    t.match(pair.logs[1], new RegExp(`dialer \\(${dialer}\\)`), 'the identity is named');
    const empty = await until('the empty edge router policy alert', async () => {
      const r = await alerts(byType('edge-router-policy.selects-nothing', erp));
      return r.hits.total.value > 0 ? r.hits.hits[0]._source : undefined;
    });
    t.match(empty.message, /empty-erp selects no identities/);
    const cert = await until('the certificate expiry alert', async () => {
      const r = await alerts(byType('certificate.expiring', ca));
      return r.hits.total.value > 0 ? r.hits.hits[0]._source : undefined;
    });
    t.match(cert.message, /ca certificate short-lived-ca expires at/);
    t.equal(cert.event_source_type, 'ca');

    // An unrelated change re-runs the checks: a persisting condition is not written again.
    await admin.post('/identities', { name: 'unrelated', type: 'User', isAdmin: false });
    await sleep(300);
    t.equal((await alerts(byType('service.no-terminators', svc))).hits.total.value, 1, 'a persisting condition is alerted once');
    // The seed-style aggregation over alerts.
    const agg = await alerts({ size: 0, query: { bool: { filter: [{ range: { '@timestamp': { format: 'strict_date_optional_time', gte: 'now-24h', lte: 'now' } } }] } }, aggs: { kinds: { terms: { field: 'event_source_type.keyword', size: 10, order: { _count: 'desc' } } } } });
    const kinds = Object.fromEntries(agg.aggregations.kinds.buckets.map((b: any) => [b.key, b.doc_count]));
    t.ok(kinds.service >= 2 && kinds['edge-router-policy'] >= 1 && kinds.ca >= 1, `alerts by source type: ${JSON.stringify(kinds)}`);
  });

  t.test('scripts/top-talkers prints the table of the last 24 hours', async (t) => {
    const out = await new Promise<string>((resolve, reject) =>
      execFile(process.execPath, [path.join(ROOT, 'dist', 'scripts', 'top-talkers.js'), '--url', `${srv.origin}/search`, '--user', 'ops-reader', '--password', 'changed-password', '--ca', path.join(srv.dataDir, 'pki', 'ca-bundle.pem')], (err, stdout, stderr) =>
        err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout),
      ),
    );
    const lines = out.trim().split('\n');
    t.match(lines[0], /FIREWALL\s+SOURCE\s+TX\s+RX/, 'header');
    t.match(out, /fw-a\s+10\.0\.0\.2\s+4000\s+5/, 'top source of the busiest firewall');
    t.notMatch(out, /fw-c|fw-d/, 'nothing outside the last 24 hours');
    const bad = await new Promise<number>((resolve) =>
      execFile(process.execPath, [path.join(ROOT, 'dist', 'scripts', 'top-talkers.js'), '--url', `${srv.origin}/search`, '--user', 'ops-reader', '--password', 'wrong-password', '--ca', path.join(srv.dataDir, 'pki', 'ca-bundle.pem')], (err) => resolve(typeof err?.code === 'number' ? err.code : 0)),
    );
    t.not(bad, 0, 'wrong credentials: non-zero exit');
  });
});

t.test('growth is bounded, documents and raised alerts survive a restart', async (t) => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-events-'));
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  const env = { MESH_ALERT_DEBOUNCE_MS: '50', MESH_SEARCH_MAX_DOCS_PER_INDEX: '100' };
  const srv = await startServer(t, { dataDir, keepData: true, env });
  const admin = await srv.login();
  const svc = (await admin.post('/services', { name: 'unterminated', encryptionRequired: true })).body.data.id;
  const lines: unknown[] = [];
  for (let i = 0; i < 150; i++) lines.push({ index: { _index: 'zfw.events' } }, { '@timestamp': ago((150 - i) * 1000), n: i });
  t.equal((await search(srv, 'POST', '/_bulk', ndjson(lines))).body.errors, false, '150 documents in');
  const count = await until('the overflow sweep', async () => {
    const c = (await search(srv, 'GET', '/zfw.events/_count', {})).body.count;
    return c <= 100 ? c : undefined;
  });
  t.equal(count, 100, 'the index keeps its newest 100 documents');
  const oldest = await search(srv, 'GET', '/zfw.events/_search', { size: 1, sort: [{ n: 'asc' }] });
  t.equal(oldest.body.hits.hits[0]._source.n, 50, 'the oldest went first');
  const alertCount = async () => (await search(srv, 'GET', '/mesh.alert*/_count', { query: { term: { 'event_source_id.keyword': svc } } })).body.count;
  await until('the alert', async () => ((await alertCount()) > 0 ? true : undefined));
  await srv.stop();

  const again = await startServer(t, { dataDir, keepData: true, env });
  t.equal((await search(again, 'GET', '/zfw.events/_count', {})).body.count, 100, 'documents survive a restart');
  await sleep(400);
  const after = (await search(again, 'GET', '/mesh.alert*/_count', { query: { term: { 'event_source_id.keyword': svc } } })).body.count;
  t.equal(after, 1, 'a condition alerted before the restart is not alerted again');
});
