/**
 * src/auth/tokens.ts: the Merkle tree of a session batch (RFC 9162 §2.1) — every leaf's path leads
 * to the root for every tree size, and nothing else does —, session tokens signed in batches and
 * verified (also as a router would, from the format: test/helpers/session-tokens.ts), signed in
 * the signing thread's task or on the event loop when that fails, and the
 * refusals: tampered claims, proofs or batch signatures, expiry, another key, an API-session token.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { createLocalJWKSet } from 'jose';
import { Store, type ServiceRecord } from '../../../src/store/store.js';
import { createRegistry } from '../../../src/resources/index.js';
import { SESSION_TOKEN, SigningKeys, merkleLeafHash, merkleRootOf, merkleTree, sessionTokenClaims } from '../../../src/auth/tokens.js';
import { verifySessionToken } from '../../helpers/session-tokens.js';
import { signSessions } from '../../../workers/tokens.js';

t.test('Merkle paths lead every leaf, and only it, to the root', async (t) => {
  let checked = 0;
  for (let size = 1; size <= 70; size++) {
    const leaves = Array.from({ length: size }, (_, i) => merkleLeafHash(`leaf-${i}`));
    const { root, paths } = merkleTree(leaves);
    t.equal(paths.length, size);
    for (let i = 0; i < size; i++) {
      if (merkleRootOf(i, size, leaves[i], paths[i]) !== root) t.fail(`size ${size} leaf ${i}`);
      else checked++;
      // The same path from another place, or for another leaf, misses.
      if (size > 1 && merkleRootOf((i + 1) % size, size, leaves[i], paths[i]) === root) t.fail(`size ${size} leaf ${i} at another index`);
      if (size > 1 && merkleRootOf(i, size, leaves[(i + 1) % size], paths[i]) === root) t.fail(`size ${size} another leaf at ${i}`);
    }
    t.equal(merkleRootOf(size, size, leaves[0], paths[0]), undefined, `size ${size}: an index past the tree`);
    if (size > 2) t.equal(merkleRootOf(0, size, leaves[0], paths[0].slice(1)), undefined, `size ${size}: a short path`);
    t.equal(merkleRootOf(0, size, leaves[0], [...paths[0], root]), undefined, `size ${size}: a long path`);
  }
  t.equal(checked, (70 * 71) / 2, 'every leaf of every tree of 1–70 leaves');
  // RFC 9162's shape: 3 leaves hash as ((0,1),2).
  const l = [0, 1, 2].map((i) => merkleLeafHash(`x${i}`));
  const node = (a: string, b: string) => crypto.createHash('sha256').update(Buffer.from([1])).update(Buffer.from(a, 'latin1')).update(Buffer.from(b, 'latin1')).digest('binary');
  t.equal(merkleTree(l).root, node(node(l[0], l[1]), l[2]), 'the left subtree holds the largest power of two below the count');
  t.equal(merkleLeafHash('x0'), crypto.createHash('sha256').update(Buffer.from([0])).update('x0').digest('binary'), 'leaf hash: SHA-256(0x00 ‖ leaf)');
});

/** A started SigningKeys of controller c1 on a store in a temporary directory, gone at the test's end. */
async function startKeys(t: Test) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-tokens-'));
  const store = new Store(path.join(dir, 'db'), createRegistry().collectionSpecs());
  const keys = new SigningKeys(store, dir, { controllerId: 'c1', rotationMs: 3_600_000 });
  await keys.start();
  t.teardown(async () => {
    keys.close();
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return { dir, store, keys };
}

t.test('session tokens: a batch is signed when a commit starts, when one of its tokens is needed, or after a wait', async (t) => {
  const { store, keys } = await startKeys(t);
  const ask = (i: number) => keys.signSession(sessionTokenClaims('https://c1', { id: `s${i}`, identityId: 'i', apiSessionId: 'a', serviceId: `svc${i}`, type: 'Dial' }, 600));
  let settled = 0;
  const first = [ask(1), ask(2)];
  for (const p of first) p.token.then(() => settled++);
  await new Promise((r) => setImmediate(r));
  t.equal(settled, 0, 'asked for, no commit, not needed: not signed yet');
  // The commit that carries their sessions' writes starts: they are signed while it commits.
  await store.write((tx) => tx.put('services', { id: 'x', name: 'x', createdAt: 0, updatedAt: 0, tags: {} } as ServiceRecord));
  const tokens = await Promise.all(first.map((p) => p.token));
  t.equal(new Set(tokens.map((tk) => tk.split('~')[0])).size, 1, 'the two asked for before the commit share its batch');
  // Needed with no write: signed at once, with whatever waits.
  const third = ask(3);
  const fourth = ask(4);
  fourth.need();
  const later = await Promise.all([third.token, fourth.token]);
  t.equal(new Set(later.map((tk) => tk.split('~')[0])).size, 1, 'the needed token took the waiting one into its batch');
  const lone = ask(5);
  const at = Date.now();
  await lone.token;
  t.ok(Date.now() - at >= 40, 'a token nobody needs is signed after the wait anyway');
  t.same(keys.signingStats, { tokens: 5, batches: 3 }, 'three signatures for the five');
});

t.test('session tokens: signed by the offload (the worker task) when there is one, by the event loop when it fails', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-tokens-'));
  const store = new Store(path.join(dir, 'db'), createRegistry().collectionSpecs());
  let offloaded = 0;
  let failing = false;
  const told: unknown[] = [];
  const keys = new SigningKeys(store, dir, {
    controllerId: 'c1',
    rotationMs: 3_600_000,
    offload: async (task) => {
      if (failing) throw new Error('the pool is closing');
      offloaded++;
      // What the signing thread runs (workers/tokens.ts), key parsed from the PEM it is sent.
      return signSessions(task);
    },
    onOffloadError: (err) => told.push(err),
  });
  await keys.start();
  t.teardown(async () => {
    keys.close();
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const jwks = createLocalJWKSet(keys.jwks() as never);
  // A newline inside a claim: the task carries the claims as JSON texts joined by newlines.
  const ask = (i: number) => keys.signSession(sessionTokenClaims('https://c1', { id: `s${i}`, identityId: `i${i}`, apiSessionId: `a\n${i}`, serviceId: 'svc', type: 'Bind' }, 600));
  for (const mode of ['offloaded', 'inline after a failure']) {
    failing = mode !== 'offloaded';
    const asked = [ask(1), ask(2), ask(3)];
    const tokens = await Promise.all([asked[0].need(), asked[1].token, asked[2].token]);
    for (const [i, token] of tokens.entries()) {
      const want = { sub: `i${i + 1}`, jti: `s${i + 1}`, z_asid: `a\n${i + 1}`, z_svc: 'svc', z_st: 'Bind' };
      t.match(keys.verify(token, SESSION_TOKEN), want, `${mode}: token ${i + 1} verifies`);
      t.match(await verifySessionToken(token, jwks), want, `${mode}: a router verifies token ${i + 1}`);
    }
  }
  t.equal(offloaded, 1, 'one task for the batch of three');
  t.match(told, [{ message: 'the pool is closing' }], 'a failing signing thread is told, once per batch');
});

t.test('session tokens: one signature per batch, each verifiable alone', async (t) => {
  const { dir, keys } = await startKeys(t);
  const facts = (i: number) => ({ id: `s${i}`, identityId: `i${i}`, apiSessionId: `a${i}`, serviceId: `svc${i}`, type: i % 2 ? 'Bind' : 'Dial' });
  // Asked for together, one of them needed: one batch, signed at once.
  const asked = Array.from({ length: 13 }, (_, i) => keys.signSession(sessionTokenClaims('https://c1', facts(i), 600)));
  asked[12].need();
  const signatures = keys.signingStats.batches;
  const tokens = await Promise.all(asked.map((p) => p.token));
  t.equal(new Set(tokens.map((tk) => tk.split('~')[0])).size, 1, '13 tokens asked for together share one batch signature');
  t.same(keys.signingStats, { tokens: 13, batches: 1 }, 'one signature for the 13');
  asked[3].need();
  t.equal(keys.signingStats.batches, signatures, 'needing a signed token signs nothing');
  const jwks = createLocalJWKSet(keys.jwks() as never);
  for (const [i, token] of tokens.entries()) {
    const own = keys.verify(token, SESSION_TOKEN);
    const router = await verifySessionToken(token, jwks);
    const want = { sub: `i${i}`, jti: `s${i}`, z_asid: `a${i}`, z_svc: `svc${i}`, z_st: facts(i).type, z_t: 'session' };
    if (!own || !t.match(own, want, `token ${i}: the controller's check`) || !t.match(router, want, `token ${i}: a router's check`)) break;
  }
  const [batch, claims, proof] = tokens[5].split('~');
  const other = tokens[6].split('~');
  t.equal(keys.verify(`${batch}~${other[1]}~${proof}`, SESSION_TOKEN), undefined, "another token's claims with this proof");
  t.equal(keys.verify(`${batch}~${claims}~${other[2]}`, SESSION_TOKEN), undefined, "another token's proof");
  const forged = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(claims, 'base64url').toString()), z_svc: 'x' })).toString('base64url');
  t.equal(keys.verify(`${batch}~${forged}~${proof}`, SESSION_TOKEN), undefined, 'changed claims');
  const [h, p, s] = batch.split('.');
  const bumped = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(p, 'base64url').toString()), z_n: 14 })).toString('base64url');
  t.equal(keys.verify(`${h}.${bumped}.${s}~${claims}~${proof}`, SESSION_TOKEN), undefined, 'a changed batch payload');
  t.equal(keys.verify(`${h}.${p}.~${claims}~${proof}`, SESSION_TOKEN), undefined, 'no batch signature');
  t.equal(keys.verify(`${batch}~${claims}~${proof}x`, SESSION_TOKEN), undefined, 'a proof of the wrong length');
  t.equal(keys.verify(`${batch}~${claims}~${proof}~`, SESSION_TOKEN), undefined, 'a fourth part');
  t.equal(keys.verify(batch, SESSION_TOKEN), undefined, 'the batch JWS alone');
  t.equal(keys.verify(tokens[5], 'api-session'), undefined, 'as an API-session token');
  const apiToken = keys.sign({ iss: 'https://c1', sub: 'i1', jti: 'as1', iat: Math.floor(Date.now() / 1000), z_t: 'api-session' });
  t.equal(keys.verify(apiToken, SESSION_TOKEN), undefined, 'an API-session token as a session token');
  t.ok(keys.verify(apiToken, 'api-session'), 'which is an API-session token');
  // Expiry is the claims' own.
  const [expired] = keys.signSessions([sessionTokenClaims('https://c1', facts(1), 60, Date.now() - 120_000)]);
  t.equal(keys.verify(expired, SESSION_TOKEN), undefined, 'expired claims');
  t.ok(keys.verify(expired, SESSION_TOKEN, Date.now() - 100_000), 'the same token before its exp');
  // After a rotation the old key's batch still verifies; a key of no controller does not.
  const before = tokens[0];
  await keys.rotate();
  t.ok(keys.verify(before, SESSION_TOKEN), 'a token of the retired key still verifies');
  const stranger = new SigningKeys(new Store(path.join(dir, 'db2'), createRegistry().collectionSpecs()), path.join(dir, 'other'), { controllerId: 'c2', rotationMs: 3_600_000 });
  await stranger.start();
  t.equal(keys.verify(stranger.signSessions([sessionTokenClaims('https://c2', facts(1), 60)])[0], SESSION_TOKEN), undefined, "another controller's unknown key");
  stranger.close();
});
