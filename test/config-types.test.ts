/**
 * Built-in config types as upstream defines them: upstream's fixed ids, full JSON Schemas that a
 * console's service wizard and schema-driven forms use, and the move of a data directory written
 * with the old ids (each type's name as its id) to the upstream ids at start.
 */
import fs from 'node:fs';
import path from 'node:path';
import t from 'tap';
import { startServer, isError, type Client } from './helpers/server.js';
import { Store } from '../src/store/store.js';
import { createRegistry } from '../src/resources/index.js';

const IDS: Record<string, string> = {
  'mesh-tunneler-client.v1': 'f2dd2df0-9c04-4b84-a91e-71437ac229f1',
  'mesh-tunneler-server.v1': 'cea49285-6c07-42cf-9f52-09a9b115c783',
  'intercept.v1': 'g7cIWbcGg',
  'host.v1': 'NH5p4FpGR',
  'host.v2': 'host.v2',
  'interfaces.v1': 'interfaces.v1',
  'host-interfaces.v1': 'host-interfaces.v1',
  'proxy.v1': 'proxy.v1',
};

const intercept = { protocols: ['tcp', 'udp'], addresses: ['*.corp.example', '10.1.0.0/16', 'db.internal'], portRanges: [{ low: 80, high: 443 }], dialOptions: { identity: '$dst_ip', connectTimeoutSeconds: 10 }, sourceIp: '$src_ip:$src_port' };
const host = {
  protocol: 'tcp', address: 'db.internal', port: 5432,
  listenOptions: { connectTimeout: '5s', maxConnections: 3, precedence: 'required', cost: 10 },
  portChecks: [{ interval: '5s', timeout: '1s', address: 'db.internal:5432', actions: [{ trigger: 'fail', consecutiveEvents: 3, action: 'mark unhealthy' }] }],
  httpChecks: [{ url: 'http://db.internal/health', method: 'GET', interval: '10s', timeout: '2s', expectStatus: 200 }],
};

async function configCount(admin: Client) {
  return (await admin.get('/configs?limit=1')).body.meta.pagination.totalCount as number;
}

