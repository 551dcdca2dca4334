/**
 * src/control/traces.ts on a real store: a start reads the traces in force from the traceUntil
 * index (an enabled trace that runs past now), not from a scan of every identity; a disabled or
 * expired trace is not in force.
 */
import t from 'tap';
import { Traces } from '../../../src/control/traces.js';
import { Identities } from '../../../src/managers/identities.js';
import { openStore, put } from '../managers/fixture.js';
import { indexTraces } from '../../../src/resources/trace-index-migration.js';

t.test('a start finds the traces in force through the traceUntil index', async (t) => {
  const { store } = openStore(t, 'traces-index');
  const identities = new Identities({ store });
  await put(store, 'identities', { id: 'on', name: 'on' }, { id: 'off', name: 'off' }, { id: 'short', name: 'short' }, { id: 'plain', name: 'plain' });
  await identities.trace('on', { enabled: true, duration: '1h', traceId: 't-on', channels: ['edge'] });
  await identities.trace('off', { enabled: true, duration: '1h' });
  await identities.trace('off', { enabled: false });
  await identities.trace('short', { enabled: true, duration: '50ms' });

  t.same(store.idsByIndex('identities', 'traceUntil', store.get('identities', 'on')!.trace!.until), ['on'], 'an enabled trace is indexed under its end');
  t.equal(store.get('identities', 'off')!.traceUntil, undefined, 'a disabled trace leaves the index');
  await new Promise((r) => setTimeout(r, 60));

  const traces = new Traces(store);
  t.teardown(() => traces.close());
  t.same(traces.list().map((s) => [s.identityId, s.traceId, s.channels]), [['on', 't-on', ['edge']]], 'only the trace in force');
  t.equal(traces.get('plain'), undefined);
});

t.test('a trace written before the index is indexed by the format-6 migration and found at start', async (t) => {
  const { store } = openStore(t, 'traces-migration');
  const until = Date.now() + 3_600_000;
  // As a format-5 controller stored it: the trace without traceUntil.
  await put(store, 'identities', { id: 'old', name: 'old', trace: { enabled: true, traceId: 't-old', until, channels: [] } }, { id: 'gone', name: 'gone', trace: { enabled: false, traceId: 't-gone', until, channels: [] } });
  const before = new Traces(store);
  t.same(before.list(), [], 'not found before the migration');
  before.close();
  t.equal(await indexTraces(store), 1, 'the enabled trace is indexed');
  t.equal(await indexTraces(store), 0, 'a second run changes nothing');
  const traces = new Traces(store);
  t.teardown(() => traces.close());
  t.same(traces.list().map((s) => s.identityId), ['old']);
});
