/**
 * Data directories written before secrets were sealed at rest (src/store/sealed.ts) hold pending
 * enrollment tokens and JWTs, TOTP secrets and MFA recovery codes in plain text. This rewrites
 * each such record the way the controller now writes them: an enrollment's token as its digest
 * (the unique index follows) and its JWT sealed; an identity's MFA secret and recovery codes
 * sealed. A record already in the new form is left alone, so an interrupted run simply resumes.
 *
 * LMDB reuses the pages the plain values were in, but does not wipe them: until they are
 * overwritten, `db/data.mdb` may still hold old bytes. Snapshots taken from now on are written
 * from the records, so they hold none (docs/auth.md).
 *
 *   const { enrollments, identities } = await sealSecretsAtRest(store);   // records rewritten
 */
import type { CollectionName, RecordOf, Store } from '../store/store.js';
import { digestOf, isSealed } from '../store/sealed.js';

/** Records rewritten per transaction: a large directory (100k pending enrollments) in steps. */
const BATCH = 1000;

export async function sealSecretsAtRest(store: Store): Promise<{ enrollments: number; identities: number }> {
  const sealer = store.sealer;
  const seal = (v: string) => (isSealed(v) ? v : sealer.seal(v));
  const rewrite = async <C extends CollectionName>(collection: C, change: (r: RecordOf<C>) => RecordOf<C> | undefined) => {
    const ids: string[] = [];
    for (const r of store.scan(collection)) if (change(r)) ids.push(r.id);
    for (let i = 0; i < ids.length; i += BATCH) {
      // The data directory's own records (in a cluster, the replica's, before it follows etcd's log).
      await store.writeLocal((tx) => {
        for (const id of ids.slice(i, i + BATCH)) {
          const cur = tx.get(collection, id);
          const next = cur && change(cur);
          if (next) tx.put(collection, next);
        }
      });
    }
    return ids.length;
  };
  const enrollments = await rewrite('enrollments', (e) =>
    typeof e.jwt === 'string' && !isSealed(e.jwt) ? { ...e, jwt: seal(e.jwt), ...(typeof e.token === 'string' ? { token: digestOf(e.token) } : {}) } : undefined,
  );
  const identities = await rewrite('identities', (i) => {
    const mfa = i.mfa;
    if (!mfa || typeof mfa.secret !== 'string' || !Array.isArray(mfa.recoveryCodes)) return undefined;
    if (isSealed(mfa.secret) && mfa.recoveryCodes.every(isSealed)) return undefined;
    return { ...i, mfa: { ...mfa, secret: seal(mfa.secret), recoveryCodes: mfa.recoveryCodes.map((c) => (typeof c === 'string' ? seal(c) : c)) } };
  });
  return { enrollments, identities };
}

/**
 * Refuse to run with a key that does not open the records (a backup restored elsewhere without
 * its `pki/secrets.key`, a cluster member with another key): every enrollment and MFA check would
 * fail later. One sealed value is tried, the first found.
 */
export function checkSealingKey(store: Store, keyFile: string): void {
  let sample: string | undefined;
  for (const e of store.scan('enrollments')) {
    if (isSealed(e.jwt)) {
      sample = e.jwt;
      break;
    }
  }
  if (sample === undefined) {
    for (const i of store.scan('identities')) {
      if (isSealed(i.mfa?.secret)) {
        sample = i.mfa.secret as string;
        break;
      }
    }
  }
  if (sample === undefined) return;
  try {
    store.sealer.open(sample);
  } catch {
    throw new Error(`${keyFile} does not open the secrets sealed in the datastore: put back the key this data was written with (backups do not carry it)`);
  }
}
