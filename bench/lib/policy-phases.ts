/**
 * The policy engine measured on a running controller holding a model (bench:policy, bench:scale): as
 * the worst-case identity, the client service list at one client, session creates at each level of
 * clients, service-update polls, and a policy change's time until every sampled identity sees it;
 * each beside its ceiling measured in the same run with the same client (the trivial answer on the
 * same listener, durable LMDB puts at the same concurrency).
 */
import { createClient, requestJson, type ClientKind, type RequestSpec } from './http.js';
import { login, MGMT, type ControllerProcess } from './controller.js';
import { runLoad, type LoadResult } from './load.js';
import { fmt } from './report.js';
import { lmdbCommit, trivialAnswer, ratio, type RawCeiling } from './raw-ceilings.js';
import type { RunChart } from './run-chart.js';

const CLIENT = '/edge/client/v1';
const USER_PASSWORD = 'bench-user-password';

export interface PolicyPhaseOptions {
  ctl: ControllerProcess;
  adminPassword: string;
  model: { worstCaseIdentityId: string; ids: { identities: string[] } };
  chart: RunChart;
  durationMs: number;
  /** Concurrent clients for polls (and the trivial ceiling). */
  concurrency: number;
  /** API sessions of the worst-case identity. */
  apiSessions: number;
  /** Concurrent session creators per level, each on its own connection. */
  sessionClients: number[];
  clientKind: ClientKind;
  log: (line: string) => void;
}

export interface SessionLevel { clients: number; result: LoadResult; cpuMsPerRequest: number; mainCpuMsPerRequest: number; ratio?: number }

