/**
 * src/pki/chain.ts and src/pki/certs.ts on real certificates made with openssl: which chains lead
 * to a CA (directly, through an intermediate the client sent, not through a stranger or an
 * expired intermediate), expiry, common names, external ids read by a CA's claim, and parsing of
 * user-supplied PEM (first block, fingerprint, CA flag, 400 naming the field on junk).
 */
import t from 'tap';
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chainsTo, commonName, externalIdOf, isExpired, issued, x509 } from '../../../src/pki/chain.js';
import { fingerprintOf, parseCert, splitPem } from '../../../src/pki/certs.js';
import { ApiError } from '../../../src/core/errors.js';
import { newCa } from '../../helpers/pki.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-chain-'));
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
const file = (name: string, text?: string) => {
  const f = path.join(dir, name);
  if (text !== undefined) fs.writeFileSync(f, text);
  return f;
};
const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: ['ignore', 'pipe', 'ignore'] });

/** An intermediate CA signed by `ca` (openssl x509 -req with CA extensions), valid `days`. */
function intermediate(ca: { cert: string; key: string }, cn: string, days: number) {
  const key = file(`${cn}.key`);
  openssl('req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', key, '-out', file(`${cn}.csr`), '-subj', `/CN=${cn}`);
  file(`${cn}.ext`, 'basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n');
  openssl('x509', '-req', '-in', file(`${cn}.csr`), '-CA', file('root.pem', ca.cert), '-CAkey', file('root.key', ca.key), '-CAcreateserial',
    '-days', String(days), '-extfile', file(`${cn}.ext`), '-out', file(`${cn}.pem`));
  return { cert: fs.readFileSync(file(`${cn}.pem`), 'utf8'), key: fs.readFileSync(key, 'utf8') };
}

const der = (pem: string) => new crypto.X509Certificate(pem).raw;

const root = newCa('unit-root');
const stranger = newCa('unit-stranger');
const mid = intermediate(root, 'unit-mid', 30);
function issueUnder(ca: { cert: string; key: string }, cn: string, sans?: string) {
  const key = file(`${cn}.leaf.key`);
  openssl('req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', key, '-out', file(`${cn}.leaf.csr`), '-subj', `/CN=${cn}`);
  file(`${cn}.leaf.ext`, `basicConstraints=critical,CA:FALSE\n${sans ? `subjectAltName=${sans}\n` : ''}`);
  file(`${cn}.ca.pem`, ca.cert);
  file(`${cn}.ca.key`, ca.key);
  openssl('x509', '-req', '-in', file(`${cn}.leaf.csr`), '-CA', file(`${cn}.ca.pem`), '-CAkey', file(`${cn}.ca.key`), '-CAcreateserial',
    '-days', '10', '-extfile', file(`${cn}.leaf.ext`), '-out', file(`${cn}.leaf.pem`));
  return fs.readFileSync(file(`${cn}.leaf.pem`), 'utf8');
}

t.test('chains: direct, through a sent intermediate, never through a stranger', async (t) => {
  const rootX = x509(der(root.cert));
  const direct = root.sign('direct-leaf').cert;
  t.ok(issued(x509(der(direct)), rootX), 'issued: the root signed the leaf');
  t.notOk(issued(x509(der(direct)), x509(der(stranger.cert))), 'issued: a stranger did not');
  t.ok(chainsTo([der(direct)], rootX), 'a leaf of the root chains to it');
  t.notOk(chainsTo([der(direct)], x509(der(stranger.cert))), 'not to a stranger');

  const leaf = issueUnder(mid, 'via-mid');
  t.notOk(chainsTo([der(leaf)], rootX), 'a leaf of an intermediate alone does not reach the root');
  t.ok(chainsTo([der(leaf), der(mid.cert)], rootX), 'with the intermediate sent, it does');
  t.ok(chainsTo([der(leaf), der(mid.cert)], x509(der(mid.cert))), 'and it chains to the intermediate itself');
  t.notOk(chainsTo([der(leaf), der(stranger.cert)], rootX), 'an unrelated certificate in the chain is no link');
  t.notOk(chainsTo([], rootX), 'an empty chain leads nowhere');
  // The intermediate is past its validity when "now" is a year later.
  const later = Date.now() + 365 * 86400_000;
  t.notOk(chainsTo([der(leaf), der(mid.cert)], rootX, later), 'an expired intermediate is no link');
});

