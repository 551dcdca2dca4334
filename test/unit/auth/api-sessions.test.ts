/**
 * src/auth/api-sessions.ts, built as src/app.ts builds it: with its signing keys and the issuer
 * passed at construction. A new API session's token is signed with those keys and names that
 * issuer (read when the token is made: the listener's address is known only once it is bound),
 * and resolves to its session; the same token signed by another key does not.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { Store } from '../../../src/store/store.js';
import { createRegistry } from '../../../src/resources/index.js';
import { SigningKeys } from '../../../src/auth/tokens.js';
import { API_SESSION_TOKEN, ApiSessions } from '../../../src/auth/api-sessions.js';

t.test('an API session is signed with the keys and names the issuer it was built with', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-api-sessions-'));
  const store = new Store(path.join(dir, 'db'), createRegistry().collectionSpecs());
  const keys = new SigningKeys(store, dir, { controllerId: 'c1', rotationMs: 3_600_000 });
  await keys.start();
  let baseUrl = '';
  const sessions = new ApiSessions(store, keys, { timeoutMinutes: 30, flushMs: 600_000, issuer: () => baseUrl });
  const other = new SigningKeys(store, path.join(dir, 'other'), { controllerId: 'c2', rotationMs: 3_600_000 });
  await other.start();
  t.teardown(async () => {
    keys.close();
    other.close();
    await sessions.close();
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  baseUrl = 'https://ctrl.example:1280';
  const fields = { identityId: 'i1', authenticatorId: 'a1', method: 'password', ipAddress: '127.0.0.1', configTypes: [], isMfaRequired: false };
  const { session, token } = await sessions.create(fields);
  const claims = keys.verify(token, API_SESSION_TOKEN);
  t.equal(claims?.iss, 'https://ctrl.example:1280', 'the issuer as it is when the token is made');
  t.equal(claims?.kid, keys.currentKid, 'signed with the keys passed in');
  t.equal(claims?.jti, session.id);
  t.equal(sessions.resolve(token)?.id, session.id, 'the token resolves to its session');

  // The same header and claims with another key's signature: the keys passed in decide.
  const [header, payload] = token.split('.');
  const otherSignature = other.sign(claims!).split('.')[2];
  t.equal(sessions.resolve(`${header}.${payload}.${otherSignature}`), undefined, 'a token not signed by its key resolves to nothing');
});
