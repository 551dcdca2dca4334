/**
 * Joining a cluster at start-up: connect to etcd, bring the replica up to date (resume or full
 * load), route the store's writes through etcd, and take the shared PKI.
 */
import type { Logger } from 'pino';
import type { Static } from 'typebox';
import type { ConfigSchema } from '../config.js';
import type { Store } from '../store/store.js';
import type { Pki } from '../pki/bootstrap.js';
import { Cluster, type ClusterSettings } from './replica.js';
import { sharedPki, sharedSealKey } from './pki.js';
import { Members, type Member } from './members.js';
import { SharedPresence } from './routers.js';
import type { Presence } from '../control/presence.js';
import type { ApiSessions } from '../auth/api-sessions.js';
import { SharedSessions } from './sessions.js';

export { prepareReplicaDir } from './replica-dir.js';

/** API sessions and sessions stay on the controller holding them; their tokens and revocations cross (sessions.ts). */
export async function shareSessions(store: Store, cluster: Cluster, sessions: ApiSessions, log: Logger): Promise<SharedSessions> {
  const shared = new SharedSessions(store, cluster, sessions, log);
  await shared.start();
  return shared;
}

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

export async function joinCluster(
  store: Store,
  settings: Static<typeof ConfigSchema>,
  controllerId: string,
  pkiDir: string,
  loadPki: () => Promise<Pki>,
  log: Logger,
): Promise<{ pki: Pki; cluster: Cluster }> {
  const cluster = new Cluster(store, clusterSettings(settings), controllerId, log);
  try {
    await cluster.start();
    store.cluster = cluster;
    const pki = await sharedPki(cluster.client, cluster.keys.prefix, pkiDir, loadPki);
    store.sealer = await sharedSealKey(cluster.client, cluster.keys.prefix, pkiDir);
    return { pki, cluster };
  } catch (e) {
    await cluster.close();
    throw e;
  }
}
