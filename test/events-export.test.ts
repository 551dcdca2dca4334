/**
 * The exporter: with `searchExportUrl` set, every document the embedded search
 * store takes in (ingested usage and the controller's alerts) is shipped to an external
 * Elasticsearch/OpenSearch with `_bulk`. A local node:http stand-in records what it receives and
 * fails on purpose: a 503 for the whole request, then a 429 for one item; both are retried.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t from 'tap';
import { startServer } from './helpers/server.js';
import { sleep } from './helpers/assert.js';

interface Received {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  lines: any[];
  status: number;
}

function standIn(answer: (n: number, lines: any[]) => { status: number; body: unknown }) {
  const received: Received[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const lines = Buffer.concat(chunks).toString('utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
      const { status, body } = answer(received.length, lines);
      received.push({ method: req.method!, url: req.url!, headers: req.headers, lines, status });
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    });
  });
  return new Promise<{ port: number; received: Received[]; close: () => Promise<void> }>((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({ port: (server.address() as AddressInfo).port, received, close: () => new Promise((r) => server.close(() => r())) }),
    ),
  );
}

const ok = (lines: any[], failFirst = false) => {
  const items = [];
  for (let i = 0; i < lines.length; i += 2) {
    const meta = lines[i].index;
    items.push({ index: { _index: meta._index, _id: meta._id, status: failFirst && i === 0 ? 429 : 201, ...(failFirst && i === 0 ? { error: { type: 'es_rejected_execution_exception', reason: 'queue full' } } : {}) } });
  }
  return { took: 1, errors: failFirst, items };
};

t.test('documents and alerts are shipped with _bulk, retried after failures, never duplicated', async (t) => {
  const es = await standIn((n, lines) => (n === 0 ? { status: 503, body: { error: 'unavailable' } } : { status: 200, body: ok(lines, n === 1) }));
  t.teardown(es.close);
  const srv = await startServer(t, {
    env: {
      MESH_SEARCH_EXPORT_URL: `http://127.0.0.1:${es.port}/es/`,
      MESH_SEARCH_EXPORT_USERNAME: 'shipper',
      MESH_SEARCH_EXPORT_PASSWORD: 'shipper-secret',
      MESH_SEARCH_EXPORT_FLUSH_MS: '50',
      MESH_SEARCH_EXPORT_BATCH: '3',
      MESH_ALERT_DEBOUNCE_MS: '50',
    },
  });
  const admin = await srv.login();
  await admin.post('/services', { name: 'no-terminator-service', encryptionRequired: true });

  const docs = Array.from({ length: 5 }, (_, i) => ({ '@timestamp': new Date(Date.now() - i * 1000).toISOString(), zfw: { source_id: 'fw-1', saddr: `10.0.0.${i}`, usage: { circuit: { tx: i * 10, rx: i } } } }));
  const body = docs.flatMap((d) => [JSON.stringify({ index: { _index: 'zfw.events' } }), JSON.stringify(d)]).join('\n') + '\n';
  const auth = 'Basic ' + Buffer.from('admin:admin-test-password').toString('base64');
  const r = await srv.raw('POST', '/search/_bulk', Buffer.from(body), { authorization: auth, 'content-type': 'application/x-ndjson' });
  t.equal(r.status, 200, 'ingested');
  const ids: string[] = r.body.items.map((i: any) => i.index._id);

  // Everything arrives: the five usage documents and the alert about the service.
  const delivered = () => {
    const m = new Map<string, any>();
    for (const req of es.received) {
      if (req.status !== 200) continue;
      const answer = ok(req.lines, es.received.indexOf(req) === 1);
      for (let i = 0; i < req.lines.length; i += 2) if (answer.items[i / 2].index.status === 201) m.set(req.lines[i].index._id, { meta: req.lines[i].index, source: req.lines[i + 1] });
    }
    return m;
  };
  for (let i = 0; i < 400; i++) {
    const m = delivered();
    if (ids.every((id) => m.has(id)) && [...m.values()].some((d) => d.meta._index === 'mesh.alerts')) break;
    await sleep(50);
  }
  const m = delivered();
  for (const [i, id] of ids.entries()) t.same(m.get(id)?.source, docs[i], `usage document ${i} delivered as ingested`);
  for (const id of ids) t.equal(m.get(id)?.meta._index, 'zfw.events', 'into its index');
  const alert = [...m.values()].find((d) => d.meta._index === 'mesh.alerts');
  t.ok(alert, 'the alert is shipped too');
  t.match(alert?.source?.message, /no-terminator-service has no terminators/);

  const first = es.received[0];
  t.equal(first.method, 'POST', 'POST');
  t.equal(first.url, '/es/_bulk', '<url>/_bulk');
  t.equal(first.headers['content-type'], 'application/x-ndjson', 'NDJSON');
  t.equal(first.headers.authorization, 'Basic ' + Buffer.from('shipper:shipper-secret').toString('base64'), 'configured basic credentials');
  t.equal(first.status, 503, 'the first request failed (503)');
  t.same(es.received[1].lines, first.lines, 'the failed batch is sent again, unchanged');
  t.ok(es.received.every((req) => req.lines.length <= 6), 'batches of at most 3 documents');
  const rejectedId = es.received[1].lines[0].index._id;
  t.ok(es.received.slice(2).some((req) => req.lines.some((l) => l.index?._id === rejectedId)), 'the item refused with 429 is sent again');
  t.ok(m.has(rejectedId), 'and delivered');
  // Every document carries its own _id, so the retries never duplicate anything at the cluster.
  const sent = es.received.flatMap((req) => req.lines.filter((l) => l.index).map((l) => l.index._id));
  t.ok(sent.every((id) => typeof id === 'string' && id.length > 0), 'every action names its _id');
});

t.test('an unreachable cluster: the buffer is bounded and the controller keeps serving', async (t) => {
  const es = await standIn(() => ({ status: 200, body: {} }));
  const port = es.port;
  await es.close(); // nothing listens there any more
  const srv = await startServer(t, {
    env: { MESH_SEARCH_EXPORT_URL: `http://127.0.0.1:${port}`, MESH_SEARCH_EXPORT_BUFFER: '3', MESH_SEARCH_EXPORT_FLUSH_MS: '50', MESH_ALERT_DEBOUNCE_MS: '60000' },
  });
  const body = Array.from({ length: 10 }, (_, i) => `{"index":{"_index":"zfw.events"}}\n{"n":${i}}`).join('\n') + '\n';
  const auth = 'Basic ' + Buffer.from('admin:admin-test-password').toString('base64');
  const r = await srv.raw('POST', '/search/_bulk', Buffer.from(body), { authorization: auth, 'content-type': 'application/x-ndjson' });
  t.equal(r.status, 200, 'ingest does not wait for the export');
  t.equal(r.body.errors, false);
  for (let i = 0; i < 100 && !/search export buffer full/.test(srv.output); i++) await sleep(50);
  t.match(srv.output, /search export buffer full/, 'the oldest documents beyond the buffer are dropped, and that is logged');
  const count = await srv.raw('GET', '/search/zfw.events/_count', undefined, { authorization: auth });
  t.equal(count.body.count, 10, 'the embedded store keeps everything');
  const admin = await srv.login();
  t.equal((await admin.get('/identities')).status, 200, 'the API keeps serving');
});
