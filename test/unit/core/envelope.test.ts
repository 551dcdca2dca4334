/**
 * src/core/envelope.ts okWithRaw: the body it writes is the JSON of `ok(data)` with the raw value
 * in its field, whatever the other values hold (the field's name elsewhere, look-alike strings,
 * characters JSON escapes).
 */
import t from 'tap';
import { ok, okWithRaw } from '../../../src/core/envelope.js';

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
