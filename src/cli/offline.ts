/**
 * Commands on a data directory, without a running controller: `mesh backup`, `mesh restore`,
 * `mesh status`, `mesh admin reset-password`, `mesh import` (import.ts). Commands that write take
 * the data directory's lock (the one a controller holds while it runs), so they refuse while a
 * controller runs there — it keeps records in memory and would not see the change — and no
 * controller starts mid-way.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { open } from 'lmdb';
import { loadConfig } from '../config.js';
import { CURRENT_FORMAT, DataFormatError, readDataFormat } from '../store/data-format.js';
import { DataDirInUse, lockDataDir, type DataDirLock } from '../store/data-dir.js';
import { BackupError, backupName, restoreBackup, verifyBackup, writeBackup } from '../store/snapshot.js';
import { Store } from '../store/store.js';
import { createRegistry } from '../resources/index.js';
import { hashPassword } from '../auth/argon2.js';
import { AUDIT_INDEX, auditFileName, redact, type AuditEvent } from '../events/audit.js';
import { SearchStore } from '../events/search-store.js';
import { CliError, usage } from './state.js';

export function dataDirOf(dir: string | undefined): string {
  if (!dir) throw usage('--data-dir DIR is required (the controller\'s MESH_DATA_DIR)');
  return path.resolve(dir);
}

/** The pid of a controller running on `dataDir` (true when its pid is unknown), or false. */
function runningController(dataDir: string): number | boolean {
  if (!fs.existsSync(dataDir)) return false;
  try {
    lockDataDir(dataDir).release();
    return false;
  } catch (e) {
    if (e instanceof DataDirInUse) return e.holderPid ?? true;
    throw e;
  }
}

export function lockFor(dataDir: string, what: string): DataDirLock {
  fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  try {
    return lockDataDir(dataDir);
  } catch (e) {
    if (e instanceof DataDirInUse) throw new CliError(`a controller${e.holderPid ? ` (pid ${e.holderPid})` : ''} is running on ${dataDir}; stop it before ${what}`);
    throw e;
  }
}

export function requireStore(dataDir: string) {
  if (!fs.existsSync(path.join(dataDir, 'db', 'data.mdb'))) throw new CliError(`${dataDir} holds no datastore (no db/data.mdb)`);
}

function controllerVersion(): string {
  const pkg = new URL(import.meta.url.includes('/dist/src/') ? '../../../package.json' : '../../package.json', import.meta.url);
  return `v${JSON.parse(fs.readFileSync(pkg, 'utf8')).version}`;
}

function osUser(): string {
  try {
    return os.userInfo().username;
  } catch {
    // A uid with no passwd entry (containers).
    return process.env.USER ?? String(process.getuid?.() ?? 'unknown');
  }
}

/**
 * Record an offline change as the controller records an API change (src/events/audit.ts): a line in
 * `<dataDir>/audit/audit-<UTC date>.jsonl` and a document in the search index `mesh.audit`, so the
 * next controller to start there serves it in `/search`. The caller holds the data directory's
 * lock, so no controller has the search store open. The actor is the operating-system user; the
 * webhook is not called (it belongs to a running controller).
 */
export async function auditOffline(dataDir: string, e: { operation: string; family: string; entityId: string | null; command: string; changes: Record<string, unknown> }): Promise<void> {
  const event: AuditEvent = {
    '@timestamp': new Date().toISOString(),
    action: 'update',
    api: 'offline',
    operation: e.operation,
    family: e.family,
    entityId: e.entityId,
    method: 'CLI',
    path: e.command,
    status: 0,
    requestId: crypto.randomBytes(6).toString('base64url'),
    actor: { identityId: null, identityName: `os:${osUser()}`, apiSessionId: null, address: os.hostname() },
    changes: redact(e.changes) as Record<string, unknown>,
  };
  // The change is made by now: a trail that cannot be written is said loudly, not turned into a failure of it.
  try {
    const dir = path.join(dataDir, 'audit');
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    fs.appendFileSync(path.join(dir, auditFileName(event['@timestamp'].slice(0, 10))), JSON.stringify(event) + '\n', { mode: 0o600 });
    // Retention is the controller's business: this store is open for one write, its sweep never runs.
    const search = new SearchStore(path.join(dataDir, 'search'), { retentionHours: Number.MAX_SAFE_INTEGER, maxDocsPerIndex: Number.MAX_SAFE_INTEGER });
    try {
      await search.bulk([{ op: 'index', index: AUDIT_INDEX, source: event as unknown as Record<string, unknown> }]);
    } finally {
      await search.close();
    }
  } catch (err) {
    process.stderr.write(`mesh: warning: ${e.command} is done, but its audit event could not be written: ${(err as Error).message}\n`);
  }
}

