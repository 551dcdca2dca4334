/**
 * Composition root: every service is built here, in dependency order, with its collaborators
 * passed in: ports → data directory → store → migrations → PKI (or the cluster's) → worker pool →
 * signing keys → API sessions → policy engine → the application (`App`, api/context.ts) →
 * bootstrap records → OIDC, events, control channel, metrics, health → router → listeners →
 * cluster membership. `startController` is what `main.ts` runs and what benchmarks embed.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { pino, type Logger } from 'pino';
import type { Config } from './config.js';
import { splitHostPort } from './config.js';
import { Store } from './store/store.js';
import { checkDataFormat, migrate } from './store/data-format.js';
import { loadOrCreatePki, type Pki } from './pki/bootstrap.js';
import { Sealer, SEALED_KEY_FILE } from './store/sealed.js';
import { checkSealingKey } from './resources/seal-secrets-migration.js';
import { ApiSessions } from './auth/api-sessions.js';
import { SigningKeys } from './auth/tokens.js';
import { jwksRoute, oidcRoutes } from './oidc/routes.js';
import { CONSOLE_PATH, consoleRoutes } from './http/console.js';
import { OidcProvider } from './oidc/provider.js';
import { AuthServices } from './auth/services.js';
import { WorkerPool } from './pool.js';
import { Router } from './api/router.js';
import { buildOperations } from './api/operations.js';
import { docsRoutes } from './api/docs.js';
import { BodyValidator } from './api/validate.js';
import { startUws, type UwsServer } from './http/uws.js';
import { startTls, type TlsServer } from './http/tls.js';
import { reservePort, type PortReservation } from './http/ports.js';
import { Presence } from './control/presence.js';
import { startEvents } from './events/index.js';
import { PolicyEngine } from './policy/engine.js';
import { ROLE_INDEX_SNAPSHOT } from './policy/index-snapshot.js';
import { Traces } from './control/traces.js';
import { ControlChannel } from './control/channel.js';
import { loadOrCreateControllerId } from './control/controller-id.js';
import { GLOBAL_SETTINGS_ID } from './control/settings.js';
import { CONTROL_PATH, MAX_FRAME_BYTES } from './control/protocol.js';
import { Metrics } from './observability/metrics.js';
import { Health } from './observability/health.js';
import { requestLogger } from './observability/request-log.js';
import { operationalRoutes } from './observability/routes.js';
import { bindPresence } from './resources/routers.js';
import { createRegistry } from './resources/index.js';
import { defaultAuthPolicy, DEFAULT_AUTH_POLICY_ID } from './resources/credentials.js';
import { newId } from './resources/write.js';
import { BUILTIN_CONFIG_TYPES, builtinConfigTypeRecord } from './resources/builtin-config-types.js';
import { MIGRATIONS } from './migrations.js';
import { Authenticators } from './managers/authenticators.js';
import { Identities } from './managers/identities.js';
import { ControllerSettings } from './managers/controller-settings.js';
import { ServiceSessions } from './managers/service-sessions.js';
import { PostureResponses } from './managers/posture-responses.js';
import { Fabric } from './managers/fabric.js';
import { checkPassword, dummyPasswordHash, hashPassword } from './auth/passwords.js';
import { totpIssuer } from './auth/mfa.js';
import { Logins } from './managers/logins.js';
import { Mfa } from './managers/mfa.js';
import { OidcSessions } from './managers/oidc-sessions.js';
import type { App } from './api/context.js';
import type { ClusterView } from './cluster/members.js';
import { Issuing } from './managers/issuing.js';
import { Enrollments } from './managers/enrollments.js';
import { issuerOf, type EnrollmentKeys } from './resources/enrollments.js';
import { lockDataDir, ownerOnlyFromNowOn, tightenModes } from './store/data-dir.js';
import { removePartialSnapshots } from './store/snapshot.js';
import type { Static } from 'typebox';
import type { ConfigSchema } from './config.js';

// dist/src/app.js when built; src/app.ts when a test or script imports the source directly.
const pkgFile = new URL(import.meta.url.includes('/dist/src/') ? '../../package.json' : '../package.json', import.meta.url);
const pkg = JSON.parse(fs.readFileSync(pkgFile, 'utf8')) as { version: string };
/** The controller's version, from package.json (`--version`, `/version`, metrics). */
export const PACKAGE_VERSION = pkg.version;

