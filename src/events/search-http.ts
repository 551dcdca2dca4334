/**
 * `/search/…` on the API listener: the Elasticsearch HTTP interface of the embedded search store,
 * so the seed's `{search_url}` is `https://<address>/search`.
 *
 *   GET|POST /search/<index pattern>/_search   query + aggregations (body, or `?source=`), `?pretty`
 *   GET|POST /search/<index pattern>/_count    `{count}` of the query
 *   POST|PUT /search[/<index>]/_bulk           NDJSON ingest (index, create, delete)
 *   POST     /search/<index>/_doc              one document
 *   GET      /search/_cat/indices              index list (`?format=json`, or a text table)
 *   GET      /search                           what this is
 *
 * Answers and errors use Elasticsearch's shapes (`{error:{root_cause,type,reason},status}`), since
 * the callers are search clients, not Edge API clients.
 */
import type { EventsApp as App } from './context.js';
import type { Reply, Req } from '../core/operation.js';
import { ApiError } from '../core/errors.js';
import { parseBulk } from './bulk.js';
import { SearchError, compileSearch } from './query.js';
import { patternMatcher, type SearchStore } from './search-store.js';
import { SearchAuth, Unauthenticated } from './search-auth.js';

const SEARCH_PREFIX = '/search';

function esError(e: SearchError, headers?: Record<string, string>): Reply {
  const cause = { type: e.type, reason: e.message };
  return { status: e.status, body: { error: { root_cause: [cause], ...cause }, status: e.status }, headers };
}

function json(req: Req, status: number, body: unknown): Reply {
  // `?pretty` (any value but false) indents, as Elasticsearch does.
  const pretty = req.query.has('pretty') && req.query.get('pretty') !== 'false';
  return pretty ? { status, body: JSON.stringify(body, null, 2) + '\n', contentType: 'application/json; charset=UTF-8' } : { status, body };
}

/** The request body as JSON: GET and POST bodies alike, or `?source=` (with `source_content_type`). */
function jsonBody(req: Req): unknown {
  const text = req.body.length ? req.body.toString('utf8') : req.query.get('source') ?? '';
  if (text.trim() === '') return undefined;
  try {
    return JSON.parse(text);
  } catch (e) {
    throw new SearchError(400, 'x_content_parse_exception', `request body is not valid JSON: ${(e as Error).message}`);
  }
}

