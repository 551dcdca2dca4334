/**
 * The data directory's format version and the migrations between versions.
 *
 * `<dataDir>/format.json` records `{ "format": N }`. A directory with a datastore and no such file
 * was written before versions were recorded: format 1. At start the controller runs, in order,
 * every migration whose `to` is above the directory's format, recording each step as it completes
 * (an interrupted upgrade resumes at the step that did not finish), and refuses a directory of a
 * newer format than it knows, since it cannot read what that format changed.
 *
 * The steps themselves are listed above the store (src/migrations.ts), since a step may need what
 * the resource layer knows; this file holds the format number and the machinery. Adding a
 * migration is one entry at the end of that list and CURRENT_FORMAT raised to its `to`.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Store } from './store.js';

export const FORMAT_FILE = 'format.json';

/** What a migration may use: the opened datastore and the data directory (PKI, other files). */
export interface MigrationContext {
  dataDir: string;
  store: Store;
  log: { info(o: object, msg?: string): void };
}

export interface Migration {
  /** The format the directory has once this migration ran. */
  to: number;
  description: string;
  run(ctx: MigrationContext): void | Promise<void>;
}

/** The format this controller writes: the `to` of the last migration in src/migrations.ts. */
export const CURRENT_FORMAT = 6;

export class DataFormatError extends Error {}

/** The directory's format: undefined for a new directory (no datastore yet). */
export function readDataFormat(dataDir: string): number | undefined {
  const file = path.join(dataDir, FORMAT_FILE);
  if (!fs.existsSync(file)) return fs.existsSync(path.join(dataDir, 'db')) ? 1 : undefined;
  let format: unknown;
  try {
    format = JSON.parse(fs.readFileSync(file, 'utf8')).format;
  } catch (e) {
    throw new DataFormatError(`${file}: ${(e as Error).message}`);
  }
  if (!Number.isInteger(format) || (format as number) < 1) throw new DataFormatError(`${file}: "format" must be a whole number of at least 1`);
  return format as number;
}

export function writeDataFormat(dataDir: string, format: number): void {
  const file = path.join(dataDir, FORMAT_FILE);
  fs.writeFileSync(file + '.tmp', JSON.stringify({ format }) + '\n');
  fs.renameSync(file + '.tmp', file);
}

/** Refuse a directory of a newer format before anything in it is opened. Returns its format. */
export function checkDataFormat(dataDir: string, version: string): number | undefined {
  const format = readDataFormat(dataDir);
  if (format !== undefined && format > CURRENT_FORMAT)
    throw new DataFormatError(
      `data directory ${dataDir} has data format ${format}, written by a newer controller; this controller (${version}) reads format ${CURRENT_FORMAT} and older. ` +
        'Run the newer controller, or restore a backup taken before the upgrade.',
    );
  return format;
}

/** Bring the directory to CURRENT_FORMAT; a new directory is simply marked current. Returns the steps run. */
export async function migrate(ctx: MigrationContext, from: number | undefined, migrations: Migration[]): Promise<Migration[]> {
  const target = migrations[migrations.length - 1].to;
  if (from === undefined) {
    writeDataFormat(ctx.dataDir, target);
    return [];
  }
  const steps = migrations.filter((m) => m.to > from);
  let at = from;
  for (const m of steps) {
    ctx.log.info({ from: at, to: m.to, migration: m.description }, 'migrating the data directory');
    await m.run(ctx);
    writeDataFormat(ctx.dataDir, m.to);
    at = m.to;
  }
  return steps;
}
