/**
 * The fabric API rows (see ./exerciser.ts): every operation of upstream's fabric spec (fabric.yml),
 * in an order where each row finds what it needs. The session is the Management API's (the fabric
 * API takes it); `before` makes it outside the checked exchanges. The coverage suite reads this
 * table: an operation with no row here fails it.
 */
import type { Row, State } from './exerciser.js';

const id = (name: string) => (d: any, s: State) => s.set(name, d.id);
const by = (name: string) => (s: State) => ({ id: s.get(name) });
const FINGERPRINT = 'ab'.repeat(20);

async function adminSession(s: State) {
  if (!s.srv) throw new Error('State.srv is not set');
  s.sessions.admin ??= (await s.srv.login()).token;
}

/** An edge router made on the Management API (the fabric API lists it with the transit routers). */
async function edgeRouter(s: State) {
  if (s.values.has('edgeRouter')) return;
  const admin = await s.srv!.login();
  s.set('edgeRouter', await admin.create('/edge-routers', { name: 'fx-edge' }));
}

/** One integrity run at a time (a second is 429): wait for the check to end (outside the checked exchanges). */
async function integrityRunDone(s: State) {
  const admin = await s.srv!.login();
  for (;;) {
    const r = await admin.get('/database/data-integrity-results');
    if (r.status !== 200 || !r.body.data.inProgress) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export function fabricRows(): Row[] {
  return [
    { op: 'listRouters', before: async (s) => (await adminSession(s), await edgeRouter(s)), params: () => ({ limit: 1000 }),
      note: 'the console\'s router count' },
    { op: 'createRouter', body: () => ({ id: 'fx-router', name: 'fx-router', cost: 3, noTraversal: false, fingerprint: FINGERPRINT, tags: { k: 'v' } }), save: id('router') },
    { op: 'detailRouter', params: by('router') },
    { op: 'detailRouter', note: 'an edge router', params: by('edgeRouter') },
    { op: 'listRouters', note: 'filter and paging', params: () => ({ filter: 'name contains "fx"', limit: 1, offset: 1 }) },
    { op: 'updateRouter', params: by('router'), body: () => ({ name: 'fx-router-2', fingerprint: FINGERPRINT, cost: 4, noTraversal: true, disabled: false, ctrlChanListeners: {} }) },
    { op: 'patchRouter', params: by('router'), body: () => ({ cost: 5 }) },
    { op: 'detailRouter', note: 'unknown id', params: () => ({ id: 'no-such-router' }), status: 404 },

    { op: 'createService', body: () => ({ name: 'fx-svc', terminatorStrategy: 'smartrouting', maxIdleTimeMillis: 0 }), save: id('svc') },
    { op: 'listServices' },
    { op: 'detailService', params: by('svc') },
    { op: 'updateService', params: by('svc'), body: () => ({ name: 'fx-svc-2', terminatorStrategy: 'weighted', maxIdleTimeMillis: 100 }) },
    { op: 'patchService', params: by('svc'), body: () => ({ maxIdleTimeMillis: 50 }) },

    { op: 'createTerminator', body: (s) => ({ service: s.get('svc'), router: s.get('router'), binding: 'transport', address: 'tcp:10.1.1.1:80', instanceId: 'fx-1', cost: 2, precedence: 'default' }), save: id('term') },
    { op: 'listTerminators' },
    { op: 'detailTerminator', params: by('term') },
    { op: 'updateTerminator', params: by('term'), body: (s) => ({ service: s.get('svc'), router: s.get('router'), binding: 'transport', address: 'tcp:10.1.1.2:80', cost: 1, precedence: 'required' }) },
    { op: 'patchTerminator', params: by('term'), body: () => ({ cost: 7 }) },
    { op: 'listServiceTerminators', params: by('svc') },
    { op: 'listRouterTerminators', params: by('router') },

    { op: 'listLinks', note: 'the console\'s network map' },
    { op: 'detailLink', params: () => ({ id: 'no-such-link' }), status: 404 },
    { op: 'patchLink', params: () => ({ id: 'no-such-link' }), body: () => ({ down: true }), status: 404 },
    { op: 'deleteLink', params: () => ({ id: 'no-such-link' }) },
    { op: 'listCircuits', note: 'the console\'s network map' },
    { op: 'detailCircuit', params: () => ({ id: 'no-such-circuit' }), status: 404 },
    { op: 'deleteCircuit', params: () => ({ id: 'no-such-circuit' }), body: () => ({ immediate: false }) },

    { op: 'inspect', body: () => ({ appRegex: '.*', requestedValues: ['connected-routers', 'cluster-config'] }) },

    { op: 'createDatabaseSnapshotWithPath', body: () => ({}) },
    { op: 'createDatabaseSnapshot', note: 'a second snapshot within the minute', status: 429 },
    { op: 'checkDataIntegrity' },
    { op: 'dataIntegrityResults' },
    { op: 'fixDataIntegrity', before: integrityRunDone },

    { op: 'clusterListMembers', note: 'standalone: as upstream without Raft', status: 400 },
    { op: 'clusterMemberAdd', body: () => ({ address: 'tls:ctrl2.example:6262', isVoter: true }), status: 400 },
    { op: 'clusterMemberRemove', body: () => ({ id: 'ctrl2' }), status: 400 },
    { op: 'clusterTransferLeadership', body: () => ({ newLeaderId: 'ctrl2' }), status: 400 },

    { op: 'deleteTerminator', params: by('term') },
    { op: 'deleteService', params: by('svc') },
    { op: 'deleteRouter', params: by('router') },
  ];
}