export function searchRoute(app: App, store: SearchStore) {
  const auth = new SearchAuth(app);

  async function search(req: Req, pattern: string, count: boolean): Promise<Reply> {
    const body = jsonBody(req);
    const now = Date.now();
    const q = count ? { query: (body as Record<string, unknown> | undefined)?.query, size: 0 } : body;
    // Shape errors are answered here, before any worker is involved.
    compileSearch(q, now);
    const { match, concrete } = patternMatcher(pattern);
    for (const name of concrete) {
      if (!store.hasIndex(name) && req.query.get('ignore_unavailable') !== 'true') {
        throw new SearchError(404, 'index_not_found_exception', `no such index [${name}]`);
      }
    }
    const indices = store.indices().map((i) => i.index).filter(match);
    const out = await app.pool.run('searchDocs', { dir: store.dir, indices, body: q, now });
    if (!out.ok) throw new SearchError(out.status, out.type, out.reason);
    if (count) {
      const total = (out.body.hits as { total: { value: number } }).total.value;
      return json(req, 200, { count: total, _shards: out.body._shards });
    }
    return json(req, 200, out.body);
  }

  /** The `_bulk` answer body for an NDJSON text. */
  async function bulk(text: string, defaultIndex: string | undefined): Promise<{ took: number; errors: boolean; items: Record<string, any>[] }> {
    const started = performance.now();
    const items = parseBulk(text, defaultIndex);
    const accepted = items.filter((i) => !i.error && i.action !== 'update');
    const outcomes = await store.bulk(accepted.map((i) => ({ op: i.action as 'index' | 'create' | 'delete', index: i.index, id: i.id, source: i.source })));
    let n = 0;
    let errors = false;
    const rendered = items.map((i) => {
      const base = { _index: i.index };
      if (i.error) {
        errors = true;
        return { [i.action]: { ...base, _id: i.id ?? null, status: i.error.status, error: { type: i.error.type, reason: i.error.reason } } };
      }
      const o = outcomes[n++];
      if (!o.ok) {
        errors = true;
        return { [i.action]: { ...base, _id: o.id ?? null, status: o.status, error: { type: o.type, reason: o.reason } } };
      }
      const result = i.action === 'delete' ? 'deleted' : o.created ? 'created' : 'updated';
      return {
        [i.action]: {
          ...base, _id: o.id, _version: 1, result, _shards: { total: 1, successful: 1, failed: 0 }, _seq_no: 0, _primary_term: 1,
          status: i.action === 'delete' ? 200 : o.created ? 201 : 200,
        },
      };
    });
    return { took: Math.round(performance.now() - started), errors, items: rendered };
  }

  async function route(req: Req): Promise<Reply> {
    const rest = req.path.slice(SEARCH_PREFIX.length).split('/').filter(Boolean).map(decodeURIComponent);
    const m = req.method;
    const identity = await auth.identify(req);
    const read = (what: string) => auth.authorize(identity, 'read', what);
    const write = (what: string) => auth.authorize(identity, 'update', what);

    if (rest.length === 0 && (m === 'get' || m === 'head')) {
      read('cluster:monitor/main');
      return json(req, 200, { name: 'mesh-controller', cluster_name: 'mesh', version: { number: app.version, distribution: 'mesh-embedded-search' }, tagline: 'You Know, for Search' });
    }
    const last = rest[rest.length - 1];
    if ((last === '_search' || last === '_count') && rest.length <= 2 && (m === 'get' || m === 'post')) {
      read('indices:data/read/search');
      return search(req, rest.length === 2 ? rest[0] : '_all', last === '_count');
    }
    if (last === '_bulk' && rest.length <= 2 && (m === 'post' || m === 'put')) {
      write('indices:data/write/bulk');
      return json(req, 200, await bulk(req.body.toString('utf8'), rest.length === 2 ? rest[0] : undefined));
    }
    if (rest.length === 2 && rest[1] === '_doc' && m === 'post') {
      write('indices:data/write/index');
      // One document: the body must be one JSON object (a newline inside it would split the NDJSON).
      const source = jsonBody(req);
      const r = await bulk(JSON.stringify({ index: { _index: rest[0] } }) + '\n' + JSON.stringify(source ?? null) + '\n', undefined);
      const item = (r.items[0] ?? {}).index;
      if (item?.error) throw new SearchError(item.status, item.error.type, item.error.reason);
      const { status, ...doc } = item;
      return json(req, status, doc);
    }
    if (rest.length === 2 && rest[0] === '_cat' && rest[1] === 'indices' && m === 'get') {
      read('indices:monitor/stats');
      const list = store.indices().map((i) => ({ health: 'green', status: 'open', index: i.index, 'docs.count': String(i.docs) }));
      if (req.query.get('format') === 'json') return json(req, 200, list);
      const header = req.query.has('v') ? 'health status index docs.count\n' : '';
      return { status: 200, body: header + list.map((i) => `${i.health} ${i.status} ${i.index} ${i['docs.count']}`).join('\n') + (list.length ? '\n' : ''), contentType: 'text/plain; charset=UTF-8' };
    }
    throw new SearchError(400, 'illegal_argument_exception', `no handler found for uri [${req.path}] and method [${m.toUpperCase()}]`);
  }

  return {
    method: '*' as const,
    path: SEARCH_PREFIX,
    prefix: true,
    async handle(req: Req, requestId: string): Promise<Reply> {
      try {
        return await route(req);
      } catch (e) {
        if (e instanceof Unauthenticated) return esError(e, { 'www-authenticate': 'Basic realm="mesh-search", charset="UTF-8"' });
        if (e instanceof SearchError) return esError(e);
        if (e instanceof ApiError && e.status === 429) return esError(new SearchError(429, 'es_rejected_execution_exception', 'the controller is busy; retry later'));
        if (e instanceof URIError) return esError(new SearchError(400, 'illegal_argument_exception', 'malformed percent-encoding in the path'));
        app.log.error({ requestId, path: req.path, err: e }, 'search request failed');
        return esError(new SearchError(500, 'exception', `internal error (request ${requestId})`));
      }
    },
  };
}