/** Offline backups read the datastore through LMDB itself, so they are consistent even while a controller writes. */
export async function backup(opts: { dataDir?: string; out?: string }): Promise<void> {
  const dataDir = dataDirOf(opts.dataDir);
  requireStore(dataDir);
  const out = path.resolve(opts.out ?? backupName());
  if (fs.existsSync(out)) throw usage(`${out} exists already`);
  const env = open({ path: path.join(dataDir, 'db'), readOnly: true, maxDbs: 256 });
  try {
    const m = await writeBackup(env, dataDir, out, controllerVersion(), { sealingKey: true });
    const bytes = fs.statSync(out).size;
    process.stdout.write(`backup of ${dataDir} written to ${out} (${m.files.length} files, ${bytes} bytes, data format ${m.dataFormat})\n`);
  } finally {
    await env.close();
  }
}

export async function restore(file: string | undefined, opts: { dataDir?: string; replace?: boolean; check?: boolean }): Promise<void> {
  if (!file) throw usage('mesh restore: which backup file?');
  try {
    if (opts.check) {
      const m = await verifyBackup(file);
      process.stdout.write(`${file}: a complete backup of controller ${m.controllerId} taken ${m.createdAt} by ${m.controllerVersion} (data format ${m.dataFormat}, ${m.files.length} files, checksums match)\n`);
      return;
    }
    const dataDir = dataDirOf(opts.dataDir);
    const lock = lockFor(dataDir, 'restoring into it');
    let m;
    try {
      m = await restoreBackup(file, dataDir, { replace: opts.replace });
      await auditOffline(dataDir, {
        operation: 'restore',
        family: 'database',
        entityId: m.controllerId,
        command: 'mesh restore',
        changes: { backup: path.resolve(file), controllerId: m.controllerId, createdAt: m.createdAt, dataFormat: m.dataFormat, replace: opts.replace === true },
      });
    } finally {
      lock.release();
    }
    process.stdout.write(
      `restored ${file} into ${dataDir}: controller ${m.controllerId}, taken ${m.createdAt} (data format ${m.dataFormat}${m.dataFormat < CURRENT_FORMAT ? `; migrated to ${CURRENT_FORMAT} when the controller starts` : ''})\n`,
    );
  } catch (e) {
    if (e instanceof BackupError) throw new CliError(e.message);
    throw e;
  }
}

