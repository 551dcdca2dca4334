/**
 * The limits table (src/api/limits.ts) as the validator applies it, and docs/limits.md in step
 * with it; the duplicate-name detector (src/api/json-keys.ts).
 */
import t from 'tap';
import fs from 'node:fs';
import { BodyValidator } from '../../../src/api/validate.js';
import { DEFINITION_LIMITS, FIELD_LIMITS, type Limit } from '../../../src/api/limits.js';
import { countNames, countParsedNames, duplicateKey } from '../../../src/api/json-keys.js';
import { validationCause } from '../../helpers/assert.js';

const mgmt = new BodyValidator('management');
const client = new BodyValidator('client');

const cause = validationCause;

const identity = (extra: Record<string, unknown> = {}) => ({ name: 'alice', type: 'User', isAdmin: false, ...extra });
const service = (extra: Record<string, unknown> = {}) => ({ name: 's', encryptionRequired: true, ...extra });
const policy = (extra: Record<string, unknown> = {}) => ({ name: 'p', type: 'Dial', semantic: 'AnyOf', identityRoles: ['#a'], serviceRoles: ['#b'], ...extra });

t.test('control characters in names and identifiers', async (t) => {
  for (const ch of ['\u0000', '\u0001', '\t', '\n', '\u001b', '\u007f', '\u0085', '\u009f']) {
    const label = JSON.stringify(ch);
    t.equal(cause(() => mgmt.validate('identityCreate', identity({ name: `a${ch}b` }))).field, 'name', `name with ${label}`);
    t.match(cause(() => mgmt.validate('identityCreate', identity({ name: `a${ch}b` }))).reason, /must not contain control characters/);
    t.equal(cause(() => mgmt.validate('identityCreate', identity({ roleAttributes: ['ok', `r${ch}`] }))).field, 'roleAttributes.1', `attribute with ${label}`);
    t.equal(cause(() => mgmt.validate('identityPatch', { externalId: `e${ch}` })).field, 'externalId', `externalId with ${label}`);
    t.equal(cause(() => mgmt.validate('identityCreate', identity({ tags: { [`k${ch}`]: 'v' } }))).field, 'tags', `tag key with ${label}`);
    t.equal(cause(() => mgmt.validate('servicePolicyCreate', policy({ identityRoles: [`#a${ch}`] }))).field, 'identityRoles.0', `role with ${label}`);
    t.equal(cause(() => mgmt.validate('serviceCreate', service({ terminatorStrategy: `x${ch}` }))).field, 'terminatorStrategy');
    t.equal(cause(() => mgmt.validate('externalJwtSignerPatch', { kid: `k${ch}` })).field, 'kid');
  }
  // Free text keeps its control characters: tag values, config data, PEMs.
  t.ok(mgmt.validate('identityCreate', identity({ tags: { k: 'line\nbreak\u0000' }, appData: { note: 'a\tb' } })));
  t.ok(mgmt.validate('configCreate', { name: 'c', configTypeId: 'ct', data: { text: 'a\u0000b\n' } }));
  // Ordinary Unicode is not a control character.
  t.ok(mgmt.validate('identityCreate', identity({ name: 'ид-😀-مرحبا\u200b\u202e' })));
  // Login bodies are not bounded beyond the spec: a username or a client's reported OS strings never
  // stop a login at validation (a bad username is an ordinary 401).
  t.ok(client.validate('authenticate', { username: 'user\u0001', password: 'secret', envInfo: { osVersion: 'v\u0001' } }));
});

