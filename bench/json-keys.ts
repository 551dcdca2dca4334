/**
 * bench/json-keys — what refusing duplicate member names (src/api/json-keys.ts) adds to reading a
 * body, on typical bodies of the hot path (a login with envInfo/sdkInfo, a session create) and of
 * writes (an identity create, a policy with 50 roles), in-process on one core: JSON.parse alone,
 * JSON.parse + the router's hostile-value walk (what runs today), + the duplicate check, and, to
 * compare with a well-kept library, jsonc-parser's visitor counting names (when installed).
 *
 *   npx tsc -p tsconfig.json && node dist/bench/json-keys.js          # a second or two
 *   node dist/bench/json-keys.js --ms 100                            # longer per case and round
 */
import { hostileJson } from '../src/api/router.js';
import { duplicateKey } from '../src/api/json-keys.js';
import { machineInfo, writeResults } from './lib/report.js';

const msArg = process.argv.indexOf('--ms');
const MS = msArg > 0 ? Number(process.argv[msArg + 1]) : 15;

const bodies: Record<string, Buffer> = {
  login: Buffer.from(JSON.stringify({
    username: 'device-0042', password: 'correct horse battery staple', configTypes: ['all'],
    envInfo: { arch: 'amd64', os: 'linux', osRelease: '6.1.0-18-amd64', osVersion: '#1 SMP Debian 6.1.76-1', hostname: 'laptop-42', domain: 'corp.example' },
    sdkInfo: { appId: 'tunnel', appVersion: '1.2.3', branch: 'main', revision: 'abcdef0', type: 'ziti-sdk-golang', version: '0.28.0' },
  })),
  session: Buffer.from(JSON.stringify({ serviceId: '3k1Xv9Q2pL', type: 'Dial' })),
  identity: Buffer.from(JSON.stringify({ name: 'alice', type: 'User', isAdmin: false, roleAttributes: ['eng', 'vpn'], tags: { team: 'core', cost: 'x1' }, appData: {}, authPolicyId: 'default' })),
  policy: Buffer.from(JSON.stringify({ name: 'p', type: 'Dial', semantic: 'AnyOf', identityRoles: Array.from({ length: 50 }, (_, i) => `#group-${i}`), serviceRoles: ['#all'], postureCheckRoles: [], tags: {} })),
};

type Step = (b: Buffer) => unknown;
const steps: Record<string, Step> = {
  'JSON.parse': (b) => JSON.parse(b.toString('utf8')),
  '+ hostile walk (today)': (b) => {
    const v = JSON.parse(b.toString('utf8'));
    return hostileJson(v) ?? v;
  },
  '+ duplicate check': (b) => {
    const v = JSON.parse(b.toString('utf8'));
    return hostileJson(v) ?? duplicateKey(b, v) ?? v;
  },
  'duplicate check alone': (b) => duplicateKey(b, parsed.get(b)),
};
const parsed = new Map(Object.values(bodies).map((b) => [b, JSON.parse(b.toString('utf8'))]));

try {
  const jsonc = await import('jsonc-parser');
  steps['jsonc-parser visit (names counted)'] = (b) => {
    let n = 0;
    jsonc.visit(b.toString('utf8'), { onObjectProperty: () => void n++ });
    return n;
  };
} catch {
  console.log('(jsonc-parser not installed: compared with JSON.parse only)');
}

/** CPU time per call (the machine may be shared: wall time would count other processes). */
function nsPerOp(step: Step, body: Buffer): number {
  for (let i = 0; i < 2000; i++) step(body); // warm up
  let n = 0;
  const start = process.cpuUsage();
  let used = 0;
  while (used < MS * 1000) {
    for (let i = 0; i < 200; i++) step(body);
    n += 200;
    const u = process.cpuUsage(start);
    used = u.user + u.system;
  }
  return (used * 1000) / n;
}

/** The best of ROUNDS interleaved rounds: the least disturbed figure of each. */
const ROUNDS = 5;
const best = new Map<string, number>();
for (let r = 0; r < ROUNDS; r++) {
  for (const [name, body] of Object.entries(bodies)) {
    for (const [label, step] of Object.entries(steps)) {
      const key = `${name}/${label}`;
      best.set(key, Math.min(best.get(key) ?? Infinity, nsPerOp(step, body)));
    }
  }
}

const rows: string[][] = [['body', 'bytes', ...Object.keys(steps).map((s) => `${s} ns`), 'check alone / JSON.parse']];
for (const [name, body] of Object.entries(bodies)) {
  const ns = Object.keys(steps).map((label) => best.get(`${name}/${label}`)!);
  rows.push([name, String(body.length), ...ns.map((x) => x.toFixed(0)), `${((ns[3] / ns[0]) * 100).toFixed(0)}%`]);
}
const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => r[c].length)));
for (const r of rows) console.log(r.map((x, c) => x.padStart(widths[c])).join('  '));

// Every figure with its ratio to the same run's ceiling: JSON.parse of the same body, in-process.
const results = Object.fromEntries(Object.entries(bodies).map(([name, body]) => {
  const ceiling = best.get(`${name}/JSON.parse`)!;
  return [name, {
    bytes: body.length,
    ceiling: { what: 'JSON.parse alone', nsPerCall: ceiling },
    steps: Object.fromEntries(Object.keys(steps).map((label) => {
      const ns = best.get(`${name}/${label}`)!;
      return [label, { nsPerCall: ns, ratioToCeiling: ns / ceiling }];
    })),
  }];
}));
console.log(`results: ${writeResults('json-keys', { machine: machineInfo(), msPerCase: MS, rounds: ROUNDS, results })}`);
