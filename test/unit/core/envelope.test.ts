/**
 * src/core/envelope.ts okWithRaw: the body it writes is the JSON of `ok(data)` with the raw value
 * in its field, whatever the other values hold (the field's name elsewhere, look-alike strings,
 * characters JSON escapes). renderError: every 429 and 503 of the catalog carries Retry-After.
 */
import t from 'tap';
import { ok, okWithRaw, renderError } from '../../../src/core/envelope.js';
import { ApiError, errors, RETRY_AFTER_SECONDS, type ErrorCode } from '../../../src/core/errors.js';

const TOKEN = 'eyJhbGciOiJFUzI1NiJ9.eyJ6X24iOjJ9.c2ln~eyJzdWIiOiJ4In0~AAAAAf8';

t.test('the body parses to ok(data) with the raw value in its field', async (t) => {
  const data = () => ({
    id: 's1',
    tags: { token: '', note: '"token":"mesh-raw-"', ctl: '\u0000\u2028', token2: TOKEN },
    token: '',
    service: { name: 'ünïcode "quoted" \\ name', token: 'inner' },
  });
  const reply = okWithRaw(data(), 'token', TOKEN, 201);
  t.equal(reply.status, 201);
  t.equal(reply.contentType, 'application/json');
  const expected = ok({ ...data(), token: TOKEN }, 201).body;
  t.same(JSON.parse(reply.body as string), expected);
  t.equal(reply.body, JSON.stringify(expected), 'byte for byte what JSON.stringify writes');
});

t.test('a field the data did not have is added', async (t) => {
  const reply = okWithRaw({ id: 'x' }, 'token', TOKEN);
  t.same(JSON.parse(reply.body as string), { data: { id: 'x', token: TOKEN }, meta: {} });
});

t.test('renderError: every 429 and 503 code carries Retry-After, its own when it names one; other statuses none', async (t) => {
  const codes: ErrorCode[] = ['RATE_LIMITED', 'SERVER_TOO_MANY_REQUESTS', 'TIMEOUT', 'SHUTTING_DOWN', 'CLUSTER_HAS_NO_LEADER', 'NOT_FOUND', 'UNAUTHORIZED'];
  for (const code of codes) {
    const reply = renderError(new ApiError(code), 'r1');
    const expected = RETRY_AFTER_SECONDS[reply.status];
    t.equal(reply.headers?.['retry-after'], expected === undefined ? undefined : String(expected), `${code} (${reply.status})`);
  }
  t.equal(renderError(errors.rateLimited(7), 'r2').headers?.['retry-after'], '7', 'a refuser that knows when keeps its value');
  t.equal(renderError(errors.unauthorized({ 'www-authenticate': 'x' }), 'r3').headers?.['www-authenticate'], 'x', 'other headers kept');
});
