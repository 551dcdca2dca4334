/**
 * PKI bootstrap: the controller's root CA, intermediate (signing) CA and TLS server certificate.
 *
 * `loadOrCreatePki(dir, { advertisedHost })` makes sure `dir` holds a consistent set and returns it
 * with the private keys already parsed into KeyObjects (performance-notes.md: parsing a PEM key per
 * signature is ~15× slower than signing with a cached KeyObject; the enrollment-JWT signer and the
 * client-certificate issuer reuse `serverKey` / `signingKey` directly).
 *
 * Files in `dir` (PEM; keys PKCS#8, mode 0600, the directory 0700 when we create it):
 *   root.cert.pem  root.key.pem                  self-signed trust anchor (10 y)
 *   intermediate.cert.pem  intermediate.key.pem  signing CA under the root, pathLen 0 (5 y)
 *   server.cert.pem  server.key.pem              TLS server cert under the intermediate (2 y)
 *   server.chain.pem                             server + intermediate: what the listener presents
 *   ca-bundle.pem                                root + intermediate: what clients trust
 *
 * Crash safety. Everything that has to be (re)issued is generated in memory first, then each file is
 * written to a temp name, fsynced and renamed over its final name (then the directory is fsynced),
 * in dependency order: root key, root cert, intermediate key, intermediate cert, server key, server
 * cert, chain, bundle. A crash can therefore only leave a *prefix* of that sequence applied, each
 * file whole. Load treats the root as the anchor and derives the rest from it:
 *   - root cert absent            → new root, and everything below it is re-issued (a root key
 *                                   without its cert is the leftover of an interrupted first run);
 *   - root cert present           → kept; its key is only needed to issue an intermediate, so an
 *                                   operator may take it offline;
 *   - intermediate missing, not matching its key, not issued by the root, or expiring
 *                                 → re-issued from the root key (error if that key is absent);
 *   - server cert missing, not matching its key, not issued by the intermediate, not covering the
 *     advertised host + loopback names, or expiring → re-issued from the intermediate, CAs kept;
 *   - chain / bundle files        → always recomputed, rewritten when they differ.
 * Inconsistencies a crash cannot produce (root cert and root key of different pairs, a root that is
 * not a CA, unparsable files) are reported as errors rather than "repaired" by replacing the trust
 * anchor clients already pinned.
 *
 * Loading an existing PKI uses node:crypto's native X509Certificate only; @peculiar/x509 (bootstrap-certs.ts)
 * is imported lazily, when something has to be issued.
 */
import { X509Certificate, createHash, createPrivateKey, randomBytes, type KeyObject } from 'node:crypto';
import { constants as fsConstants, promises as fs } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import type { Issued, SubjectAltName } from './bootstrap-certs.js';
import { encodeCertsOnlyPkcs7, wrapBase64 } from './pkcs7.js';

export interface Pki {
  rootCertPem: string;
  intermediateCertPem: string;
  /** Server certificate (leaf only). */
  serverCertPem: string;
  /** PKCS#8 PEM private key of the server certificate. */
  serverKeyPem: string;
  /** Server cert + intermediate: what the TLS listener presents. */
  serverChainPem: string;
  /** Root + intermediate: the trust bundle clients verify the server with. */
  caBundlePem: string;
  /** Lower-case hex SHA-1 of the server certificate DER: the `kid` of enrollment JWTs. */
  serverCertSha1Hex: string;
  /** Parsed once; sign with it directly. */
  serverKey: KeyObject;
  /** The intermediate CA certificate, which signs client certificates. */
  signingCertPem: string;
  /** The intermediate CA private key, parsed once. */
  signingKey: KeyObject;
  /** Files on disk (the uWS listener wants file names, not PEM text). */
  paths: { serverCert: string; serverKey: string; serverChain: string; caBundle: string };
  /** Body of `GET /.well-known/est/cacerts`: base64 of a degenerate PKCS#7 certs-only SignedData
   *  holding root + intermediate, 64-char lines joined by `\n`, no trailing newline. Computed on
   *  first call, then cached. */
  wellKnownCaStore(): string;
}

export interface PkiLogger {
  info(o: object, msg?: string): void;
}

