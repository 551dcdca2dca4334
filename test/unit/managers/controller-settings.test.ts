/**
 * src/managers/controller-settings.ts on a real store: which ids are known, create (id form,
 * duplicates, OIDC checks), PUT replaces and PATCH merges the OIDC settings, this controller's
 * record is made on first write, removing the global record resets it and removing an unknown one is a 404.
 */
import t from 'tap';
import { ControllerSettings } from '../../../src/managers/controller-settings.js';
import { openStore, refusal } from './fixture.js';

t.test('controller settings', async (t) => {
  const { store } = openStore(t, 'controller-settings');
  const settings = new ControllerSettings({ store, controllerId: 'me' });
  const oidc = (id: string) => store.get('controllerSettings', id)?.oidc;

  t.ok(settings.known('global'));
  t.ok(settings.known('me'));
  t.notOk(settings.known('other'));

  t.same(await refusal(() => settings.create('bad id', {})), { code: 'COULD_NOT_VALIDATE', status: 400, field: 'controllerId' });
  t.same(await refusal(() => settings.create('other', { oidc: { redirectUris: ['not a uri'] } })), { code: 'COULD_NOT_VALIDATE', status: 400, field: 'oidc.redirectUris' });
  t.equal(await settings.create('other', { oidc: { redirectUris: ['https://a/cb', 'https://a/cb'] } }), 'other');
  t.same(oidc('other'), { redirectUris: ['https://a/cb'] }, 'stored without duplicates');
  t.ok(settings.known('other'));
  t.same(await refusal(() => settings.create('other', {})), { code: 'COULD_NOT_VALIDATE', status: 400, field: 'controllerId' });

  await settings.update('me', 'patch', { oidc: { redirectUris: ['https://me/cb'] } });
  t.same(oidc('me'), { redirectUris: ['https://me/cb'] }, "this controller's record made on first write");
  await settings.update('me', 'patch', { oidc: { postLogoutUris: ['https://me/out'] } });
  t.same(oidc('me'), { redirectUris: ['https://me/cb'], postLogoutUris: ['https://me/out'] }, 'PATCH merges key by key');
  await settings.update('me', 'put', { oidc: { postLogoutUris: ['https://me/bye'] }, tags: { a: 1 } });
  t.same(oidc('me'), { postLogoutUris: ['https://me/bye'] }, 'PUT replaces');
  t.same(store.get('controllerSettings', 'me')!.tags, { a: 1 });
  t.same(await refusal(() => settings.update('nobody', 'put', {})), { code: 'NOT_FOUND', status: 404 });

  await settings.update('global', 'put', { oidc: { redirectUris: ['https://g/cb'] } });
  await settings.remove('global');
  t.same(oidc('global'), {}, 'removing the global record resets it');
  await settings.remove('other');
  t.notOk(store.has('controllerSettings', 'other'));
  t.same(await refusal(() => settings.remove('other')), { code: 'NOT_FOUND', status: 404 });
});
