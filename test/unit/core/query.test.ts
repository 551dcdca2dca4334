/**
 * src/core/query.ts, the list engine, on a real LMDB store: the paging and sort parameters
 * (defaults, clamps, what is refused), and every way it answers a query — an index's candidates,
 * the name index's keys, id order, a walk of a unique index, a scan — agreeing with a plain
 * evaluation of the same filter, sort and page over all records (the `records` source).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { Store, type CollectionName, type Rec } from '../../../src/store/store.js';
import { DEFAULT_LIMIT, MAX_LIMIT, MAX_OFFSET, parseListParams, runList, type ListSource } from '../../../src/core/query.js';
import type { SymbolTable } from '../../../src/core/filter/index.js';
import { ApiError } from '../../../src/core/errors.js';

const symbols: SymbolTable = {
  id: { type: 'string' },
  name: { type: 'string' },
  color: { type: 'string' },
  size: { type: 'number' },
  weight: { type: 'number' },
};
const q = (params: Record<string, string>) => new URLSearchParams(params);

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (e) {
    if (e instanceof ApiError) return e.code;
    throw e;
  }
  return undefined;
}

t.test('paging and sort parameters', async (t) => {
  const p = (params: Record<string, string>) => parseListParams(q(params), symbols);
  t.match(p({}), { limit: DEFAULT_LIMIT, offset: 0, sort: [] }, 'defaults');
  t.equal(p({ limit: '-1' }).limit, -1, 'limit -1: everything');
  t.equal(p({ limit: '-5' }).limit, DEFAULT_LIMIT, 'other negative limits: the default');
  t.equal(p({ limit: '0' }).limit, DEFAULT_LIMIT, 'limit 0: the default');
  t.equal(p({ limit: '100000' }).limit, MAX_LIMIT, 'capped');
  t.equal(p({ offset: '-3' }).offset, 0, 'a negative offset is 0');
  t.equal(p({ offset: String(MAX_OFFSET + 1) }).offset, MAX_OFFSET, 'capped');
  t.same(p({ sort: 'color desc, name' }).sort, [{ field: 'color', desc: true }, { field: 'name', desc: false }]);
  t.match(p({ filter: 'size > 1 sort by name desc skip 2 limit 3', sort: 'color', limit: '50', offset: '9' }), { limit: 3, offset: 2, sort: [{ field: 'name', desc: true }] }, "the filter's own clauses win");
  t.same(parseListParams(q({ sort: 'nope' }), symbols, { sortParamIgnored: true }).sort, [], 'an ignored sort parameter is not checked');
  for (const [params, code] of [
    [{ limit: 'ten' }, 'INVALID_PAGINATION'], [{ limit: '1.5' }, 'INVALID_PAGINATION'], [{ offset: '1e3' }, 'INVALID_PAGINATION'],
    [{ limit: '9'.repeat(19) }, 'INVALID_PAGINATION'], [{ sort: 'nope' }, 'INVALID_SORT_IDENTIFIER'], [{ sort: 'name sideways' }, 'INVALID_SORT_IDENTIFIER'],
    [{ sort: 'name asc desc' }, 'INVALID_SORT_IDENTIFIER'], [{ filter: 'size = ' }, 'INVALID_FILTER'],
  ] as const) {
    t.equal(codeOf(() => p(params)), code, `${new URLSearchParams(params)} → ${code}`);
  }
});

t.test('every query path agrees with a plain evaluation', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-query-'));
  const things = new Store<{ things: Rec }>(dir, [{ name: 'things', unique: ['name'], indexes: ['color', 'size'] }]);
  // The list engine reads collections by name only: it lists this test collection as it would any other.
  const store = things as unknown as Store;
  t.teardown(async () => {
    await things.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const colors = ['red', 'green', 'blue', 'cyan'];
  // A fixed pseudo-random sequence: a failure reproduces.
  let seed = 7;
  const rnd = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) % n);
  await things.write((tx) => {
    for (let i = 0; i < 400; i++) {
      const id = `t${String(i).padStart(4, '0')}`;
      tx.put('things', { id, createdAt: i, updatedAt: i, name: `thing-${rnd(100000)}-${i}`, color: colors[rnd(4)], size: rnd(20), weight: rnd(1000) });
    }
  });
  const all: Rec[] = [...things.scan('things')];
  t.equal(all.length, 400);
  const fromStore: ListSource = { collection: 'things' as CollectionName, symbols, filterableFields: Object.keys(symbols) };
  const plain: ListSource = { ...fromStore, records: all };
  const ids = (page: (Rec | string)[]) => page.map((x) => (typeof x === 'string' ? x : x.id));

  const filters = [
    '', 'color = "red"', 'color in ["red", "blue"]', 'size >= 5 and size < 12', 'size > 5 and size <= 12', 'size = 3 or size = 17',
    'weight > 500', 'color = "green" and weight < 300', 'name contains "-1"', 'name = "nope"', 'id in ["t0003", "t0399", "t9999"]',
    'name contains "thing" and id > "t0200"', 'not (color = "cyan")', 'size between 4 and 9',
  ];
  const sorts = ['', 'name', 'name desc', 'color', 'size desc, name', 'weight', 'id desc'];
  const pages: Record<string, string>[] = [{}, { limit: '7' }, { limit: '7', offset: '5' }, { limit: '-1' }, { offset: '395' }];
  let compared = 0;
  let nonEmpty = 0;
  for (const filter of filters) {
    for (const sort of sorts) {
      for (const page of pages) {
        const params = parseListParams(q({ ...(filter ? { filter } : {}), ...(sort ? { sort } : {}), ...page }), symbols);
        const got = runList(store, fromStore, params);
        const want = runList(store, plain, params);
        const label = `filter ${JSON.stringify(filter)} sort ${JSON.stringify(sort)} ${new URLSearchParams(page)}`;
        // Without a sort both answer in id order: the plain source is given the records in id order.
        if (JSON.stringify(ids(got.page)) !== JSON.stringify(ids(want.page)) || JSON.stringify(got.pagination) !== JSON.stringify(want.pagination)) {
          t.same({ page: ids(got.page), pagination: got.pagination }, { page: ids(want.page), pagination: want.pagination }, label);
        }
        compared++;
        if (want.page.length > 0) nonEmpty++;
      }
    }
  }
  t.equal(compared, filters.length * sorts.length * pages.length, `${compared} queries compared`);
  t.ok(nonEmpty > compared / 2, `${nonEmpty} of them with a non-empty page`);
  t.equal(codeOf(() => runList(store, fromStore, parseListParams(q({ filter: 'nope = 1' }), symbols))), 'INVALID_FILTER', 'an unknown field is refused when the filter is compiled');

  const sub: ListSource = { ...fromStore, candidates: ['t0012', 't0010', 't0011', 't0010'] };
  const r = runList(store, sub, parseListParams(q({ limit: '-1' }), symbols));
  t.same(ids(r.page), ['t0010', 't0011', 't0012'], 'candidates: each once, in id order');
  t.equal(r.pagination.totalCount, 3);
  const filtered = runList(store, { ...sub, where: (rec) => rec.id !== 't0011' }, parseListParams(q({ limit: '-1' }), symbols));
  t.same(ids(filtered.page), ['t0010', 't0012'], 'a where condition narrows the candidates');
  const gone = runList(store, { ...sub, candidates: ['t0010', 't9999'], candidatesNeedFilter: true }, parseListParams(q({ filter: 'size >= 0', limit: '-1' }), symbols));
  t.same(ids(gone.page), ['t0010'], 'a candidate with no record drops out when the filter runs');
});