t.test('expiry and common names', async (t) => {
  const c = x509(der(root.sign('cn-leaf').cert));
  t.equal(commonName(c), 'cn-leaf');
  t.notOk(isExpired(c), 'a fresh certificate is not expired');
  t.ok(isExpired(c, Date.now() + 400 * 86400_000), 'expired after notAfter');
  t.ok(isExpired(c, Date.now() - 2 * 3600_000 - 10 * 60_000 - 3600_000), 'not yet valid before notBefore (beyond 5 minutes of skew)');
});

t.test('external ids read by a CA claim', async (t) => {
  const c = x509(der(issueUnder(root, 'ext-id', 'URI:spiffe://corp/device/d-42,URI:https://corp.example/u/7,email:dev@corp.example')));
  t.equal(externalIdOf(c, { location: 'COMMON_NAME' }), 'ext-id');
  t.equal(externalIdOf(c, { location: 'SAN_URI' }), 'spiffe://corp/device/d-42', 'the first URI without a matcher');
  t.equal(externalIdOf(c, { location: 'SAN_URI', matcher: 'SCHEME', matcherCriteria: 'HTTPS' }), 'https://corp.example/u/7', 'scheme match ignores case');
  t.equal(externalIdOf(c, { location: 'SAN_URI', matcher: 'PREFIX', matcherCriteria: 'spiffe://corp/', parser: 'SPLIT', parserCriteria: '/', index: 4 }), 'd-42');
  t.equal(externalIdOf(c, { location: 'SAN_URI', matcher: 'SUFFIX', matcherCriteria: '/7' }), 'https://corp.example/u/7');
  t.equal(externalIdOf(c, { location: 'SAN_EMAIL' }), 'dev@corp.example');
  t.equal(externalIdOf(c, { location: 'SAN_URI', matcher: 'PREFIX', matcherCriteria: 'urn:' }), undefined, 'no match → undefined');
  t.equal(externalIdOf(c, { location: 'SAN_URI', parser: 'SPLIT', parserCriteria: '/', index: 99 }), undefined, 'index past the parts → undefined');
  t.equal(externalIdOf(c, {}), undefined, 'no location → undefined');
});

t.test('parseCert: first PEM block, fingerprint, CA flag; junk is a 400 naming the field', async (t) => {
  const leaf = root.sign('parsed-leaf').cert;
  const info = parseCert(leaf + root.cert, 'certPem');
  t.equal(info.commonName, 'parsed-leaf', 'the first block of a bundle');
  t.equal(info.isCa, false);
  t.equal(parseCert(root.cert, 'certPem').isCa, true);
  t.equal(info.fingerprint, crypto.createHash('sha1').update(der(leaf)).digest('hex'));
  t.equal(fingerprintOf(der(leaf)), info.fingerprint);
  t.ok(info.notBefore < Date.now() && info.notAfter > Date.now(), 'validity in epoch ms');
  t.equal(splitPem(leaf + '\n' + root.cert).length, 2, 'splitPem finds both blocks');
  for (const [label, junk] of [['not a string', 42], ['no PEM block', 'hello'], ['damaged body', '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----']] as const) {
    try {
      parseCert(junk, 'certPem');
      t.fail(`${label}: accepted`);
    } catch (e) {
      t.ok(e instanceof ApiError && e.code === 'COULD_NOT_VALIDATE' && (e.errorCause as { field?: string })?.field === 'certPem', `${label} → COULD_NOT_VALIDATE certPem`);
    }
  }
});
