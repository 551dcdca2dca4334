/**
 * Backups: one format for `POST /database/snapshot`, `mesh snapshot` and `mesh backup`, and what
 * `mesh restore` reads back.
 *
 * A backup is a gzipped tar (`mesh-backup-<UTC time>.tar.gz`) of:
 * - `db/data.mdb`: a consistent copy of the LMDB environment, made by LMDB itself (`mdb_env_copy2`
 *   with compaction, through lmdb-js `backup`) from one read transaction on a background thread,
 *   so writes go on while it is taken;
 * - `pki/…`: every file of the PKI directory (CAs, their keys, the server certificate), so devices
 *   enrolled before the backup still log in after a restore. `pki/secrets.key`, the key the
 *   records' secrets are sealed with (sealed.ts), only in an operator's full backup (`mesh
 *   backup`): online snapshots, kept in `<dataDir>/snapshots`, leave it out so that a copy of that
 *   directory opens none of the secrets. A restore keeps the key of the directory it restores into
 *   when the backup has none;
 * - `controller.id` and `format.json` when present;
 * - `manifest.json`: what the backup is (kind, backup format, data format, controller version and
 *   id, time) and the size and SHA-256 of every other file, checked on restore.
 *
 * Online snapshots go to `<dataDir>/snapshots`: at most one per `minIntervalMs` (one a minute, as
 * upstream) and one at a time; the oldest beyond `keep` are removed. The backup holds private keys:
 * it is written readable by its owner only.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as tar from 'tar';
import type { RootDatabase } from 'lmdb';
import type { Store } from './store.js';
import { CURRENT_FORMAT, FORMAT_FILE, readDataFormat } from './data-format.js';
import { SEALED_KEY_FILE } from './sealed.js';

const BACKUP_KIND = 'mesh-controller-backup';
/** Version of the backup file layout itself (not of the data inside, which is `dataFormat`). */
const BACKUP_FORMAT = 1;
const MANIFEST = 'manifest.json';
/** Files and directories of the data directory a backup carries, besides the datastore. */
const CARRIED = ['pki', 'controller.id', FORMAT_FILE];

export interface BackupManifest {
  kind: typeof BACKUP_KIND;
  backupFormat: number;
  /** Data directory format of the contents (src/store/data-format.ts). */
  dataFormat: number;
  controllerVersion: string;
  controllerId: string | null;
  createdAt: string;
  files: { path: string; bytes: number; sha256: string }[];
}

export class SnapshotTooSoon extends Error {}
export class BackupError extends Error {}

function sha256(file: string): string {
  return crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
}

function filesUnder(root: string, rel = ''): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(path.join(root, rel), { withFileTypes: true })) {
    const p = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) out.push(...filesUnder(root, p));
    else if (e.isFile()) out.push(p);
  }
  return out.sort();
}

export function backupName(now = Date.now()): string {
  return `mesh-backup-${new Date(now).toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z')}.tar.gz`;
}

/**
 * Write a backup of `dataDir` to `outFile`. `env` is the open LMDB environment of `<dataDir>/db`
 * (the controller's own, or one opened by `mesh backup`). The file appears only when complete.
 */
