/**
 * `mesh import`: bring a fleet's identities into a stopped controller's data directory from a
 * JSON-lines file, one `POST /identities` body per line:
 *
 *   {"name":"sensor-000001","type":"Default","isAdmin":false,"roleAttributes":["plant-3"],"enrollment":{"ott":true}}
 *
 *   mesh import --data-dir /var/lib/mesh fleet.jsonl
 *
 * Each line is validated with the Management API's own body validator and created by the resource
 * layer's create (`createInTx`, src/resources/write.ts): the same records, defaults, unique and
 * secondary indexes (the role index reads `roleAttributes` from them at start) and enrollments,
 * with their signed JWTs, as the API makes. What differs is the commit: the API commits what a few
 * clients sent at once; here one write carries a thousand creates, and the next ones are prepared
 * while it commits (several in flight), so the disk never waits for the CPU nor the other way.
 *
 * Offline, not through the API, because at a million identities the controller would spend
 * minutes of its event loop on HTTP parsing and rendering that no one reads, competing with the
 * fleet's logins; the data directory's lock keeps a controller from starting meanwhile.
 * `npm run generate-model` writes its models through the same writer (`BulkWriter`).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { pino } from 'pino';
import { loadConfig, splitHostPort } from '../config.js';
import type { App } from '../api/context.js';
import { ApiError } from '../core/errors.js';
import { BodyValidator } from '../api/validate.js';
import { loadOrCreatePki } from '../pki/bootstrap.js';
import { WorkerPool } from '../pool.js';
import { keysOf } from '../resources/enrollments.js';
import { enrollmentSpec } from '../resources/identities.js';
import { createRegistry } from '../resources/index.js';
import type { Registry } from '../resources/registry.js';
import type { ResourceDef, Writer } from '../resources/types.js';
import { createInTx, newId, write } from '../resources/write.js';
import { CURRENT_FORMAT, readDataFormat, writeDataFormat } from '../store/data-format.js';
import { Sealer } from '../store/sealed.js';
import { Store, UniqueViolation } from '../store/store.js';
import { auditOffline, dataDirOf, lockFor, requireStore } from './offline.js';
import { CliError, usage } from './state.js';

/** What record creation reads of the application, for a data directory no controller runs on. */
export interface OfflineApp {
  app: App;
  /** The controller's own writes: no acting identity. */
  writer: Writer;
  store: Store;
  reg: Registry;
  /** Its PKI directory: the keys a worker seals with. */
  pkiDir: string;
}

/**
 * Open `dataDir` as the controller would with the MESH_* settings in `env`: its PKI (enrollment
 * JWTs are signed with its server key and name its certificate listener, MESH_CERT_ADDRESS or the
 * API port + 1, as src/app.ts places it), its store with the controller's sealer. A directory
 * without a data format yet gets the current one.
 */
export async function openOffline(dataDir: string, env: Record<string, string | undefined>): Promise<OfflineApp> {
  const settings = loadConfig({ ...env, MESH_DATA_DIR: dataDir } as NodeJS.ProcessEnv);
  if (settings.clusterEtcd) throw new CliError('a cluster member\'s datastore is a replica of etcd: import through the API of a running controller instead');
  const listen = splitHostPort(settings.address);
  const advertisedHost = settings.advertisedAddress
    ? splitHostPort(settings.advertisedAddress).host
    : listen.host === '0.0.0.0' || listen.host === '::' ? 'localhost' : listen.host;
  const bracket = (h: string) => (h.includes(':') ? `[${h}]` : h);
  const advertisedAddress = settings.advertisedAddress ?? `${bracket(advertisedHost)}:${listen.port}`;
  const certPort = settings.certAddress ? splitHostPort(settings.certAddress).port : listen.port === 0 ? 0 : listen.port + 1;
  const certAdvertisedAddress = settings.certAdvertisedAddress ?? `${bracket(advertisedHost)}:${certPort}`;
  const pkiDir = path.join(dataDir, 'pki');
  const pki = await loadOrCreatePki(pkiDir, { advertisedHost });
  const format = readDataFormat(dataDir);
  if (format !== undefined && format !== CURRENT_FORMAT)
    throw new CliError(`${dataDir} has data format ${format}, this version writes ${CURRENT_FORMAT}: start the controller once on it (it migrates the data), stop it, then import`);
  const reg = createRegistry();
  const store = new Store(path.join(dataDir, 'db'), reg.collectionSpecs(), { sealer: Sealer.forPkiDir(pkiDir) });
  if (format === undefined) writeDataFormat(dataDir, CURRENT_FORMAT);
  const app = {
    config: { ...settings, advertisedAddress, certAdvertisedAddress },
    store,
    log: pino({ level: 'silent' }),
    pki,
    baseUrl: `https://${advertisedAddress}`,
    certBaseUrl: `https://${certAdvertisedAddress}`,
    startedAt: Date.now(),
  } as unknown as App;
  return { app, writer: { store, enrollments: keysOf(app) }, store, reg, pkiDir };
}

