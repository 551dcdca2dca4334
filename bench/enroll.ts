/**
 * Enrollment and certificate-login benchmark (issue #5).
 *
 *   npm run build && node dist/bench/enroll.js [--enrollments 6000] [--concurrency 64] [--logins-ms 8000]
 *                                              [--env MESH_X=value]… [--cpu-prof <dir>]
 *
 * Keys and CSRs are made first, before the controller starts: none is made while timed.
 * Phases, all against the real controller (`dist/src/main.js`, spawned) on this machine:
 *  0. issuing path: certificates/s single-threaded in this process, @peculiar/x509 vs the DER
 *     template + node:crypto issuer the controller uses (src/pki/cert-issuer.ts) — the numbers the
 *     choice rests on;
 *  1. OTT enrollments/s: `POST /enroll/ott {token, clientCsr}` over keep-alive HTTPS, each with a
 *     distinct key and CSR (CSR → verified → certificate signed in the pool → enrollment deleted
 *     and authenticator created in one write), with the CPU time per enrollment of the controller
 *     (per thread, from /proc: on 2 shared cores the honest figure) and of this load generator;
 *  2. raw node:tls mutual-TLS handshakes/s against a bare node:tls server in its own process with
 *     the same server certificate: new connection, client certificate, one tiny reply, close;
 *  3. certificate logins/s: new TLS connection to the controller's certificate listener + `POST
 *     /authenticate?method=cert` (an API session is created and persisted per login), close.
 * Phase 3 ÷ phase 2 is the figure of merit (target ≥ 80%). Results: bench/results/enroll-*.json.
 */
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import tls from 'node:tls';
import { performance } from 'node:perf_hooks';
import { spawnController, login, MGMT, ROOT } from './lib/controller.js';
import { formatProfile, summarizeProfile } from './lib/cpuprofile.js';
import { createClient, requestJson, type RequestSpec } from './lib/http.js';
import { runLoad } from './lib/load.js';
import { Recorder, round } from './lib/stats.js';
import { machineInfo, table, writeResults, fmt } from './lib/report.js';
import { CertIssuer } from '../src/pki/cert-issuer.js';
import { parseCsr } from '../src/pki/csr.js';
import { derTlv, oid, seq, bitString, toPem } from '../src/pki/der.js';

const args = process.argv.slice(2);
const arg = (name: string, dflt: number) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : dflt;
};
const ENROLLMENTS = arg('enrollments', 6000);
const CONCURRENCY = arg('concurrency', 64);
const LOGIN_MS = arg('logins-ms', 8000);
const TLS_CONCURRENCY = arg('tls-concurrency', 16);
const PASSWORD = 'bench-admin-password';
/** `--env KEY=VALUE` (repeatable): extra controller settings, e.g. `--env MESH_HEAVY_CONCURRENCY=64`. */
const EXTRA_ENV: Record<string, string> = Object.fromEntries(
  args.flatMap((a, i) => (a === '--env' && args[i + 1]?.includes('=') ? [[args[i + 1].slice(0, args[i + 1].indexOf('=')), args[i + 1].slice(args[i + 1].indexOf('=') + 1)]] : [])),
);
/** `--cpu-prof <dir>`: profile the controller (every thread) and print where the enrollment phase's time went. */
const PROF_DIR = args.includes('--cpu-prof') ? args[args.indexOf('--cpu-prof') + 1] : undefined;

/** A PKCS#10 CSR for a new P-256 key, built with node:crypto (openssl per CSR would dominate setup). */
function makeCsr(cn: string): { csr: string; key: string } {
  const { privateKey, publicKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const name = seq(derTlv(0x31, seq(oid('2.5.4.3'), derTlv(0x0c, Buffer.from(cn)))));
  const cri = seq(Buffer.from('020100', 'hex'), name, publicKey.export({ type: 'spki', format: 'der' }), Buffer.from('a000', 'hex'));
  const sig = crypto.sign('sha256', cri, privateKey);
  const der = seq(cri, seq(oid('1.2.840.10045.4.3.2')), bitString(sig));
  return { csr: toPem(der, 'CERTIFICATE REQUEST'), key: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string };
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
    s.on('error', reject);
  });
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