t.test('built-in types have upstream ids and full schemas; configs validate against them', async (t) => {
  const srv = await startServer(t);
  const admin = await srv.login();
  const all = (await admin.get('/config-types?limit=-1')).body.data as { id: string; name: string; schema: any }[];
  for (const [name, id] of Object.entries(IDS)) {
    const ct = all.find((c) => c.name === name);
    t.equal(ct?.id, id, `${name} has id ${id}`);
  }
  const ic = (await admin.get('/config-types/g7cIWbcGg')).body.data;
  t.equal(ic.name, 'intercept.v1');
  t.equal(ic.schema.additionalProperties, false, 'intercept.v1 refuses unknown properties');
  t.same(ic.schema.required, ['protocols', 'addresses', 'portRanges']);
  t.equal(ic.schema.properties.dialOptions.additionalProperties, false);
  t.ok(ic.schema.properties.dialOptions.properties.connectTimeoutSeconds, 'dialOptions has its properties');
  t.ok(ic.schema.definitions.portRange && ic.schema.definitions.listenAddress, 'definitions the $refs point to');
  const h1 = (await admin.get('/config-types/NH5p4FpGR')).body.data.schema;
  t.same(h1.properties.portChecks, { $ref: '#/definitions/portCheckList' });
  t.same(h1.properties.httpChecks, { $ref: '#/definitions/httpCheckList' });
  t.ok(h1.properties.listenOptions.properties.bindUsingEdgeIdentity, 'listenOptions with its properties');
  t.equal(h1.definitions.portCheck.additionalProperties, false);
  t.equal(h1.allOf.length, 3, 'protocol/address/port or their forward variants');
  const h2 = (await admin.get('/config-types/host.v2')).body.data.schema;
  t.same(h2.properties.terminators, { $ref: '#/definitions/terminatorList' });
  t.ok(h2.definitions.terminator.properties.portChecks);

  // What a console's service wizard posts: upstream's ids with data the full schemas allow.
  const mk = async (name: string, configTypeId: string, data: object) => {
    const r = await admin.post('/configs', { name, configTypeId, data });
    t.equal(r.status, 201, `config ${name} of ${configTypeId}: ${r.text.slice(0, 200)}`);
    return r.body.data?.id as string;
  };
  const ci = await mk('wiz-intercept', 'g7cIWbcGg', intercept);
  const ch = await mk('wiz-host', 'NH5p4FpGR', host);
  await mk('wiz-host2', 'host.v2', { terminators: [host, { forwardProtocol: true, allowedProtocols: ['tcp'], forwardAddress: true, allowedAddresses: ['10.0.0.0/8'], forwardPort: true, allowedPortRanges: [{ low: 1, high: 1024 }] }] });
  await mk('wiz-client', IDS['mesh-tunneler-client.v1'], { hostname: 'db.internal', port: 5432 });
  await mk('wiz-server', IDS['mesh-tunneler-server.v1'], { hostname: 'db.internal', port: 5432, protocol: 'tcp', portChecks: host.portChecks });
  await mk('wiz-proxy', 'proxy.v1', { port: 3128, protocols: ['tcp'], binding: 'b' });
  await mk('wiz-ifaces', 'interfaces.v1', { interfaces: ['eth0'] });
  const svc = await admin.post('/services', { name: 'wiz-svc', encryptionRequired: true, configs: [ci, ch] });
  t.equal(svc.status, 201, 'service created with both configs');
  t.same((await admin.get(`/services/${svc.body.data.id}`)).body.data.configs.slice().sort(), [ci, ch].sort());

  // Data the full schemas refuse: 400 (root), nothing written.
  const before = await configCount(admin);
  const bad: [string, string, object][] = [
    ['unknown dialOptions key', 'g7cIWbcGg', { ...intercept, dialOptions: { bogus: 1 } }],
    ['unknown top-level key', 'g7cIWbcGg', { ...intercept, extra: true }],
    ['empty address', 'g7cIWbcGg', { ...intercept, addresses: [''] }],
    ['port check without timeout', 'NH5p4FpGR', { ...host, portChecks: [{ interval: '5s', address: 'a:1' }] }],
    ['bad duration', 'NH5p4FpGR', { ...host, listenOptions: { connectTimeout: 'soon' } }],
    ['forwardProtocol without allowedProtocols', 'NH5p4FpGR', { forwardProtocol: true, address: 'a', port: 1 }],
    ['no terminators', 'host.v2', { terminators: [] }],
    ['tunneler port out of range', IDS['mesh-tunneler-client.v1'], { hostname: 'a', port: 70000 }],
    ['old id', 'intercept.v1', intercept],
  ];
  for (const [label, configTypeId, data] of bad) {
    const r = await admin.post('/configs', { name: `bad-${label}`, configTypeId, data });
    t.ok(isError(r, 400, 'COULD_NOT_VALIDATE'), `${label}: 400 ${r.status} ${r.body?.error?.code}`);
  }
  t.equal(await configCount(admin), before, 'no config written');
  t.notMatch(srv.output, /unknown format/, 'every format of the schemas is known');
});

/** The simplified schemas the old ids carried (what a data directory from before holds). */
const OLD_SCHEMA = { type: 'object' };

