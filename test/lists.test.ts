/**
 * Lists: paging, sorting, the filter language and role filters, against ~60 identities on one
 * real controller. Expected results are computed in the test from the full list the server returns.
 */
import t from 'tap';
import { startServer, isError, type Res } from './helpers/server.js';

const srv = await startServer(t);
const admin = await srv.login();

const GROUPS = ['alpha', 'beta', 'gamma'];
const N = 60;
interface Ident { id: string; name: string; isAdmin: boolean; roleAttributes: string[]; tags: Record<string, unknown>; createdAt: string }

function spec(i: number) {
  const roleAttributes: string[] = [];
  if (i % 2 === 0) roleAttributes.push('a');
  if (i % 3 === 0) roleAttributes.push('b');
  if (i % 7 === 0) roleAttributes.push('c');
  return {
    name: `${GROUPS[i % 3]}-${String(i).padStart(2, '0')}`,
    type: ['User', 'Device', 'Service'][i % 3],
    isAdmin: i % 5 === 0,
    roleAttributes,
    tags: { grp: i % 4 === 0 ? 'x' : 'y', idx: String(i) },
  };
}

// Create sequentially in small parallel batches (createdAt then differs between batches).
for (let i = 0; i < N; i += 6) {
  const rs = await Promise.all(Array.from({ length: Math.min(6, N - i) }, (_, k) => admin.post('/identities', spec(i + k))));
  for (const r of rs) if (r.status !== 201) throw new Error(`create failed: ${r.status} ${r.text}`);
  await new Promise((r) => setTimeout(r, 3));
}

const allRes = await admin.get('/identities?limit=-1');
const all: Ident[] = allRes.body.data;
const names = (rs: Res) => (rs.body?.data ?? []).map((d: Ident) => d.name);
const sortedNames = (xs: Ident[]) => xs.map((x) => x.name).sort();
const byName = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

async function list(q: string): Promise<Res> {
  return admin.get(`/identities?${q}`);
}
async function filter(f: string, extra = 'limit=-1'): Promise<Res> {
  return list(`filter=${encodeURIComponent(f)}&${extra}`);
}

t.test('full list', async (t) => {
  t.equal(allRes.status, 200);
  t.equal(all.length, N + 1, 'our identities plus the default admin');
  t.equal(allRes.body.meta.pagination.totalCount, N + 1);
  t.equal(allRes.body.meta.pagination.offset, 0);
  const ff: string[] = allRes.body.meta.filterableFields;
  t.ok(Array.isArray(ff), 'filterableFields is an array');
  for (const f of ['id', 'createdAt', 'updatedAt', 'tags', 'isSystem', 'name', 'isAdmin', 'isDefaultAdmin', 'roleAttributes', 'authPolicyId', 'externalId']) {
    t.ok(ff.includes(f), `filterableFields has ${f}`);
  }
  const one = all.find((x) => x.name === 'alpha-00')!;
  t.same(one.roleAttributes.slice().sort(), ['a', 'b', 'c']);
  t.equal(one.isAdmin, true);
  t.same(one.tags, { grp: 'x', idx: '0' });
});