export const PKI_FILES = {
  rootCert: 'root.cert.pem',
  rootKey: 'root.key.pem',
  intermediateCert: 'intermediate.cert.pem',
  intermediateKey: 'intermediate.key.pem',
  serverCert: 'server.cert.pem',
  serverKey: 'server.key.pem',
  serverChain: 'server.chain.pem',
  caBundle: 'ca-bundle.pem',
} as const;

/** Re-issue an intermediate / server certificate at load when less than this remains. */
export const RENEW_BEFORE_MS = 30 * 24 * 60 * 60 * 1000;

const KEY_MODE = 0o600;
// Certificates are public, but nothing under the data directory is readable by others (data-dir.ts).
const CERT_MODE = 0o600;
const DIR_MODE = 0o700;
const TEMP_MARK = '.tmp-';

/** A certificate as parsed by node:crypto, with its normalized PEM text. */
interface CertSlot {
  cert: X509Certificate;
  pem: string;
}

/** One pending write (all writes of a load are collected, then applied in order). */
interface PendingWrite {
  file: string;
  data: string;
  mode: number;
}

/**
 * Reduce an advertised address to the host the certificate must name. Accepts a bare host
 * (`ctrl.example.test`, `10.1.2.3`, `::1`), a bracketed IPv6 literal (`[::1]`, `[::1]:1280`) or
 * `host:port` (the shape of upstream's `edge.api.address`), so callers can pass the configured
 * address as is.
 */
function normalizeAdvertisedHost(advertised: string): SubjectAltName {
  let host = advertised.trim();
  if (host.startsWith('[')) {
    const end = host.indexOf(']');
    host = end > 0 ? host.slice(1, end) : host;
  } else if (!net.isIP(host) && host.split(':').length === 2) {
    host = host.slice(0, host.indexOf(':'));
  }
  if (net.isIP(host)) return { type: 'ip', value: canonicalIp(host) };
  host = host.toLowerCase().replace(/\.$/, '');
  // Letters, digits, hyphens, dots and (for wildcard-ish or internal names) underscores only:
  // anything else would be a malformed dNSName SAN that TLS clients reject anyway.
  if (!host || !/^[a-z0-9_*]([a-z0-9_.*-]*[a-z0-9_])?$/.test(host)) {
    throw new Error(`PKI: advertised host ${JSON.stringify(advertised)} is not a DNS name or IP address`);
  }
  return { type: 'dns', value: host };
}

/** SANs of a server certificate: the advertised host plus the loopback names, so local tools and
 *  health checks can connect with full verification. */
function serverSans(advertised: SubjectAltName): SubjectAltName[] {
  const sans: SubjectAltName[] = [advertised];
  for (const s of [
    { type: 'dns', value: 'localhost' },
    { type: 'ip', value: '127.0.0.1' },
    { type: 'ip', value: '::1' },
  ] as const) {
    if (!sans.some((x) => x.type === s.type && sameName(x, s))) sans.push(s);
  }
  return sans;
}

function sameName(a: SubjectAltName, b: SubjectAltName): boolean {
  return a.type === 'ip' ? canonicalIp(a.value) === canonicalIp(b.value) : a.value === b.value;
}

/** Canonical text of an IP literal (so `0:0:0:0:0:0:0:1` equals `::1`); SocketAddress parses
 *  with inet_pton and prints the canonical form. */
function canonicalIp(ip: string): string {
  return new net.SocketAddress({ address: ip, family: net.isIPv6(ip) ? 'ipv6' : 'ipv4' }).address;
}

/** Does `cert` name every SAN in `sans`? Uses OpenSSL's own matching (as a TLS client would),
 *  SANs only, never the subject CN. */
function coversSans(cert: X509Certificate, sans: readonly SubjectAltName[]): boolean {
  return sans.every((s) =>
    s.type === 'ip' ? cert.checkIP(s.value) !== undefined : cert.checkHost(s.value, { subject: 'never' }) !== undefined,
  );
}

function notAfter(cert: X509Certificate): number {
  return Date.parse(cert.validTo);
}

/**
 * True when `cert` should be renewed: less than RENEW_BEFORE_MS left *and* its issuer outlives it
 * (otherwise a new certificate, capped at the issuer's expiry, would be no better, and we would
 * re-issue on every start).
 */