export async function writeBackup(env: RootDatabase, dataDir: string, outFile: string, controllerVersion: string, opts: { sealingKey: boolean }): Promise<BackupManifest> {
  const staging = fs.mkdtempSync(path.join(path.dirname(path.resolve(outFile)), '.mesh-backup-'));
  const partial = outFile + '.partial';
  try {
    fs.mkdirSync(path.join(staging, 'db'));
    await env.backup(path.join(staging, 'db'), true);
    for (const name of CARRIED) {
      const from = path.join(dataDir, name);
      if (fs.existsSync(from)) fs.cpSync(from, path.join(staging, name), { recursive: true, filter: (src) => opts.sealingKey || path.basename(src) !== SEALED_KEY_FILE });
    }
    const idFile = path.join(dataDir, 'controller.id');
    const manifest: BackupManifest = {
      kind: BACKUP_KIND,
      backupFormat: BACKUP_FORMAT,
      dataFormat: readDataFormat(dataDir) ?? CURRENT_FORMAT,
      controllerVersion,
      controllerId: fs.existsSync(idFile) ? fs.readFileSync(idFile, 'utf8').trim() : null,
      createdAt: new Date().toISOString(),
      files: filesUnder(staging).map((p) => ({ path: p, bytes: fs.statSync(path.join(staging, p)).size, sha256: sha256(path.join(staging, p)) })),
    };
    fs.writeFileSync(path.join(staging, MANIFEST), JSON.stringify(manifest, null, 2) + '\n');
    await tar.create({ gzip: true, file: partial, cwd: staging, portable: true, mode: 0o600 } as tar.TarOptionsWithAliasesAsyncFile, [MANIFEST, ...manifest.files.map((f) => f.path)]);
    fs.chmodSync(partial, 0o600);
    fs.renameSync(partial, outFile);
    return manifest;
  } finally {
    fs.rmSync(staging, { recursive: true, force: true });
    fs.rmSync(partial, { force: true });
  }
}

/**
 * Unpack `file` into the empty directory `into` and check it: a manifest of this kind and a known
 * backup format, every listed file present with its size and SHA-256, nothing unlisted, a data
 * format this controller reads (older ones are migrated at start).
 */
export async function unpackBackup(file: string, into: string): Promise<BackupManifest> {
  if (!fs.existsSync(file)) throw new BackupError(`${file} does not exist`);
  try {
    // node-tar keeps entries inside `cwd` (no absolute paths, no `..`), and refuses links out of it.
    await tar.extract({ file, cwd: into, strict: true, preservePaths: false });
  } catch (e) {
    throw new BackupError(`${file} is not a readable backup (gzipped tar): ${(e as Error).message}`);
  }
  const mf = path.join(into, MANIFEST);
  if (!fs.existsSync(mf)) throw new BackupError(`${file} has no ${MANIFEST}: not a mesh-controller backup`);
  let m: BackupManifest;
  try {
    m = JSON.parse(fs.readFileSync(mf, 'utf8'));
  } catch (e) {
    throw new BackupError(`${file}: ${MANIFEST} is not JSON: ${(e as Error).message}`);
  }
  if (m?.kind !== BACKUP_KIND) throw new BackupError(`${file}: not a mesh-controller backup (kind ${JSON.stringify(m?.kind)})`);
  if (m.backupFormat !== BACKUP_FORMAT) throw new BackupError(`${file}: backup format ${m.backupFormat} is not one this controller reads (${BACKUP_FORMAT})`);
  if (!Number.isInteger(m.dataFormat) || m.dataFormat > CURRENT_FORMAT)
    throw new BackupError(`${file}: data format ${m.dataFormat} was written by a newer controller (this one reads ${CURRENT_FORMAT} and older)`);
  if (!Array.isArray(m.files)) throw new BackupError(`${file}: ${MANIFEST} lists no files`);
  const listed = new Set<string>();
  for (const f of m.files) {
    const p = path.join(into, String(f.path));
    if (!fs.existsSync(p)) throw new BackupError(`${file}: ${f.path} is listed in the manifest but missing`);
    if (fs.statSync(p).size !== f.bytes || sha256(p) !== f.sha256) throw new BackupError(`${file}: ${f.path} does not match its checksum: the backup is damaged`);
    listed.add(String(f.path));
  }
  const extra = filesUnder(into).filter((p) => p !== MANIFEST && !listed.has(p));
  if (extra.length) throw new BackupError(`${file}: holds files the manifest does not list: ${extra.join(', ')}`);
  if (!listed.has('db/data.mdb')) throw new BackupError(`${file}: holds no datastore (db/data.mdb)`);
  return m;
}

