/**
 * src/managers/identities.ts on a real store: disable and enable (bounds, the sessions a disable
 * ends, the lockout counts an enable clears), tracing (duration and field checks, a re-enabled
 * trace keeps its id, updatedAt untouched) and per-service config overrides (one per service and
 * config type, removal by pair or all at once), each a 404 for an unknown identity.
 */
import t from 'tap';
import { Identities, parseDuration, serviceConfigPairs } from '../../../src/managers/identities.js';
import { openStore, put, refusal } from './fixture.js';

t.test('disable: bounded minutes, ends the sessions; enable clears the lockout counts', async (t) => {
  const { store } = openStore(t, 'identities-disable');
  const identities = new Identities({ store });
  await put(store, 'identities', { id: 'ann', name: 'ann', type: 'User' });
  await put(store, 'authenticators', { id: 'a1', identityId: 'ann', method: 'updb', username: 'ann', failedAttempts: 2 });
  await put(store, 'sessions', { id: 's1', identityId: 'ann', apiSessionId: 'as1', serviceId: 'svc', type: 'Dial' });

  for (const bad of [-1, 1.5, '10', null, 100 * 365 * 24 * 60 + 1])
    t.same(await refusal(() => identities.disable('ann', bad)), { code: 'COULD_NOT_VALIDATE', status: 400, field: 'durationMinutes' }, `${JSON.stringify(bad)} refused`);
  t.same(await refusal(() => identities.disable('nobody', 5)), { code: 'NOT_FOUND', status: 404 });

  await identities.disable('ann', 5);
  const disabled = store.get('identities', 'ann')!;
  t.ok(disabled.disabledAt! > 0);
  t.equal(disabled.disabledUntil, disabled.disabledAt! + 5 * 60_000, 'until now + 5 minutes');
  t.notOk(store.has('sessions', 's1'), 'its sessions ended in the same write');
  await identities.disable('ann', 0);
  t.equal(store.get('identities', 'ann')!.disabledUntil, null, '0: indefinitely');

  await identities.enable('ann');
  const enabled = store.get('identities', 'ann')!;
  t.equal(enabled.disabledAt, undefined);
  t.equal(enabled.disabledUntil, undefined);
  t.equal(store.get('authenticators', 'a1')!.failedAttempts, undefined, 'lockout count cleared');
  t.same(await refusal(() => identities.enable('nobody')), { code: 'NOT_FOUND', status: 404 });
});

t.test('tracing: checked fields, kept id while in force, identity not edited', async (t) => {
  const { store } = openStore(t, 'identities-trace');
  const identities = new Identities({ store });
  await put(store, 'identities', { id: 'bob', name: 'bob', type: 'User', updatedAt: 1 });

  t.equal(parseDuration('1h30m'), 90 * 60_000);
  t.equal(parseDuration('250ms'), 250);
  t.equal(parseDuration('10'), undefined, 'a unit is required');
  t.equal(parseDuration('5d'), undefined, 'days are not a Go unit');

  t.same(await refusal(() => identities.trace('bob', { enabled: 'yes' })), { code: 'COULD_NOT_VALIDATE', status: 400, field: 'enabled' });
  t.same(await refusal(() => identities.trace('bob', { enabled: true, duration: 'soon' })), { code: 'COULD_NOT_VALIDATE', status: 400, field: 'duration' });
  t.same(await refusal(() => identities.trace('bob', { enabled: true, duration: '8761h' })), { code: 'COULD_NOT_VALIDATE', status: 400, field: 'duration' });
  t.same(await refusal(() => identities.trace('bob', { traceId: 'x'.repeat(129) })), { code: 'COULD_NOT_VALIDATE', status: 400, field: 'traceId' });
  t.same(await refusal(() => identities.trace('bob', { channels: [''] })), { code: 'COULD_NOT_VALIDATE', status: 400, field: 'channels' });
  t.same(await refusal(() => identities.trace('nobody', { enabled: true })), { code: 'NOT_FOUND', status: 404 });

  const first = await identities.trace('bob', { enabled: true, channels: ['a', 'a', 'b'] });
  t.equal(first.enabled, true);
  t.ok(first.until - Date.now() > 9 * 60_000, 'ten minutes by default');
  t.same(first.channels, ['a', 'b'], 'channels without duplicates');
  const again = await identities.trace('bob', { enabled: true, duration: '1h' });
  t.equal(again.traceId, first.traceId, 'a trace in force keeps its id');
  const named = await identities.trace('bob', { enabled: true, traceId: 'mine' });
  t.equal(named.traceId, 'mine');
  const stored = store.get('identities', 'bob')!;
  t.same(stored.trace, named, 'stored on the identity');
  t.equal(stored.updatedAt, 1, 'tracing is not an edit of the identity');
  const off = await identities.trace('bob', {});
  t.equal(off.enabled, false);
});

t.test('service config overrides: one per service and config type', async (t) => {
  const { store } = openStore(t, 'identities-configs');
  const identities = new Identities({ store });
  await put(store, 'identities', { id: 'cy', name: 'cy', type: 'User' });
  await put(store, 'services', { id: 'svc', name: 'svc' });
  await put(store, 'configTypes', { id: 'ta', name: 'ta' }, { id: 'tb', name: 'tb' });
  await put(store, 'configs', { id: 'a1', name: 'a1', configTypeId: 'ta', data: {} }, { id: 'a2', name: 'a2', configTypeId: 'ta', data: {} }, { id: 'b1', name: 'b1', configTypeId: 'tb', data: {} });

  t.same(await refusal(() => serviceConfigPairs(undefined, true)), { code: 'COULD_NOT_VALIDATE', status: 400, field: '(root)' });
  t.same(serviceConfigPairs(null, false), []);
  t.same(await refusal(() => serviceConfigPairs([{ serviceId: 'svc' }], true)), { code: 'COULD_NOT_VALIDATE', status: 400, field: '[0].configId' });

  await identities.associateServiceConfigs('cy', [{ serviceId: 'svc', configId: 'a1' }, { serviceId: 'svc', configId: 'b1' }]);
  await identities.associateServiceConfigs('cy', [{ serviceId: 'svc', configId: 'a2' }]);
  let rec = store.get('identities', 'cy')!;
  t.same(rec.serviceConfigs, [{ serviceId: 'svc', configId: 'b1' }, { serviceId: 'svc', configId: 'a2' }], 'a2 replaced a1 (same type)');
  t.same(rec.overrideConfigIds, ['b1', 'a2']);
  t.same(await refusal(() => identities.associateServiceConfigs('cy', [{ serviceId: 'svc', configId: 'none' }])), { code: 'NOT_FOUND', status: 404 });
  t.same(await refusal(() => identities.associateServiceConfigs('cy', [{ serviceId: 'none', configId: 'a1' }])), { code: 'NOT_FOUND', status: 404 });

  // A pair removes the override of its config's type for that service.
  await identities.disassociateServiceConfigs('cy', [{ serviceId: 'svc', configId: 'a1' }]);
  rec = store.get('identities', 'cy')!;
  t.same(rec.serviceConfigs, [{ serviceId: 'svc', configId: 'b1' }]);
  const before = rec.updatedAt;
  await identities.disassociateServiceConfigs('cy', []);
  t.equal(store.get('identities', 'cy')!.updatedAt, before, 'nothing to remove writes nothing');
  await identities.disassociateServiceConfigs('cy', undefined);
  t.same(store.get('identities', 'cy')!.serviceConfigs, [], 'no pairs: every override removed');
  t.same(await refusal(() => identities.disassociateServiceConfigs('nobody', undefined)), { code: 'NOT_FOUND', status: 404 });
});
