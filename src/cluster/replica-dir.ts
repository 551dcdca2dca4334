/**
 * The replica's LMDB environment is written without waiting for fsync: every model write is
 * durable in etcd before a controller applies it, so the replica only has to be consistent, not
 * durable. LMDB without sync survives a killed process (the writes are in the OS's page cache) but
 * not a crash of the machine, after which the file may be torn. So the boot id of the system that
 * last wrote it is kept beside it: under another boot id (the machine restarted meanwhile) the
 * replica is removed before it is opened and loaded again from etcd. Where the boot id cannot be
 * read, the replica is written with sync as on a single node.
 *
 * What this controller keeps for itself (API sessions, sessions) is lost with it after a machine
 * crash: its clients log in again.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';

const BOOT_ID = '/proc/sys/kernel/random/boot_id';
const MARKER = 'replica-boot-id';

function bootId(): string | undefined {
  try {
    return fs.readFileSync(BOOT_ID, 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

/** Before the store opens `dbDir`: whether it may be written without sync (see above). */
export function prepareReplicaDir(dataDir: string, dbDir: string, log: Logger): { noSync: boolean } {
  const current = bootId();
  if (!current) return { noSync: false };
  const marker = path.join(dataDir, MARKER);
  let last: string | undefined;
  try {
    last = fs.readFileSync(marker, 'utf8').trim();
  } catch {
    // Never written without sync (a new directory, or one written with sync): nothing to fear.
  }
  if (last && last !== current && fs.existsSync(dbDir)) {
    log.warn({ dbDir }, 'cluster: the machine restarted since the replica was last written without sync; loading it again from etcd');
    fs.rmSync(dbDir, { recursive: true, force: true });
  }
  if (last !== current) {
    fs.mkdirSync(dataDir, { recursive: true });
    const fd = fs.openSync(marker, 'w', 0o600);
    try {
      fs.writeSync(fd, current + '\n');
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
  }
  return { noSync: true };
}
