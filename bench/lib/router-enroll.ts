/**
 * Create a router through the Management API and enroll it the way a real router does: a fresh
 * P-256 key, a client CSR and a server CSR, `POST /enroll/erott` (edge) or
 * `POST /enroll?method=trott` (transit) with the router's one-time token. Returns what the router
 * then holds: its id, certificate chain and private key (for RouterClient).
 *
 *   const r = await createAndEnroll(http, adminToken, { name: 'er-1', kind: 'edge', hostname: 'er-1.sim' });
 *   new RouterClient({ url, ca, certChain: r.certChain, key: r.keyPem, ... })
 */
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import crypto from 'node:crypto';
import type { HttpClient } from './http.js';
import { requestJson } from './http.js';

const MGMT = '/edge/management/v1';
const CLIENT = '/edge/client/v1';
const webcrypto = globalThis.crypto;
const ALG = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

export interface EnrolledRouter {
  id: string;
  name: string;
  kind: 'edge' | 'transit';
  /** Client certificate chain (leaf first), as the enrollment returned it. */
  certChain: string;
  /** Server certificate chain. */
  serverCertChain: string;
  keyPem: string;
  fingerprint: string;
}

export interface RouterKeys {
  keyPem: string;
  clientCsr: string;
  serverCsr: string;
}

/** A key and the two CSRs a router sends at enrollment (and at certificate extension). */
export async function routerCsrs(name: string, hostname: string): Promise<RouterKeys> {
  const keys = (await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify'])) as CryptoKeyPair;
  const clientCsr = await x509.Pkcs10CertificateRequestGenerator.create({ name: `CN=${name}`, keys, signingAlgorithm: ALG }, webcrypto);
  const serverCsr = await x509.Pkcs10CertificateRequestGenerator.create(
    { name: `CN=${hostname}`, keys, signingAlgorithm: ALG, extensions: [new x509.SubjectAlternativeNameExtension([{ type: 'dns', value: hostname }])] },
    webcrypto,
  );
  const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey));
  const keyPem = crypto.createPrivateKey({ key: pkcs8, format: 'der', type: 'pkcs8' }).export({ type: 'pkcs8', format: 'pem' }) as string;
  return { keyPem, clientCsr: clientCsr.toString('pem'), serverCsr: serverCsr.toString('pem') };
}

function leafFingerprint(chain: string): string {
  const leaf = chain.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/)?.[0];
  if (!leaf) throw new Error('enrollment returned no certificate');
  return crypto.createHash('sha1').update(new crypto.X509Certificate(leaf).raw).digest('hex');
}

/** Enroll an existing router with its one-time token. */
export async function enrollRouter(http: HttpClient, kind: 'edge' | 'transit', token: string, keys: RouterKeys): Promise<{ certChain: string; serverCertChain: string }> {
  const r =
    kind === 'edge'
      ? await requestJson(http, 'POST', `${CLIENT}/enroll/erott`, { accept: 'application/json' }, { token, clientCsr: keys.clientCsr, serverCsr: keys.serverCsr })
      : await requestJson(http, 'POST', `${CLIENT}/enroll?method=trott&token=${encodeURIComponent(token)}`, { accept: 'application/json' }, { certCsr: keys.clientCsr, serverCertCsr: keys.serverCsr });
  const cert = r.body?.data?.cert;
  if (r.status !== 200 || typeof cert !== 'string') throw new Error(`${kind} router enrollment failed: ${r.status} ${JSON.stringify(r.body)}`);
  return { certChain: cert, serverCertChain: r.body.data.serverCert ?? '' };
}

export async function createAndEnroll(
  http: HttpClient,
  adminToken: string,
  opts: { name: string; kind: 'edge' | 'transit'; hostname: string; roleAttributes?: string[] },
): Promise<EnrolledRouter> {
  const headers = { accept: 'application/json', 'zt-session': adminToken };
  const path = opts.kind === 'edge' ? 'edge-routers' : 'transit-routers';
  const body = opts.kind === 'edge' ? { name: opts.name, roleAttributes: opts.roleAttributes ?? [], isTunnelerEnabled: false } : { name: opts.name };
  const c = await requestJson(http, 'POST', `${MGMT}/${path}`, headers, body);
  if (c.status !== 201) throw new Error(`create ${path} ${opts.name}: ${c.status} ${JSON.stringify(c.body)}`);
  const id = c.body.data.id as string;
  const d = await requestJson(http, 'GET', `${MGMT}/${path}/${id}`, headers);
  const token = d.body?.data?.enrollmentToken;
  if (typeof token !== 'string') throw new Error(`${path}/${id} has no enrollmentToken: ${JSON.stringify(d.body)}`);
  const keys = await routerCsrs(opts.name, opts.hostname);
  const { certChain, serverCertChain } = await enrollRouter(http, opts.kind, token, keys);
  return { id, name: opts.name, kind: opts.kind, certChain, serverCertChain, keyPem: keys.keyPem, fingerprint: leafFingerprint(certChain) };
}
