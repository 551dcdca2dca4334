/**
 * All settings in one TypeBox schema, read once at start-up from an optional YAML or JSON config
 * file (`MESH_CONFIG`, or `<dataDir>/config.yaml`, `config.yml` or `config.json` when present) and
 * `MESH_*` environment variables (environment wins).
 * Example: `MESH_ADDRESS=0.0.0.0:1280 MESH_DATA_DIR=/var/lib/mesh npm start`.
 */
import fs from 'node:fs';
import path from 'node:path';
import { load as loadYaml } from 'js-yaml';
import Type, { type Static } from 'typebox';
import { Value } from 'typebox/value';

const HOST_PORT = '^(\\[[0-9a-fA-F:.]+\\]|[A-Za-z0-9_.-]+):[0-9]{1,5}$';

export const ConfigSchema = Type.Object({
  /** Everything the controller keeps lives here: LMDB environment, PKI, snapshots. */
  dataDir: Type.String({ description: 'directory of all state: datastore, PKI, signing keys, search store, snapshots, audit files', default: './data', minLength: 1 }),
  /** HTTPS API listener (uWebSockets.js). Port 0 picks a free port; the bound address is logged. */
  address: Type.String({ description: 'host:port of the HTTPS API listener; port 0 picks a free one', default: '127.0.0.1:1280', pattern: HOST_PORT }),
  /**
   * Mutual-TLS listener (node:https): certificate login, CA/ottca enrollment, certificate
   * extension, and every other operation. Default: the API host, port + 1 (port 0 when the API
   * port is 0). It is the controller URL in enrollment JWTs (`iss`, `ctrls`).
   */
  certAddress: Type.Optional(Type.String({ description: 'host:port of the mutual-TLS listener (certificate login); default: API host, API port + 1', pattern: HOST_PORT })),
  /** host:port of the mutual-TLS listener written into JWTs; defaults to the advertised host and the bound cert port. */
  certAdvertisedAddress: Type.Optional(Type.String({ description: 'host:port of the mutual-TLS listener written into enrollment JWTs', pattern: HOST_PORT })),
  /** host:port written into URLs and JWTs; defaults to `address` (with the bound port when 0). */
  advertisedAddress: Type.Optional(Type.String({ description: 'host:port clients are told (apiBaseUrls, server certificate); default: the listen host and bound port', pattern: HOST_PORT })),
  /** Password of the default admin created on first start; random (printed once) when absent. */
  adminPassword: Type.Optional(Type.String({ description: 'password of the default admin made on first start; unset: a random one, printed once', minLength: 5, maxLength: 100 })),
  adminUsername: Type.String({ description: 'username of the default admin made on first start', default: 'admin', minLength: 4, maxLength: 100 }),
  logLevel: Type.Union([Type.Literal('trace'), Type.Literal('debug'), Type.Literal('info'), Type.Literal('warn'), Type.Literal('error'), Type.Literal('fatal'), Type.Literal('silent')], { description: 'least level of the JSON log on stdout', default: 'info' }),
  /** Sliding inactivity timeout of API sessions. */
  sessionTimeoutMinutes: Type.Integer({ description: 'API sessions end after this long without a request', default: 30, minimum: 1, maximum: 525600 }),
  /** The minute that `sessionTimeoutMinutes` and the API's disable and lockout durations
   *  (`durationMinutes`, `lockoutDurationMinutes`) count in: tests shorten it to see those end
   *  without waiting whole minutes; the API's fields stay in minutes. */
  minuteMs: Type.Integer({ description: 'length in ms of the minute API-session timeouts and identity disables and lockouts count in (tests shorten it)', default: 60000, minimum: 1000, maximum: 60000 }),
  /** Largest accepted request body. */
  maxBodyBytes: Type.Integer({ description: 'largest request body accepted (413 beyond)', default: 512 * 1024, minimum: 1024, maximum: 64 * 1024 * 1024 }),
  /** Worker threads for CPU-heavy work (password hashing, CSR signing). 0 = number of cores. */
  workers: Type.Integer({ description: 'worker threads for CPU-heavy work (hashing, signing); 0: one per core', default: 0, minimum: 0, maximum: 64 }),
  /** Tasks allowed to wait for a worker before callers get 429 RATE_LIMITED. */
  workerQueue: Type.Integer({ description: 'tasks that may wait for a worker; beyond: 429', default: 2048, minimum: 1, maximum: 1_000_000 }),
  /** argon2id parameters for UPDB passwords (OWASP defaults: 19 MiB, t=2, p=1). */
  argon2MemoryKiB: Type.Integer({ description: 'argon2id memory per password hash', default: 19456, minimum: 1024, maximum: 4 * 1024 * 1024 }),
  argon2Iterations: Type.Integer({ description: 'argon2id passes per password hash', default: 2, minimum: 1, maximum: 100 }),
  argon2Parallelism: Type.Integer({ description: 'argon2id lanes per password hash', default: 1, minimum: 1, maximum: 16 }),
  /** Age at which the token signing key is replaced; the old key keeps verifying what it signed. */
  signingKeyRotationHours: Type.Integer({ description: 'age at which the token signing key is replaced (the old one verifies what it signed)', default: 720, minimum: 1, maximum: 87600 }),
  /** Where session (dial/bind) tokens are signed: in the worker pool, batched with the group
   *  commit, or on the event loop (docs/auth.md). */
  /** OIDC (`/oidc`): redirect and post-logout URIs the `openziti` client may use (`*`: any run of
   *  characters but `/`), and token lifetimes. The defaults are upstream's. */
  oidcRedirectUris: Type.Array(Type.String({ minLength: 1 }), {
    default: ['openziti://auth/callback', 'https://127.0.0.1:*/auth/callback', 'http://127.0.0.1:*/auth/callback', 'https://localhost:*/auth/callback', 'http://localhost:*/auth/callback'],
  }),
  oidcPostLogoutUris: Type.Array(Type.String({ minLength: 1 }), {
    default: ['openziti://auth/logout', 'https://127.0.0.1:*/auth/logout', 'http://127.0.0.1:*/auth/logout', 'https://localhost:*/auth/logout', 'http://localhost:*/auth/logout'],
  }),
  oidcAccessTokenSeconds: Type.Integer({ default: 1800, minimum: 10, maximum: 86400 }),
  oidcRefreshTokenSeconds: Type.Integer({ default: 86400, minimum: 60, maximum: 31_536_000 }),
  /** How often batched API-session last-activity times are written to the store. */
  activityFlushMs: Type.Integer({ description: 'how often API-session last-activity times are written to the store', default: 5000, minimum: 100, maximum: 600000 }),
  /** Default lifetime of enrollments created together with an identity or router. */
  enrollmentMinutes: Type.Integer({ description: 'lifetime of enrollments made with an identity or router', default: 180, minimum: 5, maximum: 5256000 }),
  /** Logins and MFA checks running at once, and waiting beyond those; past both: 429 RATE_LIMITED. */
  authConcurrency: Type.Integer({ description: 'logins and MFA checks running at once', default: 32, minimum: 1, maximum: 100_000 }),
  authQueue: Type.Integer({ description: 'logins and MFA checks that may wait beyond those; beyond: 429', default: 512, minimum: 0, maximum: 1_000_000 }),
  /** Longest expected wait the queues admit (from recent call times; beyond: 429 at once), and longest a call waits in one before 429. */
  queueMaxWaitMs: Type.Integer({ description: 'longest a call waits in a queue, and longest expected wait one admits; beyond: 429', default: 5000, minimum: 100, maximum: 600_000 }),
  /** Other expensive operations (certificate signing, password changes, QR codes): same scheme.
   *  64 running: an enrollment holds its slot through its durable commit, and with 16 the CSR
   *  signing of one group waited for the previous group's commit (docs/pki.md); the CPU work
   *  itself is bounded by the worker pool's threads and queue. */
  heavyConcurrency: Type.Integer({ description: 'expensive operations (certificate signing, password changes) running at once', default: 64, minimum: 1, maximum: 100_000 }),
  heavyQueue: Type.Integer({ description: 'expensive operations that may wait beyond those; beyond: 429', default: 256, minimum: 0, maximum: 1_000_000 }),
  /** Lists past 8 ms of main-thread work (large answers) that go on at once, and that may wait (beyond: 429). */
  largeAnswerConcurrency: Type.Integer({ description: 'large list answers built at once', default: 2, minimum: 1, maximum: 1000 }),
  largeAnswerQueue: Type.Integer({ description: 'large list answers that may wait; beyond: 429', default: 4, minimum: 0, maximum: 10_000 }),
  /** Least time between two fetches of one external JWT signer's JWKS (unknown kids refetch). */
  extJwtJwksCooldownMs: Type.Integer({ description: 'least time between two fetches of an external JWT signer\'s JWKS', default: 5000, minimum: 0, maximum: 3_600_000 }),
  /** Clock skew allowed on external JWT exp/nbf/iat. */
  extJwtClockSkewSeconds: Type.Integer({ description: 'clock skew allowed on external JWTs\' exp, nbf and iat', default: 30, minimum: 0, maximum: 600 }),
  /** Grace period for in-flight requests on SIGTERM/SIGINT. */
  shutdownGraceMs: Type.Integer({ description: 'how long a stop waits for requests in flight', default: 10000, minimum: 0, maximum: 14000 }),
  /** Datastore snapshots kept under `<dataDir>/snapshots` (oldest removed first); 0 keeps all. */
  snapshotsKeep: Type.Integer({ description: 'online snapshots kept under <dataDir>/snapshots; 0 keeps all', default: 10, minimum: 0, maximum: 100000 }),
  /** Embedded search store (`/search`, docs/events.md): documents older than this are removed. */
  searchRetentionHours: Type.Integer({ description: 'search store documents older than this are removed', default: 168, minimum: 1, maximum: 87600 }),
  /** Most documents kept per index; the oldest go first. */
  searchMaxDocsPerIndex: Type.Integer({ description: 'most documents kept per search index (the oldest go first)', default: 2_000_000, minimum: 100, maximum: 1_000_000_000 }),
  /** External Elasticsearch/OpenSearch base URL that every document is also shipped to with `_bulk`. */
  searchExportUrl: Type.Optional(Type.String({ description: 'Elasticsearch/OpenSearch URL every search document is also shipped to', pattern: '^https?://[^\\s]+$' })),
  searchExportUsername: Type.Optional(Type.String({ description: 'user for searchExportUrl', minLength: 1 })),
  searchExportPassword: Type.Optional(Type.String({ description: 'password for searchExportUrl', minLength: 1 })),
  /** Documents per `_bulk` request, and the most kept waiting (the oldest are dropped beyond it). */
  searchExportBatch: Type.Integer({ description: 'documents per export request', default: 500, minimum: 1, maximum: 100000 }),
  searchExportBuffer: Type.Integer({ description: 'documents waiting for export at most (the oldest dropped beyond)', default: 50000, minimum: 1, maximum: 10_000_000 }),
  searchExportFlushMs: Type.Integer({ description: 'longest wait before a partial export batch is sent', default: 1000, minimum: 10, maximum: 600000 }),
  /** Alerts: configuration checks run this long after the last relevant change. */
  alertDebounceMs: Type.Integer({ description: 'configuration alerts are checked this long after the last change', default: 2000, minimum: 10, maximum: 3_600_000 }),
  /** Alerts: after a scan, wait at least this many times the CPU it took, so scans take at most 1/(1+n) of the controller's time. */
  alertScanSpacing: Type.Integer({ description: 'the wait after an alert scan, as a multiple of the CPU the scan took', default: 20, minimum: 1, maximum: 1000 }),
  /** Alerts: warn when a CA or the controller's certificate expires within this many days. */
  alertCertExpiryDays: Type.Integer({ description: 'alert when a CA or the server certificate expires within this many days', default: 30, minimum: 1, maximum: 3650 }),
  /** Router control channel: the controller pings every router this often… */
  routerHeartbeatMs: Type.Integer({ description: 'how often the controller pings each router', default: 2000, minimum: 100, maximum: 60000 }),
  /** …and marks a router offline when nothing arrived from it for this long (more than the interval). */
  routerHeartbeatTimeoutMs: Type.Integer({ description: 'a router silent this long is marked offline', default: 6000, minimum: 300, maximum: 300000 }),
  /** Time a router has from connecting to a verified proof of its certificate. */
  routerHandshakeTimeoutMs: Type.Integer({ description: 'time a connecting router has to prove its certificate', default: 10000, minimum: 500, maximum: 120000 }),
  /** Router connections allowed mid-handshake at once; more are refused (try again later). */
  routerMaxPendingHandshakes: Type.Integer({ description: 'router connections allowed mid-handshake at once', default: 1024, minimum: 1, maximum: 100000 }),
  /** One access-log line per request at info level (no secrets: see src/observability/request-log.ts). */
  requestLog: Type.Boolean({ description: 'one access-log line per request at info level', default: true }),
  /** Audit trail (src/events/audit.ts): also POST every change to this URL… */
  auditWebhookUrl: Type.Optional(Type.String({ description: 'URL every audit event is also POSTed to', pattern: '^https?://[^\\s]+$' })),
  /** …signed with HMAC-SHA256 of the body under this secret (`x-mesh-signature: sha256=<hex>`). */
  auditWebhookSecret: Type.Optional(Type.String({ description: 'HMAC-SHA256 key signing webhook bodies (x-mesh-signature)', minLength: 16, maxLength: 1024 })),
  /** Events waiting for the webhook at most (the oldest are dropped and counted beyond it). */
  auditWebhookQueue: Type.Integer({ description: 'audit events waiting for the webhook at most (the oldest dropped beyond)', default: 10000, minimum: 1, maximum: 10_000_000 }),
  /** Events per webhook request. */
  auditWebhookBatch: Type.Integer({ description: 'audit events per webhook request', default: 100, minimum: 1, maximum: 10000 }),
  /** Tries per batch before its events are dropped (and counted), waiting auditWebhookRetryMs, doubling, between tries. */
  auditWebhookAttempts: Type.Integer({ description: 'tries per webhook batch before it is dropped', default: 5, minimum: 1, maximum: 100 }),
  auditWebhookRetryMs: Type.Integer({ description: 'first wait between webhook tries, doubling', default: 1000, minimum: 10, maximum: 600000 }),
  auditWebhookTimeoutMs: Type.Integer({ description: 'time a webhook request may take', default: 10000, minimum: 100, maximum: 600000 }),
  /** A directory holding an admin console build (its index.html), served at `/zac/` (src/http/console.ts). */
  consoleDir: Type.Optional(Type.String({ minLength: 1, description: 'directory of an admin console build (with index.html) served at /zac/' })),
  /** When set, `GET /metrics` requires `Authorization: Bearer <this>`. */
  metricsToken: Type.Optional(Type.String({ description: 'when set, GET /metrics needs Authorization: Bearer <token>', minLength: 16, maxLength: 256 })),
  /**
   * Cluster mode (docs/cluster.md): etcd v3 client endpoints, comma-separated
   * (`http://10.0.0.1:2379,http://10.0.0.2:2379`). Unset: a single node with its own store.
   */
  clusterEtcd: Type.Optional(Type.String({ description: 'etcd v3 client URLs, comma-separated: run as a cluster member (unset: single node)', pattern: '^https?://[^\\s,]+(,https?://[^\\s,]+)*$' })),
  /** Key prefix of this cluster's model in etcd (several clusters can share one etcd). */
  clusterPrefix: Type.String({ description: 'key prefix of this cluster in etcd', default: '/mesh', pattern: '^/[A-Za-z0-9_./-]*$', maxLength: 200 }),
  /** TLS to etcd: CA bundle, and a client certificate and key when etcd asks for one. */
  clusterEtcdCa: Type.Optional(Type.String({ description: 'CA bundle (file) etcd\'s TLS certificate is checked against', minLength: 1 })),
  clusterEtcdCert: Type.Optional(Type.String({ description: 'client certificate (file) for etcd', minLength: 1 })),
  clusterEtcdKey: Type.Optional(Type.String({ description: 'client key (file) for etcd', minLength: 1 })),
  /** etcd user and password, when etcd has authentication enabled. */
  clusterEtcdUsername: Type.Optional(Type.String({ description: 'etcd user, when etcd has authentication on', minLength: 1 })),
  clusterEtcdPassword: Type.Optional(Type.String({ description: 'etcd password, when etcd has authentication on', minLength: 1 })),
  /** host:port other controllers and routers reach this one at; defaults to the advertised address. */
  clusterAdvertisedAddress: Type.Optional(Type.String({ description: 'host:port other controllers and routers reach this one at', pattern: HOST_PORT })),
});

