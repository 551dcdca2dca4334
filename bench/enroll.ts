/**
 * bench:enroll — ott enrollments (CSR → certificate) and certificate logins, each as a ratio to its
 * ceiling measured in the same run: raw CSR signing on one thread, and a raw node:tls mutual-TLS
 * handshake. `--help` lists the phases and flags. Results: bench/results/enroll-<ts>.json and .svg.
 */
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import tls from 'node:tls';
import { performance } from 'node:perf_hooks';
import { spawnController, login, MGMT, ROOT } from './lib/controller.js';
import { formatProfile, summarizeProfile } from './lib/cpuprofile.js';
import { createClient, requestJson, type RequestSpec } from './lib/http.js';
import { runLoad } from './lib/load.js';
import { Recorder, round } from './lib/stats.js';
import { machineInfo, table, writeResults, fmt } from './lib/report.js';
import { parseCli, intFlag } from './lib/cli.js';
import { progressBar } from './lib/progress.js';
import { ratio as ratioOf, pct } from './lib/raw-ceilings.js';
import { RunChart } from './lib/run-chart.js';
import type { TimelineBucket } from './lib/load.js';
import { CertIssuer } from '../src/pki/cert-issuer.js';
import { parseCsr } from '../src/pki/csr.js';
import { derTlv, oid, seq, bitString, toPem } from '../src/pki/der.js';
import { freePort } from './lib/ports.js';

const argv = parseCli({
  name: 'bench:enroll',
  summary: `ott enrollments and certificate logins against the real controller.
Keys and CSRs are made first, before the controller starts: none is made while timed. Phases:
 0. ceiling: certificates/s on one thread in this process, the DER template + node:crypto issuer the
    controller uses (src/pki/cert-issuer.ts), and @peculiar/x509 for reference;
 1. ott enrollments/s: POST /enroll/ott {token, clientCsr} over keep-alive HTTPS, each with its own
    key and CSR, with the controller's CPU per enrollment (per thread, from /proc) and the load
    generator's; figure: enrollments/s ÷ phase 0's template rate (target ≥ 50%);
 2. ceiling: raw node:tls mutual-TLS handshakes/s against a bare node:tls server in its own process
    with the same server certificate (new connection, client certificate, tiny reply, close);
 3. certificate logins/s: new TLS connection to the certificate listener + POST
    /authenticate?method=cert (an API session is created and persisted per login), close.
Phases 2 and 3 alternate in 4 short rounds; phase 3 ÷ phase 2 is the figure (target ≥ 80%).`,
  usage: ['npm run bench:enroll', 'npm run bench:enroll -- --enrollments 2000 --env MESH_HEAVY_CONCURRENCY=32', 'npm run bench:enroll -- --enrollments 200 --logins-ms 2000 --concurrency 8   # a smoke run'],
  flags: {
    enrollments: { type: 'string', default: '6000', help: 'identities enrolled (each its own key and CSR)' },
    concurrency: { type: 'string', default: '64', arg: 'C', help: 'concurrent enrollment requests' },
    'logins-ms': { type: 'string', default: '8000', arg: 'MS', help: 'total time of phases 2 and 3 each' },
    'tls-concurrency': { type: 'string', default: '16', arg: 'C', help: 'concurrent TLS connections in phases 2 and 3' },
    env: { type: 'string', multiple: true, arg: 'KEY=VALUE', help: 'extra controller setting, e.g. MESH_HEAVY_CONCURRENCY=64' },
    'cpu-prof': { type: 'string', arg: 'DIR', help: "profile the controller's threads into DIR and print where the enrollment phase's time went" },
  },
});
const ENROLLMENTS = intFlag(argv, 'enrollments', 1, 1_000_000);
const CONCURRENCY = intFlag(argv, 'concurrency', 1, 4096);
const LOGIN_MS = intFlag(argv, 'logins-ms', 100, 3_600_000);
const TLS_CONCURRENCY = intFlag(argv, 'tls-concurrency', 1, 1024);
const PASSWORD = 'bench-admin-password';
const TARGET_ENROLL_RATIO = 0.5;
const TARGET_LOGIN_RATIO = 0.8;
const EXTRA_ENV: Record<string, string> = {};
for (const kv of (argv.env as string[] | undefined) ?? []) {
  const at = kv.indexOf('=');
  if (at < 1) {
    process.stderr.write(`--env: expected KEY=VALUE, got ${JSON.stringify(kv)}\n`);
    process.exit(2);
  }
  EXTRA_ENV[kv.slice(0, at)] = kv.slice(at + 1);
}
const PROF_DIR = argv['cpu-prof'] as string | undefined;

