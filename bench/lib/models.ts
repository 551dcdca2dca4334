/**
 * A model in a data directory for a benchmark: copied from a kept one (`--models DIR`: DIR/<identities>)
 * when there, else a first start and the model written straight into the store, then kept when asked.
 * A million identities take minutes to write and the ids follow from the seed, so runs reuse them.
 *
 *   const { summary, writeMs } = await preparedModel(shape, dataDir, { seed: 1, password, modelsDir });
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { spawnController } from './controller.js';
import { SHAPES, storeModelSummary, writeModelToStore, type ModelSummary, type Shape } from '../../scripts/lib/model.js';

/** The shape for an identity count: the large shape's services, routers and policies (large and huge by name). */
export function shapeFor(identities: number): Shape {
  const named = Object.values(SHAPES).find((s) => s.identities === identities && s.services === SHAPES.large.services);
  return named ?? { ...SHAPES.large, name: `large-${identities}`, identities };
}

export interface PreparedModel {
  summary: ModelSummary;
  /** Set when the model was written by this run (not copied). */
  writeMs?: number;
}

export async function preparedModel(shape: Shape, dataDir: string, opts: { seed: number; password: string; modelsDir?: string; env?: Record<string, string> }): Promise<PreparedModel> {
  const kept = opts.modelsDir ? path.join(opts.modelsDir, String(shape.identities)) : undefined;
  fs.mkdirSync(dataDir, { recursive: true });
  if (kept && fs.existsSync(path.join(kept, 'db'))) {
    execFileSync('cp', ['-a', '--reflink=auto', `${kept}/.`, dataDir]);
    return { summary: storeModelSummary(shape, opts.seed) };
  }
  const first = await spawnController({ password: opts.password, env: opts.env, dataDir, keepData: true });
  await first.stop();
  const summary = await writeModelToStore(dataDir, shape, { seed: opts.seed, env: { MESH_ADMIN_PASSWORD: opts.password, MESH_ADDRESS: '127.0.0.1:0' } });
  if (kept) {
    fs.mkdirSync(kept, { recursive: true });
    execFileSync('cp', ['-a', '--reflink=auto', `${dataDir}/.`, kept]);
  }
  return { summary, writeMs: summary.elapsedMs };
}