export interface Controller {
  app: App;
  /** host:port actually bound. */
  address: string;
  /** `https://<advertised address>` */
  baseUrl: string;
  /** host:port the mutual-TLS listener actually bound. */
  certAddress: string;
  /** `https://<advertised cert address>` */
  certBaseUrl: string;
  close(): Promise<void>;
}

function buildInfo(): { revision: string; buildDate: string } {
  try {
    const stat = fs.statSync(new URL('./main.js', import.meta.url));
    return { revision: process.env.MESH_REVISION ?? 'local', buildDate: stat.mtime.toISOString().replace('T', ' ').slice(0, 19) };
  } catch {
    return { revision: 'local', buildDate: '' };
  }
}

export async function startController(settings: Static<typeof ConfigSchema>, log: Logger = pino({ level: settings.logLevel })): Promise<Controller> {
  const listen = splitHostPort(settings.address);
  // The mutual-TLS listener: by default the API host and the next port (0 when the API port is 0).
  const certListen = settings.certAddress ? splitHostPort(settings.certAddress) : { host: listen.host, port: listen.port === 0 ? 0 : listen.port + 1 };
  // The ports first, before anything is created on disk (http/ports.ts): a port another process
  // listens on stops a first start before the data directory, the PKI or the admin exist. The
  // listeners themselves need the server certificate the PKI bootstrap makes, so these hold the
  // ports until the listeners take them over.
  const ports = { api: await reservePort(listen.host, listen.port, 'MESH_ADDRESS'), cert: undefined as PortReservation | undefined };
  try {
    ports.cert = await reservePort(certListen.host, certListen.port, settings.certAddress ? 'MESH_CERT_ADDRESS' : 'MESH_CERT_ADDRESS (by default the API port + 1)');
    return await startOn(settings, log, listen, certListen, { api: ports.api, cert: ports.cert });
  } finally {
    // Released already when the listeners started; this covers a start that failed before.
    ports.api.release();
    ports.cert?.release();
  }
}

type HostPort = { host: string; port: number };