export type Config = Static<typeof ConfigSchema> & { advertisedAddress: string; certAdvertisedAddress: string };

export const ENV: Record<string, keyof Static<typeof ConfigSchema>> = {
  MESH_DATA_DIR: 'dataDir',
  MESH_ADDRESS: 'address',
  MESH_ADVERTISED_ADDRESS: 'advertisedAddress',
  MESH_CERT_ADDRESS: 'certAddress',
  MESH_CERT_ADVERTISED_ADDRESS: 'certAdvertisedAddress',
  MESH_ADMIN_PASSWORD: 'adminPassword',
  MESH_ADMIN_USERNAME: 'adminUsername',
  MESH_LOG_LEVEL: 'logLevel',
  MESH_SESSION_TIMEOUT_MINUTES: 'sessionTimeoutMinutes',
  MESH_MINUTE_MS: 'minuteMs',
  MESH_MAX_BODY_BYTES: 'maxBodyBytes',
  MESH_WORKERS: 'workers',
  MESH_WORKER_QUEUE: 'workerQueue',
  MESH_ARGON2_MEMORY_KIB: 'argon2MemoryKiB',
  MESH_ARGON2_ITERATIONS: 'argon2Iterations',
  MESH_ARGON2_PARALLELISM: 'argon2Parallelism',
  MESH_ACTIVITY_FLUSH_MS: 'activityFlushMs',
  MESH_SIGNING_KEY_ROTATION_HOURS: 'signingKeyRotationHours',
  MESH_ENROLLMENT_MINUTES: 'enrollmentMinutes',
  MESH_SHUTDOWN_GRACE_MS: 'shutdownGraceMs',
  MESH_AUTH_CONCURRENCY: 'authConcurrency',
  MESH_AUTH_QUEUE: 'authQueue',
  MESH_QUEUE_MAX_WAIT_MS: 'queueMaxWaitMs',
  MESH_HEAVY_CONCURRENCY: 'heavyConcurrency',
  MESH_HEAVY_QUEUE: 'heavyQueue',
  MESH_LARGE_ANSWER_CONCURRENCY: 'largeAnswerConcurrency',
  MESH_LARGE_ANSWER_QUEUE: 'largeAnswerQueue',
  MESH_EXT_JWT_JWKS_COOLDOWN_MS: 'extJwtJwksCooldownMs',
  MESH_EXT_JWT_CLOCK_SKEW_SECONDS: 'extJwtClockSkewSeconds',
  MESH_SNAPSHOTS_KEEP: 'snapshotsKeep',
  MESH_SEARCH_RETENTION_HOURS: 'searchRetentionHours',
  MESH_SEARCH_MAX_DOCS_PER_INDEX: 'searchMaxDocsPerIndex',
  MESH_SEARCH_EXPORT_URL: 'searchExportUrl',
  MESH_SEARCH_EXPORT_USERNAME: 'searchExportUsername',
  MESH_SEARCH_EXPORT_PASSWORD: 'searchExportPassword',
  MESH_SEARCH_EXPORT_BATCH: 'searchExportBatch',
  MESH_SEARCH_EXPORT_BUFFER: 'searchExportBuffer',
  MESH_SEARCH_EXPORT_FLUSH_MS: 'searchExportFlushMs',
  MESH_ALERT_DEBOUNCE_MS: 'alertDebounceMs',
  MESH_ALERT_SCAN_SPACING: 'alertScanSpacing',
  MESH_ALERT_CERT_EXPIRY_DAYS: 'alertCertExpiryDays',
  MESH_ROUTER_HEARTBEAT_MS: 'routerHeartbeatMs',
  MESH_ROUTER_HEARTBEAT_TIMEOUT_MS: 'routerHeartbeatTimeoutMs',
  MESH_ROUTER_HANDSHAKE_TIMEOUT_MS: 'routerHandshakeTimeoutMs',
  MESH_ROUTER_MAX_PENDING_HANDSHAKES: 'routerMaxPendingHandshakes',
  MESH_REQUEST_LOG: 'requestLog',
  MESH_METRICS_TOKEN: 'metricsToken',
  MESH_CONSOLE_DIR: 'consoleDir',
  MESH_AUDIT_WEBHOOK_URL: 'auditWebhookUrl',
  MESH_AUDIT_WEBHOOK_SECRET: 'auditWebhookSecret',
  MESH_AUDIT_WEBHOOK_QUEUE: 'auditWebhookQueue',
  MESH_AUDIT_WEBHOOK_BATCH: 'auditWebhookBatch',
  MESH_AUDIT_WEBHOOK_ATTEMPTS: 'auditWebhookAttempts',
  MESH_AUDIT_WEBHOOK_RETRY_MS: 'auditWebhookRetryMs',
  MESH_AUDIT_WEBHOOK_TIMEOUT_MS: 'auditWebhookTimeoutMs',
  MESH_CLUSTER_ETCD: 'clusterEtcd',
  MESH_CLUSTER_PREFIX: 'clusterPrefix',
  MESH_CLUSTER_ETCD_CA: 'clusterEtcdCa',
  MESH_CLUSTER_ETCD_CERT: 'clusterEtcdCert',
  MESH_CLUSTER_ETCD_KEY: 'clusterEtcdKey',
  MESH_CLUSTER_ETCD_USERNAME: 'clusterEtcdUsername',
  MESH_CLUSTER_ETCD_PASSWORD: 'clusterEtcdPassword',
  MESH_CLUSTER_ADVERTISED_ADDRESS: 'clusterAdvertisedAddress',
};

