/**
 * src/managers/authenticators.ts on a real store with the real worker pool (argon2id at a low cost):
 * one authenticator per method and identity, the checks before any hashing, an administrator's
 * PUT and PATCH, and the owner's update, which proves the current password and never reaches
 * another identity's authenticator.
 */
import t from 'tap';
import type { Config } from '../../../src/config.js';
import { Authenticators } from '../../../src/managers/authenticators.js';
import type { WorkerPool as Pool } from '../../../src/pool.js';
import { openStore, put, refusal } from './fixture.js';

// The pool's worker files are the built ones (dist/workers): the pool is loaded from the build.
const { WorkerPool } = (await import(new URL('../../../dist/src/pool.js', import.meta.url).href)) as { WorkerPool: typeof Pool };

t.test('authenticators', async (t) => {
  const { reg, store } = openStore(t, 'authenticators');
  const pool = new WorkerPool({ threads: 1, maxQueue: 8 });
  t.teardown(() => pool.close());
  const config = { argon2MemoryKiB: 1024, argon2Iterations: 1, argon2Parallelism: 1 } as Config;
  const authenticators = new Authenticators({ store, reg, config, pool, pki: { signingCertPem: '' } });
  const verify = (id: string, password: string) => pool.run('verifyPassword', { hash: store.get('authenticators', id)!.passwordHash!, password });
  await put(store, 'identities', { id: 'ann', name: 'ann', type: 'User' }, { id: 'bob', name: 'bob', type: 'User' });

  t.same(await refusal(() => authenticators.create({ identityId: 'nobody', method: 'updb' })), { code: 'COULD_NOT_VALIDATE', status: 400, field: 'identityId' });
  t.same(await refusal(() => authenticators.create({ identityId: 'ann', method: 'otp' })), { code: 'COULD_NOT_VALIDATE', status: 400, field: 'method' });
  t.same(await refusal(() => authenticators.create({ identityId: 'ann', method: 'updb', username: 'ann-login', password: '1234' })), { code: 'COULD_NOT_VALIDATE', status: 400, field: 'password' }, 'the default policy wants 5 characters');
  t.same(await refusal(() => authenticators.create({ identityId: 'ann', method: 'cert', certPem: 'not a certificate' })), { code: 'COULD_NOT_VALIDATE', status: 400, field: 'certPem' });

  const ann = await authenticators.create({ identityId: 'ann', method: 'updb', username: 'ann-login', password: 'first-secret', tags: { t: 1 } });
  const stored = store.get('authenticators', ann.id)!;
  t.match(stored, { identityId: 'ann', method: 'updb', username: 'ann-login', tags: { t: 1 } });
  t.notOk(JSON.stringify(stored).includes('first-secret'), 'only the hash is stored');
  t.equal(await verify(ann.id, 'first-secret'), true);
  t.same(await refusal(() => authenticators.create({ identityId: 'ann', method: 'updb', username: 'ann-two', password: 'other-secret' })), { code: 'MAX_AUTHENTICATOR_METHODS_REACHED', status: 409 });

  // An administrator's PATCH changes what it names; PUT sets all (tags back to none).
  await authenticators.update(ann.id, 'patch', { username: 'ann-renamed' });
  t.match(store.get('authenticators', ann.id), { username: 'ann-renamed', tags: { t: 1 } });
  t.equal(await verify(ann.id, 'first-secret'), true, 'PATCH without a password keeps it');
  t.same(await refusal(() => authenticators.update(ann.id, 'put', { username: 'ann-put' })), { code: 'COULD_NOT_VALIDATE', status: 400, field: 'password' }, 'PUT needs the password');
  await authenticators.update(ann.id, 'put', { username: 'ann-put', password: 'second-secret' });
  t.match(store.get('authenticators', ann.id), { username: 'ann-put', tags: {} });
  t.same(await refusal(() => authenticators.update('none', 'patch', {})), { code: 'NOT_FOUND', status: 404 });

  // The owner proves the current password; another identity's authenticator does not exist for it.
  t.same(await refusal(() => authenticators.updateOwn('bob', ann.id, 'patch', { password: 'stolen-pass' }, 'second-secret')), { code: 'NOT_FOUND', status: 404 });
  t.same(await refusal(() => authenticators.updateOwn('ann', ann.id, 'patch', { password: 'third-secret' }, 'wrong')), { code: 'UNAUTHORIZED', status: 401 });
  await authenticators.updateOwn('ann', ann.id, 'patch', { password: 'third-secret' }, 'second-secret');
  t.equal(await verify(ann.id, 'third-secret'), true);

  await put(store, 'authenticators', { id: 'bob-cert', identityId: 'bob', method: 'cert', certPem: '', fingerprint: 'f' });
  t.same(await refusal(() => authenticators.update('bob-cert', 'patch', { username: 'bob' })), { code: 'CAN_NOT_UPDATE_AUTHENTICATOR', status: 409 });
  t.same(await refusal(() => authenticators.updateOwn('bob', 'bob-cert', 'patch', {}, 'x')), { code: 'CAN_NOT_UPDATE_AUTHENTICATOR', status: 409 });
});