export async function measurePolicy(opts: PolicyPhaseOptions) {
  const { ctl, chart, log, durationMs, concurrency, apiSessions, sessionClients, clientKind } = opts;
  const client = await createClient({ origin: ctl.origin, ca: ctl.ca, connections: concurrency, kind: clientKind });
  try {
    const adminToken = await login(client, 'admin', opts.adminPassword);
    const ah = { accept: 'application/json', 'zt-session': adminToken };
    const addUser = async (identityId: string, username: string) => {
      const r = await requestJson(client, 'POST', `${MGMT}/authenticators`, ah, { identityId, method: 'updb', username, password: USER_PASSWORD });
      if (r.status !== 201) throw new Error(`authenticator for ${identityId}: ${r.status} ${JSON.stringify(r.body)}`);
    };
    const clientLogin = async (username: string) => {
      const r = await requestJson(client, 'POST', `${CLIENT}/authenticate?method=password`, { accept: 'application/json' }, { username, password: USER_PASSWORD });
      if (r.status !== 200) throw new Error(`client login ${username}: ${r.status} ${JSON.stringify(r.body)}`);
      return r.body.data.token as string;
    };
    await addUser(opts.model.worstCaseIdentityId, 'bench-worst');
    const tokens: string[] = [];
    for (let i = 0; i < apiSessions; i++) tokens.push(await clientLogin('bench-worst'));
    const wh = { accept: 'application/json', 'zt-session': tokens[0] };

    // Ceilings of this run, with the same client: the listener at 1 and C, the disk at each session level.
    const trivial1 = await trivialAnswer(client, 1, durationMs);
    const trivialC = await trivialAnswer(client, concurrency, durationMs);
    chart.add('ceiling: trivial c=1', trivial1.timeline);
    chart.add(`ceiling: trivial c=${concurrency}`, trivialC.timeline);
    const lmdb = new Map<number, RawCeiling>();
    for (const c of sessionClients) {
      const x = await lmdbCommit({ concurrency: c, durationMs });
      lmdb.set(c, x);
      chart.add(`ceiling: LMDB put c=${c}`, x.timeline);
    }
    log(`ceilings: trivial answer ${fmt(trivial1.perSec, 0)}/s at c=1, ${fmt(trivialC.perSec, 0)}/s at c=${concurrency}; durable LMDB put ${[...lmdb.values()].map((x) => `${fmt(x.perSec, 0)}/s at c=${x.concurrency}`).join(', ')}`);
    const all = await requestJson(client, 'GET', `${CLIENT}/services?limit=-1`, wh);
    const visible = (all.body.data as { id: string; permissions: string[] }[]) ?? [];
    const dialable = visible.filter((s) => s.permissions.includes('Dial')).map((s) => s.id);
    log(`worst-case identity: ${visible.length} services (${dialable.length} dialable), ${apiSessions} API sessions`);

    // Controller CPU time per request: a figure that other load on the machine does not distort.
    const windows: Record<string, [number, number]> = {};
    const monoUs = () => Number(process.hrtime.bigint() / 1000n);
    // The main thread's share too: work moved to the worker pool leaves the event loop free.
    const cpuPer = async (name: string, run: () => Promise<LoadResult>) => {
      const c0 = ctl.cpuMs() ?? NaN;
      const m0 = ctl.mainThreadCpuMs() ?? NaN;
      const w0 = monoUs();
      const r = await run();
      windows[name] = [w0, monoUs()];
      const n = Math.max(1, r.requests);
      return { r, cpuMsPerRequest: ((ctl.cpuMs() ?? NaN) - c0) / n, mainCpuMsPerRequest: ((ctl.mainThreadCpuMs() ?? NaN) - m0) / n };
    };

    // 1. Client service list, limit 100, worst-case identity, one request at a time.
    const listSpec: RequestSpec = { method: 'GET', path: `${CLIENT}/services?limit=100`, headers: wh };
    await runLoad({ client, concurrency: 1, requests: [listSpec], durationMs: 500 });
    const { r: list1, cpuMsPerRequest: listCpu } = await cpuPer('service list', () => runLoad({ client: client, concurrency: 1, requests: [listSpec], durationMs, label: 'service list c=1' }));
    const listC = await runLoad({ client, concurrency: Math.min(concurrency, 8), requests: [listSpec], durationMs, label: `service list c=${Math.min(concurrency, 8)}` });
    chart.add('service list c=1', list1.timeline);
    chart.add(`service list c=${Math.min(concurrency, 8)}`, listC.timeline);
    const listRatio = ratio(list1.okPerSec, trivial1.perSec);
    log(`service list p50 ${fmt(list1.latency.p50)} ms p99 ${fmt(list1.latency.p99)} ms (c=1); ${fmt(listC.rps, 0)}/s at c=${Math.min(concurrency, 8)}; controller CPU ${fmt(listCpu, 3)} ms/request`);

    const pollSpecs = tokens.map((tok) => ({ method: 'GET', path: `${CLIENT}/current-api-session/service-updates`, headers: { accept: 'application/json', 'zt-session': tok } }));

    // 2. Session creates: each (API session, dialable service) pair once.
    const sessionSpecs: RequestSpec[] = [];
    for (const sid of dialable) for (const tok of tokens) sessionSpecs.push({ method: 'POST', path: `${CLIENT}/sessions`, headers: { accept: 'application/json', 'content-type': 'application/json', 'zt-session': tok }, body: Buffer.from(JSON.stringify({ serviceId: sid, type: 'Dial' })) });
    // Each level of concurrent clients (each on its own keep-alive connection) creates its own
    // share of the pairs. A session is a durable write: its rate is writes per group commit × commits
    // per second, and the writes per commit are the clients waiting, so the levels show both the
    // latency-bound and the saturated regime.
    const levels = sessionClients.filter((c) => c > 0);
    const perLevel = Math.floor(Math.min(sessionSpecs.length, 60_000) / Math.max(1, levels.length));
    const sessionLevels: SessionLevel[] = [];
    for (const [i, clients] of levels.entries()) {
      if (perLevel === 0) break;
      const c = await createClient({ origin: ctl.origin, ca: ctl.ca, connections: clients, kind: clientKind });
      try {
        // Connections opened (TLS handshakes) before the clock starts: a poll on each.
        await runLoad({ client: c, concurrency: clients, requests: pollSpecs, count: clients * 4 });
        const { r, cpuMsPerRequest, mainCpuMsPerRequest } = await cpuPer(`session create c=${clients}`, () => runLoad({ client: c, concurrency: clients, requests: sessionSpecs.slice(i * perLevel, (i + 1) * perLevel), count: perLevel, label: `session creates c=${clients}` }));
        sessionLevels.push({ clients, result: r, cpuMsPerRequest, mainCpuMsPerRequest, ratio: ratio(r.okPerSec, lmdb.get(clients)?.perSec) });
        chart.add(`session creates c=${clients}`, r.timeline);
        log(`session creates, ${clients} clients: ${fmt(r.okPerSec, 0)}/s p50 ${fmt(r.latency.p50)} ms p99 ${fmt(r.latency.p99)} ms (${r.ok} created, errors ${JSON.stringify(r.errors)}); controller CPU ${fmt(cpuMsPerRequest, 3)} ms/request (main thread ${fmt(mainCpuMsPerRequest, 3)})`);
      } finally {
        await c.close();
      }
    }
    const best = sessionLevels.reduce<(typeof sessionLevels)[number] | undefined>((b, l) => (!b || (l.ratio ?? 0) > (b.ratio ?? 0) ? l : b), undefined);

    // 3. Service-update polls.
    await runLoad({ client, concurrency, requests: pollSpecs, durationMs: 500 });
    const { r: polls, cpuMsPerRequest: pollCpu, mainCpuMsPerRequest: pollMainCpu } = await cpuPer('service-update polls', () => runLoad({ client: client, concurrency, requests: pollSpecs, durationMs, label: 'service-update polls' }));
    chart.add('service-update polls', polls.timeline);
    const pollRatio = ratio(polls.okPerSec, trivialC.perSec);
    log(`service-update polls: ${fmt(polls.okPerSec, 0)}/s p99 ${fmt(polls.latency.p99)} ms; controller CPU ${fmt(pollCpu, 3)} ms/request (main thread ${fmt(pollMainCpu, 3)})`);

    // 4. A policy change affecting every identity: the `#all` service policy gains a new service.
    const others = [1, 2, 3].map((k) => opts.model.ids.identities[Math.floor((k * opts.model.ids.identities.length) / 4)]);
    for (const [k, id] of others.entries()) await addUser(id, `bench-other-${k}`);
    const otherTokens = await Promise.all(others.map((_, k) => clientLogin(`bench-other-${k}`)));
    const newSvc = await requestJson(client, 'POST', `${MGMT}/services`, ah, { name: `bench-new-service-${Date.now()}`, encryptionRequired: true });
    const allPolicy = await requestJson(client, 'GET', `${MGMT}/service-policies?filter=${encodeURIComponent('anyOf(identityRoles) = "#all" and type = 1')}&limit=1`, ah);
    const pol = allPolicy.body.data?.[0];
    let changeMs = NaN;
    let patchMs = NaN;
    if (pol && newSvc.status === 201) {
      const c0 = performance.now();
      const patch = await requestJson(client, 'PATCH', `${MGMT}/service-policies/${pol.id}`, ah, { serviceRoles: [...pol.serviceRoles, `@${newSvc.body.data.id}`] });
      patchMs = performance.now() - c0;
      if (patch.status !== 200) throw new Error(`policy change: ${patch.status} ${JSON.stringify(patch.body)}`);
      const pending = new Set([tokens[0], ...otherTokens]);
      while (pending.size && performance.now() - c0 < 10_000) {
        for (const tok of [...pending]) {
          const r = await requestJson(client, 'GET', `${CLIENT}/services?filter=${encodeURIComponent(`id = "${newSvc.body.data.id}"`)}`, { accept: 'application/json', 'zt-session': tok });
          if (r.body?.data?.length === 1) pending.delete(tok);
        }
      }
      if (pending.size === 0) changeMs = performance.now() - c0;
    }
    log(`policy change visible to every sampled identity after ${fmt(changeMs, 1)} ms (PATCH answered in ${fmt(patchMs, 1)} ms)`);

    return { visible: visible.length, dialable: dialable.length, trivial1, trivialC, lmdb, list1, listC, listCpu, listRatio, sessionLevels, best, polls, pollCpu, pollMainCpu, pollRatio, changeMs, patchMs, windows };
  } finally {
    await client.close();
  }
}