/** The start proper, with both ports held. */
async function startOn(settings: Static<typeof ConfigSchema>, log: Logger, listen: HostPort, certListen: HostPort, ports: { api: PortReservation; cert: PortReservation }): Promise<Controller> {
  const dataDir = path.resolve(settings.dataDir);
  ownerOnlyFromNowOn();
  fs.mkdirSync(dataDir, { recursive: true });
  // Before anything reads or writes the directory: a second controller on it would interleave
  // writes the unique indexes of one process cannot see (duplicate names).
  const dirLock = lockDataDir(dataDir);
  tightenModes(dataDir);
  const partial = removePartialSnapshots(path.join(dataDir, 'snapshots'));
  if (partial.length) log.warn({ removed: partial }, 'removed snapshots left incomplete by an earlier process');
  const format = checkDataFormat(dataDir, `v${pkg.version}`);
  const advertisedHost = settings.advertisedAddress ? splitHostPort(settings.advertisedAddress).host : listen.host === '0.0.0.0' || listen.host === '::' ? 'localhost' : listen.host;

  const reg = createRegistry();
  const presence = new Presence();
  bindPresence(reg, presence);
  const controllerId = loadOrCreateControllerId(dataDir);
  // Cluster mode (docs/cluster.md): loaded only here, so a single node never loads the etcd client.
  const join = settings.clusterEtcd ? await import('./cluster/join.js') : undefined;
  const clusterLog = log.child({ component: 'cluster' });
  const dbDir = path.join(dataDir, 'db');
  const pkiDir = path.join(dataDir, 'pki');
  // Cluster mode: etcd and the cluster's sealing key first; the store is the replica of etcd's
  // log, which opens it and takes its every write.
  const etcdSettings = join?.clusterSettings(settings);
  const etcd = join && etcdSettings ? await join.connectEtcd(etcdSettings, pkiDir) : undefined;
  const cluster = join && etcdSettings && etcd
    ? new join.Cluster(etcd.client, etcdSettings, controllerId, clusterLog, { dir: dbDir, specs: reg.collectionSpecs(), sealer: etcd.sealer, ...join.prepareReplicaDir(dataDir, dbDir, clusterLog) })
    : undefined;
  const store = cluster?.store ?? new Store(dbDir, reg.collectionSpecs(), { sealer: Sealer.forPkiDir(pkiDir) });
  reg.renders.attach(store);
  const loadPki = () => loadOrCreatePki(pkiDir, { advertisedHost, logger: log });
  let pki: Pki;
  try {
    await migrate({ dataDir, store, log }, format, MIGRATIONS);
    if (!cluster) checkSealingKey(store, path.join(pkiDir, SEALED_KEY_FILE));
    // Cluster mode: the replica brought up to date (the migrations ran on it first), the shared PKI.
    pki = join && cluster ? await join.joinCluster(cluster, pkiDir, loadPki) : await loadPki();
  } catch (e) {
    await store.close();
    throw e;
  }
  const pool = new WorkerPool({ threads: settings.workers, maxQueue: settings.workerQueue, signingCa: { certPem: pki.signingCertPem, key: pki.signingKey } });
  // The keys come before the API sessions, which sign and verify with them. The keys ask whether
  // API sessions still need a retired key only from their rotation timer, which first fires once
  // `sessions` exists.
  const keys: SigningKeys = new SigningKeys(store, dataDir, {
    controllerId,
    rotationMs: settings.signingKeyRotationHours * 3_600_000,
    stillNeeded: (key) => sessions.anyCreatedBefore(key.retiredAt ?? Infinity),
    onError: (err) => log.error({ err }, 'signing key rotation failed'),
    offload: (task) => pool.signSessions(task),
    onOffloadError: (err) => log.warn({ err }, 'session tokens signed on the event loop: the signing thread failed'),
  });
  await keys.start();
  // Cluster mode: API sessions stay on this controller; tokens and revocations cross, and activity
  // beats tell the others which were used here (docs/cluster.md).
  const sharedSessions = join && cluster ? new join.SharedSessions(store, cluster, { timeoutMs: settings.sessionTimeoutMinutes * settings.minuteMs, log: clusterLog }) : undefined;
  const sessions: ApiSessions = new ApiSessions(store, keys, {
    timeoutMinutes: settings.sessionTimeoutMinutes,
    minuteMs: settings.minuteMs,
    flushMs: settings.activityFlushMs,
    // The API's base URL, known once the listener is bound.
    issuer: () => app.baseUrl,
    shared: sharedSessions,
  });
  const beats = join && cluster && sharedSessions ? new join.ActivityBeats(cluster, sessions, sharedSessions, clusterLog) : undefined;
  beats?.start();
  await sharedSessions?.start();
  const ended = await sessions.endPlainTokenSessions();
  if (ended) log.info({ ended }, 'ended API sessions stored with a plain token');
  // Built on the main thread: it reads only index keys and policies (no entity records); the
  // policy benchmark measures it at 100k identities (docs/policy.md).
  const policy = new PolicyEngine(store, {
    onError: (err) => log.error({ err }, 'policy index update failed'),
    snapshotFile: cluster ? undefined : path.join(dataDir, ROLE_INDEX_SNAPSHOT),
  });
  log.info({ ms: Math.round(policy.buildMs), fromSnapshot: policy.fromSnapshot }, 'role index built');

  const config = { ...settings, advertisedAddress: settings.advertisedAddress ?? '', certAdvertisedAddress: settings.certAdvertisedAddress ?? '' } as Config;
  // Cluster mode: the membership this controller announces once its listeners are bound (below).
  let shared: { members: import('./cluster/members.js').Members; close(): Promise<void> } | undefined;
  const clusterView: ClusterView = { members: () => shared!.members.list() };
  // The managers hold the domain rules and writes the handlers call (src/managers/).
  const authenticators = new Authenticators({ store, reg, config, pool, pki });
  const identities = new Identities({ store, minuteMs: settings.minuteMs });
  const controllerSettings = new ControllerSettings({ store, controllerId });
  const serviceSessions = new ServiceSessions({ store, policy, keys, sessions, issuer: () => app.baseUrl });
  const postureResponses = new PostureResponses({ store, policy });
  // What enrollments are signed and sealed with. Read when a JWT is signed: the listeners bind,
  // and cluster members join, further down.
  const enrollmentKeys: EnrollmentKeys = { store, pki, issuer: () => issuerOf(app), lifetimeMs: settings.enrollmentMinutes * 60_000 };
  const fabric = new Fabric({ store, reg, enrollments: enrollmentKeys });
  const auth = new AuthServices(store, config);
  // Both read `app` only when called, once it is built.
  const logins = new Logins({ store, pool, extJwt: auth.extJwt, sessions, dummyHash: () => dummyPasswordHash(app), minuteMs: settings.minuteMs });
  const mfa = new Mfa({ store, throttle: auth.mfaThrottle, pki, issuer: () => app.baseUrl, totpIssuer: () => totpIssuer(app.config.advertisedAddress) });
  const issuing = new Issuing({ store, pool, pki });
  const enrollments = new Enrollments({
    ...enrollmentKeys, store, pki, issuing,
    passwords: { check: (identity, password) => checkPassword(app, identity, password), hash: (password) => hashPassword(app, password) },
  });
  const app: App = {
    config,
    store,
    authenticators,
    identities,
    controllerSettings,
    serviceSessions,
    postureResponses,
    fabric,
    pool,
    sessions,
    auth,
    logins,
    mfa,
    oidcSessions: new OidcSessions({ store }),
    log,
    pki,
    validators: { client: new BodyValidator('client'), management: new BodyValidator('management'), fabric: new BodyValidator('fabric') },
    presence,
    policy,
    traces: new Traces(store),
    issuing,
    enrollments,
    controllerId,
    keys,
    startedAt: Date.now(),
    version: `v${pkg.version}`,
    ...buildInfo(),
    instanceId: crypto.randomUUID(),
    baseUrl: '',
    certBaseUrl: '',
    // Absent until announced: until then this controller answers as if alone.
    get cluster() {
      return shared && clusterView;
    },
  };

  // A generated password is shown once the listeners serve, never before a start that then fails.
  const newAdmin = await bootstrap(app, { showPasswordLater: true });
  // Made now, so the first login for an unknown username is not the one that pays for it.
  await dummyPasswordHash(app);

  const oidc = new OidcProvider(app, {
    redirectUris: settings.oidcRedirectUris,
    postLogoutUris: settings.oidcPostLogoutUris,
    accessTokenSeconds: settings.oidcAccessTokenSeconds,
    refreshTokenSeconds: settings.oidcRefreshTokenSeconds,
    consolePath: settings.consoleDir ? CONSOLE_PATH : undefined,
  });
  // Alerts, usage ingest and the embedded search store at /search (docs/events.md).
  const events = startEvents(app);
  let tls: TlsServer | undefined;
  const channel = new ControlChannel({
    store, presence, traces: app.traces, log: log.child({ component: 'control' }),
    signingCertPem: pki.signingCertPem, controllerId: app.controllerId, controllerFingerprint: pki.serverCertSha1Hex,
    heartbeatIntervalMs: settings.routerHeartbeatMs, heartbeatTimeoutMs: settings.routerHeartbeatTimeoutMs,
    handshakeTimeoutMs: settings.routerHandshakeTimeoutMs, maxPendingHandshakes: settings.routerMaxPendingHandshakes,
    controllers: settings.clusterEtcd ? () => (app.cluster?.members() ?? []).map((m) => ({ id: m.id, ctrlAddress: m.ctrlAddress })) : undefined,
  });
  // Sessions deleted on another controller: this one tells its own routers.
  sharedSessions?.sessionsRemoved.add((ids) => channel.sessionsRemoved(ids));
  const metrics = new Metrics(app, channel, events.audit);
  const health = new Health(app);
  const logRequest = requestLogger(log, settings.requestLog);
  const router = new Router(app, buildOperations(reg), {
    raw: [
      jwksRoute(keys),
      ...oidcRoutes(oidc),
      ...(settings.consoleDir ? consoleRoutes(settings.consoleDir) : []),
      events.route,
      ...docsRoutes(),
      ...operationalRoutes({ metrics, health, metricsToken: settings.metricsToken }),
    ],
    onChange: (ctx, reply) => events.audit.record(ctx, reply),
    onRequest: (r) => {
      metrics.observe(r);
      logRequest(r);
    },
  });
  /** What runs behind the listeners, stopped in this order once they are closed. */
  const stopServices = async () => {
    app.traces.close();
    await events.close();
    await sessions.close();
    // Its final activity beat names what sessions.close() just flushed; the store closes etcd.
    await beats?.close();
    sharedSessions?.close();
    keys.close();
    oidc.close();
    policy.close();
    await pool.close();
    // Nothing writes any more: the index as of the store's last write, for the next start (a
    // cluster member's replica moves while it is down: it keeps none).
    if (!cluster) {
      await store.settled();
      try {
        policy.saveSnapshot();
      } catch (err) {
        log.warn({ err }, 'role index snapshot not written: the next start builds the index from the store');
      }
    }
    await store.close();
    dirLock.release();
  };
  let server: UwsServer | undefined;
  try {
    // Each placeholder closes just before its listener binds the port exclusively (http/ports.ts).
    ports.api.release();
    server = await startUws({
      host: listen.host,
      port: listen.port,
      certFile: pki.paths.serverChain,
      keyFile: pki.paths.serverKey,
      maxBodyBytes: settings.maxBodyBytes,
      handle: (req) => router.handle(req),
      tooLarge: () => router.tooLarge(),
      shuttingDown: () => router.shuttingDown(),
      websockets: [{ path: CONTROL_PATH, maxPayloadLength: MAX_FRAME_BYTES, accept: (t) => channel.accept(t) }],
    });
    ports.cert.release();
    tls = await startTls({
      host: certListen.host,
      port: certListen.port,
      certPem: pki.serverChainPem,
      keyPem: pki.serverKeyPem,
      maxBodyBytes: settings.maxBodyBytes,
      handle: (req) => router.handle(req),
      tooLarge: () => router.tooLarge(),
      shuttingDown: () => router.shuttingDown(),
    });
  } catch (e) {
    await server?.close(0);
    channel.close();
    // Its password was never shown: without the admin, the next start makes one and shows that.
    if (newAdmin) await forgetAdmin(app, newAdmin);
    await stopServices();
    throw e;
  }
  if (newAdmin) showAdminPassword(newAdmin);
  const bracket = (h: string) => (h.includes(':') ? `[${h}]` : h);
  const address = `${bracket(listen.host)}:${server.port}`;
  const certAddress = `${bracket(certListen.host)}:${tls.port}`;
  config.advertisedAddress = settings.advertisedAddress ?? `${bracket(advertisedHost)}:${server.port}`;
  config.certAdvertisedAddress = settings.certAdvertisedAddress ?? `${bracket(advertisedHost)}:${tls.port}`;
  app.baseUrl = `https://${config.advertisedAddress}`;
  app.certBaseUrl = `https://${config.certAdvertisedAddress}`;
  const api = server;
  const certServer = tls;
  if (join && cluster) {
    const at = Date.now();
    const self = {
      id: app.controllerId,
      name: settings.clusterAdvertisedAddress ?? config.advertisedAddress,
      certPem: pki.serverCertPem,
      fingerprint: pki.serverCertSha1Hex,
      ctrlAddress: `wss://${settings.clusterAdvertisedAddress ?? config.advertisedAddress}${CONTROL_PATH}`,
      baseUrl: settings.clusterAdvertisedAddress ? `https://${settings.clusterAdvertisedAddress}` : app.baseUrl,
      certBaseUrl: app.certBaseUrl,
      startedAt: app.startedAt,
      joinedAt: at,
      versionInfo: { version: app.version, revision: app.revision, buildDate: app.buildDate, os: process.platform, arch: process.arch },
    };
    shared = await join.announce(cluster, self, presence, clusterLog);
    // Routers hear of a controller joining or leaving, not only at welcome.
    shared.members.changed.push(() => channel.controllersChanged());
  }

  let closing: Promise<void> | undefined;
  return {
    app,
    address,
    baseUrl: app.baseUrl,
    certAddress,
    certBaseUrl: app.certBaseUrl,
    close: () =>
      (closing ??= (async () => {
        health.closing = true;
        await shared?.close();
        // Routers first: they see a clean 1001 and reconnect elsewhere (or later).
        channel.close();
        await Promise.all([api.close(settings.shutdownGraceMs), certServer.close(settings.shutdownGraceMs)]);
        await stopServices();
      })()),
  };
}