t.test('paging', async (t) => {
  const d = await list('');
  t.equal(d.status, 200);
  t.equal(d.body.data.length, 10, 'default limit 10');
  t.same(d.body.meta.pagination, { limit: 10, offset: 0, totalCount: N + 1 });

  const big = await list('limit=1000');
  t.equal(big.status, 200);
  t.equal(big.body.meta.pagination.limit, 500, 'limit clamped to 500');
  t.equal(big.body.data.length, N + 1);

  const l500 = await list('limit=500');
  t.equal(l500.body.meta.pagination.limit, 500);

  const l0 = await list('limit=0');
  t.equal(l0.status, 200);
  t.equal(l0.body.meta.pagination.limit, 10, 'limit=0 means the default');
  t.equal(l0.body.data.length, 10);

  const none = await list('limit=-1');
  t.equal(none.body.data.length, N + 1, 'limit=-1 returns everything');
  t.equal(none.body.meta.pagination.totalCount, N + 1);

  const l5 = await list('limit=5');
  t.equal(l5.body.data.length, 5);
  t.same(l5.body.meta.pagination, { limit: 5, offset: 0, totalCount: N + 1 });

  const off = await list('limit=10&offset=55');
  t.equal(off.status, 200);
  t.equal(off.body.data.length, N + 1 - 55, 'tail page');
  t.same(off.body.meta.pagination, { limit: 10, offset: 55, totalCount: N + 1 });

  const past = await list('offset=1000');
  t.same(past.body.data, [], 'offset past the end → []');
  t.equal(past.body.meta.pagination.totalCount, N + 1);
  t.equal(past.body.meta.pagination.offset, 1000);

  // Pages are disjoint and together make up the whole collection in the default order.
  const seen: string[] = [];
  for (let o = 0; o < N + 1; o += 20) {
    const p = await list(`limit=20&offset=${o}`);
    seen.push(...p.body.data.map((x: Ident) => x.id));
  }
  t.equal(new Set(seen).size, N + 1, 'pages cover every identity exactly once');
  t.same(seen, all.map((x) => x.id), 'paging follows the default order');

  for (const q of ['limit=abc', 'offset=abc', 'limit=1.5', 'offset=x1']) {
    const r = await list(q);
    t.ok(isError(r, 400, 'INVALID_PAGINATION'), `${q} → 400 INVALID_PAGINATION: ${r.status} ${r.body?.error?.code}`);
  }
  const lc = await list('limit=abc');
  t.equal(lc.body?.error?.cause?.field, 'limit');
});

t.test('sort', async (t) => {
  const asc = await list('sort=name asc&limit=-1');
  t.equal(asc.status, 200);
  t.same(names(asc), all.map((x) => x.name).sort(byName), 'name asc');
  const desc = await list('sort=name desc&limit=-1');
  t.same(names(desc), all.map((x) => x.name).sort(byName).reverse(), 'name desc');
  const plain = await list('sort=name&limit=5');
  t.same(names(plain), all.map((x) => x.name).sort(byName).slice(0, 5), 'direction defaults to asc');
  const cdesc = await list('sort=createdAt desc&limit=-1');
  t.equal(cdesc.status, 200);
  const cs = cdesc.body.data.map((x: Ident) => x.createdAt);
  t.ok(cs.every((c: string, i: number) => i === 0 || cs[i - 1] >= c), 'createdAt desc is non-increasing');
  t.equal(cdesc.body.data[cdesc.body.data.length - 1].name, 'Default Admin', 'oldest last');
  const multi = await list('sort=isAdmin desc,name asc&limit=-1');
  t.equal(multi.status, 200);
  const expectMulti = [...all].sort((a, b) => (a.isAdmin === b.isAdmin ? byName(a.name, b.name) : a.isAdmin ? -1 : 1)).map((x) => x.name);
  t.same(names(multi), expectMulti, 'two sort fields');

  const bad = await list('sort=bogus asc');
  t.ok(isError(bad, 400, 'INVALID_SORT_IDENTIFIER'), `unknown sort field → 400 INVALID_SORT_IDENTIFIER: ${bad.status}`);
  const bad2 = await list('sort=name sideways');
  t.ok(isError(bad2, 400, 'INVALID_SORT_IDENTIFIER'), `bad direction → 400: ${bad2.status}`);
  const bad3 = await list('sort=roleAttributes asc');
  t.equal(bad3.status, 400, 'sorting by a set field → 400');
});

