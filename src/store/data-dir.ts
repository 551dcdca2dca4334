/**
 * The data directory as a whole: one controller at a time, and nothing in it readable by anyone
 * but its owner.
 *
 * Exclusive use is an `flock` on `<dataDir>/controller.lock` (fs-native-extensions): the kernel
 * drops it when the process ends, however it ends (kill -9 included), so a stale lock never has
 * to be guessed at, and a reused pid cannot keep a dead controller's lock alive. The file holds
 * the holder's pid for the refusal message only; it is never removed (removing it would let a
 * second process lock a new file while the first still holds the old one).
 *
 * Modes: the process runs with umask 077, so every file and directory it (and LMDB, and the
 * snapshot copy) creates is 0600/0700 whatever umask it was started with; what an older version
 * created under a looser umask is tightened at start-up.
 */
import fs from 'node:fs';
import path from 'node:path';
import { tryLock, unlock } from 'fs-native-extensions';

const LOCK_FILE = 'controller.lock';

export class DataDirInUse extends Error {
  constructor(readonly dataDir: string, readonly holderPid: number | undefined) {
    super(`data directory ${dataDir} is in use by another controller${holderPid ? ` (pid ${holderPid})` : ''}; stop it first, or give this one its own data directory`);
  }
}

export interface DataDirLock {
  release(): void;
}

/** Take the data directory for this process, or throw DataDirInUse while another process holds it. */
export function lockDataDir(dataDir: string): DataDirLock {
  const file = path.join(dataDir, LOCK_FILE);
  const fd = fs.openSync(file, fs.constants.O_RDWR | fs.constants.O_CREAT, 0o600);
  if (!tryLock(fd)) {
    const pid = Number.parseInt(fs.readFileSync(fd, 'utf8').trim(), 10);
    fs.closeSync(fd);
    throw new DataDirInUse(dataDir, Number.isFinite(pid) ? pid : undefined);
  }
  fs.ftruncateSync(fd, 0);
  fs.writeSync(fd, `${process.pid}\n`, 0);
  let held = true;
  return {
    release() {
      if (!held) return;
      held = false;
      unlock(fd);
      fs.closeSync(fd);
    },
  };
}

/** Make everything the process creates from now on owner-only (0700 directories, 0600 files). */
export function ownerOnlyFromNowOn(): void {
  process.umask(0o077);
}

/** Set every directory under (and including) `dir` to 0700 and every file to 0600 where looser. */
export function tightenModes(dir: string): void {
  const stack = [dir];
  while (stack.length) {
    const d = stack.pop()!;
    const st = fs.lstatSync(d);
    if ((st.mode & 0o077) !== 0) fs.chmodSync(d, 0o700);
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) stack.push(p);
      else if (e.isFile() && (fs.lstatSync(p).mode & 0o077) !== 0) fs.chmodSync(p, 0o600);
    }
  }
}