/** A PKCS#10 CSR for a new P-256 key, built with node:crypto (openssl per CSR would dominate setup). */
function makeCsr(cn: string): { csr: string; key: string } {
  const { privateKey, publicKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const name = seq(derTlv(0x31, seq(oid('2.5.4.3'), derTlv(0x0c, Buffer.from(cn)))));
  const cri = seq(Buffer.from('020100', 'hex'), name, publicKey.export({ type: 'spki', format: 'der' }), Buffer.from('a000', 'hex'));
  const sig = crypto.sign('sha256', cri, privateKey);
  const der = seq(cri, seq(oid('1.2.840.10045.4.3.2')), bitString(sig));
  return { csr: toPem(der, 'CERTIFICATE REQUEST'), key: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string };
}

/** Phase 0: certificates per second, single-threaded, for each issuing path. */
async function issuingPaths(caCertPem: string, caKey: crypto.KeyObject, csrs: string[]) {
  const ms = 2000;
  const tpl = new CertIssuer(caCertPem, caKey);
  let n = 0;
  let t0 = performance.now();
  while (performance.now() - t0 < ms) tpl.issueFromPem(csrs[n++ % csrs.length], 'client', 86400_000);
  const template = (n * 1000) / (performance.now() - t0);

  const wc = globalThis.crypto;
  const signingKey = await wc.subtle.importKey('pkcs8', caKey.export({ format: 'der', type: 'pkcs8' }), { name: 'ECDSA', namedCurve: 'P-256' }, false, ['sign']);
  const ca = new x509.X509Certificate(caCertPem);
  n = 0;
  t0 = performance.now();
  while (performance.now() - t0 < ms) {
    const req = new x509.Pkcs10CertificateRequest(csrs[n % csrs.length]);
    if (!(await req.verify(wc))) throw new Error('CSR did not verify');
    await x509.X509CertificateGenerator.create(
      {
        serialNumber: crypto.randomBytes(16).toString('hex').replace(/^./, '4'),
        subject: req.subjectName,
        issuer: ca.subjectName,
        notBefore: new Date(),
        notAfter: new Date(Date.now() + 86400_000),
        publicKey: await req.publicKey.export(wc),
        signingKey,
        signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
        extensions: [
          new x509.BasicConstraintsExtension(false, undefined, true),
          new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
          new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.clientAuth]),
          await x509.SubjectKeyIdentifierExtension.create(await req.publicKey.export(wc), false, wc),
        ],
      },
      wc,
    );
    n++;
  }
  const peculiar = (n * 1000) / (performance.now() - t0);
  // Parse + verify alone, for the record.
  n = 0;
  t0 = performance.now();
  while (performance.now() - t0 < 1000) parseCsr(csrs[n++ % csrs.length]);
  const parseVerify = (n * 1000) / (performance.now() - t0);
  return { templatePerSec: round(template, 0), peculiarPerSec: round(peculiar, 0), csrParseVerifyPerSec: round(parseVerify, 0) };
}

