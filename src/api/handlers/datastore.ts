/**
 * Datastore integrity check/fix and snapshots:
 * - `POST /database/check-data-integrity` and `POST /database/fix-data-integrity` start a run in the
 *   background and answer 202; while one runs (check or fix) both answer 429 RATE_LIMITED.
 * - `GET /database/data-integrity-results` reads the current (or last) run, also while it runs.
 * - `POST /database/snapshot` writes a backup (datastore, PKI, manifest; src/store/snapshot.ts)
 *   under `<dataDir>/snapshots`, the file `mesh restore` reads; more than one a minute is 429 RATE_LIMITED.
 * The fabric API's database operations are these same entries (one run at a time and one snapshot
 * a minute across both APIs); its `POST /database/snapshot` answers the file's path and refuses a
 * `path` (snapshots are written under the data directory only).
 * One integrity run and one snapshot schedule per controller: the state lives in the closure of
 * `datastoreEntries`, built once per operation table.
 */
import path from 'node:path';
import type { Ctx, Entry, Handler } from '../context.js';
import type { Reply } from '../../core/operation.js';
import type { Registry } from '../../resources/registry.js';
import { empty, envelope, ok } from '../../core/envelope.js';
import { errors } from '../../core/errors.js';
import { emptyState, runIntegrity, type IntegrityState } from '../../store/integrity.js';
import { Snapshots, SnapshotTooSoon } from '../../store/snapshot.js';
import { integrityChecks } from '../../resources/integrity-rules.js';

/** Go's zero time: what upstream reports for a run that never started or has not ended. */
const ZERO_TIME = '0001-01-01T00:00:00.000Z';

function renderIntegrity(s: IntegrityState) {
  return {
    inProgress: s.inProgress,
    fixingErrors: s.fixingErrors,
    startTime: s.startTime === null ? ZERO_TIME : new Date(s.startTime).toISOString(),
    endTime: s.endTime === null ? ZERO_TIME : new Date(s.endTime).toISOString(),
    error: s.error ?? '',
    tooManyErrors: s.tooManyErrors,
    results: s.results.map((r) => ({ ...r })),
  };
}

export function datastoreEntries(reg: Registry): Entry[] {
  // One run at a time per controller: the handlers are built once per App.
  const state = emptyState();
  let running: Promise<void> | undefined;
  let snapshots: Snapshots | undefined;

  const start = (ctx: Ctx, fix: boolean): Reply => {
    if (running) throw errors.rateLimited();
    state.inProgress = true;
    state.fixingErrors = fix;
    const app = ctx.app;
    running = runIntegrity(app.store, state, integrityChecks(reg), { fix }).finally(() => {
      running = undefined;
      app.log.info({ fix, problems: state.results.length, fixed: state.results.filter((r) => r.fixed).length, error: state.error }, 'data integrity run finished');
    });
    return empty(202);
  };

  const results: Handler = () => {
    const data = renderIntegrity(state);
    return envelope(data, { pagination: { limit: -1, offset: 0, totalCount: data.results.length } });
  };
  const takeSnapshot: Handler = async (ctx) => {
    const app = ctx.app;
    snapshots ??= new Snapshots(app.store, path.resolve(app.config.dataDir), {
      minIntervalMs: 60_000,
      keep: app.config.snapshotsKeep,
      controllerVersion: app.version,
    });
    let where: string;
    try {
      where = await snapshots.create();
      app.log.info({ path: where }, 'database snapshot created');
    } catch (e) {
      if (e instanceof SnapshotTooSoon) throw errors.rateLimited();
      throw e;
    }
    // Upstream's empty answer, plus the file's name (under <dataDir>/snapshots) for `mesh snapshot`.
    return { ...empty(), headers: { 'mesh-snapshot': path.basename(where) } };
  };

  // The same operations in both specs (the join at start-up checks it).
  const entries: Entry[] = [];
  for (const api of ['management', 'fabric'] as const) {
    entries.push(
      { api, operationId: 'checkDataIntegrity', auth: 'admin', permission: null, handler: (ctx) => start(ctx, false) },
      { api, operationId: 'fixDataIntegrity', auth: 'admin', permission: null, handler: (ctx) => start(ctx, true) },
      { api, operationId: 'dataIntegrityResults', auth: 'admin', permission: null, handler: results },
      { api, operationId: 'createDatabaseSnapshot', auth: 'admin', permission: null, handler: takeSnapshot },
    );
  }
  entries.push({ api: 'fabric', operationId: 'createDatabaseSnapshotWithPath', auth: 'admin', permission: null, body: 'optional',
    handler: async (ctx) => {
      const asked = ctx.body?.path;
      if (typeof asked === 'string' && asked !== '')
        throw errors.field('path', 'snapshots are written under the data directory (snapshots/); leave path empty', asked);
      const reply = await takeSnapshot(ctx);
      return ok({ path: path.join(path.resolve(ctx.app.config.dataDir), 'snapshots', reply.headers!['mesh-snapshot']!) });
    } });
  return entries;
}