export class ConfigError extends Error {}

/** Settings whose values are never repeated in messages. */
const SECRET_SETTINGS = new Set(['adminPassword', 'metricsToken', 'searchExportPassword', 'auditWebhookSecret', 'clusterEtcdPassword']);

/** Config file names looked for in the data directory when `MESH_CONFIG` is not set, in this order. */
const DATA_DIR_CONFIG_FILES = ['config.yaml', 'config.yml', 'config.json'];

function readConfigFile(file: string): Record<string, unknown> {
  let parsed: unknown;
  try {
    const text = fs.readFileSync(file, 'utf8');
    // YAML 1.2 reads JSON too; a `.json` file is still parsed strictly so its errors read as JSON's.
    parsed = file.endsWith('.json') ? JSON.parse(text) : loadYaml(text, { filename: file });
  } catch (e) {
    throw new ConfigError(`config file ${file}: ${(e as Error).message}`);
  }
  if (parsed === undefined || parsed === null) return {};
  if (typeof parsed !== 'object' || Array.isArray(parsed)) throw new ConfigError(`config file ${file}: must hold a mapping of settings (YAML) or an object (JSON)`);
  return parsed as Record<string, unknown>;
}

/** What a setting accepts, read from its schema: the text of its one error message. */
export function allowedValues(key: string): string {
  const s = (ConfigSchema.properties as unknown as Record<string, Record<string, unknown>>)[key];
  if (!s) return 'not a setting';
  if (Array.isArray(s.anyOf)) return `must be one of ${(s.anyOf as { const: unknown }[]).map((o) => o.const).join(', ')}`;
  if (s.type === 'integer') return `must be a whole number from ${s.minimum} to ${s.maximum}`;
  if (s.type === 'boolean') return 'must be true or false';
  if (s.pattern === HOST_PORT) return 'must be host:port (port 0-65535), e.g. 127.0.0.1:1280';
  if (typeof s.pattern === 'string' && s.pattern.startsWith('^https?'))
    return s.pattern.includes(',') ? 'must be http:// or https:// URLs separated by commas' : 'must be an http:// or https:// URL';
  if (typeof s.pattern === 'string') return `must match ${s.pattern}${s.maxLength !== undefined ? ` (at most ${s.maxLength} characters)` : ''}`;
  const len = s.maxLength !== undefined ? `${s.minLength ?? 0} to ${s.maxLength} characters` : `at least ${s.minLength ?? 0} character(s)`;
  return `must be a string of ${len}`;
}