t.test('filters', async (t) => {
  const cases: Array<[string, (x: Ident) => boolean]> = [
    ['name = "beta-04"', (x) => x.name === 'beta-04'],
    ['name="beta-04"', (x) => x.name === 'beta-04'],
    ['name != "beta-04"', (x) => x.name !== 'beta-04'],
    ['name contains "alpha"', (x) => x.name.includes('alpha')],
    ['name icontains "ALPHA"', (x) => x.name.toLowerCase().includes('alpha')],
    ['name not contains "a-"', (x) => !x.name.includes('a-')],
    ['name in ["alpha-03", "gamma-05", "nope"]', (x) => ['alpha-03', 'gamma-05'].includes(x.name)],
    ['name not in ["alpha-03", "gamma-05"]', (x) => !['alpha-03', 'gamma-05'].includes(x.name)],
    ['name > "gamma-50"', (x) => x.name > 'gamma-50'],
    ['name <= "alpha-09"', (x) => x.name <= 'alpha-09'],
    ['isAdmin = true', (x) => x.isAdmin],
    ['isAdmin = false', (x) => !x.isAdmin],
    ['isAdmin', (x) => x.isAdmin],
    ['not isAdmin', (x) => !x.isAdmin],
    ['anyOf(roleAttributes) = "a"', (x) => x.roleAttributes.includes('a')],
    ['anyOf(roleAttributes) in ["b", "c"]', (x) => x.roleAttributes.includes('b') || x.roleAttributes.includes('c')],
    ['allOf(roleAttributes) = "a"', (x) => x.roleAttributes.every((r) => r === 'a')],
    ['count(roleAttributes) >= 2', (x) => x.roleAttributes.length >= 2],
    ['isEmpty(roleAttributes)', (x) => x.roleAttributes.length === 0],
    ['not isEmpty(roleAttributes)', (x) => x.roleAttributes.length > 0],
    ['not (name contains "alpha")', (x) => !x.name.includes('alpha')],
    ['name contains "alpha" and isAdmin = true', (x) => x.name.includes('alpha') && x.isAdmin],
    ['name contains "alpha" or name contains "beta"', (x) => x.name.includes('alpha') || x.name.includes('beta')],
    ['(name contains "alpha" or name contains "beta") and anyOf(roleAttributes) = "c"', (x) => (x.name.includes('alpha') || x.name.includes('beta')) && x.roleAttributes.includes('c')],
    ['name contains "alpha" or name contains "beta" and isAdmin = true', (x) => x.name.includes('alpha') || (x.name.includes('beta') && x.isAdmin)],
    ['tags.grp = "x"', (x) => x.tags.grp === 'x'],
    ['tags.grp = "x" and tags.idx = "8"', (x) => x.tags.grp === 'x' && x.tags.idx === '8'],
    ['tags.nothere = "x"', () => false],
    ['NAME contains "z"', () => false],
    ['name contains "alpha" AND isAdmin = TRUE', (x) => x.name.includes('alpha') && x.isAdmin],
    ['true', () => true],
    ['false', () => false],
  ];
  for (const [f, pred] of cases) {
    if (f === 'NAME contains "z"') continue; // field names are case-sensitive; covered below as an error
    const r = await filter(f);
    t.equal(r.status, 200, `${f} → 200 (${r.body?.error?.cause?.message ?? ''})`);
    const expected = sortedNames(all.filter(pred));
    t.same(names(r).sort(), expected, `${f} → ${expected.length} matches`);
    t.equal(r.body?.meta?.pagination?.totalCount, expected.length, `${f} totalCount`);
  }

  // datetime comparisons against a real createdAt
  const pivot = [...all].sort((a, b) => byName(a.createdAt, b.createdAt))[30].createdAt;
  const gt = await filter(`createdAt > datetime(${pivot})`);
  t.equal(gt.status, 200, 'createdAt > datetime(...)');
  t.same(names(gt).sort(), sortedNames(all.filter((x) => x.createdAt > pivot)), `createdAt > ${pivot}`);
  const le = await filter(`createdAt <= datetime(${pivot})`);
  t.same(names(le).sort(), sortedNames(all.filter((x) => x.createdAt <= pivot)), 'createdAt <= pivot');
  const future = await filter('createdAt > datetime(2999-01-01T00:00:00Z)');
  t.same(future.body.data, [], 'nothing created in the future');
  const between = await filter(`createdAt between datetime(2000-01-01T00:00:00Z) and datetime(${pivot})`);
  t.same(names(between).sort(), sortedNames(all.filter((x) => x.createdAt < pivot)), 'between is upper-exclusive');

  // Paging and sorting inside the filter
  const inside = await filter('name contains "alpha" sort by name desc skip 1 limit 3', '');
  t.equal(inside.status, 200, 'sort by / skip / limit in the filter');
  const alphas = all.filter((x) => x.name.includes('alpha')).map((x) => x.name).sort(byName).reverse();
  t.same(names(inside), alphas.slice(1, 4));
  t.equal(inside.body.meta.pagination.limit, 3);
  t.equal(inside.body.meta.pagination.offset, 1);
  t.equal(inside.body.meta.pagination.totalCount, alphas.length);
  const overrides = await filter('name contains "beta" sort by name asc limit 2', 'limit=50&sort=name desc');
  t.same(names(overrides), all.filter((x) => x.name.includes('beta')).map((x) => x.name).sort(byName).slice(0, 2), 'filter clauses win over query params');
  t.equal(overrides.body.meta.pagination.limit, 2);
  const limNone = await filter('true limit none', 'limit=3');
  t.equal(limNone.body.data.length, N + 1, 'limit none');
  const onlySort = await filter('sort by name asc', 'limit=3');
  t.same(names(onlySort), all.map((x) => x.name).sort(byName).slice(0, 3), 'filter with only sort by');

  // Invalid filters
  for (const f of [
    'identity', 'name = ', 'name = "x', 'nosuchfield = "x"', 'roleAttributes = "a"', 'anyOf(name) = "x"', 'name == "x"',
    'name = "a" and', '(name = "a"', 'name contains', 'isAdmin = 1', 'createdAt = "abc"', 'name startsWith "a"', 'NAME contains "z"',
    'name = "a" limit abc', 'name in []', ')))', 'name = \'single\'', 'type.name = "x"', 'createdAt > datetime(yesterday)',
  ]) {
    const r = await filter(f);
    t.ok(isError(r, 400, 'INVALID_FILTER'), `${JSON.stringify(f)} → 400 INVALID_FILTER: ${r.status} ${r.body?.error?.code ?? ''}`);
  }
});