async function closedLoop(ms: number, concurrency: number, one: (i: number) => Promise<{ ok: boolean; ms: number }>) {
  const rec = new Recorder();
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
      }
    }),
  );
  const elapsed = performance.now() - t0;
  return { ok, failed, perSec: round((ok * 1000) / elapsed, 1), latency: rec.summary() };
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
  console.log(`enroll benchmark: ${ENROLLMENTS} enrollments, concurrency ${CONCURRENCY}; cert logins ${LOGIN_MS} ms at ${TLS_CONCURRENCY} connections; load ${machine.loadavg.join(' ')}`);
  // Keys and CSRs first: the load generator does no key generation while it is timed, and the
  // controller's kept-alive connections do not sit idle (and time out) while they are made.
  console.log('setup: generating keys and CSRs…');
  const devices = Array.from({ length: ENROLLMENTS }, (_, i) => makeCsr(`bench-dev-${i}`));
  const certPort = await freePort();
  const ctl = await spawnController({
    password: PASSWORD,
    env: { MESH_CERT_ADDRESS: `127.0.0.1:${certPort}`, MESH_WORKER_QUEUE: '100000', ...EXTRA_ENV },
    nodeArgs: PROF_DIR ? ['--cpu-prof', `--cpu-prof-dir=${PROF_DIR}`] : [],
  });
  ctlPid = ctl.pid;
  try {
    // Phase 0 (before any connection is open, so none idles through it).
    const pkiDir = path.join(ctl.dataDir, 'pki');
    const paths = await issuingPaths(fs.readFileSync(path.join(pkiDir, 'intermediate.cert.pem'), 'utf8'), crypto.createPrivateKey(fs.readFileSync(path.join(pkiDir, 'intermediate.key.pem'))), devices.slice(0, 200).map((d) => d.csr));
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
    const made = await runLoad({ client, concurrency: CONCURRENCY, requests: creates, count: creates.length });
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
      client, concurrency: CONCURRENCY, requests: enrolls, count: enrolls.length,
      onResult: (i, r) => {
        if (r.status === 200 && r.body) certs[i] = JSON.parse(r.body.toString()).data.cert;
      },
    });
    enrollWindow = [w0, monoUs()];
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
    try {
      for (let r = 0; r < ROUNDS; r++) {
        const rawR = await closedLoop(LOGIN_MS / ROUNDS, TLS_CONCURRENCY, (i) => tlsOnce(rawPort, ctl.ca, pick(i).cert, pick(i).key, undefined));
        const loginR = await closedLoop(LOGIN_MS / ROUNDS, TLS_CONCURRENCY, (i) => tlsOnce(certPort, ctl.ca, pick(i).cert, pick(i).key, req));
        rounds.push({ raw: rawR, login: loginR });
        console.log(`round ${r + 1}: raw ${rawR.perSec}/s, cert logins ${loginR.perSec}/s (failed ${rawR.failed}/${loginR.failed})`);
      }
    } finally {
      raw.kill('SIGKILL');
    }
    const mean = (xs: number[]) => round(xs.reduce((a, b) => a + b, 0) / xs.length, 1);
    const rawRes = { perSec: mean(rounds.map((x) => x.raw.perSec)), failed: rounds.reduce((a, x) => a + x.raw.failed, 0), rounds: rounds.map((x) => x.raw) };
    const logins = { perSec: mean(rounds.map((x) => x.login.perSec)), failed: rounds.reduce((a, x) => a + x.login.failed, 0), rounds: rounds.map((x) => x.login) };
    const ratio = logins.perSec / rawRes.perSec;
    console.log(`raw node:tls mTLS handshakes: ${rawRes.perSec}/s; certificate logins: ${logins.perSec}/s (failed ${logins.failed}); ${fmt(ratio * 100, 1)}% of the raw handshake rate`);

    console.log('\n' + table(['measure', 'per second', 'target'], [
      ['certificates, DER template, 1 thread', paths.templatePerSec, ''],
      ['certificates, @peculiar/x509, 1 thread', paths.peculiarPerSec, ''],
      ['ott enrollments (HTTP, pool)', fmt(enr.okPerSec, 0), '≥ 2000'],
      ['raw node:tls mTLS handshakes', rawRes.perSec, ''],
      ['certificate logins', logins.perSec, `≥ ${fmt(rawRes.perSec * 0.8, 0)} (80%)`],
    ]));
    const file = writeResults('enroll', {
      machine,
      params: { enrollments: ENROLLMENTS, concurrency: CONCURRENCY, loginMs: LOGIN_MS, tlsConcurrency: TLS_CONCURRENCY },
      issuingPaths: paths,
      enrollments: {
        ok: enr.ok, perSec: round(enr.okPerSec, 1), latency: enr.latency, errors: enr.errors,
        controllerCpuMs: cpu0 !== undefined && cpu1 !== undefined ? cpu1 - cpu0 : undefined,
        controllerCpuMsPerEnrollment: ctlCpuPer === undefined ? undefined : round(ctlCpuPer, 3),
        loadGeneratorCpuMsPerEnrollment: round(genCpuPer, 3),
        controllerThreadCpuMsPerEnrollment: threadsPer,
      },
      rawMtlsHandshakes: rawRes,
      certLogins: logins,
      certLoginRatio: round(ratio, 3),
    });
    console.log(`\nresults: ${path.relative(process.cwd(), file)}`);
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
