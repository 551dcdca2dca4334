/**
 * The search subset on its own (pure functions of src/events): Elasticsearch date math and the
 * query and aggregation semantics the embedded store shares with a real cluster.
 */
import t from 'tap';
import { resolveDate, parseDate, DateMathError } from '../../../src/events/date-math.js';
import { compileSearch, executeSearch, SearchError, type Doc } from '../../../src/events/query.js';
import { patternMatcher, checkIndexName } from '../../../src/events/search-store.js';
import { parseBulk } from '../../../src/events/bulk.js';

/** The thrown error is an instance of `cls`. */
function throwsType(t: Tap, fn: () => unknown, cls: new (...a: any[]) => Error, msg: string) {
  try {
    fn();
    t.fail(`${msg}: nothing thrown`);
  } catch (e) {
    t.ok(e instanceof cls, `${msg} (${(e as Error).message})`);
  }
}
type Tap = import('../../helpers/assert.js').Tap;

const NOW = Date.UTC(2026, 10, 23, 15, 30, 45, 123); // Monday 2026-11-23 15:30:45.123Z

t.test('date math', async (t) => {
  t.equal(resolveDate('now', NOW), NOW);
  t.equal(resolveDate('now-24h', NOW), NOW - 24 * 3_600_000);
  t.equal(resolveDate('now-1d/d', NOW), Date.UTC(2026, 10, 22), 'rounded down for gte');
  t.equal(resolveDate('now/d', NOW, { roundUp: true }), Date.UTC(2026, 10, 24) - 1, 'rounded up for lte: the whole day');
  t.equal(resolveDate('now/w', NOW), Date.UTC(2026, 10, 23), 'weeks start on Monday');
  t.equal(resolveDate('now-1M/M', NOW), Date.UTC(2026, 9, 1));
  t.equal(resolveDate('now+1y-2m+30s', NOW), Date.UTC(2027, 10, 23, 15, 28, 75, 123));
  t.equal(resolveDate('2026-11-01||+1M', NOW), Date.UTC(2026, 11, 1));
  t.equal(resolveDate('2026-11-23T10:00:00+02:00', NOW), Date.UTC(2026, 10, 23, 8));
  t.equal(resolveDate(1700000000000, NOW), 1700000000000, 'epoch millis');
  t.equal(resolveDate('1700000000', NOW, { format: 'epoch_second' }), 1700000000000);
  t.equal(parseDate('2026-11-23'), Date.UTC(2026, 10, 23), 'date without time');
  t.equal(parseDate('2026-11-23T15:00:00.000Z'), Date.UTC(2026, 10, 23, 15));
  for (const bad of ['now-1x', 'now-', 'yesterday', '2026-13-01', 'now/', 'now*2d']) throwsType(t, () => resolveDate(bad, NOW), DateMathError, `${bad} refused`);
});

const docs: Doc[] = [
  { index: 'a', id: '1', ts: NOW - 1000, source: { '@timestamp': new Date(NOW - 1000).toISOString(), host: 'Alpha Server', n: 5, tags: ['x', 'y'], nested: { v: 1 } } },
  { index: 'a', id: '2', ts: NOW - 2000, source: { '@timestamp': new Date(NOW - 2000).toISOString(), host: 'beta', n: 7, tags: ['y'], 'nested.v': 2 } },
  { index: 'b', id: '3', ts: NOW - 3 * 3_600_000, source: { '@timestamp': new Date(NOW - 3 * 3_600_000).toISOString(), host: 'beta', n: 1, tags: ['y', 'y'] } },
  { index: 'b', id: '4', ts: NOW, source: { host: 'x'.repeat(300), n: '4' } },
];
const run = (body: unknown) => executeSearch(compileSearch(body, NOW), docs, () => 0) as any;

t.test('queries', async (t) => {
  t.equal(run({}).hits.total.value, 4, 'match all by default');
  t.equal(run({ query: { range: { '@timestamp': { gte: 'now-1h' } } } }).hits.total.value, 2, 'time range; no @timestamp never matches');
  t.equal(run({ query: { term: { host: 'alpha' } } }).hits.total.value, 1, 'term on text matches a lower-cased token');
  t.equal(run({ query: { term: { 'host.keyword': 'alpha' } } }).hits.total.value, 0, 'term on keyword is exact');
  t.equal(run({ query: { term: { 'host.keyword': 'x'.repeat(300) } } }).hits.total.value, 0, 'keyword ignores strings above 256 characters');
  t.equal(run({ query: { match: { host: 'ALPHA gamma' } } }).hits.total.value, 1, 'match: any token');
  t.equal(run({ query: { match: { host: { query: 'alpha gamma', operator: 'and' } } } }).hits.total.value, 0, 'match: operator and');
  t.equal(run({ query: { range: { n: { gt: 4, lte: 7 } } } }).hits.total.value, 2, 'numeric range');
  t.equal(run({ query: { range: { n: { gte: 4 } } } }).hits.total.value, 3, 'numeric strings compare as numbers');
  t.equal(run({ query: { term: { 'nested.v': 2 } } }).hits.total.value, 1, 'dotted key');
  t.equal(run({ query: { term: { 'nested.v': 1 } } }).hits.total.value, 1, 'nested object');
  t.equal(run({ query: { bool: { should: [{ term: { n: 5 } }, { term: { n: 1 } }] } } }).hits.total.value, 2, 'should alone: one must match');
  t.equal(run({ query: { bool: { should: [{ term: { n: 5 } }, { term: { 'tags.keyword': 'x' } }], minimum_should_match: 2 } } }).hits.total.value, 1, 'minimum_should_match');
  t.equal(run({ query: { bool: { filter: { exists: { field: '@timestamp' } }, must_not: [{ ids: { values: ['1'] } }] } } }).hits.total.value, 2, 'exists, ids, must_not');
  const sorted = run({ sort: [{ n: 'desc' }], size: 2 });
  t.same(sorted.hits.hits.map((h: any) => h._id), ['2', '1'], 'sort by a number, desc');
  throwsType(t, () => run({ sort: ['host'] }), SearchError, 'sorting on text is refused like Elasticsearch');
  throwsType(t, () => run({ query: { nope: {} } }), SearchError, 'refused');
  throwsType(t, () => run({ size: -1 }), SearchError, 'refused');
  throwsType(t, () => run({ whatever: 1 }), SearchError, 'unknown top-level key');
});