t.test('indexed and scanned queries agree', async (t) => {
  for (const x of all.slice(0, 20)) {
    const eq = await filter(`name = "${x.name}"`);
    const scan = await filter(`name contains "${x.name}"`);
    const within = await filter(`name in ["${x.name}"]`);
    t.equal(eq.status, 200);
    t.same(eq.body.data.map((d: Ident) => d.id), [x.id], `name = "${x.name}" finds exactly it`);
    t.same(scan.body.data.map((d: Ident) => d.id), eq.body.data.map((d: Ident) => d.id), `contains agrees for ${x.name}`);
    t.same(within.body.data.map((d: Ident) => d.id), [x.id], `in agrees for ${x.name}`);
    t.same(eq.body.data[0], x, 'same record as in the full list');
  }
  const miss = await filter('name = "alpha"');
  t.same(miss.body.data, [], 'equality is not a prefix match');
  const ci = await filter('name = "ALPHA-00"');
  t.same(ci.body.data, [], 'equality is case-sensitive');
});

t.test('roleFilter and roleSemantic', async (t) => {
  const anyOf = await list('roleFilter=%23a&roleFilter=%23b&roleSemantic=AnyOf&limit=-1');
  t.equal(anyOf.status, 200);
  t.same(names(anyOf).sort(), sortedNames(all.filter((x) => x.roleAttributes.includes('a') || x.roleAttributes.includes('b'))), 'AnyOf #a #b');
  const allOf = await list('roleFilter=%23a&roleFilter=%23b&roleSemantic=AllOf&limit=-1');
  t.same(names(allOf).sort(), sortedNames(all.filter((x) => x.roleAttributes.includes('a') && x.roleAttributes.includes('b'))), 'AllOf #a #b');
  const dflt = await list('roleFilter=%23a&roleFilter=%23b&limit=-1');
  t.same(names(dflt).sort(), names(allOf).sort(), 'AllOf is the default');
  const single = await list('roleFilter=%23c&limit=-1');
  t.same(names(single).sort(), sortedNames(all.filter((x) => x.roleAttributes.includes('c'))), '#c');
  const target = all.find((x) => x.name === 'gamma-05')!;
  const withId = await list(`roleFilter=%23c&roleFilter=%40${target.id}&roleSemantic=AnyOf&limit=-1`);
  t.same(names(withId).sort(), sortedNames(all.filter((x) => x.roleAttributes.includes('c') || x.id === target.id)), '@id entries union in');
  const combined = await list(`roleFilter=%23a&roleSemantic=AnyOf&filter=${encodeURIComponent('isAdmin = true')}&limit=-1`);
  t.same(names(combined).sort(), sortedNames(all.filter((x) => x.roleAttributes.includes('a') && x.isAdmin)), 'roleFilter combines with filter');
  const paged = await list('roleFilter=%23a&roleSemantic=AnyOf&limit=3');
  t.equal(paged.body.data.length, 3);
  t.equal(paged.body.meta.pagination.totalCount, all.filter((x) => x.roleAttributes.includes('a')).length, 'totalCount counts role matches');
  const badSem = await list('roleFilter=%23a&roleSemantic=Sometimes');
  t.equal(badSem.status, 400, `unknown roleSemantic → 400: ${badSem.status}`);
});