/** A create that failed: which item of the group, the error, and its message as the API would say it. */
export class ImportError extends Error {
  constructor(readonly index: number, readonly error: unknown, shown: unknown = error) {
    super(describeError(shown));
  }
}

function describeError(e: unknown): string {
  if (e instanceof ApiError) {
    const c = e.errorCause as { field?: string; reason?: string; value?: unknown } | undefined;
    return `${e.code}: ${c?.reason ?? e.message}${c?.field ? ` (field ${c.field})` : ''}`;
  }
  return e instanceof Error ? e.message : String(e);
}

/** The rejection of a group given after one that failed: it is not written. */
class NotWritten extends Error {}

/**
 * Creates records in large atomic groups with several groups committing at once. A group's
 * signed and sealed parts are made first (an identity group's enrollments in the worker pool when
 * there is one, while earlier groups commit and the caller reads the next), then its creates run
 * at once in one write, in the order the groups were given. A bad record fails its group: the
 * records before it are written, the error names it, and the groups given after it are not
 * written. `create` resolves when its group is handed to the store, waiting only while `depth`
 * groups are still committing; `drain` waits for all of them.
 */
export class BulkWriter {
  private readonly inFlight: Promise<unknown>[] = [];
  /** The last group given: settled once it is handed to the store or failed. */
  private last: Promise<unknown> = Promise.resolve();
  private readonly depth: number;
  private readonly pool: WorkerPool | undefined;

  /** `depth`: groups committing at once; `pool`: where an identity group's enrollments are made. */
  constructor(private readonly o: OfflineApp, opts: { depth?: number; pool?: WorkerPool } = {}) {
    this.depth = opts.depth ?? 4;
    this.pool = opts.pool;
  }

  /** Create `bodies` (validated already) in `def`'s family; `ids` given (seeded models) or new. */
  create(def: ResourceDef, bodies: unknown[], ids?: string[]): Promise<string[]> {
    const newIds = bodies.map((_, k) => ids?.[k] ?? newId());
    const prepared = this.prepare(def, newIds, bodies);
    // Unhandled until its turn comes; its failure is the group's.
    prepared.catch(() => undefined);
    const turn = this.last.then(
      async () => this.hand(def, bodies, ids, newIds, await prepared),
      () => {
        throw new NotWritten('an earlier group failed');
      },
    );
    this.last = turn;
    turn.catch(() => undefined);
    return turn;
  }

  /** What the family's `beforeCreate` makes for each record, before the write (as a POST makes it). */
  private async prepare(def: ResourceDef, ids: string[], bodies: unknown[]): Promise<unknown[]> {
    // An identity's beforeCreate is newEnrollment(keysOf(app), enrollmentSpec(id, body)): the same
    // made for the whole group in one pool task, the signatures and sealing off this thread.
    if (this.pool && def.collection === 'identities') {
      const specs = bodies.map((body, k) => enrollmentSpec(ids[k], body));
      const wanted = specs.filter((s) => s !== undefined);
      const keys = keysOf(this.o.app);
      const made = wanted.length
        ? await this.pool.run('newEnrollments', { specs: wanted, serverKey: keys.pki.serverKey, kid: keys.pki.serverCertSha1Hex, issuer: keys.issuer(), lifetimeMs: keys.lifetimeMs, pkiDir: this.o.pkiDir })
        : [];
      let next = 0;
      return specs.map((s) => (s ? made[next++] : undefined));
    }
    return bodies.map((body, k) => {
      try {
        return def.beforeCreate?.(ids[k], body as Record<string, unknown>, this.o.writer);
      } catch (e) {
        throw new ImportError(k, e);
      }
    });
  }

  private async hand(def: ResourceDef, bodies: unknown[], ids: string[] | undefined, newIds: string[], prepared: unknown[]): Promise<string[]> {
    const { reg, writer, store } = this.o;
    const now = Date.now();
    let failed: ImportError | undefined;
    const put = (count: number, out: string[]) =>
      write(store, (tx) => {
        for (let k = 0; k < count; k++) {
          try {
            // Given ids repeat with their seed: a second model in the same store must not replace the first.
            if (ids && tx.exists(def.collection, ids[k])) throw new UniqueViolation(def.collection, 'id', ids[k]);
            out.push(createInTx(reg, def, writer, tx, newIds[k], now, bodies[k] as Record<string, unknown>, undefined, prepared[k]).id);
          } catch (e) {
            failed = new ImportError(k, e);
            throw e;
          }
        }
      });
    const out: string[] = [];
    const committed = put(bodies.length, out);
    if (failed) {
      // Nothing of the group was written; the API's rendering of the error (unique values) is kept.
      const { index, error } = failed;
      const shown = await committed.then(() => undefined, (err: unknown) => err);
      if (index > 0) this.track(put(index, []));
      throw new ImportError(index, error, shown);
    }
    this.track(committed);
    while (this.inFlight.length >= this.depth) await this.inFlight.shift();
    return out;
  }