/** Read and check a backup without restoring it (`mesh restore --check`). */
export async function verifyBackup(file: string): Promise<BackupManifest> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-verify-'));
  try {
    return await unpackBackup(file, tmp);
  } finally {
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

/**
 * Restore `file` into `dataDir` (the controller stopped). A data directory that already holds a
 * datastore is refused unless `replace`; then its datastore, PKI, controller id and format file are
 * moved aside to `<dataDir>/replaced-<time>/` rather than deleted. Nothing is changed unless the
 * whole backup checked out.
 */
export async function restoreBackup(file: string, dataDir: string, opts: { replace?: boolean } = {}): Promise<BackupManifest> {
  fs.mkdirSync(dataDir, { recursive: true });
  const existing = ['db', ...CARRIED].filter((n) => fs.existsSync(path.join(dataDir, n)));
  if (fs.existsSync(path.join(dataDir, 'db', 'data.mdb')) && !opts.replace)
    throw new BackupError(`${dataDir} already holds a datastore; stop its controller and pass --replace to restore over it (the current files are moved aside)`);
  const staging = fs.mkdtempSync(path.join(dataDir, '.restore-'));
  try {
    const m = await unpackBackup(file, staging);
    fs.rmSync(path.join(staging, MANIFEST));
    let aside: string | undefined;
    if (existing.length) {
      aside = path.join(dataDir, `replaced-${new Date().toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z')}`);
      fs.mkdirSync(aside);
      for (const n of existing) fs.renameSync(path.join(dataDir, n), path.join(aside, n));
    }
    for (const n of fs.readdirSync(staging)) fs.renameSync(path.join(staging, n), path.join(dataDir, n));
    // Snapshots leave the sealing key out: the one this directory had still opens the restored records.
    const key = path.join('pki', SEALED_KEY_FILE);
    if (aside && fs.existsSync(path.join(aside, key)) && !fs.existsSync(path.join(dataDir, key))) fs.copyFileSync(path.join(aside, key), path.join(dataDir, key));
    return m;
  } finally {
    fs.rmSync(staging, { recursive: true, force: true });
  }
}

/**
 * Remove the `*.partial` copies a process killed mid-snapshot left in `dir` (a crash skips the
 * cleanup in `create`). Run at start-up, under the data-directory lock: no copy is in progress.
 */
export function removePartialSnapshots(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  const gone = fs.readdirSync(dir).filter((n) => n.endsWith('.partial') || n.startsWith('.mesh-backup-'));
  for (const n of gone) fs.rmSync(path.join(dir, n), { recursive: true, force: true });
  return gone;
}

export class Snapshots {
  private last = 0;
  private running = false;

  constructor(
    private readonly store: Store,
    private readonly dataDir: string,
    private readonly opts: { minIntervalMs: number; keep: number; controllerVersion: string },
  ) {}

  get dir(): string {
    return path.join(this.dataDir, 'snapshots');
  }

  /** Take a snapshot; throws SnapshotTooSoon within the interval or while one is being taken. */
  async create(now = Date.now()): Promise<string> {
    if (this.running || now - this.last < this.opts.minIntervalMs) throw new SnapshotTooSoon('a snapshot was taken less than a minute ago');
    this.running = true;
    this.last = now;
    fs.mkdirSync(this.dir, { recursive: true });
    let target = path.join(this.dir, backupName(now));
    for (let i = 1; fs.existsSync(target); i++) target = path.join(this.dir, backupName(now).replace('.tar.gz', `-${i}.tar.gz`));
    try {
      await writeBackup(this.store.env, this.dataDir, target, this.opts.controllerVersion, { sealingKey: false });
    } catch (e) {
      this.last = 0;
      throw e;
    } finally {
      this.running = false;
    }
    this.prune();
    return target;
  }

  /** Completed snapshots, oldest first. */
  list(): string[] {
    if (!fs.existsSync(this.dir)) return [];
    return fs
      .readdirSync(this.dir)
      .filter((n) => n.startsWith('mesh-backup-') && n.endsWith('.tar.gz'))
      .sort()
      .map((n) => path.join(this.dir, n));
  }

  private prune() {
    if (this.opts.keep <= 0) return;
    const all = this.list();
    for (const old of all.slice(0, Math.max(0, all.length - this.opts.keep))) fs.rmSync(old, { force: true });
  }
}