t.test('aggregations', async (t) => {
  const r = run({ size: 0, aggs: { tags: { terms: { field: 'tags.keyword' }, aggs: { s: { sum: { field: 'n' } }, lo: { min: { field: 'n' } }, hi: { max: { field: 'n' } }, avg: { avg: { field: 'n' } } } } } });
  const b = r.aggregations.tags.buckets;
  t.same(b.map((x: any) => [x.key, x.doc_count]), [['y', 3], ['x', 1]], 'a document counts once per distinct value; ordered by count');
  t.same([b[0].s.value, b[0].lo.value, b[0].hi.value, b[0].avg.value], [13, 1, 7, 13 / 3], 'sum, min, max, avg');
  const byKey = run({ size: 0, aggs: { h: { terms: { field: 'host.keyword', order: { _key: 'asc' }, size: 1 } } } });
  t.same(byKey.aggregations.h.buckets.map((x: any) => x.key), ['Alpha Server'], 'order by key, size');
  t.equal(byKey.aggregations.h.sum_other_doc_count, 2, 'what size left out is counted');
  const tie = run({ size: 0, aggs: { h: { terms: { field: 'n', order: { _count: 'desc' } } } } });
  t.same(tie.aggregations.h.buckets.map((x: any) => x.key), [1, 4, 5, 7], 'equal counts: by key ascending; numeric strings count as numbers');
  const stats = run({ size: 0, aggs: { s: { stats: { field: 'n' } }, c: { cardinality: { field: 'host.keyword' } }, v: { value_count: { field: 'n' } } } });
  t.same(stats.aggregations.s, { count: 4, min: 1, max: 7, avg: 17 / 4, sum: 17 });
  t.equal(stats.aggregations.c.value, 2, 'cardinality (long strings have no keyword)');
  t.equal(stats.aggregations.v.value, 4);
  const hist = run({ size: 0, aggs: { h: { date_histogram: { field: '@timestamp', calendar_interval: 'hour' } } } });
  t.same(hist.aggregations.h.buckets.map((x: any) => x.doc_count), [1, 2], 'calendar histogram, empty buckets left out');
  const f = run({ size: 0, aggs: { f: { filter: { term: { host: 'beta' } }, aggs: { s: { sum: { field: 'n' } } } } } });
  t.same(f.aggregations.f, { doc_count: 2, s: { value: 8 } }, 'filter aggregation');
  t.throws(() => run({ aggs: { x: { terms: { field: 'host' } } } }), /Text fields are not optimised/, 'terms on text: 400 like Elasticsearch');
  throwsType(t, () => run({ aggs: { x: { terms: { field: 'n', order: { nope: 'desc' } } } } }), SearchError, 'order by an unknown sub-aggregation');
  throwsType(t, () => run({ aggs: { x: { sum: { field: 'n' }, aggs: { y: { sum: { field: 'n' } } } } } }), SearchError, 'metrics take no sub-aggregations');
  throwsType(t, () => run({ aggs: { x: { bogus: {} } } }), SearchError, 'refused');
});

t.test('index patterns, names and bulk bodies', async (t) => {
  const m = patternMatcher('zfw.events*,-zfw.events-old,mesh.alerts');
  t.ok(m.match('zfw.events-2026') && m.match('mesh.alerts') && !m.match('zfw.events-old') && !m.match('other'));
  t.same(m.concrete, ['mesh.alerts']);
  t.ok(patternMatcher('_all').match('anything'));
  t.equal(checkIndexName('zfw.events'), undefined);
  for (const bad of ['Upper', 'a b', '_x', 'a*', '', 'a/b']) t.type(checkIndexName(bad), 'string', `${JSON.stringify(bad)} refused`);
  const items = parseBulk('{"index":{"_index":"x"}}\n{"a":1}\n\n{"delete":{"_id":"7"}}\n{"create":{}}\n[1]\n', 'dflt');
  t.same(items.map((i) => [i.action, i.index, i.id ?? null, i.error?.status ?? null]), [['index', 'x', null, null], ['delete', 'dflt', '7', null], ['create', 'dflt', null, 400]]);
  throwsType(t, () => parseBulk('{"index":{}}\n{"a":1}\n', undefined), SearchError, 'no index');
  throwsType(t, () => parseBulk('{"index":{"_index":"x"}}\n', undefined), SearchError, 'document line missing');
});