function dueForRenewal(cert: X509Certificate, issuer: X509Certificate, now: number): boolean {
  return notAfter(cert) - now < RENEW_BEFORE_MS && notAfter(issuer) > notAfter(cert);
}

/** Is `cert` issued (name and signature) by `issuer`? */
function issuedBy(cert: X509Certificate, issuer: X509Certificate): boolean {
  return cert.checkIssued(issuer) && cert.verify(issuer.publicKey);
}

async function readOptional(file: string): Promise<string | undefined> {
  try {
    return await fs.readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

function parseCert(file: string, pem: string): CertSlot {
  try {
    const cert = new X509Certificate(pem);
    // Normalized PEM (drops any `openssl x509 -text` preamble an operator may have left in).
    return { cert, pem: cert.toString() };
  } catch (err) {
    throw new Error(`PKI: ${file} is not a PEM certificate: ${(err as Error).message}`);
  }
}

function parseKey(file: string, pem: string): KeyObject {
  try {
    return createPrivateKey(pem);
  } catch (err) {
    throw new Error(`PKI: ${file} is not an unencrypted PEM private key: ${(err as Error).message}`);
  }
}

function pkcs8Pem(key: KeyObject): string {
  return key.export({ type: 'pkcs8', format: 'pem' }) as string;
}

/** Open a directory and fsync it so a rename inside it is durable before the next one. */
async function fsyncDir(dir: string): Promise<void> {
  let fh: fs.FileHandle | undefined;
  try {
    fh = await fs.open(dir, fsConstants.O_RDONLY);
    await fh.sync();
  } catch (err) {
    // Some filesystems (and Windows) refuse fsync on directories; the rename is still atomic.
    if (!['EISDIR', 'EINVAL', 'EPERM', 'EBADF'].includes((err as NodeJS.ErrnoException).code ?? '')) throw err;
  } finally {
    await fh?.close();
  }
}

/** Write `data` to `file` atomically: temp file (created with `mode`, so a key is never readable
 *  by others even for an instant), fsync, rename over the target, fsync the directory. */
async function writeAtomic(file: string, data: string, mode: number): Promise<void> {
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}${TEMP_MARK}${process.pid}-${randomBytes(4).toString('hex')}`);
  const fh = await fs.open(tmp, 'wx', mode);
  try {
    await fh.chmod(mode); // the creation mode is subject to umask; make it exact
    await fh.writeFile(data, 'utf8');
    await fh.sync();
  } catch (err) {
    await fh.close();
    await fs.rm(tmp, { force: true });
    throw err;
  }
  await fh.close();
  try {
    await fs.rename(tmp, file);
  } catch (err) {
    await fs.rm(tmp, { force: true });
    throw err;
  }
  await fsyncDir(path.dirname(file));
}

/** Remove temp files a crashed earlier run may have left (only our own naming pattern). */
async function removeStaleTemps(dir: string): Promise<void> {
  const names = new Set<string>(Object.values(PKI_FILES));
  for (const entry of await fs.readdir(dir)) {
    const i = entry.indexOf(TEMP_MARK);
    if (entry.startsWith('.') && i > 0 && names.has(entry.slice(1, i))) {
      await fs.rm(path.join(dir, entry), { force: true });
    }
  }
}

/** Keys must not be readable by group/others; tighten a file an operator copied in loosely. */
async function tightenKeyMode(file: string, logger?: PkiLogger): Promise<void> {
  const st = await fs.stat(file);
  if ((st.mode & 0o077) !== 0) {
    await fs.chmod(file, KEY_MODE);
    logger?.info({ file, mode: (st.mode & 0o777).toString(8) }, 'PKI: private key file was group/world accessible; set to 0600');
  }
}

/**
 * Load the PKI in `dir`, creating or repairing whatever is missing (see the header comment).
 * `advertisedHost` is the host clients use to reach the controller (a bare host or `host:port`).
 */
export async function loadOrCreatePki(dir: string, opts: { advertisedHost: string; logger?: PkiLogger }): Promise<Pki> {
  const { logger } = opts;
  const advertised = normalizeAdvertisedHost(opts.advertisedHost);
  const sans = serverSans(advertised);
  const file = (k: keyof typeof PKI_FILES) => path.join(dir, PKI_FILES[k]);
  const now = Date.now();

  await fs.mkdir(dir, { recursive: true, mode: DIR_MODE });
  await removeStaleTemps(dir);

  const [rootCertText, rootKeyText, intCertText, intKeyText, srvCertText, srvKeyText, chainText, bundleText] = await Promise.all(
    (Object.keys(PKI_FILES) as (keyof typeof PKI_FILES)[]).map((k) => readOptional(file(k))),
  );

  const writes: PendingWrite[] = [];
  const issued: string[] = [];
  // Loaded lazily: only needed when something is issued.
  let issueMod: typeof import('./bootstrap-certs.js') | undefined;
  const issue = async () => (issueMod ??= await import('./bootstrap-certs.js'));
  const stage = (kind: 'root' | 'intermediate' | 'server', material: Issued) => {
    const [keyFile, certFile] =
      kind === 'root'
        ? (['rootKey', 'rootCert'] as const)
        : kind === 'intermediate'
          ? (['intermediateKey', 'intermediateCert'] as const)
          : (['serverKey', 'serverCert'] as const);
    // Key before cert: an interrupted write leaves "key without cert", which load treats as missing.
    writes.push({ file: file(keyFile), data: material.keyPem, mode: KEY_MODE });
    writes.push({ file: file(certFile), data: material.certPem, mode: CERT_MODE });
  };

  // ---- root ---------------------------------------------------------------------------------
  let root: CertSlot;
  let rootKey: KeyObject | undefined;
  let rootIsNew = false;
  if (rootCertText === undefined) {
    const leftovers = [intCertText, intKeyText, srvCertText, srvKeyText].some((x) => x !== undefined);
    const m = await (await issue()).createRoot(new Date(now));
    root = parseCert(PKI_FILES.rootCert, m.certPem);
    rootKey = m.key;
    rootIsNew = true;
    stage('root', m);
    issued.push('root');
    if (leftovers) logger?.info({ dir }, 'PKI: root CA certificate absent; issuing a new root and replacing the certificates below it');
  } else {
    root = parseCert(PKI_FILES.rootCert, rootCertText);
    if (!root.cert.ca) throw new Error(`PKI: ${file('rootCert')} is not a CA certificate`);
    if (rootKeyText !== undefined) {
      rootKey = parseKey(PKI_FILES.rootKey, rootKeyText);
      if (!root.cert.checkPrivateKey(rootKey)) {
        throw new Error(`PKI: ${file('rootKey')} does not belong to ${file('rootCert')}; refusing to replace the trust anchor`);
      }
      await tightenKeyMode(file('rootKey'), logger);
    }
    if (notAfter(root.cert) - now < RENEW_BEFORE_MS) {
      // Never rolled automatically: every client pins this certificate.
      logger?.info({ notAfter: root.cert.validTo }, 'PKI: root CA certificate expires soon; rotate it manually');
    }
  }

  // ---- intermediate -------------------------------------------------------------------------
  let intermediate: CertSlot | undefined;
  let signingKey: KeyObject | undefined;
  let intermediateIsNew = false;
  let intermediateProblem: string | undefined = rootIsNew ? 'new root' : undefined;
  if (!intermediateProblem) {
    if (intCertText === undefined || intKeyText === undefined) {
      intermediateProblem = 'missing';
    } else {
      const slot = parseCert(PKI_FILES.intermediateCert, intCertText);
      const key = parseKey(PKI_FILES.intermediateKey, intKeyText);
      if (!slot.cert.checkPrivateKey(key)) intermediateProblem = 'key does not match certificate';
      else if (!slot.cert.ca) intermediateProblem = 'not a CA certificate';
      else if (!issuedBy(slot.cert, root.cert)) intermediateProblem = 'not issued by the root CA';
      else if (now >= notAfter(slot.cert)) intermediateProblem = 'expired';
      else if (dueForRenewal(slot.cert, root.cert, now) && rootKey) intermediateProblem = 'expiring';
      else {
        intermediate = slot;
        signingKey = key;
        await tightenKeyMode(file('intermediateKey'), logger);
      }
    }
  }
  if (intermediateProblem) {
    if (!rootKey) {
      throw new Error(`PKI: intermediate CA must be (re)issued (${intermediateProblem}) but the root key ${file('rootKey')} is absent`);
    }
    const m = await (await issue()).createIntermediate({ certPem: root.pem, key: rootKey }, new Date(now));
    intermediate = parseCert(PKI_FILES.intermediateCert, m.certPem);
    signingKey = m.key;
    intermediateIsNew = true;
    stage('intermediate', m);
    issued.push('intermediate');
    if (!rootIsNew) logger?.info({ reason: intermediateProblem }, 'PKI: issuing a new intermediate CA');
  }
  // Definitely assigned by one of the branches above; narrowed for the compiler.
  if (!intermediate || !signingKey) throw new Error('PKI: internal error: no intermediate');

  // ---- server -------------------------------------------------------------------------------
  let server: CertSlot | undefined;
  let serverKey: KeyObject | undefined;
  let serverProblem: string | undefined = intermediateIsNew ? 'new intermediate' : undefined;
  if (!serverProblem) {
    if (srvCertText === undefined || srvKeyText === undefined) {
      serverProblem = 'missing';
    } else {
      const slot = parseCert(PKI_FILES.serverCert, srvCertText);
      const key = parseKey(PKI_FILES.serverKey, srvKeyText);
      if (!slot.cert.checkPrivateKey(key)) serverProblem = 'key does not match certificate';
      else if (!issuedBy(slot.cert, intermediate.cert)) serverProblem = 'not issued by the intermediate CA';
      else if (!coversSans(slot.cert, sans)) serverProblem = 'advertised host not covered';
      else if (now >= notAfter(slot.cert) || dueForRenewal(slot.cert, intermediate.cert, now)) serverProblem = 'expiring';
      else {
        server = slot;
        serverKey = key;
        await tightenKeyMode(file('serverKey'), logger);
      }
    }
  }
  if (serverProblem) {
    const m = await (await issue()).createServer({ certPem: intermediate.pem, key: signingKey }, advertised.value, sans, new Date(now));
    server = parseCert(PKI_FILES.serverCert, m.certPem);
    serverKey = m.key;
    stage('server', m);
    issued.push('server');
    if (!intermediateIsNew) logger?.info({ reason: serverProblem, sans: sans.map((s) => s.value) }, 'PKI: issuing a new server certificate');
  }
  if (!server || !serverKey) throw new Error('PKI: internal error: no server certificate');

  // ---- derived files ------------------------------------------------------------------------
  const serverChainPem = server.pem + intermediate.pem;
  const caBundlePem = root.pem + intermediate.pem;
  if (chainText !== serverChainPem) writes.push({ file: file('serverChain'), data: serverChainPem, mode: CERT_MODE });
  if (bundleText !== caBundlePem) writes.push({ file: file('caBundle'), data: caBundlePem, mode: CERT_MODE });

  // Sequential on purpose: the order is the crash-consistency argument (header comment).
  for (const w of writes) await writeAtomic(w.file, w.data, w.mode);

  if (issued.length) {
    logger?.info(
      { dir, issued, advertisedHost: advertised.value, serverNotAfter: server.cert.validTo },
      `PKI: issued ${issued.join(', ')} certificate${issued.length > 1 ? 's' : ''}`,
    );
  }

  let wellKnown: string | undefined;
  return {
    rootCertPem: root.pem,
    intermediateCertPem: intermediate.pem,
    serverCertPem: server.pem,
    serverKeyPem: pkcs8Pem(serverKey),
    serverChainPem,
    caBundlePem,
    serverCertSha1Hex: createHash('sha1').update(server.cert.raw).digest('hex'),
    serverKey,
    signingCertPem: intermediate.pem,
    signingKey,
    paths: {
      serverCert: file('serverCert'),
      serverKey: file('serverKey'),
      serverChain: file('serverChain'),
      caBundle: file('caBundle'),
    },
    wellKnownCaStore() {
      return (wellKnown ??= wrapBase64(encodeCertsOnlyPkcs7([root.cert.raw, intermediate.cert.raw])));
    },
  };
}
