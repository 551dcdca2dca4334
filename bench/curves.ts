/**
 * bench:curves — @noble/curves against node:crypto for the signatures the controller makes and
 * checks (P-256 ECDSA as in ES256 JWTs, certificates and CSRs; Ed25519), on one thread in this
 * process. node:crypto (OpenSSL) is the ceiling; each @noble/curves figure is also given as a ratio
 * to it. Before timing, each library verifies the other's signatures, so both compute the same thing.
 * Writes bench/results/curves-<ts>.json and curves-latest.json.
 */
import crypto from 'node:crypto';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { p256 } from '@noble/curves/nist.js';
import { ed25519 } from '@noble/curves/ed25519.js';
import { parseCli, numFlag, intFlag } from './lib/cli.js';
import { progressBar } from './lib/progress.js';
import { ratio, pct } from './lib/raw-ceilings.js';
import { machineInfo, table, fmt, writeResults } from './lib/report.js';
import { ROOT } from './lib/controller.js';

const argv = parseCli({
  name: 'bench:curves',
  summary: `@noble/curves against node:crypto: P-256 ECDSA (SHA-256, IEEE P1363 signatures, as ES256) and
Ed25519 sign and verify, one thread, S seconds each. node:crypto is the ceiling; ratios are noble ÷ node.`,
  usage: ['npm run bench:curves', 'npm run bench:curves -- --duration 0.3   # a smoke run'],
  flags: {
    duration: { type: 'string', default: '2', arg: 'S', help: 'seconds per measure' },
    'message-bytes': { type: 'string', default: '400', arg: 'N', help: 'size of the signed message (a JWT signing input is ~300-600 bytes)' },
  },
});
const durationMs = numFlag(argv, 'duration', 0.05, 600) * 1000;
const message = crypto.randomBytes(intFlag(argv, 'message-bytes', 1, 1 << 20));

function opsPerSec(label: string, op: () => unknown): number {
  const bar = progressBar(label, { durationMs });
  for (let i = 0; i < 50; i++) op();
  let n = 0;
  const t0 = performance.now();
  let now = t0;
  while (now - t0 < durationMs) {
    for (let i = 0; i < 20; i++) op();
    n += 20;
    now = performance.now();
    bar.update(n);
  }
  bar.done();
  return Math.round((n / (now - t0)) * 1000);
}

function must(ok: boolean, what: string): void {
  if (!ok) throw new Error(`cross-check failed: ${what}`);
}

// P-256: one key pair, in each library's own form.
const ec = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
const ecJwk = ec.privateKey.export({ format: 'jwk' });
const ecSecret = Buffer.from(ecJwk.d!, 'base64url');
const ecPublic = p256.getPublicKey(ecSecret, false);
const nodeEcSig = crypto.sign('sha256', message, { key: ec.privateKey, dsaEncoding: 'ieee-p1363' });
const nobleEcSig = p256.sign(message, ecSecret);
must(p256.verify(nodeEcSig, message, ecPublic), 'noble verifies node:crypto P-256');
must(crypto.verify('sha256', message, { key: ec.publicKey, dsaEncoding: 'ieee-p1363' }, nobleEcSig), 'node:crypto verifies noble P-256');

// Ed25519.
const ed = crypto.generateKeyPairSync('ed25519');
const edSecret = Buffer.from(ed.privateKey.export({ format: 'jwk' }).d!, 'base64url');
const edPublic = ed25519.getPublicKey(edSecret);
const nodeEdSig = crypto.sign(null, message, ed.privateKey);
const nobleEdSig = ed25519.sign(message, edSecret);
must(Buffer.from(nodeEdSig).equals(Buffer.from(nobleEdSig)), 'Ed25519 signatures are deterministic and equal');
must(ed25519.verify(nodeEdSig, message, edPublic), 'noble verifies node:crypto Ed25519');

const rows = [
  { what: 'P-256 ECDSA sign', node: opsPerSec('node:crypto P-256 sign', () => crypto.sign('sha256', message, { key: ec.privateKey, dsaEncoding: 'ieee-p1363' })), noble: opsPerSec('noble P-256 sign', () => p256.sign(message, ecSecret)) },
  { what: 'P-256 ECDSA verify', node: opsPerSec('node:crypto P-256 verify', () => crypto.verify('sha256', message, { key: ec.publicKey, dsaEncoding: 'ieee-p1363' }, nodeEcSig)), noble: opsPerSec('noble P-256 verify', () => p256.verify(nodeEcSig, message, ecPublic)) },
  { what: 'Ed25519 sign', node: opsPerSec('node:crypto Ed25519 sign', () => crypto.sign(null, message, ed.privateKey)), noble: opsPerSec('noble Ed25519 sign', () => ed25519.sign(message, edSecret)) },
  { what: 'Ed25519 verify', node: opsPerSec('node:crypto Ed25519 verify', () => crypto.verify(null, message, ed.publicKey, nodeEdSig)), noble: opsPerSec('noble Ed25519 verify', () => ed25519.verify(nodeEdSig, message, edPublic)) },
].map((r) => ({ ...r, nobleRatio: ratio(r.noble, r.node) }));

const started = new Date();
const machine = machineInfo();
process.stdout.write(`\ncurves  one thread, ${message.length}-byte message, ${machine.cpus} cpus, node ${machine.node} (OpenSSL ${process.versions.openssl}), load at start ${machine.loadavg.join(' ')}\n`);
process.stdout.write(table(['operation', 'node:crypto /s (ceiling)', '@noble/curves /s', 'noble ÷ node'], rows.map((r) => [r.what, r.node, r.noble, pct(r.nobleRatio)])) + '\n');
const file = writeResults('curves', { bench: 'curves', startedAt: started.toISOString(), machine, parameters: { durationMs, messageBytes: message.length }, results: rows }, started);
process.stdout.write(`results: ${path.relative(ROOT, file)} (${fmt(durationMs / 1000, 1)} s per measure)\n`);