t.test('a data directory with the old ids works after a restart', async (t) => {
  const first = await startServer(undefined, { keepData: true });
  const dataDir = first.dataDir;
  t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }));
  let admin = await first.login();
  const svcId = (await admin.post('/services', { name: 'old-svc', encryptionRequired: true })).body.data.id as string;
  const adminId = (await admin.get('/current-identity')).body.data.id as string;
  // A client session that asked for intercept.v1, kept across the restart.
  const client = await first.login(undefined, undefined, 'client');
  const tokenBefore = client.token;
  const sessionId = (await client.get('/current-api-session')).body.data.id as string;
  await first.stop();

  // Rewrite the directory as the old version wrote it, with the store's own API.
  const store = new Store(path.join(dataDir, 'db'), createRegistry().collectionSpecs());
  const now = Date.now();
  await store.write((tx) => {
    for (const [name, id] of Object.entries(IDS)) {
      tx.delete('configTypes', id);
      if (['interfaces.v1', 'host-interfaces.v1', 'proxy.v1'].includes(name)) continue; // the old version had no such types
      tx.put('configTypes', { id: name, createdAt: now - 1000, updatedAt: now - 1000, tags: { mine: 'kept' }, name, schema: OLD_SCHEMA });
    }
    const cfg = (id: string, name: string, configTypeId: string, data: Record<string, unknown>) =>
      tx.put('configs', { id, createdAt: now, updatedAt: now, tags: {}, name, configTypeId, data });
    cfg('cfg-int', 'old-intercept', 'intercept.v1', intercept);
    cfg('cfg-int-over', 'old-intercept-override', 'intercept.v1', { ...intercept, addresses: ['override.internal'] });
    cfg('cfg-host', 'old-host', 'host.v1', host);
    cfg('cfg-cli', 'old-client', 'mesh-tunneler-client.v1', { hostname: 'x', port: 1 });
    const svc = tx.get('services', svcId)!;
    tx.put('services', { ...svc, configs: ['cfg-int', 'cfg-host'] });
    const ident = tx.get('identities', adminId)!;
    tx.put('identities', { ...ident, serviceConfigs: [{ serviceId: svcId, configId: 'cfg-int-over' }], overrideConfigIds: ['cfg-int-over'] });
    const s = tx.get('apiSessions', sessionId)!;
    tx.put('apiSessions', { ...s, configTypes: ['intercept.v1', 'host.v1'] });
  });
  await store.close();
  // The version before the move wrote format 2.
  fs.writeFileSync(path.join(dataDir, 'format.json'), JSON.stringify({ format: 2 }) + '\n');

  const second = await startServer(undefined, { dataDir, keepData: true });
  admin = await second.login();
  for (const [name, id] of Object.entries(IDS)) {
    const r = await admin.get(`/config-types/${encodeURIComponent(id)}`);
    t.equal(r.status, 200, `${name} under ${id}`);
    t.equal(r.body.data?.name, name);
    t.not(JSON.stringify(r.body.data?.schema), JSON.stringify(OLD_SCHEMA), `${name} has the full schema`);
  }
  t.same((await admin.get('/config-types/g7cIWbcGg')).body.data.tags, { mine: 'kept' }, 'the moved record keeps its fields');
  t.equal((await admin.get('/config-types/intercept.v1')).status, 404, 'nothing left under the old id');
  t.equal((await admin.get(`/config-types?limit=1&filter=${encodeURIComponent('name = "intercept.v1"')}`)).body.meta.pagination.totalCount, 1, 'one intercept.v1');
  const cfg = (await admin.get('/configs/cfg-int')).body.data;
  t.equal(cfg.configTypeId, 'g7cIWbcGg', 'config points at the new id');
  t.equal(cfg.configType?.name, 'intercept.v1');
  t.equal((await admin.get('/configs/cfg-cli')).body.data.configTypeId, IDS['mesh-tunneler-client.v1']);
  const ofType = (await admin.get('/config-types/g7cIWbcGg/configs?limit=-1')).body.data.map((c: any) => c.id).sort();
  t.same(ofType, ['cfg-int', 'cfg-int-over'], 'the configTypeId index follows');
  const filtered = (await admin.get(`/configs?limit=-1&filter=${encodeURIComponent('type = "NH5p4FpGR"')}`)).body.data.map((c: any) => c.id);
  t.same(filtered, ['cfg-host']);
  t.ok(isError(await admin.delete('/config-types/g7cIWbcGg'), 409, 'CAN_NOT_DELETE_REFERENCED_ENTITY'), 'still referenced');
  t.equal((await admin.get('/config-types/host.v2')).body.data.schema.properties.terminators.$ref, '#/definitions/terminatorList', 'host.v2 (same id) has the full schema');

  // The session from before the restart: its config types moved, and the override still wins.
  const old = (await second.login()).token; // keep a fresh login working too
  t.ok(old);
  const c = second.client;
  const cur = await c.get('/current-api-session', { headers: { 'zt-session': tokenBefore! } });
  t.equal(cur.status, 200, 'the session survived');
  t.same(cur.body.data.configTypes.slice().sort(), ['NH5p4FpGR', 'g7cIWbcGg'].sort());
  const s = (await c.get(`/services/${svcId}`, { headers: { 'zt-session': tokenBefore! } })).body.data;
  t.same(s.config['intercept.v1']?.addresses, ['override.internal'], 'identity override replaces the service config of its type');
  t.equal(s.config['host.v1']?.port, 5432);
  // Writing configs with the new ids works on the migrated directory.
  t.equal((await admin.post('/configs', { name: 'new-after', configTypeId: 'g7cIWbcGg', data: intercept })).status, 201);

  // An admin edit of a built-in schema after the move survives the next start (the move runs once).
  const edited = { ...(await admin.get('/config-types/host.v2')).body.data.schema, description: 'edited' };
  t.equal((await admin.patch('/config-types/host.v2', { schema: edited })).status, 200);
  await second.stop();
  const third = await startServer(undefined, { dataDir, keepData: true });
  const admin3 = await third.login();
  t.equal((await admin3.get('/config-types/host.v2')).body.data.schema.description, 'edited', 'not undone by a second start');
  t.equal((await admin3.get('/configs/cfg-int')).body.data.configTypeId, 'g7cIWbcGg');
  await third.stop();
});
