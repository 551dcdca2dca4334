/**
 * One PKI per cluster: the root and the signing (intermediate) CA live in etcd under P/pki/, so a
 * certificate any controller issues is trusted by all. The first controller of an empty prefix
 * creates them (as a single node would) and stores them in one guarded transaction; the others
 * (and a controller whose data directory was wiped) write them into their PKI directory before
 * loading it. Each controller keeps its own TLS server certificate, issued by the shared
 * intermediate for its own advertised address.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Etcd3 } from 'etcd3';
import { PKI_FILES, type Pki } from '../pki/bootstrap.js';
import { Sealer, SEALED_KEY_FILE } from '../store/sealed.js';

const SHARED = ['rootCert', 'rootKey', 'intermediateCert', 'intermediateKey'] as const;
/** Issued per controller from the shared CA: removed when the CA changes, so they are issued again. */
const LOCAL = ['serverCert', 'serverKey', 'serverChain', 'caBundle'] as const;

export async function sharedPki(client: Etcd3, prefix: string, dir: string, load: () => Promise<Pki>): Promise<Pki> {
  const key = (f: string) => Buffer.from(`${prefix}/pki/${f}`);
  for (let attempt = 0; attempt < 3; attempt++) {
    const found = new Map<string, string>();
    for (const f of SHARED) {
      const v = await client.get(`${prefix}/pki/${f}`).string();
      if (v !== null) found.set(f, v);
    }
    if (found.size === SHARED.length) {
      fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
      let changed = false;
      for (const f of SHARED) {
        const file = path.join(dir, PKI_FILES[f]);
        const now = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : undefined;
        if (now === found.get(f)) continue;
        fs.writeFileSync(file, found.get(f)!, { mode: f.endsWith('Key') ? 0o600 : 0o644 });
        changed = true;
      }
      if (changed) for (const f of LOCAL) fs.rmSync(path.join(dir, PKI_FILES[f]), { force: true });
      return load();
    }
    const pki = await load();
    const success = SHARED.map((f) => ({ request_put: { key: key(f), value: fs.readFileSync(path.join(dir, PKI_FILES[f])) } }));
    const res = await client.kv.txn({ compare: [{ key: key('rootCert'), target: 'Version', result: 'Equal', version: 0 }], success, failure: [] });
    if (res.succeeded) return pki;
    // Another controller stored its CA first: take that one.
  }
  throw new Error('cluster: could not agree on the shared PKI in etcd');
}

/**
 * The key secrets are sealed with (src/store/sealed.ts) is the cluster's, since records replicate
 * sealed: the first controller stores its own in etcd, the others take that one into their PKI
 * directory. It is taken before the store opens, so the data-format migrations (run on the
 * replica before it follows etcd) seal with it too; still, upgrading a cluster from a data format
 * before sealing, every member must start with the same `pki/secrets.key` (docs/auth.md).
 */
export async function sharedSealKey(client: Etcd3, prefix: string, dir: string): Promise<Sealer> {
  const name = Buffer.from(`${prefix}/pki/${SEALED_KEY_FILE}`);
  const file = path.join(dir, SEALED_KEY_FILE);
  Sealer.forPkiDir(dir);
  await client.kv.txn({ compare: [{ key: name, target: 'Version', result: 'Equal', version: 0 }], success: [{ request_put: { key: name, value: fs.readFileSync(file) } }], failure: [] });
  const shared = await client.get(name.toString()).string();
  if (shared !== null && shared !== fs.readFileSync(file, 'utf8')) {
    fs.writeFileSync(`${file}.tmp`, shared, { mode: 0o600 });
    fs.renameSync(`${file}.tmp`, file);
  }
  return Sealer.forPkiDir(dir);
}
