/**
 * src/managers/posture-responses.ts on a real store and role index: every report of a batch is
 * checked before any is recorded, reports land in the engine's posture state, and a wake lists the
 * caller's services whose MFA check prompts on wake.
 */
import t from 'tap';
import { PostureResponses } from '../../../src/managers/posture-responses.js';
import { PolicyEngine } from '../../../src/policy/engine.js';
import { openStore, put, refusal } from './fixture.js';

t.test('posture responses', async (t) => {
  const { store } = openStore(t, 'posture-responses');
  const policy = new PolicyEngine(store, { sweepMs: 3_600_000 });
  t.teardown(() => policy.close());
  const responses = new PostureResponses({ store, policy });

  await put(store, 'identities', { id: 'ann', name: 'ann', type: 'User', roleAttributes: ['users'] });
  await put(store, 'services', { id: 'web', name: 'web', roleAttributes: ['web'], configs: [] });
  await put(store, 'postureChecks', { id: 'mfa', name: 'mfa', typeId: 'MFA', roleAttributes: ['mfa'], timeoutSeconds: 300, promptOnWake: true, promptOnUnlock: false });
  await put(store, 'servicePolicies', { id: 'dial', name: 'dial', type: 'Dial', semantic: 'AllOf', identityRoles: ['#users'], serviceRoles: ['#web'], postureCheckRoles: ['#mfa'] });
  const ann = store.get('identities', 'ann')!;

  t.same(await refusal(() => responses.report(ann, 'as1', [{ id: 'os', typeId: 'OS', type: 'Linux' }, 'nonsense'])), { code: 'COULD_NOT_VALIDATE', status: 400, field: '(root)' });
  t.same(await refusal(() => responses.report(ann, 'as1', [{ typeId: 'OS' }])), { code: 'COULD_NOT_VALIDATE', status: 400, field: 'id' });
  t.equal(policy.posture.identities.get('ann'), undefined, 'a refused batch records nothing');

  t.same(responses.report(ann, 'as1', [{ id: 'os', typeId: 'OS', type: 'Linux', version: '6.1' }]), []);
  t.match(policy.posture.identities.get('ann')?.os, { postureCheckId: 'os', type: 'Linux', version: '6.1' });

  t.same(responses.report(ann, 'as1', [{ id: 'es', typeId: 'ENDPOINT_STATE', unlocked: true }]), [], 'the check does not prompt on unlock');
  const prompted = responses.report(ann, 'as1', [{ id: 'es', typeId: 'ENDPOINT_STATE', woken: true }]);
  t.match(prompted, [{ id: 'web', name: 'web', postureQueryType: 'MFA', timeout: 300 }], 'a wake prompts the MFA check of the service');
});
