/**
 * `mesh enroll JWTFILE --out IDENTITY.json`: one-time-token enrollment as a device does it. The
 * JWT names the controller (`iss`); its CA bundle is fetched from there and the JWT's signature is
 * checked against the certificate the controller presents (it signs enrollment JWTs with its
 * server key) before anything is sent. Then: a new EC P-256 key, a CSR, `POST /enroll/ott`, and
 * the identity file with the certificate, key, CA bundle and controller URL (upstream's identity
 * JSON shape, so upstream SDKs read it too).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import { call, apiErrorText } from './http.js';
import { fetchCaBundle, origin, type IdentityFile } from './login.js';
import { CliError, usage } from './state.js';

export async function enroll(jwtFile: string, out: string, opts: { name?: string } = {}): Promise<void> {
  if (!fs.existsSync(jwtFile)) throw usage(`${jwtFile} does not exist`);
  if (fs.existsSync(out)) throw usage(`${out} exists already; choose another --out (it would replace an identity)`);
  const jwt = fs.readFileSync(jwtFile, 'utf8').trim();
  const { decodeJwt, decodeProtectedHeader, compactVerify } = await import('jose');
  let claims: Record<string, any>;
  try {
    decodeProtectedHeader(jwt);
    claims = decodeJwt(jwt);
  } catch (e) {
    throw usage(`${jwtFile}: not a JWT: ${(e as Error).message}`);
  }
  if (claims.em !== 'ott') throw usage(`${jwtFile}: enrollment method "${claims.em}" is not one mesh enroll performs (ott)`);
  if (typeof claims.exp === 'number' && claims.exp * 1000 < Date.now()) throw new CliError(`${jwtFile}: the enrollment expired at ${new Date(claims.exp * 1000).toISOString()}`);
  const url = origin(String(claims.iss));
  const { pem: caPem } = await fetchCaBundle(url);
  // The controller's certificate, checked against its CA bundle; the JWT must be signed by its key.
  const probe = await call('GET', `${url}/edge/client/v1/version`, undefined, { ca: caPem });
  if (!probe.peerCert) throw new CliError(`${url}: no server certificate seen`);
  try {
    await compactVerify(jwt, new crypto.X509Certificate(probe.peerCert).publicKey);
  } catch {
    throw new CliError(`${jwtFile}: the JWT is not signed by the controller at ${url}; refusing to enroll`);
  }

  const { publicKey, privateKey } = crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
  await import('reflect-metadata');
  const x509 = await import('@peculiar/x509');
  const alg = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };
  const keys = {
    publicKey: await crypto.webcrypto.subtle.importKey('spki', publicKey.export({ type: 'spki', format: 'der' }), alg, true, ['verify']),
    privateKey: await crypto.webcrypto.subtle.importKey('pkcs8', privateKey.export({ type: 'pkcs8', format: 'der' }), alg, true, ['sign']),
  };
  const csr = await x509.Pkcs10CertificateRequestGenerator.create(
    { name: `CN=${(opts.name ?? String(claims.sub ?? 'device')).replace(/[,=+<>#;\\"]/g, '_')}`, keys, signingAlgorithm: alg },
    crypto.webcrypto as Crypto,
  );
  const r = await call('POST', `${url}/edge/client/v1/enroll/ott`, { token: claims.jti, clientCsr: csr.toString('pem') }, { ca: caPem });
  if (r.status !== 200) throw new CliError(apiErrorText('POST', '/enroll/ott', r));
  const cert = r.body?.data?.cert;
  if (typeof cert !== 'string') throw new CliError(`${url}: the enrollment answered without a certificate`);
  const identity: IdentityFile = {
    ztAPI: url,
    ztAPIs: Array.isArray(claims.ctrls) ? claims.ctrls : [url],
    id: { key: 'pem:' + privateKey.export({ type: 'pkcs8', format: 'pem' }), cert: 'pem:' + cert, ca: 'pem:' + caPem },
  };
  fs.writeFileSync(out, JSON.stringify(identity, null, 2) + '\n', { mode: 0o600, flag: 'wx' });
  const leaf = new crypto.X509Certificate(cert);
  process.stdout.write(`enrolled ${claims.sub}: certificate ${leaf.subject.replace(/\n/g, ', ')} valid until ${new Date(leaf.validTo).toISOString().slice(0, 10)}; identity written to ${out}\n`);
}
