/**
 * scripts/generate-model — write a benchmark model of a named shape (scripts/lib/model.ts).
 *
 *   npm run generate-model -- --shape large --seed 1 --data-dir /tmp/mesh-large      # before the first start
 *   npm run generate-model -- --shape medium --url https://127.0.0.1:1280 --ca data/pki/ca-bundle.pem
 *
 * Flags (env in brackets):
 *   --shape NAME        tiny | small | medium | large | huge | many-services     default medium
 *   --seed N            same seed → same names, attributes and policies           default 1
 *   --data-dir DIR      write straight into this data directory's store (no controller may run on it);
 *                       MESH_* settings in the environment apply as the controller will see them:
 *                       MESH_ADMIN_PASSWORD (else a random one is printed once), MESH_ADDRESS or
 *                       MESH_ADVERTISED_ADDRESS (the issuer of the enrollment JWTs), MESH_ENROLLMENT_MINUTES
 *   --url URL           … or create it through the Management API of a running controller
 *   --ca FILE           CA bundle of that controller (default <MESH_DATA_DIR>/pki/ca-bundle.pem)
 *   --username U        admin username for --url [MESH_ADMIN_USERNAME]             default admin
 *   --password P        admin password for --url [MESH_ADMIN_PASSWORD]
 *   --concurrency C     concurrent requests for --url                              default 16
 *   --summary FILE      also write the summary (counts, ids, worst-case identity) as JSON
 *
 * Progress goes to stderr; the summary (without the id lists) to stdout.
 */
import fs from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { shapeByName, writeModelToStore, writeModelViaApi, type ModelSummary } from './lib/model.js';

const { values: argv } = parseArgs({
  options: {
    shape: { type: 'string', default: 'medium' },
    seed: { type: 'string', default: '1' },
    'data-dir': { type: 'string' },
    url: { type: 'string' },
    ca: { type: 'string' },
    username: { type: 'string' },
    password: { type: 'string' },
    concurrency: { type: 'string', default: '16' },
    summary: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
  strict: true,
});

function usage(): string {
  const src = fs.readFileSync(new URL(import.meta.url), 'utf8');
  return (/\/\*\*([\s\S]*?)\*\//.exec(src)?.[1] ?? '').replace(/^ \* ?/gm, '');
}

/** One line on stderr, redrawn in place on a terminal: `[#####-----] 52% 2,600/5,000 1,234/s`. */
function progressBar(label: string) {
  const t0 = performance.now();
  const tty = process.stderr.isTTY;
  let lastPrint = 0;
  return (done: number, total: number) => {
    const now = performance.now();
    if (done < total && now - lastPrint < (tty ? 100 : 2000)) return;
    lastPrint = now;
    const width = 30;
    const fill = Math.round((done / total) * width);
    const rate = Math.round(done / ((now - t0) / 1000 || 1));
    const line = `${label} [${'#'.repeat(fill)}${'-'.repeat(width - fill)}] ${Math.floor((done / total) * 100)}% ${done.toLocaleString('en')}/${total.toLocaleString('en')} ${rate.toLocaleString('en')}/s`;
    process.stderr.write(tty ? `\r${line}${done >= total ? '\n' : ''}` : line + '\n');
  };
}

async function login(url: URL, ca: Buffer, username: string, password: string): Promise<string> {
  const data = Buffer.from(JSON.stringify({ username, password }));
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port || 443), method: 'POST', path: '/edge/management/v1/authenticate?method=password', ca,
        headers: { 'content-type': 'application/json', accept: 'application/json', 'content-length': String(data.length) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          try {
            const token = JSON.parse(text)?.data?.token;
            if (res.statusCode === 200 && typeof token === 'string') return resolve(token);
          } catch {
            /* reported below */
          }
          reject(new Error(`login as ${username} failed: ${res.statusCode} ${text.slice(0, 300)}`));
        });
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

async function main() {
  if (argv.help) {
    process.stdout.write(usage());
    return;
  }
  const shape = shapeByName(argv.shape!);
  const seed = Number(argv.seed);
  if (!Number.isSafeInteger(seed) || seed < 0) throw new Error('--seed must be a non-negative integer');
  if (!!argv['data-dir'] === !!argv.url) throw new Error('give exactly one of --data-dir and --url (see --help)');
  const concurrency = Number(argv.concurrency);
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 256) throw new Error('--concurrency must be 1..256');

  const counts = `${shape.identities} identities, ${shape.services} services, ${shape.edgeRouters} edge routers, ${shape.servicePolicies}/${shape.edgeRouterPolicies}/${shape.serviceEdgeRouterPolicies} policies`;
  process.stderr.write(`model "${shape.name}" (${counts}), seed ${seed}\n`);
  let summary: ModelSummary;
  if (argv['data-dir']) {
    const dir = path.resolve(argv['data-dir']);
    summary = await writeModelToStore(dir, shape, { seed, env: process.env, onProgress: progressBar('writing to store') });
  } else {
    const url = new URL(argv.url!);
    if (url.protocol !== 'https:') throw new Error('--url must be https://host:port');
    const caFile = argv.ca ?? (process.env.MESH_DATA_DIR ? path.join(process.env.MESH_DATA_DIR, 'pki', 'ca-bundle.pem') : undefined);
    if (!caFile) throw new Error('--ca FILE is required with --url (the controller\'s pki/ca-bundle.pem)');
    const ca = fs.readFileSync(caFile);
    const password = argv.password ?? process.env.MESH_ADMIN_PASSWORD;
    if (!password) throw new Error('--password (or MESH_ADMIN_PASSWORD) is required with --url');
    const token = await login(url, ca, argv.username ?? process.env.MESH_ADMIN_USERNAME ?? 'admin', password);
    summary = await writeModelViaApi(url.origin, token, shape, { seed, ca, concurrency, onProgress: progressBar('creating via API') });
  }
  if (argv.summary) fs.writeFileSync(argv.summary, JSON.stringify(summary, null, 2) + '\n');
  const { ids: _ids, ...short } = summary;
  process.stdout.write(JSON.stringify(short, null, 2) + '\n');
}

main().catch((e) => {
  process.stderr.write(`generate-model: ${e?.message ?? e}\n`);
  process.exitCode = 1;
});

