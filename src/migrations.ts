/**
 * The data directory's migrations, in order (the machinery and the format number are in
 * src/store/data-format.ts). Each step brings a directory from the previous format to `to`.
 */
import { CURRENT_FORMAT, type Migration } from './store/data-format.js';
import { migrateBuiltinConfigTypeIds } from './resources/config-type-ids-migration.js';
import { sealSecretsAtRest } from './resources/seal-secrets-migration.js';
import { indexTraces } from './resources/trace-index-migration.js';

export const MIGRATIONS: Migration[] = [
  // Format 1 had no version file; format 2 is the same data with `format.json` written.
  { to: 2, description: 'record the data format version in format.json', run: () => {} },
  {
    to: 3,
    description: "built-in config types under upstream's ids and full schemas",
    run: async ({ store, log }) => {
      const moved = await migrateBuiltinConfigTypeIds(store);
      log.info({ moved }, 'built-in config types moved to their upstream ids');
    },
  },
  {
    to: 4,
    description: 'enrollment tokens stored as digests; enrollment JWTs, TOTP secrets and recovery codes sealed under pki/secrets.key',
    run: async ({ store, log }) => {
      const rewritten = await sealSecretsAtRest(store);
      log.info(rewritten, 'secrets sealed at rest');
    },
  },
  // Nothing to rewrite: records written before read as they are, and every write stores the shared
  // form. The number is what matters: a controller of format 4 or older cannot read the new form,
  // so it refuses the directory instead of misreading it.
  { to: 5, description: 'records name a msgpack shape shared per collection (src/store/store.ts STRUCTURES)', run: () => {} },
  // A controller of format 5 would write traces without the indexed field: it must not open the directory again.
  {
    to: 6,
    description: 'identity traces in force indexed by traceUntil (a start reads only traced identities)',
    run: async ({ store, log }) => {
      const indexed = await indexTraces(store);
      log.info({ indexed }, 'identity traces indexed');
    },
  },
];

if (MIGRATIONS[MIGRATIONS.length - 1].to !== CURRENT_FORMAT)
  throw new Error(`the last migration leads to format ${MIGRATIONS[MIGRATIONS.length - 1].to}, but CURRENT_FORMAT is ${CURRENT_FORMAT}`);
