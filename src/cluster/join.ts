/**
 * Joining a cluster at start-up, in this order: connect to etcd and take the cluster's sealing key
 * (`connectEtcd`); open the store as the replica of etcd's log (`new Cluster`, which makes it);
 * once the data directory's migrations ran, bring the replica up to date and take the shared PKI
 * (`joinCluster`); share API sessions (`SharedSessions`, `ActivityBeats`); once listening,
 * `announce`.
 */
import type { Logger } from 'pino';
import type { Static } from 'typebox';
import type { ConfigSchema } from '../config.js';
import type { Etcd3 } from 'etcd3';
import type { Pki } from '../pki/bootstrap.js';
import type { Sealer } from '../store/sealed.js';
import { Cluster, connect, type ClusterSettings } from './replica.js';
import { sharedPki, sharedSealKey } from './pki.js';
import { Members, type Member } from './members.js';
import { SharedPresence } from './routers.js';
import type { Presence } from '../control/presence.js';

export { prepareReplicaDir } from './replica-dir.js';
export { Cluster } from './replica.js';
export { ActivityBeats, SharedSessions } from './sessions.js';

/**
 * Once listening: publish this controller in the membership list, and share router presence.
 * `close` withdraws both (the lease is revoked, so this controller's routers go offline elsewhere
 * at once rather than when the lease would expire).
 */
export async function announce(cluster: Cluster, self: Member, presence: Presence, log: Logger): Promise<{ members: Members; close(): Promise<void> }> {
  const members = new Members(cluster.client, cluster.keys.prefix, self, log);
  await members.start();
  const routers = new SharedPresence(cluster.client, cluster.keys.prefix, self.id, presence, members, log);
  await routers.start();
  return {
    members,
    close: async () => {
      await routers.close();
      await members.close();
    },
  };
}

export function clusterSettings(s: Static<typeof ConfigSchema>): ClusterSettings {
  return {
    endpoints: (s.clusterEtcd ?? '').split(',').filter(Boolean),
    prefix: s.clusterPrefix.replace(/\/+$/, '') || '/mesh',
    caFile: s.clusterEtcdCa,
    certFile: s.clusterEtcdCert,
    keyFile: s.clusterEtcdKey,
    username: s.clusterEtcdUsername,
    password: s.clusterEtcdPassword,
  };
}

/**
 * Before the store opens: the etcd client, and the key secrets are sealed with, the cluster's
 * (records replicate sealed; cluster/pki.ts).
 */
export async function connectEtcd(settings: ClusterSettings, pkiDir: string): Promise<{ client: Etcd3; sealer: Sealer }> {
  const client = connect(settings);
  // The first etcd call of a start: etcd may be coming up with this controller, as the replica's
  // first read allows (Cluster.start). Taking the key again is harmless (put only if absent).
  for (let attempt = 1; ; attempt++) {
    try {
      return { client, sealer: await sharedSealKey(client, settings.prefix, pkiDir) };
    } catch (e) {
      if (attempt >= 20) {
        client.close();
        throw e;
      }
      await new Promise((r) => setTimeout(r, Math.min(2000, 100 * attempt)));
    }
  }
}

/** Once the data directory's migrations ran: the replica brought up to date, and the shared PKI. */
export async function joinCluster(cluster: Cluster, pkiDir: string, loadPki: () => Promise<Pki>): Promise<Pki> {
  await cluster.start();
  return sharedPki(cluster.client, cluster.keys.prefix, pkiDir, loadPki);
}
