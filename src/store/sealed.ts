/**
 * Secrets at rest. What the controller must show or use again (an enrollment JWT an admin reads
 * again, a TOTP secret, MFA recovery codes) is stored sealed: AES-256-GCM under a key kept beside
 * the CA keys in `<dataDir>/pki/secrets.key` (0600, made at first start, kept across restarts).
 * `db/` and `snapshots/` hold only sealed values, so a copy of them without `pki/` opens nothing.
 * What only needs comparing (enrollment tokens) is stored as a digest instead (`digestOf`).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

export const SEALED_KEY_FILE = 'secrets.key';
/** Marks a sealed value; anything else is a value written before sealing (migrated at start). */
const PREFIX = 'sealed:v1:';
const IV_BYTES = 12;
const TAG_BYTES = 16;

/**
 * IVs cut from one buffer of random bytes refilled when used up: a randomBytes call per seal cost
 * about as much as the encryption itself (docs/benchmarks.md, "Measurements behind the code"), and
 * a bulk import seals once per identity. Each IV is used at once and copied into the sealed value.
 */
const ivPool = Buffer.alloc(IV_BYTES * 341);
let ivNext = ivPool.length;
function nextIv(): Buffer {
  if (ivNext + IV_BYTES > ivPool.length) {
    crypto.randomFillSync(ivPool);
    ivNext = 0;
  }
  return ivPool.subarray(ivNext, (ivNext += IV_BYTES));
}

export class Sealer {
  private constructor(private readonly key: Buffer) {}

  /** The key of `<pkiDir>/secrets.key`, made (32 random bytes, 0600) if the file does not exist. */
  static forPkiDir(pkiDir: string): Sealer {
    fs.mkdirSync(pkiDir, { recursive: true, mode: 0o700 });
    const file = path.join(pkiDir, SEALED_KEY_FILE);
    if (!fs.existsSync(file)) {
      // Written aside and renamed: a crash never leaves a short key that later seals with.
      const tmp = `${file}.${process.pid}.tmp`;
      fs.writeFileSync(tmp, crypto.randomBytes(32).toString('base64') + '\n', { mode: 0o600 });
      fs.renameSync(tmp, file);
    }
    const key = Buffer.from(fs.readFileSync(file, 'utf8').trim(), 'base64');
    if (key.length !== 32) throw new Error(`${file}: expected a base64 256-bit key`);
    fs.chmodSync(file, 0o600);
    return new Sealer(key);
  }

  seal(plain: string): string {
    const iv = nextIv();
    const c = crypto.createCipheriv('aes-256-gcm', this.key, iv);
    const body = Buffer.concat([c.update(plain, 'utf8'), c.final()]);
    return PREFIX + Buffer.concat([iv, c.getAuthTag(), body]).toString('base64url');
  }

  /** The plain value; a value not sealed yet is returned as it is. Throws on a wrong key or a damaged value. */
  open(value: string): string {
    if (!isSealed(value)) return value;
    const raw = Buffer.from(value.slice(PREFIX.length), 'base64url');
    const d = crypto.createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, IV_BYTES));
    d.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    return Buffer.concat([d.update(raw.subarray(IV_BYTES + TAG_BYTES)), d.final()]).toString('utf8');
  }
}

export const isSealed = (v: unknown): v is string => typeof v === 'string' && v.startsWith(PREFIX);

/** SHA-256 (hex) of a random token: enough for a 122-bit random UUID, and what the token index keys. */
export const digestOf = (token: string) => crypto.createHash('sha256').update(token, 'utf8').digest('hex');
