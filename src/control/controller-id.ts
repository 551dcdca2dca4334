/**
 * This controller's stable id: what `GET /controllers` reports and what per-controller settings
 * (`POST /controller-settings {controllerId}`) and the control channel's `welcome` name. Kept in
 * `<dataDir>/controller.id`, created once (random, 10 characters of the entity-id alphabet), so it
 * survives restarts and moves with the data directory. (`mesh-instance-id` is different: a new
 * random value per process.)
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

const FILE = 'controller.id';
const VALID = /^[A-Za-z0-9._-]{1,64}$/;

export function loadOrCreateControllerId(dataDir: string): string {
  const file = path.join(dataDir, FILE);
  try {
    const id = fs.readFileSync(file, 'utf8').trim();
    if (VALID.test(id)) return id;
    throw new Error(`${file} does not hold a controller id (1-64 of A-Z a-z 0-9 . _ -)`);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  const id = crypto.randomBytes(8).toString('base64url').slice(0, 10);
  // Temp file + rename: a crash never leaves a half-written id behind.
  const tmp = `${file}.tmp-${process.pid}`;
  fs.writeFileSync(tmp, id + '\n', { mode: 0o600 });
  fs.renameSync(tmp, file);
  return id;
}
