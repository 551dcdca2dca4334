/**
 * Top talkers of the last 24 hours: sends the seed's top-talkers query (firewall, then source
 * address, ordered by summed transmit or receive usage) to a search endpoint — the controller's
 * `https://<address>/search` or an external Elasticsearch/OpenSearch the controller exports to —
 * and prints the answer as a table.
 *
 *   npm run build && node dist/scripts/top-talkers.js --url https://ctrl:1280/search \
 *     --user ops-reader --password '…' [--ca ca-bundle.pem | --insecure] [--by tx|rx] \
 *     [--hours 24] [--firewalls 10] [--sources 10] [--index 'zfw.events*']
 *
 * The password may come from MESH_SEARCH_PASSWORD instead of the command line. Exit status 0 on
 * success, 1 when the search fails (the error is printed), 2 on bad arguments.
 */
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';

interface Args {
  url: string;
  user?: string;
  password?: string;
  ca?: string;
  insecure: boolean;
  by: 'tx' | 'rx';
  hours: number;
  firewalls: number;
  sources: number;
  index: string;
}

function usage(msg: string): never {
  process.stderr.write(`top-talkers: ${msg}\nusage: top-talkers --url <search url> [--user U --password P] [--ca file | --insecure] [--by tx|rx] [--hours N] [--firewalls N] [--sources N] [--index pattern]\n`);
  process.exit(2);
}

function parseArgs(argv: string[]): Args {
  const a: Partial<Args> & { insecure: boolean } = { insecure: false, by: 'tx', hours: 24, firewalls: 10, sources: 10, index: 'zfw.events*' };
  for (let i = 0; i < argv.length; i++) {
    const k = argv[i];
    const v = () => {
      const x = argv[++i];
      if (x === undefined) usage(`${k} needs a value`);
      return x;
    };
    const n = () => {
      const x = Number(v());
      if (!Number.isInteger(x) || x < 1) usage(`${k} must be a positive integer`);
      return x;
    };
    switch (k) {
      case '--url': a.url = v(); break;
      case '--user': a.user = v(); break;
      case '--password': a.password = v(); break;
      case '--ca': a.ca = v(); break;
      case '--insecure': a.insecure = true; break;
      case '--by': { const b = v(); if (b !== 'tx' && b !== 'rx') usage('--by must be tx or rx'); a.by = b; break; }
      case '--hours': a.hours = n(); break;
      case '--firewalls': a.firewalls = n(); break;
      case '--sources': a.sources = n(); break;
      case '--index': a.index = v(); break;
      case '-h': case '--help': usage('help');
      default: usage(`unknown argument ${k}`);
    }
  }
  if (!a.url) usage('--url is required');
  a.password ??= process.env.MESH_SEARCH_PASSWORD;
  return a as Args;
}

/** The seed's top-talkers request: time filter, firewall → source address, summed usage. */
function topTalkersQuery(by: 'tx' | 'rx', hours: number, firewalls: number, sources: number) {
  return {
    query: { bool: { filter: [{ range: { '@timestamp': { format: 'strict_date_optional_time', gte: `now-${hours}h`, lte: 'now' } } }] } },
    aggs: {
      firewalls: {
        terms: { field: 'zfw.source_id.keyword', order: { [by]: 'desc' }, size: firewalls },
        aggs: {
          [by]: { sum: { field: `zfw.usage.circuit.${by}` } },
          sources: {
            terms: { field: 'zfw.saddr.keyword', order: { [by]: 'desc' }, size: sources },
            aggs: { tx: { sum: { field: 'zfw.usage.circuit.tx' } }, rx: { sum: { field: 'zfw.usage.circuit.rx' } } },
          },
        },
      },
    },
    size: 0,
  };
}

function request(a: Args, body: string): Promise<{ status: number; text: string }> {
  const url = new URL(a.url.replace(/\/+$/, '') + '/' + encodeURIComponent(a.index).replace(/%2A/g, '*') + '/_search');
  const headers: Record<string, string> = { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) };
  if (a.user !== undefined) headers.authorization = 'Basic ' + Buffer.from(`${a.user}:${a.password ?? ''}`).toString('base64');
  const lib = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = lib.request(
      url,
      { method: 'GET', headers, ca: a.ca ? fs.readFileSync(a.ca) : undefined, rejectUnauthorized: !a.insecure, timeout: 30_000 },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.on('error', reject);
    req.end(body);
  });
}

const fmt = (n: unknown) => (typeof n === 'number' ? String(Math.round(n)) : '-');

function table(answer: any, by: 'tx' | 'rx'): string {
  const rows: string[][] = [['FIREWALL', 'SOURCE', 'TX', 'RX', 'DOCS']];
  for (const fw of answer?.aggregations?.firewalls?.buckets ?? []) {
    for (const s of fw.sources?.buckets ?? []) rows.push([String(fw.key), String(s.key), fmt(s.tx?.value), fmt(s.rx?.value), String(s.doc_count)]);
  }
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
  const lines = rows.map((r) => r.map((c, i) => (i >= 2 ? c.padStart(widths[i]) : c.padEnd(widths[i]))).join('  ').trimEnd());
  if (rows.length === 1) lines.push(`(no usage in the period; ordered by ${by})`);
  return lines.join('\n') + '\n';
}

async function main() {
  const a = parseArgs(process.argv.slice(2));
  let res;
  try {
    res = await request(a, JSON.stringify(topTalkersQuery(a.by, a.hours, a.firewalls, a.sources)));
  } catch (e) {
    process.stderr.write(`top-talkers: ${(e as Error).message}\n`);
    process.exit(1);
  }
  let answer: any;
  try {
    answer = JSON.parse(res.text);
  } catch {
    answer = undefined;
  }
  if (res.status !== 200 || !answer) {
    const reason = answer?.error?.reason ?? answer?.error ?? res.text.slice(0, 300);
    process.stderr.write(`top-talkers: search failed with HTTP ${res.status}: ${typeof reason === 'string' ? reason : JSON.stringify(reason)}\n`);
    process.exit(1);
  }
  process.stdout.write(table(answer, a.by));
}

void main();
