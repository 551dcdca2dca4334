/**
 * src/managers/oidc-sessions.ts on a real store: refresh-token rotation holds only for the
 * family's current token, a rotated token coming back ends the login, and a session certificate
 * is kept only while its login lives.
 */
import t from 'tap';
import { OidcSessions } from '../../../src/managers/oidc-sessions.js';
import { managerStore } from './fixture.js';
import type { CollectionName } from '../../../src/store/store.js';

const { store, sessions } = await managerStore(t);
const oidcSessions = new OidcSessions({ store });
const family = (refreshJti: string) => ({ clientId: 'openziti', refreshJti, scopes: ['openid'] });
const cert = { pem: 'PEM', fingerprint: 'ff'.repeat(20), subject: 'CN=x', notBefore: 0, notAfter: 1 };

async function oidcLogin() {
  const { session } = await sessions.create({ identityId: 'i1', authenticatorId: 'a', method: 'password', ipAddress: '::1', configTypes: [], isMfaRequired: false });
  // The code exchange starts the family.
  if (!(await oidcSessions.recordIssue(session.id, { oidc: family('r1') }))) throw new Error('no family started');
  return session.id;
}

t.before(() => store.write((tx) => tx.put<CollectionName>('identities', { id: 'i1', createdAt: 0, updatedAt: 0, tags: {}, name: 'i1', type: 'User', isAdmin: false, roleAttributes: [] })));

t.test('rotation: only the current refresh token rotates; an access-only issue keeps the family', async (t) => {
  const asid = await oidcLogin();
  t.ok(await oidcSessions.recordIssue(asid, { previousRefresh: 'r1', oidc: family('r2') }));
  t.equal(store.get('apiSessions', asid)?.oidc?.refreshJti, 'r2');
  t.notOk(await oidcSessions.recordIssue(asid, { previousRefresh: 'r1', oidc: family('r3') }), 'r1 is spent');
  t.ok(await oidcSessions.recordIssue(asid, {}), 'an access token alone');
  t.equal(store.get('apiSessions', asid)?.oidc?.refreshJti, 'r2', 'family unchanged');
});

t.test('a rotated refresh token coming back ends the login; the current one does not', async (t) => {
  const asid = await oidcLogin();
  await oidcSessions.recordIssue(asid, { previousRefresh: 'r1', oidc: family('r2') });
  t.notOk(await oidcSessions.endIfReused(asid, 'r2'), 'the current token is no reuse');
  t.ok(store.get('apiSessions', asid));
  t.ok(await oidcSessions.endIfReused(asid, 'r1'), 'the rotated one is');
  t.equal(store.get('apiSessions', asid), undefined, 'the login has ended');
  t.notOk(await oidcSessions.recordIssue(asid, {}), 'and issues nothing more');
});

t.test('session certificates live with their login', async (t) => {
  const asid = await oidcLogin();
  t.ok(await oidcSessions.addCertificate({ id: asid, identityId: 'i1' }, cert));
  t.equal(store.idsByIndex('apiSessionCertificates', 'apiSessionId', asid).length, 1);
  await sessions.delete(asid);
  t.equal(store.idsByIndex('apiSessionCertificates', 'apiSessionId', asid).length, 0, 'ended with it');
  t.notOk(await oidcSessions.addCertificate({ id: asid, identityId: 'i1' }, cert), 'none for an ended login');
});
