/**
 * Rate limiting and the API session lifecycle pieces that need no waiting:
 * - the bounded queue itself (in process): concurrency, queue, immediate 429 beyond both, and a
 *   call admitted to wait that has not started within maxWaitMs refused then (never started late);
 *   every refusal with Retry-After;
 * - a burst of logins against a controller configured with a tiny auth queue: 200s and 429
 *   RATE_LIMITED, never a 5xx, and the controller logs in normally afterwards;
 * - the idle-session sweeper and the per-identity session end (in process, on a real LMDB store).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { Limiter } from '../src/auth/limiter.js';
import { ApiSessions } from '../src/auth/api-sessions.js';
import { SigningKeys } from '../src/auth/tokens.js';
import { Store, type SessionRecord } from '../src/store/store.js';
import { createRegistry } from '../src/resources/index.js';
import { ApiError } from '../src/core/errors.js';
import { startServer, isError } from './helpers/server.js';

t.test('bounded queue', async (t) => {
  const l = new Limiter('test', 2, 1);
  const gates: Array<() => void> = [];
  const started: number[] = [];
  const task = (i: number) => l.run(() => new Promise<number>((resolve) => { started.push(i); gates.push(() => resolve(i)); }));
  const a = task(1);
  const b = task(2);
  const c = task(3); // queued
  await new Promise((r) => setImmediate(r));
  t.same(started, [1, 2], 'two run at once');
  t.equal(l.queued, 1, 'one waits');
  const refused = await task(4).then(() => undefined, (e: unknown) => e);
  t.ok(refused instanceof ApiError && refused.code === 'RATE_LIMITED' && refused.status === 429, 'a fourth is refused at once with 429 RATE_LIMITED');
  t.ok(Number((refused as ApiError).headers?.['retry-after']) >= 1, 'with Retry-After');
  t.equal(l.rejected, 1, 'counted');
  gates.shift()!();
  t.equal(await a, 1);
  await new Promise((r) => setImmediate(r));
  t.same(started, [1, 2, 3], 'the waiter got the freed slot');
  gates.shift()!();
  gates.shift()!();
  t.same([await b, await c], [2, 3]);
  t.equal(l.running, 0, 'all slots free');
  const failing = l.run(() => { throw new Error('boom'); });
  await t.rejects(failing, /boom/, 'a failing task frees its slot too');
  t.equal(l.running, 0);
});

t.test('a call that would wait longer than maxWaitMs is refused at once, whatever room the queue has', async (t) => {
  const l = new Limiter('wait', 1, 100, 300);
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  await l.run(() => sleep(200)); // teaches it how long a call takes (~200 ms)
  const first = l.run(() => sleep(200));
  const second = l.run(() => sleep(200)); // expected wait ~200 ms: admitted
  await new Promise((r) => setImmediate(r));
  t.equal(l.queued, 1, 'one waits');
  const t0 = performance.now();
  const third = await l.run(() => sleep(200)).then(() => undefined, (e: unknown) => e);
  t.ok(third instanceof ApiError && third.code === 'RATE_LIMITED', 'expected wait ~400 ms > 300 ms: 429 RATE_LIMITED');
  t.ok(performance.now() - t0 < 150, 'at once, not after the ~400 ms wait');
  await Promise.all([first, second]);
});

t.test('a call admitted to wait starts within maxWaitMs or is refused then, never later', async (t) => {
  // No call has finished yet, so nothing tells the queue how long one takes: it admits the waiters.
  const l = new Limiter('bound', 1, 10, 200);
  let release!: () => void;
  const holder = l.run(() => new Promise<void>((resolve) => (release = resolve)));
  const started: number[] = [];
  const waiters = [1, 2].map((i) => l.run(() => void started.push(i)).then(() => 'ran', (e: unknown) => e));
  await new Promise((r) => setImmediate(r));
  t.equal(l.queued, 2, 'both admitted to wait');
  // The slot stays held past the bound: the waiters are refused then, while it is still held.
  const outcomes = await Promise.all(waiters);
  t.equal(l.running, 1, 'the slot is still held when they are refused');
  for (const e of outcomes) {
    t.ok(e instanceof ApiError && e.code === 'RATE_LIMITED' && e.status === 429, '429 RATE_LIMITED');
    t.ok(Number((e as ApiError).headers?.['retry-after']) >= 1, `Retry-After ${(e as ApiError).headers?.['retry-after']}`);
  }
  t.same(started, [], 'neither ran');
  t.equal(l.queued, 0, 'they left the queue');
  t.equal(l.expired, 2);
  // Before any call finished, how long the running one has taken already counts as a call's time:
  // a newcomer that would wait longer than the bound is refused at once.
  const late = await l.run(() => 'ran').then((v) => v, (e: unknown) => e);
  t.ok(late instanceof ApiError && late.code === 'RATE_LIMITED', 'refused at once: the running call has taken longer than the bound');
  release();
  await holder;
  t.equal(await l.run(() => 'ran'), 'ran', 'a free slot is taken at once');
});

t.test('a login burst beyond the auth queue gets 429 RATE_LIMITED', async (t) => {
  const srv = await startServer(t, {
    env: { MESH_AUTH_CONCURRENCY: '1', MESH_AUTH_QUEUE: '1', MESH_ARGON2_MEMORY_KIB: '32768', MESH_ARGON2_ITERATIONS: '3' },
  });
  const admin = await srv.login();
  const who = await admin.post('/identities', { name: 'burst-user', type: 'User', isAdmin: false });
  t.equal((await admin.post('/authenticators', { method: 'updb', identityId: who.body.data.id, username: 'burst-user', password: 'burst-password' })).status, 201);
  const burst = await Promise.all(
    Array.from({ length: 24 }, (_, i) => srv.client.post('/authenticate?method=password', { username: 'burst-user', password: i % 2 ? 'burst-password' : 'wrong-password' })),
  );
  const statuses = burst.map((r) => r.status);
  t.ok(statuses.every((s) => s === 200 || s === 401 || s === 429), `only 200/401/429: ${statuses.join(' ')}`);
  const limited = burst.filter((r) => r.status === 429);
  t.ok(limited.length > 0, `some were refused (${limited.length})`);
  for (const r of limited) t.ok(isError(r, 429, 'RATE_LIMITED') && Number(r.headers['retry-after']) >= 1, `429 RATE_LIMITED envelope with Retry-After (${r.headers['retry-after']})`);
  t.ok(statuses.some((s) => s === 200 || s === 401), 'some were served');
  t.equal((await srv.client.post('/authenticate?method=password', { username: 'burst-user', password: 'burst-password' })).status, 200, 'after the burst: served normally');
  t.equal((await srv.client.post('/authenticate/mfa', { code: '123456' })).status, 401, 'MFA check without a session is still a 401');
});

t.test('idle API sessions are swept with their sessions; identity end is one write', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-sweep-'));
  const store = new Store(dir, createRegistry().collectionSpecs());
  const keys = new SigningKeys(store, dir, { controllerId: 'c1', rotationMs: 3_600_000 });
  await keys.start();
  const sessions = new ApiSessions(store, keys, { timeoutMinutes: 1, flushMs: 600_000 });
  t.teardown(async () => {
    keys.close();
    await sessions.close();
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });
  const now = Date.now();
  const mk = async (identityId: string) => {
    const { session, token } = await sessions.create({ identityId, authenticatorId: 'a', method: 'password', ipAddress: '127.0.0.1', configTypes: [], isMfaRequired: false });
    return { ...session, token };
  };
  const s1 = await mk('ident-1');
  const s2 = await mk('ident-1');
  const s3 = await mk('ident-2');
  t.equal(sessions.resolve(s3.token)?.id, s3.id, 'the signed token resolves to its API session');
  let n = 0;
  const svc = (apiSessionId: string | undefined, identityId: string) => ({ id: `svc-${++n}`, createdAt: now, updatedAt: now, token: `tok-${n}`, apiSessionId, identityId, type: 'Dial' }) as SessionRecord;
  await store.write((tx) => {
    tx.put('sessions', svc(s1.id, 'ident-1'));
    tx.put('sessions', svc(s3.id, 'ident-2'));
    tx.put('sessions', svc(undefined, 'ident-1'));
  });
  t.equal(await sessions.sweep(now + 30_000), 0, 'nothing idle for longer than the timeout yet');
  t.equal(store.count('apiSessions'), 3);

  await store.write((tx) => ApiSessions.endForIdentityInTx(tx, 'ident-1'));
  t.equal(sessions.get(s1.id), undefined, 'identity end: API session 1 gone (memory follows the store)');
  t.equal(sessions.get(s2.id), undefined, 'identity end: API session 2 gone');
  t.ok(sessions.get(s3.id), 'another identity untouched');
  t.same([...store.scan('sessions')].map((r) => r.identityId), ['ident-2'], 'every session of the identity gone, others kept');

  t.equal(await sessions.sweep(now + 61_000), 1, 'an idle session is swept');
  t.equal(store.count('apiSessions'), 0, 'no API session left');
  t.equal(store.count('sessions'), 0, 'its sessions went with it');
  t.equal(sessions.resolve(s3.token), undefined, 'its token no longer resolves');
});