/** One TLS connection with a client certificate; optional request text; resolves when closed. */
function tlsOnce(port: number, ca: Buffer, cert: string, key: string, request: string | undefined): Promise<{ ok: boolean; ms: number }> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    let data = '';
    const s = tls.connect({ host: '127.0.0.1', port, ca, cert, key, servername: 'localhost' }, () => {
      if (request) s.write(request);
    });
    s.setEncoding('utf8');
    s.on('data', (d) => (data += d));
    s.on('error', () => resolve({ ok: false, ms: performance.now() - t0 }));
    s.on('close', () => resolve({ ok: /^HTTP\/1\.1 200 /.test(data), ms: performance.now() - t0 }));
  });
}

async function closedLoop(ms: number, concurrency: number, one: (i: number) => Promise<{ ok: boolean; ms: number }>, onDone?: () => void) {
  const rec = new Recorder();
  const timeline: TimelineBucket[] = [];
  let ok = 0;
  let failed = 0;
  let i = 0;
  const t0 = performance.now();
  const end = t0 + ms;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const r = await one(i++);
        rec.add(r.ms);
        if (r.ok) ok++;
        else failed++;
        const t = t0 + Math.floor((performance.now() - t0) / 500) * 500;
        let b = timeline[timeline.length - 1];
        if (b?.t !== t) timeline.push((b = { t, ok: 0, failed: 0 }));
        if (r.ok) b.ok++;
        else b.failed++;
        onDone?.();
      }
    }),
  );
  const elapsed = performance.now() - t0;
  return { ok, failed, perSec: round((ok * 1000) / elapsed, 1), latency: rec.summary(), timeline };
}

const RAW_SERVER = `
const tls = require('node:tls'); const fs = require('node:fs');
const [cert, key] = [fs.readFileSync(process.argv[1]), fs.readFileSync(process.argv[2])];
const s = tls.createServer({ cert, key, requestCert: true, rejectUnauthorized: false }, (sock) => {
  sock.end('HTTP/1.1 200 OK\\r\\ncontent-length: 2\\r\\nconnection: close\\r\\n\\r\\nok');
});
s.on('tlsClientError', () => {});
s.listen(0, '127.0.0.1', () => process.stdout.write('port ' + s.address().port + '\\n'));
`;

/** CPU ms (user + system) of each thread of a process, by thread id (all of node's threads are
 *  named `node`; the main thread's id is the process id). */
function threadCpuMs(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  try {
    for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
      const s = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
      out.set(tid === String(pid) ? 'main' : tid, (Number(f[11]) + Number(f[12])) * 10);
    }
  } catch {
    // the process is gone: report nothing
  }
  return out;
}

const monoUs = () => Number(process.hrtime.bigint() / 1000n);
let enrollWindow: [number, number] = [0, 0];
let ctlPid = 0;