/** Where a setting can be given, for messages: `logLevel (MESH_LOG_LEVEL)`. */
function settingName(key: string): string {
  const env = Object.entries(ENV).find(([, k]) => k === key)?.[0];
  return env ? `${key} (${env})` : key;
}

/** Parse settings from a config file and the environment; throws ConfigError with every problem listed, one line per setting. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Static<typeof ConfigSchema> {
  let fromFile: Record<string, unknown> = {};
  if (env.MESH_CONFIG) {
    if (!fs.existsSync(env.MESH_CONFIG)) throw new ConfigError(`config file ${env.MESH_CONFIG} does not exist`);
    fromFile = readConfigFile(env.MESH_CONFIG);
  } else if (env.MESH_DATA_DIR) {
    const file = DATA_DIR_CONFIG_FILES.map((n) => path.join(env.MESH_DATA_DIR!, n)).find((f) => fs.existsSync(f));
    if (file) fromFile = readConfigFile(file);
  }
  const raw: Record<string, unknown> = { ...fromFile };
  for (const [name, key] of Object.entries(ENV)) {
    const v = env[name];
    if (v === undefined || v === '') continue;
    const kind = typeof (Value.Default(ConfigSchema, {}) as Record<string, unknown>)[key];
    raw[key] = /^-?\d+$/.test(v) && kind === 'number' ? Number(v) : kind === 'boolean' && /^(true|false)$/i.test(v) ? v.toLowerCase() === 'true' : v;
  }
  const unknown = Object.keys(raw).filter((k) => !(k in ConfigSchema.properties));
  if (unknown.length) throw new ConfigError(`unknown setting(s): ${unknown.join(', ')} (\`--help\` lists the settings)`);
  const value = Value.Default(ConfigSchema, raw) as Record<string, unknown>;
  // One problem per setting, however many schema branches it failed (a union of literals reports each).
  // Checked setting by setting: the schema-wide error list stops early and repeats union branches.
  const props = ConfigSchema.properties as unknown as Record<string, Parameters<typeof Value.Check>[0]>;
  const bad = new Set(Object.keys(props).filter((k) => value[k] !== undefined && !Value.Check(props[k], value[k])));
  const problems = [...bad].map((k) => `${settingName(k)}${SECRET_SETTINGS.has(k) ? '' : ` = ${JSON.stringify(value[k])}`}: ${allowedValues(k)}`);
  if (!bad.has('routerHeartbeatTimeoutMs') && !bad.has('routerHeartbeatMs') && (value.routerHeartbeatTimeoutMs as number) <= (value.routerHeartbeatMs as number))
    problems.push(`${settingName('routerHeartbeatTimeoutMs')}: must be longer than routerHeartbeatMs (${value.routerHeartbeatMs})`);
  if (!bad.has('consoleDir') && typeof value.consoleDir === 'string' && !fs.statSync(path.join(value.consoleDir, 'index.html'), { throwIfNoEntry: false })?.isFile())
    problems.push(`${settingName('consoleDir')} = ${JSON.stringify(value.consoleDir)}: must be a directory holding an admin console build (its index.html)`);
  if (problems.length) throw new ConfigError(`invalid configuration:\n  ${problems.join('\n  ')}`);
  return value as Static<typeof ConfigSchema>;
}

/** The one-line description of a setting (its schema's `description`). */
export function describe(key: string): string | undefined {
  return (ConfigSchema.properties as unknown as Record<string, { description?: string }>)[key]?.description;
}

/** `--help`: every setting, one line each: variable, what it does, its file key, allowed values, default. */
export function configHelp(): string {
  const defaults = Value.Default(ConfigSchema, {}) as Record<string, unknown>;
  const lines = Object.entries(ENV).map(([name, key]) => {
    const d = defaults[key];
    return `  ${name.padEnd(36)} ${describe(key) ?? key} [${key}; ${allowedValues(key).replace(/^must be /, '')}${d === undefined ? '' : `; default ${JSON.stringify(d)}`}]`;
  });
  return lines.join('\n');
}

export function splitHostPort(address: string): { host: string; port: number } {
  const i = address.lastIndexOf(':');
  let host = address.slice(0, i);
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  return { host, port: Number(address.slice(i + 1)) };
}
