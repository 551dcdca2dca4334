/**
 * HTTP/1.1 pipelining on the wire (RFC 9112 §9.3.2), on both listeners (the API listener, uWS;
 * the certificate listener, node:https; both are TLS, there is no plain-text listener): requests
 * written back to back on one raw TLS connection — a read and a delete, a create and a delete, two
 * deletes, 3 to 10 mixed requests in one write, a request split across writes, a successor sent
 * while its predecessor's write is being committed — are answered in order, every write that was
 * answered was made, and no write was made that was not answered: when the server does not answer
 * them all, it closes the connection and the unanswered requests did nothing, so a client's retry
 * is safe.
 *
 * The certificate listener (node) answers every request. The API listener (uWS) answers in full
 * when each request but the last is answered before the next one is parsed: uWS closes the
 * connection when it parses a request while an earlier answer is pending, so a request that waits
 * for a commit followed by a successor in the same read gets none answered (and nothing done),
 * while a successor in a later read waits for its turn. Which read a successor lands in depends on
 * how the bytes happen to arrive, so those assertions hold for either outcome; a mix whose requests
 * before the last are reads answered at once (identity details) is answered in full whatever the
 * reads.
 */
import t from 'tap';
import tls from 'node:tls';
import { startServer, type Client, type Server } from './helpers/server.js';
import { createUser } from './helpers/users.js';

const M = '/edge/management/v1';

/** One request of a scenario, with what its answer must be and what it does to the store. */
type Step =
  | { kind: 'get'; id: string; name: string }
  | { kind: 'delete'; id: string }
  | { kind: 'create'; name: string };

interface Answer {
  status: number;
  body: any;
}

/** A write on the connection, or a pause between two writes. */
type Wire = string | { gapMs: number };

let srv: Server;
let admin: Client;
let seq = 0;

t.before(async () => {
  srv = await startServer(t);
  admin = await srv.login();
});

async function identity(): Promise<{ id: string; name: string }> {
  const name = `pipe-${++seq}`;
  return { id: await createUser(admin, name), name };
}

const get = async () => ({ kind: 'get' as const, ...(await identity()) });
const del = async () => ({ kind: 'delete' as const, id: (await identity()).id });
const create = () => ({ kind: 'create' as const, name: `pipe-new-${++seq}` });

function wire(s: Step, token: string): string {
  const head = (method: string, path: string, extra = '') => `${method} ${M}${path} HTTP/1.1\r\nhost: x\r\nzt-session: ${token}\r\n${extra}`;
  if (s.kind === 'get') return head('GET', `/identities/${s.id}`) + '\r\n';
  if (s.kind === 'delete') return head('DELETE', `/identities/${s.id}`) + '\r\n';
  const body = JSON.stringify({ name: s.name, type: 'User', isAdmin: false });
  return head('POST', '/identities', `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n`) + '\r\n' + body;
}

/**
 * Send `wires` on one TLS connection; the answers in the order they came, and whether the server
 * closed the connection (rather than this client after `expect` answers or 5 s of silence).
 */
function exchange(port: number, wires: Wire[], expect: number): Promise<{ answers: Answer[]; closedByServer: boolean }> {
  return new Promise((resolve, reject) => {
    const answers: Answer[] = [];
    let buf = Buffer.alloc(0);
    let closedByServer = true;
    let idle: NodeJS.Timeout | undefined;
    const finish = () => {
      closedByServer = false;
      sock.end();
    };
    const arm = () => {
      clearTimeout(idle);
      idle = setTimeout(finish, 5000);
    };
    const sock = tls.connect({ host: '127.0.0.1', port, ca: srv.ca }, async () => {
      for (const w of wires) {
        if (typeof w === 'string') sock.write(w);
        else await new Promise((r) => setTimeout(r, w.gapMs));
      }
      arm();
    });
    sock.on('data', (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) break;
        const head = buf.subarray(0, end).toString('latin1');
        const len = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
        if (buf.length < end + 4 + len) break;
        const text = buf.subarray(end + 4, end + 4 + len).toString('utf8');
        let body: any;
        try {
          body = JSON.parse(text);
        } catch {
          body = text;
        }
        answers.push({ status: Number(head.split(' ')[1]), body });
        buf = buf.subarray(end + 4 + len);
      }
      if (answers.length === expect) {
        clearTimeout(idle);
        finish();
      }
    });
    sock.on('error', (e) => {
      // A reset after the server closed is a close; anything before connecting is a failure.
      if (!sock.remoteAddress) reject(e);
    });
    sock.on('close', () => {
      clearTimeout(idle);
      resolve({ answers, closedByServer });
    });
  });
}