async function main() {
  const machine = machineInfo();
  const started = new Date();
  console.log(`enroll benchmark: ${ENROLLMENTS} enrollments, concurrency ${CONCURRENCY}; cert logins ${LOGIN_MS} ms at ${TLS_CONCURRENCY} connections; load ${machine.loadavg.join(' ')}`);
  // Keys and CSRs first: the load generator does no key generation while it is timed, and the
  // controller's kept-alive connections do not sit idle (and time out) while they are made.
  console.log('setup: generating keys and CSRs…');
  const keysBar = progressBar('setup: keys and CSRs', { total: ENROLLMENTS });
  const devices: ReturnType<typeof makeCsr>[] = [];
  for (let i = 0; i < ENROLLMENTS; i++) {
    devices.push(makeCsr(`bench-dev-${i}`));
    // The bar redraws from a timer: let it run now and then during this synchronous loop.
    if (i % 200 === 199) {
      keysBar.update(i + 1);
      await new Promise((r) => setImmediate(r));
    }
  }
  keysBar.done();
  const certPort = await freePort();
  const ctl = await spawnController({
    password: PASSWORD,
    env: { MESH_CERT_ADDRESS: `127.0.0.1:${certPort}`, MESH_WORKER_QUEUE: '100000', ...EXTRA_ENV },
    nodeArgs: PROF_DIR ? ['--cpu-prof', `--cpu-prof-dir=${PROF_DIR}`] : [],
  });
  ctlPid = ctl.pid;
  const chart = new RunChart(ctl.pid);
  try {
    // Phase 0 (before any connection is open, so none idles through it).
    const pkiDir = path.join(ctl.dataDir, 'pki');
    const bar0 = progressBar('ceiling: CSR signing, 1 thread', { durationMs: 5000 });
    const paths = await issuingPaths(fs.readFileSync(path.join(pkiDir, 'intermediate.cert.pem'), 'utf8'), crypto.createPrivateKey(fs.readFileSync(path.join(pkiDir, 'intermediate.key.pem'))), devices.slice(0, 200).map((d) => d.csr));
    bar0.done();
    console.log(`issuing path, 1 thread: template ${paths.templatePerSec}/s, @peculiar/x509 ${paths.peculiarPerSec}/s (CSR parse+verify alone ${paths.csrParseVerifyPerSec}/s)`);

    const client = await createClient({ origin: ctl.origin, ca: ctl.ca, connections: CONCURRENCY });
    const token = await login(client, 'admin', PASSWORD);
    const auth = { 'zt-session': token, 'content-type': 'application/json', accept: 'application/json' };

    // Setup: identities with ott enrollments.
    console.log('setup: identities with ott enrollments…');
    const creates: RequestSpec[] = Array.from({ length: ENROLLMENTS }, (_, i) => ({
      method: 'POST', path: `${MGMT}/identities`, headers: auth,
      body: Buffer.from(JSON.stringify({ name: `bench-dev-${i}`, type: 'Device', isAdmin: false, enrollment: { ott: true } })),
    }));
    const made = await runLoad({ client, concurrency: CONCURRENCY, requests: creates, count: creates.length, label: 'setup: identities' });
    chart.add('setup: identities', made.timeline);
    if (made.ok !== ENROLLMENTS) throw new Error(`identity setup failed: ${JSON.stringify(made.errors)}`);
    const tokens: string[] = [];
    for (let offset = 0; tokens.length < ENROLLMENTS; offset += 500) {
      const page = await requestJson(client, 'GET', `${MGMT}/enrollments?limit=500&offset=${offset}&filter=${encodeURIComponent('method="ott"')}`, auth);
      if (!page.body?.data?.length) break;
      for (const e of page.body.data) tokens.push(e.token);
    }
    if (tokens.length !== ENROLLMENTS) throw new Error(`expected ${ENROLLMENTS} ott enrollments, found ${tokens.length}`);

    // Phase 1: enrollments.
    const certs: string[] = new Array(tokens.length);
    const enrolls: RequestSpec[] = tokens.map((tok, i) => ({
      method: 'POST', path: '/edge/client/v1/enroll/ott', headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: Buffer.from(JSON.stringify({ token: tok, clientCsr: devices[i].csr })), wantBody: true,
    }));
    const threads0 = threadCpuMs(ctl.pid);
    const cpu0 = ctl.cpuMs();
    const own0 = process.cpuUsage();
    const w0 = monoUs();
    const enr = await runLoad({
      client, concurrency: CONCURRENCY, requests: enrolls, count: enrolls.length, label: 'enrollments',
      onResult: (i, r) => {
        if (r.status === 200 && r.body) certs[i] = JSON.parse(r.body.toString()).data.cert;
      },
    });
    enrollWindow = [w0, monoUs()];
    chart.add('enrollments', enr.timeline);
    const enrollRatio = ratioOf(enr.okPerSec, paths.templatePerSec);
    const cpu1 = ctl.cpuMs();
    const own = process.cpuUsage(own0);
    // Main thread; the two busiest others (the pool workers); everything else (V8's compiler and
    // GC helpers, libuv's threads where LMDB commits and syncs).
    const per = (ms: number) => round(ms / Math.max(1, enr.ok), 3);
    const threads1 = threadCpuMs(ctl.pid);
    const others = [...threads1].filter(([t]) => t !== 'main').map(([t, ms]) => ms - (threads0.get(t) ?? 0)).sort((a, b) => b - a);
    const threadsPer = {
      main: per((threads1.get('main') ?? 0) - (threads0.get('main') ?? 0)),
      busiest: others.slice(0, 2).map(per),
      rest: per(others.slice(2).reduce((a, b) => a + b, 0)),
    };
    // CPU per enrollment: the controller's (every thread) is the honest cost; the load generator's
    // own share shows how much of these 2 cores the client took from the controller.
    const ctlCpuPer = cpu0 !== undefined && cpu1 !== undefined ? (cpu1 - cpu0) / Math.max(1, enr.ok) : undefined;
    const genCpuPer = (own.user + own.system) / 1000 / Math.max(1, enr.ok);
    console.log(`enrollments: ${enr.ok} ok, ${fmt(enr.okPerSec, 0)}/s, p50 ${fmt(enr.latency.p50)} ms, p99 ${fmt(enr.latency.p99)} ms, errors ${JSON.stringify(enr.errors)}; CPU per enrollment: controller ${fmt(ctlCpuPer ?? NaN, 3)} ms (main thread ${threadsPer.main}, two busiest others ${threadsPer.busiest.join(' + ')}, rest ${threadsPer.rest}), load generator ${fmt(genCpuPer, 3)} ms`);
    await client.close();

    // Phase 2: raw node:tls mutual-TLS handshakes (own process, same certificate and key).
    const raw = spawn(process.execPath, ['-e', RAW_SERVER, path.join(pkiDir, 'server.chain.pem'), path.join(pkiDir, 'server.key.pem')], { stdio: ['ignore', 'pipe', 'inherit'] });
    const rawPort = await new Promise<number>((resolve) => raw.stdout!.on('data', (d) => {
      const m = /port (\d+)/.exec(String(d));
      if (m) resolve(Number(m[1]));
    }));
    const enrolled = certs.map((c, i) => ({ cert: c, key: devices[i].key })).filter((d) => d.cert);
    const pick = (i: number) => enrolled[i % enrolled.length];
    // Phases 2 and 3 alternate in short rounds, so both see the same (shared, noisy) machine.
    const req = 'POST /edge/client/v1/authenticate?method=cert HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 0\r\naccept: application/json\r\nconnection: close\r\n\r\n';
    const ROUNDS = 4;
    const rounds: { raw: Awaited<ReturnType<typeof closedLoop>>; login: Awaited<ReturnType<typeof closedLoop>> }[] = [];
    const bar = progressBar('raw handshakes and certificate logins', { durationMs: 2 * LOGIN_MS });
    let handshakes = 0;
    const count = () => bar.update(++handshakes);
    try {
      for (let r = 0; r < ROUNDS; r++) {
        const rawR = await closedLoop(LOGIN_MS / ROUNDS, TLS_CONCURRENCY, (i) => tlsOnce(rawPort, ctl.ca, pick(i).cert, pick(i).key, undefined), count);
        const loginR = await closedLoop(LOGIN_MS / ROUNDS, TLS_CONCURRENCY, (i) => tlsOnce(certPort, ctl.ca, pick(i).cert, pick(i).key, req), count);
        rounds.push({ raw: rawR, login: loginR });
        chart.add(`ceiling: raw mTLS handshake ${r + 1}`, rawR.timeline);
        chart.add(`certificate logins ${r + 1}`, loginR.timeline);
        if (!process.stderr.isTTY) console.log(`round ${r + 1}: raw ${rawR.perSec}/s, cert logins ${loginR.perSec}/s (failed ${rawR.failed}/${loginR.failed})`);
      }
    } finally {
      bar.done();
      raw.kill('SIGKILL');
    }
    const mean = (xs: number[]) => round(xs.reduce((a, b) => a + b, 0) / xs.length, 1);
    const rawRes = { perSec: mean(rounds.map((x) => x.raw.perSec)), failed: rounds.reduce((a, x) => a + x.raw.failed, 0), rounds: rounds.map((x) => ({ ...x.raw, timeline: undefined })) };
    const logins = { perSec: mean(rounds.map((x) => x.login.perSec)), failed: rounds.reduce((a, x) => a + x.login.failed, 0), rounds: rounds.map((x) => ({ ...x.login, timeline: undefined })) };
    const ratio = logins.perSec / rawRes.perSec;
    console.log(`raw node:tls mTLS handshakes: ${rawRes.perSec}/s; certificate logins: ${logins.perSec}/s (failed ${logins.failed}); ${fmt(ratio * 100, 1)}% of the raw handshake rate`);

    const chartFile = chart.write('enroll', `bench:enroll — ${ENROLLMENTS} enrollments at ${CONCURRENCY}, logins at ${TLS_CONCURRENCY}`, started);
    console.log('\n' + table(['measure', 'per second', 'ratio', 'target'], [
      ['ceiling: certificates, DER template, 1 thread', paths.templatePerSec, '', ''],
      ['certificates, @peculiar/x509, 1 thread', paths.peculiarPerSec, pct(ratioOf(paths.peculiarPerSec, paths.templatePerSec)), ''],
      ['ott enrollments (HTTP, pool)', fmt(enr.okPerSec, 0), pct(enrollRatio), `≥ ${pct(TARGET_ENROLL_RATIO)} of the template rate ${(enrollRatio ?? 0) >= TARGET_ENROLL_RATIO ? 'ok' : 'MISS'}`],
      ['ceiling: raw node:tls mTLS handshakes', rawRes.perSec, '', ''],
      ['certificate logins', logins.perSec, pct(ratio), `≥ ${pct(TARGET_LOGIN_RATIO)} of raw ${ratio >= TARGET_LOGIN_RATIO ? 'ok' : 'MISS'}`],
    ]));
    const file = writeResults('enroll', {
      bench: 'enroll',
      startedAt: started.toISOString(),
      machine,
      targets: { enrollRatioToTemplateSigning: TARGET_ENROLL_RATIO, certLoginRatioToRawHandshake: TARGET_LOGIN_RATIO },
      chart: path.relative(ROOT, chartFile),
      params: { enrollments: ENROLLMENTS, concurrency: CONCURRENCY, loginMs: LOGIN_MS, tlsConcurrency: TLS_CONCURRENCY },
      issuingPaths: paths,
      enrollments: {
        ok: enr.ok, perSec: round(enr.okPerSec, 1), ratioToTemplateSigning: enrollRatio, latency: enr.latency, errors: enr.errors,
        controllerCpuMs: cpu0 !== undefined && cpu1 !== undefined ? cpu1 - cpu0 : undefined,
        controllerCpuMsPerEnrollment: ctlCpuPer === undefined ? undefined : round(ctlCpuPer, 3),
        loadGeneratorCpuMsPerEnrollment: round(genCpuPer, 3),
        controllerThreadCpuMsPerEnrollment: threadsPer,
      },
      rawMtlsHandshakes: rawRes,
      certLogins: logins,
      certLoginRatio: round(ratio, 3),
    }, started);
    console.log(`\nresults: ${path.relative(process.cwd(), file)}; chart: ${path.relative(process.cwd(), chartFile)}`);
  } finally {
    await ctl.stop();
  }
  if (PROF_DIR) {
    // One profile per thread (CPU.<date>.<time>.<pid>.<thread>.<seq>.cpuprofile; thread 0 = main),
    // each cut to the enrollment phase.
    const pid = String(ctlPid);
    for (const f of fs.readdirSync(PROF_DIR).filter((f) => f.endsWith('.cpuprofile') && f.split('.')[3] === pid).sort()) {
      console.log(`\n== enrollment phase, thread ${f.split('.')[4]} ==\n` + formatProfile(summarizeProfile(path.join(PROF_DIR, f), { root: ROOT, window: enrollWindow }), 30));
    }
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