  private track(committed: Promise<unknown>) {
    // Awaited in turn; a commit that fails meanwhile is not an unhandled rejection.
    committed.catch(() => undefined);
    this.inFlight.push(committed);
  }

  async drain(): Promise<void> {
    await this.last.catch(() => undefined);
    while (this.inFlight.length > 0) await this.inFlight.shift();
  }
}

export interface ImportOptions {
  dataDir?: string;
  /** Lines before this one (1-based) are skipped: resuming after a stop at a bad line. */
  fromLine?: number;
  /** Identities per write (default 1000). */
  batch?: number;
  env?: Record<string, string | undefined>;
}

/** `mesh import --data-dir DIR FILE`: see the top of this file. Resolves with the count imported. */
export async function importIdentities(file: string | undefined, opts: ImportOptions): Promise<number> {
  if (!file) throw usage('mesh import: which JSON-lines file?');
  const dataDir = dataDirOf(opts.dataDir);
  requireStore(dataDir);
  if (!fs.existsSync(file)) throw new CliError(`${file} does not exist`);
  const fromLine = opts.fromLine ?? 1;
  const batch = opts.batch ?? 1000;
  if (!Number.isInteger(fromLine) || fromLine < 1) throw usage('--from-line must be a positive line number');
  if (!Number.isInteger(batch) || batch < 1 || batch > 100_000) throw usage('--batch must be 1..100000');
  const lock = lockFor(dataDir, 'importing into it');
  const t0 = performance.now();
  let imported = 0;
  let open: OfflineApp | undefined;
  let pool: WorkerPool | undefined;
  try {
    open = await openOffline(dataDir, opts.env ?? process.env);
    const def = open.reg.def('identities');
    const validator = new BodyValidator('management');
    // The enrollments' signatures and sealing on the other cores; this thread reads, validates and writes.
    const threads = Math.max(1, os.availableParallelism() - 1);
    pool = new WorkerPool({ threads, maxQueue: 4 * threads + 8 });
    const writer = new BulkWriter(open, { pool });
    let bodies: unknown[] = [];
    let lines: number[] = [];
    /** Groups given to the writer, oldest first: a few ahead, so that the workers always have one. */
    const given: { written: Promise<string[]>; lines: number[] }[] = [];
    let reported = performance.now();
    /** Waits for the oldest group; on a bad record, what came before it is written, and the import stops there. */
    const settle = async () => {
      const g = given.shift()!;
      try {
        await g.written;
      } catch (e) {
        if (!(e instanceof ImportError)) throw e;
        imported += e.index;
        given.length = 0;
        return stopAt(g.lines[e.index], e.message);
      }
      imported += g.lines.length;
      if (performance.now() - reported > 5000) {
        reported = performance.now();
        process.stderr.write(`mesh import: ${imported} identities so far (line ${g.lines[g.lines.length - 1]})\n`);
      }
    };
    const flush = async () => {
      if (bodies.length) given.push({ written: writer.create(def, bodies), lines });
      [bodies, lines] = [[], []];
      while (given.length > threads + 1) await settle();
    };
    const stopAt = async (line: number, why: string): Promise<never> => {
      await writer.drain();
      throw new CliError(
        `${file} line ${line}: ${why}\n${imported} identities before it are imported${line > 1 ? `; fix the line and go on with --from-line ${line}` : ''}`,
      );
    };
    const input = readline.createInterface({ input: fs.createReadStream(file, { encoding: 'utf8' }), crlfDelay: Infinity });
    let n = 0;
    for await (const text of input) {
      n++;
      if (n < fromLine || text.trim() === '') continue;
      let body: unknown;
      try {
        body = validator.validate('identityCreate', JSON.parse(text), false, true);
      } catch (e) {
        await flush();
        while (given.length) await settle();
        return await stopAt(n, e instanceof SyntaxError ? `not JSON: ${e.message}` : describeError(e));
      }
      bodies.push(body);
      lines.push(n);
      if (bodies.length >= batch) await flush();
    }
    await flush();
    while (given.length) await settle();
    await writer.drain();
    await open.store.closeCompacted();
  } finally {
    await pool?.close();
    await open?.store.close();
    if (imported > 0)
      await auditOffline(dataDir, {
        operation: 'importIdentities',
        family: 'identities',
        entityId: null,
        command: 'mesh import',
        changes: { file: path.resolve(file), fromLine, imported },
      });
    lock.release();
  }
  const seconds = (performance.now() - t0) / 1000;
  process.stdout.write(`imported ${imported} identities from ${file} into ${dataDir} in ${seconds.toFixed(1)} s (${Math.round(imported / seconds)}/s)\n`);
  return imported;
}