t.test('lengths, ranges and list sizes', async (t) => {
  let c = cause(() => mgmt.validate('serviceCreate', service({ terminatorStrategy: 'x'.repeat(256) })));
  t.same([c.field, c.reason], ['terminatorStrategy', 'terminatorStrategy must be at most 255 characters long']);
  t.ok(mgmt.validate('serviceCreate', service({ terminatorStrategy: 'x'.repeat(255) })), '255 characters fit');
  c = cause(() => mgmt.validate('serviceCreate', service({ maxIdleTimeMillis: -1 })));
  t.same([c.field, c.reason, c.value], ['maxIdleTimeMillis', 'maxIdleTimeMillis must be greater than or equal to 0', '-1']);
  t.equal(cause(() => mgmt.validate('serviceCreate', service({ maxIdleTimeMillis: 1e308 }))).field, 'maxIdleTimeMillis');
  t.ok(mgmt.validate('serviceCreate', service({ maxIdleTimeMillis: 0 })));
  t.equal(cause(() => mgmt.validate('postureCheckCreate', { name: 'm', typeId: 'MFA', timeoutSeconds: -2 })).field, 'timeoutSeconds');
  t.ok(mgmt.validate('postureCheckCreate', { name: 'm', typeId: 'MFA', timeoutSeconds: -1 }), '-1 is "no timeout"');
  t.equal(cause(() => mgmt.validate('caPatch', { externalIdClaim: { location: 'COMMON_NAME', matcher: 'ALL', matcherCriteria: '', parser: 'NONE', parserCriteria: '', index: -1 } })).field, 'externalIdClaim.index');
  t.equal(cause(() => mgmt.validate('identityCreate', identity({ serviceHostingCosts: { s: -1 } }))).field, 'serviceHostingCosts.s');
  t.equal(cause(() => mgmt.validate('disableParams', { durationMinutes: -1 })).field, 'durationMinutes');
  // Upstream's auth policy rule stays: negatives are accepted (and normalised when stored).
  const updb = { allowed: true, minPasswordLength: -1, maxAttempts: -1, lockoutDurationMinutes: -1, requireMixedCase: false, requireNumberChar: false, requireSpecialChar: false };
  const ap = (u: object) => ({ name: 'ap', primary: { cert: { allowed: true, allowExpiredCerts: true }, extJwt: { allowed: false, allowedSigners: [] }, updb: u }, secondary: { requireTotp: false } });
  t.ok(mgmt.validate('authPolicyCreate', ap(updb)));
  t.equal(cause(() => mgmt.validate('authPolicyCreate', ap({ ...updb, minPasswordLength: 101 }))).field, 'primary.updb.minPasswordLength');
  // Lists and maps.
  c = cause(() => mgmt.validate('servicePolicyCreate', policy({ identityRoles: Array(100000).fill('#a') })));
  t.same([c.field, c.reason], ['identityRoles', 'identityRoles must have at most 10000 items']);
  t.ok(mgmt.validate('servicePolicyCreate', policy({ serviceRoles: Array(10000).fill('#a') })), '10,000 roles fit');
  t.equal(cause(() => mgmt.validate('identityCreate', identity({ roleAttributes: Array(1001).fill('a') }))).field, 'roleAttributes');
  t.equal(cause(() => mgmt.validate('serviceCreate', service({ roleAttributes: Array(1001).fill('a') }))).field, 'roleAttributes');
  c = cause(() => mgmt.validate('identityCreate', identity({ tags: Object.fromEntries(Array.from({ length: 1001 }, (_, i) => [`k${i}`, i])) })));
  t.same([c.field, c.reason], ['tags', 'tags must have at most 1000 keys']);
  c = cause(() => mgmt.validate('identityCreate', identity({ appData: { ['k'.repeat(1025)]: 1 } })));
  t.same([c.field, c.reason], ['appData', 'appData has a key that must be at most 1024 characters long']);
  t.equal(cause(() => mgmt.validate('postureCheckCreate', { name: 'd', typeId: 'DOMAIN', domains: Array(1001).fill('x.example') })).field, 'domains');
  // Free-form objects stay free: a config's data may be large and deep within the body limits.
  t.ok(mgmt.validate('configCreate', { name: 'c', configTypeId: 'ct', data: { list: Array(5000).fill({ k: 'v'.repeat(100) }) } }));
});

/** The docs/limits.md row of a key: its cells. */
function docRow(doc: string, key: string): string[] | undefined {
  const line = doc.split('\n').find((l) => l.startsWith(`| \`${key}\` |`));
  return line?.split('|').slice(1, -1).map((c) => c.trim());
}
const n = (x: number) => x.toLocaleString('en-US');

t.test('docs/limits.md shows the table', async (t) => {
  const doc = fs.readFileSync(new URL('../../../docs/limits.md', import.meta.url), 'utf8');
  const check = (key: string, l: Limit) => {
    const row = docRow(doc, key);
    if (!row) return t.fail(`docs/limits.md has no row for ${key}`);
    const [, , longest, plain, range, most] = row;
    const s = l.items ?? l.keys ?? l;
    if (s.maxLength !== undefined) t.match(longest, n(s.maxLength), `${key}: longest ${s.maxLength}`);
    else t.equal(longest, '', `${key}: no length`);
    t.equal(plain !== '', s.plain === true, `${key}: plain ${s.plain === true}`);
    if (l.minimum !== undefined) t.match(range, `${n(l.minimum)} …`, `${key}: minimum`);
    if (l.maximum !== undefined) t.match(range, `… ${n(l.maximum)}`, `${key}: maximum`);
    const items = l.maxItems ?? l.maxProperties;
    if (items !== undefined) t.match(most, n(items), `${key}: most entries ${items}`);
    else t.equal(most, '', `${key}: no entry bound`);
  };
  for (const [key, l] of Object.entries(FIELD_LIMITS)) check(key, l);
  for (const [key, l] of Object.entries(DEFINITION_LIMITS)) check(key, l);
});

t.test('duplicate member names', async (t) => {
  const cases: Array<[string, string | undefined]> = [
    ['{"a":1,"b":2}', undefined],
    ['{"a":1,"a":2}', 'a'],
    ['{"a" : 1 , "a":2}', 'a'],
    ['{"a":{"b":1,"b":2}}', 'a.b'],
    ['[{"x":1},{"y":1,"y":2}]', '1.y'],
    ['{"a":{"x":1},"b":{"x":1}}', undefined],
    ['{"s":"\\"s\\":1","t":1}', undefined],
    ['{"s":"\\\\","s":1}', 's'],
    ['{"e":1,"\\u0065":2}', 'e'],
    ['{"l":[1,2,{"k":[{"z":1,"z":1}]}]}', 'l.2.k.0.z'],
    ['{"ключ":1,"ключ":2}', 'ключ'],
    ['"a:b"', undefined],
    ['[]', undefined],
  ];
  for (const [text, want] of cases) {
    const buf = Buffer.from(text);
    const parsed = JSON.parse(text);
    t.equal(duplicateKey(buf, parsed), want, `${text} → ${want}`);
    if (want === undefined) t.equal(countNames(buf), countParsedNames(parsed), `${text}: the counts agree`);
  }
});
