/**
 * Datastore snapshots (M:/database/snapshot): a consistent copy of the LMDB environment, made by
 * LMDB itself (`mdb_env_copy2` with compaction, through lmdb-js `backup`) from one read
 * transaction on a background thread, so writes go on while it is taken.
 *
 * Layout: `<dataDir>/snapshots/db-<UTC time>/data.mdb`. To restore, stop the controller and copy
 * that `data.mdb` over `<dataDir>/db/data.mdb`. At most one snapshot per `minIntervalMs`
 * (behaviors §18: one a minute) and one at a time; the oldest beyond `keep` are removed.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Store } from './store.js';

export class SnapshotTooSoon extends Error {}

/**
 * Remove the `*.partial` copies a process killed mid-snapshot left in `dir` (a crash skips the
 * cleanup in `create`). Run at start-up, under the data-directory lock: no copy is in progress.
 */
export function removePartialSnapshots(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  const gone = fs.readdirSync(dir).filter((n) => n.endsWith('.partial'));
  for (const n of gone) fs.rmSync(path.join(dir, n), { recursive: true, force: true });
  return gone;
}

export class Snapshots {
  private last = 0;
  private running = false;

  constructor(
    private readonly store: Store,
    readonly dir: string,
    private readonly opts: { minIntervalMs: number; keep: number },
  ) {}

  /** Take a snapshot; throws SnapshotTooSoon within the interval or while one is being taken. */
  async create(now = Date.now()): Promise<string> {
    if (this.running || now - this.last < this.opts.minIntervalMs) throw new SnapshotTooSoon('a snapshot was taken less than a minute ago');
    this.running = true;
    this.last = now;
    const stamp = new Date(now).toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
    let target = path.join(this.dir, `db-${stamp}`);
    for (let i = 1; fs.existsSync(target); i++) target = path.join(this.dir, `db-${stamp}-${i}`);
    const partial = target + '.partial';
    try {
      fs.rmSync(partial, { recursive: true, force: true });
      fs.mkdirSync(partial, { recursive: true });
      await this.store.env.backup(partial, true);
      // Only complete copies carry the final name.
      fs.renameSync(partial, target);
    } catch (e) {
      fs.rmSync(partial, { recursive: true, force: true });
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
      .filter((n) => n.startsWith('db-') && !n.endsWith('.partial'))
      .sort()
      .map((n) => path.join(this.dir, n));
  }

  private prune() {
    if (this.opts.keep <= 0) return;
    const all = this.list();
    for (const old of all.slice(0, Math.max(0, all.length - this.opts.keep))) fs.rmSync(old, { recursive: true, force: true });
  }
}