/** Whether a step's write is in the store now. */
async function made(s: Step): Promise<boolean> {
  if (s.kind === 'delete') return (await admin.get(`/identities/${s.id}`)).status === 404;
  if (s.kind === 'create') return (await admin.get(`/identities?filter=${encodeURIComponent(`name = "${s.name}"`)}`)).body.data.length === 1;
  return false;
}

const expected = (s: Step) => (s.kind === 'create' ? 201 : 200);

/** Totals per listener, printed at the end: how often everything was answered. */
const tally: Record<string, { scenarios: number; allAnswered: number }> = {};

/**
 * Run one scenario and check it: the answers are a prefix of the requests, in order and each the
 * right one; a request answered with success did its write; an unanswered request did nothing and
 * the server closed the connection.
 */
async function scenario(t: Tap, listener: string, port: number, label: string, steps: Step[], wires: Wire[]) {
  const { answers, closedByServer } = await exchange(port, wires, steps.length);
  const k = answers.length;
  const tl = (tally[listener] ??= { scenarios: 0, allAnswered: 0 });
  tl.scenarios++;
  if (k === steps.length) tl.allAnswered++;
  t.ok(k <= steps.length, `${listener} ${label}: no more answers than requests (${k})`);
  if (listener === 'certificate') t.equal(k, steps.length, `${listener} ${label}: node answers every pipelined request`);
  else if (steps.slice(0, -1).every((s) => s.kind === 'get')) t.equal(k, steps.length, `${listener} ${label}: reads are answered before the next request is parsed, so uWS answers all`);
  for (let i = 0; i < k; i++) {
    const s = steps[i];
    const a = answers[i];
    t.equal(a.status, expected(s), `${listener} ${label}: answer ${i + 1} is ${s.kind}'s (${a.status} ${a.status >= 300 ? JSON.stringify(a.body) : ''})`);
    if (s.kind === 'get') t.equal(a.body?.data?.name, s.name, `${listener} ${label}: answer ${i + 1} names the identity asked for`);
    if (s.kind === 'create') t.equal(a.body?.data?.id !== undefined, true, `${listener} ${label}: answer ${i + 1} carries the new id`);
    if (s.kind !== 'get') t.ok(await made(s), `${listener} ${label}: answered ${s.kind} ${i + 1} was made`);
  }
  if (k < steps.length) {
    t.ok(closedByServer, `${listener} ${label}: ${steps.length - k} unanswered, and the server closed the connection`);
    for (let i = k; i < steps.length; i++) {
      const s = steps[i];
      if (s.kind !== 'get') t.notOk(await made(s), `${listener} ${label}: unanswered ${s.kind} ${i + 1} did nothing`);
    }
    // The client's retry of what was not answered succeeds as if first sent.
    for (const s of steps.slice(k)) {
      const r =
        s.kind === 'get' ? await admin.get(`/identities/${s.id}`)
        : s.kind === 'delete' ? await admin.delete(`/identities/${s.id}`)
        : await admin.post('/identities', { name: s.name, type: 'User', isAdmin: false });
      t.equal(r.status, expected(s), `${listener} ${label}: the retried ${s.kind} succeeds`);
    }
  }
}
type Tap = import("./helpers/assert.js").Tap;

const LISTENERS = () => [['API', srv.port], ['certificate', srv.certPort]] as const;

t.test('two requests in one write', async (t) => {
  for (const [listener, port] of LISTENERS()) {
    const mixes: [string, Step[]][] = [
      ['GET + DELETE', [await get(), await del()]],
      ['GET + GET + POST with a body', [await get(), await get(), create()]],
      ['DELETE + GET', [await del(), await get()]],
      ['POST with a body + DELETE', [create(), await del()]],
      ['DELETE + POST with a body', [await del(), create()]],
      ['DELETE + DELETE', [await del(), await del()]],
    ];
    for (const [label, steps] of mixes) await scenario(t, listener, port, label, steps, [steps.map((s) => wire(s, admin.token!)).join('')]);
  }
});