t.test('lists of other families honour the same paging and filters', async (t) => {
  for (let i = 0; i < 12; i++) {
    const r = await admin.post('/services', { name: `svc-${String(i).padStart(2, '0')}`, encryptionRequired: i % 2 === 0, roleAttributes: i % 3 === 0 ? ['web'] : [] });
    t.equal(r.status, 201);
  }
  const d = await admin.get('/services');
  t.same(d.body.meta.pagination, { limit: 10, offset: 0, totalCount: 12 });
  const f = await admin.get(`/services?filter=${encodeURIComponent('anyOf(roleAttributes) = "web" sort by name desc')}`);
  t.same(names(f), ['svc-09', 'svc-06', 'svc-03', 'svc-00']);
  const enc = await admin.get(`/services?filter=${encodeURIComponent('name contains "svc-0"')}&limit=-1`);
  t.equal(enc.status, 200);
  t.equal(enc.body.data.length, 10);
  const rf = await admin.get('/services?roleFilter=%23web&limit=-1');
  t.equal(rf.body.data.length, 4, 'services roleFilter');
  const bad = await admin.get('/services?filter=bogus');
  t.ok(isError(bad, 400, 'INVALID_FILTER'));
  const pag = await admin.get('/service-policies?limit=abc');
  t.ok(isError(pag, 400, 'INVALID_PAGINATION'));
});

t.test('name searches find very long and non-ASCII names', async (t) => {
  const own = await startServer(t);
  const a = await own.login();
  const long = '😀'.repeat(480);
  t.equal((await a.post('/identities', { name: long, type: 'User', isAdmin: false })).status, 201);
  t.equal((await a.post('/identities', { name: 'short 😀', type: 'User', isAdmin: false })).status, 201);
  const r = await a.get('/identities?filter=' + encodeURIComponent('name contains "😀"'));
  t.equal(r.body.meta.pagination.totalCount, 2, 'both found by contains');
  const eq = await a.get('/identities?filter=' + encodeURIComponent(`name = "${long}"`));
  t.equal(eq.body.meta.pagination.totalCount, 1, 'the long name found by equality');
  const dup = await a.post('/identities', { name: long, type: 'User', isAdmin: false });
  t.equal(dup.status, 400, 'and it stays unique');
});