export async function status(opts: { dataDir?: string; json?: boolean }): Promise<void> {
  const dataDir = dataDirOf(opts.dataDir);
  if (!fs.existsSync(dataDir)) throw new CliError(`${dataDir} does not exist`);
  let format: number | string | undefined;
  try {
    format = readDataFormat(dataDir);
  } catch (e) {
    if (!(e instanceof DataFormatError)) throw e;
    format = `unreadable: ${e.message}`;
  }
  const file = (p: string) => (fs.existsSync(path.join(dataDir, p)) ? path.join(dataDir, p) : undefined);
  const db = file('db/data.mdb');
  const idFile = file('controller.id');
  const cas = file('pki/ca-bundle.pem');
  const snapshots = fs.existsSync(path.join(dataDir, 'snapshots')) ? fs.readdirSync(path.join(dataDir, 'snapshots')).filter((n) => n.endsWith('.tar.gz')).sort() : [];
  const audit = fs.existsSync(path.join(dataDir, 'audit')) ? fs.readdirSync(path.join(dataDir, 'audit')).filter((n) => n.endsWith('.jsonl')).sort() : [];
  const pid = runningController(dataDir);
  const info = {
    dataDir,
    running: pid === false ? false : { pid: pid === true ? null : pid },
    dataFormat: format ?? 'new (no datastore yet)',
    supportedFormat: CURRENT_FORMAT,
    controllerId: idFile ? fs.readFileSync(idFile, 'utf8').trim() : null,
    datastoreBytes: db ? fs.statSync(db).size : 0,
    cas: cas
      ? (fs.readFileSync(cas, 'utf8').match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []).map((p) => {
          const c = new crypto.X509Certificate(p);
          return { subject: c.subject.replace(/\n/g, ', '), sha256: c.fingerprint256, validTo: new Date(c.validTo).toISOString() };
        })
      : [],
    snapshots: { count: snapshots.length, latest: snapshots[snapshots.length - 1] ?? null },
    auditFiles: { count: audit.length, latest: audit[audit.length - 1] ?? null },
  };
  if (opts.json) {
    process.stdout.write(JSON.stringify(info, null, 2) + '\n');
    return;
  }
  const lines = [
    `data directory   ${dataDir}`,
    `controller       ${pid === false ? 'not running' : `running${pid === true ? '' : ` (pid ${pid})`}`}`,
    `data format      ${info.dataFormat} (this version reads up to ${CURRENT_FORMAT})`,
    `controller id    ${info.controllerId ?? '-'}`,
    `datastore        ${db ? `${info.datastoreBytes} bytes` : 'none'}`,
    ...info.cas.map((c) => `CA               ${c.subject}, until ${c.validTo.slice(0, 10)}, SHA-256 ${c.sha256}`),
    `snapshots        ${info.snapshots.count}${info.snapshots.latest ? ` (latest ${info.snapshots.latest})` : ''}`,
    `audit files      ${info.auditFiles.count}${info.auditFiles.latest ? ` (latest ${info.auditFiles.latest})` : ''}`,
  ];
  process.stdout.write(lines.join('\n') + '\n');
}

/** Set a UPDB password in the datastore directly: the way back in when the admin password is lost. */
export async function resetPassword(opts: { dataDir?: string; username?: string; password?: string }): Promise<void> {
  const dataDir = dataDirOf(opts.dataDir);
  if (!opts.username) throw usage('--username U is required');
  if (!opts.password) throw usage('--password P is required');
  if (opts.password.length < 5 || opts.password.length > 100) throw usage('--password: must be 5 to 100 characters');
  requireStore(dataDir);
  const lock = lockFor(dataDir, 'changing a password');
  try {
    await setPassword(dataDir, opts.username, opts.password);
  } finally {
    lock.release();
  }
}

async function setPassword(dataDir: string, username: string, password: string): Promise<void> {
  const opts = { username, password };
  const format = readDataFormat(dataDir);
  if (format !== undefined && format > CURRENT_FORMAT) throw new CliError(`${dataDir} has data format ${format}, newer than this version reads (${CURRENT_FORMAT})`);
  // The controller's own hashing settings (MESH_ARGON2_*, config file), so the hash is one it would make.
  const c = loadConfig({ ...process.env, MESH_DATA_DIR: dataDir });
  const store = new Store(path.join(dataDir, 'db'), createRegistry().collectionSpecs());
  try {
    const auth = store.findUnique('authenticators', 'username', opts.username);
    if (!auth || auth.method !== 'updb') throw new CliError(`no password authenticator with username "${opts.username}" in ${dataDir}`);
    const passwordHash = await hashPassword({ password: opts.password, memoryCost: c.argon2MemoryKiB, timeCost: c.argon2Iterations, parallelism: c.argon2Parallelism });
    await store.write((tx) => tx.put('authenticators', { ...auth, passwordHash, updatedAt: Date.now() }));
    const identity = store.get('identities', auth.identityId);
    await auditOffline(dataDir, {
      operation: 'resetPassword',
      family: 'authenticators',
      entityId: auth.id,
      command: 'mesh admin reset-password',
      changes: { username: opts.username, identityId: auth.identityId, password: opts.password },
    });
    process.stdout.write(`password of "${opts.username}" (identity ${identity?.name ?? auth.identityId}) reset in ${dataDir}\n`);
  } finally {
    await store.close();
  }
}