t.test('3 to 10 mixed requests in one write', async (t) => {
  for (const [listener, port] of LISTENERS()) {
    for (const n of [3, 4, 6, 10]) {
      const steps: Step[] = [];
      for (let i = 0; i < n; i++) steps.push(i % 3 === 0 ? await get() : i % 3 === 1 ? await del() : create());
      await scenario(t, listener, port, `${n} in one write`, steps, [steps.map((s) => wire(s, admin.token!)).join('')]);
    }
  }
});

t.test('requests split across writes', async (t) => {
  for (const [listener, port] of LISTENERS()) {
    // One request's head in two writes, then a read.
    {
      const steps: Step[] = [await del(), await get()];
      const [a, b] = steps.map((s) => wire(s, admin.token!));
      await scenario(t, listener, port, 'a DELETE head split in two', steps, [a.slice(0, 20), { gapMs: 30 }, a.slice(20) + b]);
    }
    // A create's body in two writes, then a delete.
    {
      const steps: Step[] = [create(), await del()];
      const [a, b] = steps.map((s) => wire(s, admin.token!));
      await scenario(t, listener, port, 'a POST body split in two', steps, [a.slice(0, a.length - 10), { gapMs: 30 }, a.slice(a.length - 10) + b]);
    }
    // The second request starts in the first's write and ends in a later one.
    {
      const steps: Step[] = [await del(), await del()];
      const [a, b] = steps.map((s) => wire(s, admin.token!));
      await scenario(t, listener, port, 'the second DELETE straddling two writes', steps, [a + b.slice(0, 25), { gapMs: 5 }, b.slice(25)]);
    }
    // A successor written while its predecessor's write is being committed (or just after):
    // several gaps, so some land mid-commit.
    for (const gapMs of [0, 1, 2, 4, 8, 16]) {
      const steps: Step[] = [await del(), await del(), create()];
      const w = steps.map((s) => wire(s, admin.token!));
      await scenario(t, listener, port, `writes ${gapMs} ms apart`, steps, [w[0], { gapMs }, w[1], { gapMs }, w[2]]);
    }
  }
});

t.test('a successor written after a POST, before its answer', async (t) => {
  // RFC 9112 §9.3.2 tells clients not to pipeline after a non-idempotent method; one that does
  // still gets both answers in order, or (both in one read on uWS) the connection closed with
  // neither done — never a POST made and its answer lost.
  for (const [listener, port] of LISTENERS()) {
    const steps: Step[] = [create(), await del()];
    const [a, b] = steps.map((s) => wire(s, admin.token!));
    const { answers, closedByServer } = await exchange(port, [a, { gapMs: 0 }, b], 2);
    if (listener === 'certificate') t.equal(answers.length, 2, `${listener}: node answers both`);
    for (let i = 0; i < answers.length; i++) {
      t.equal(answers[i].status, expected(steps[i]), `${listener}: answer ${i + 1} is ${steps[i].kind}'s`);
      t.ok(await made(steps[i]), `${listener}: answered ${steps[i].kind} ${i + 1} was made`);
    }
    if (answers.length < 2) {
      t.ok(closedByServer, `${listener}: ${2 - answers.length} unanswered, and the server closed the connection`);
      for (let i = answers.length; i < 2; i++) t.notOk(await made(steps[i]), `${listener}: unanswered ${steps[i].kind} ${i + 1} did nothing`);
      t.equal((await admin.delete(`/identities/${(steps[1] as { id: string }).id}`)).status, 200, `${listener}: the DELETE's retry succeeds`);
    }
  }
});

t.test('the tally', async (t) => {
  for (const [listener, { scenarios, allAnswered }] of Object.entries(tally)) t.comment(`${listener}: ${allAnswered} of ${scenarios} scenarios answered in full`);
  t.equal(tally.certificate?.allAnswered, tally.certificate?.scenarios, 'the certificate listener answered every scenario in full');
  t.ok((tally.API?.allAnswered ?? 0) > 0, 'the API listener answered some scenarios in full');
});
