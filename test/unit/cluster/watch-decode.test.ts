/**
 * src/cluster/watch.ts: the watch stream's own decoder reads what etcd's protobuf encoding (here
 * etcd3's, from the same rpc.proto etcd serves) writes: every event's type, key, value and
 * revision, the created/canceled/compacted answers, and skips every field it does not use.
 */
import t from 'tap';
import { createRequire } from 'node:module';
import { decodeWatchResponse } from '../../../src/cluster/watch.js';

const require = createRequire(import.meta.url);
const protoLoader = require('@grpc/proto-loader') as typeof import('@grpc/proto-loader');
const etcd3Dir = require.resolve('etcd3').replace(/lib\/index\.js$/, '');
const def = protoLoader.loadSync(`${etcd3Dir}proto/rpc.proto`, { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true });
const watch = (def['etcdserverpb.Watch'] as unknown as { Watch: { responseSerialize(v: unknown): Buffer } }).Watch;
const encode = (v: unknown) => watch.responseSerialize(v);

t.test('events: puts and deletes, keys, values and revisions, other fields skipped', async (t) => {
  const big = 2 ** 40 + 7; // past 32 bits: a varint of six bytes
  const buf = encode({
    header: { cluster_id: '123456789012345', member_id: '42', revision: String(big), raft_term: '9' },
    watch_id: '3',
    events: [
      { type: 'Put', kv: { key: Buffer.from('/mesh/c/identities/a'), create_revision: '5', mod_revision: String(big - 1), version: '2', value: Buffer.from([0x81, 0xa2, 0x69, 0x64, 0xa1, 0x61]), lease: '77' }, prev_kv: { key: Buffer.from('x'), value: Buffer.from('old') } },
      { type: 'Delete', kv: { key: Buffer.from('/mesh/c/identities/b'), mod_revision: String(big) } },
      { type: 'Put', kv: { key: Buffer.from('/mesh/c/identities/c'), mod_revision: '1', value: Buffer.alloc(0) } },
    ],
  });
  const res = decodeWatchResponse(buf);
  t.same(
    res.events.map((e) => [e.type, e.kv.key.toString(), e.kv.value.toString('hex'), e.kv.mod_revision]),
    [
      ['Put', '/mesh/c/identities/a', '81a26964a161', big - 1],
      ['Delete', '/mesh/c/identities/b', '', big],
      ['Put', '/mesh/c/identities/c', '', 1],
    ],
  );
  t.equal(res.created, false);
  t.equal(res.canceled, false);
  t.equal(res.compact_revision, 0);
  // The values are copies: the stream's buffer may be reused once decoded.
  const value = res.events[0].kv.value;
  buf.fill(0);
  t.equal(value.toString('hex'), '81a26964a161', 'a value outlives the response buffer');
});

t.test('created, canceled and compacted answers', async (t) => {
  t.match(decodeWatchResponse(encode({ header: { revision: '10' }, watch_id: '0', created: true })), { created: true, canceled: false, events: [] });
  t.match(decodeWatchResponse(encode({ header: { revision: '10' }, canceled: true, compact_revision: '8', cancel_reason: 'mvcc: required revision has been compacted' })), {
    canceled: true,
    compact_revision: 8,
    cancel_reason: 'mvcc: required revision has been compacted',
  });
  t.same(decodeWatchResponse(Buffer.alloc(0)), { created: false, canceled: false, compact_revision: 0, cancel_reason: '', events: [] }, 'an empty message is all defaults');
});

t.test('a truncated message is refused, not misread', async (t) => {
  const buf = encode({ events: [{ type: 'Put', kv: { key: Buffer.from('/k'), mod_revision: '300', value: Buffer.from('v') } }] });
  t.throws(() => decodeWatchResponse(buf.subarray(0, buf.length - 2)), /truncated/);
});