/** The default admin a first start created with a generated password. */
export interface NewAdmin {
  username: string;
  password: string;
  identityId: string;
  authenticatorId: string;
}

/**
 * First start: the default auth policy and the default admin. Idempotent. Exported
 * for the model generator (scripts/lib/model.ts), which seeds a data directory before its first start.
 * A generated admin password is printed at once, or with `showPasswordLater` returned for
 * `showAdminPassword` (the controller shows it once it serves).
 */
export async function bootstrap(app: App, opts: { showPasswordLater?: boolean } = {}): Promise<NewAdmin | undefined> {
  const { store, config, log } = app;
  const now = Date.now();
  await store.write((tx) => {
    if (!tx.exists('authPolicies', DEFAULT_AUTH_POLICY_ID)) tx.put('authPolicies', defaultAuthPolicy(now));
    // The global controller settings always exist (per-controller settings override them).
    if (!tx.exists('controllerSettings', GLOBAL_SETTINGS_ID)) tx.put('controllerSettings', { id: GLOBAL_SETTINGS_ID, createdAt: now, updatedAt: now, tags: {}, oidc: {} });
    for (const t of BUILTIN_CONFIG_TYPES) {
      if (!tx.findUnique('configTypes', 'name', t.name) && !tx.exists('configTypes', t.id)) tx.put('configTypes', builtinConfigTypeRecord(t, now));
    }
  });
  if (store.count('identities') > 0) {
    // Said once per start, so an operator who expected the variable to change the password knows it did not.
    if (config.adminPassword !== undefined)
      log.warn(
        { username: config.adminUsername },
        'MESH_ADMIN_PASSWORD is set but the default admin already exists: it is ignored. To change the password: `mesh admin reset-password --data-dir DIR --username U --password P` while the controller is stopped, or PUT /current-identity/authenticators/{id}',
      );
    return;
  }
  const generated = config.adminPassword === undefined;
  const password = config.adminPassword ?? crypto.randomBytes(18).toString('base64url');
  const passwordHash = await hashPassword(app, password);
  const identityId = newId();
  const authenticatorId = newId();
  const made = await store.write((tx) => {
    // Controllers of a new cluster may start at once: the name is unique, so one of them makes it.
    if (tx.findUnique('identities', 'name', 'Default Admin')) return false;
    tx.put('identities', {
      id: identityId, createdAt: now, updatedAt: now, tags: {}, name: 'Default Admin', typeId: 'Default', isAdmin: true,
      isDefaultAdmin: true, authPolicyId: DEFAULT_AUTH_POLICY_ID, roleAttributes: [], defaultHostingCost: 0,
      defaultHostingPrecedence: 'default', serviceHostingCosts: {}, serviceHostingPrecedences: {},
    });
    tx.put('authenticators', { id: authenticatorId, createdAt: now, updatedAt: now, tags: {}, method: 'updb', identityId, username: config.adminUsername, passwordHash });
    return true;
  });
  if (!made) return;
  log.info({ username: config.adminUsername, generatedPassword: generated }, 'default admin created');
  if (!generated) return;
  const admin = { username: config.adminUsername, password, identityId, authenticatorId };
  if (!opts.showPasswordLater) showAdminPassword(admin);
  return admin;
}

/** Printed once, on the console only; never logged through the structured logger. */
function showAdminPassword(admin: NewAdmin) {
  process.stderr.write(`\nmesh-controller: created the default admin "${admin.username}" with password: ${admin.password}\n` +
    'Set MESH_ADMIN_PASSWORD before the first start to choose it. This password is not shown again.\n\n');
}

/** Remove a generated admin whose password was never shown. */
async function forgetAdmin(app: App, admin: NewAdmin) {
  await app.store.write((tx) => {
    tx.delete('authenticators', admin.authenticatorId);
    tx.delete('identities', admin.identityId);
  });
  app.log.warn({ username: admin.username }, 'default admin removed again: the start failed before its password could be shown');
}
