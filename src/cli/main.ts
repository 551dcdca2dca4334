#!/usr/bin/env node
/**
 * `mesh`: the operator's command for a mesh controller (`npx mesh …` in a checkout, after
 * `npm install`). Online commands use the session of `mesh login`; offline commands work on a
 * data directory. Every command has `--help`; bad input is a message and exit code 2, a failed
 * operation a message and exit code 1.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import fs from 'node:fs';
import { CliError, loadSession, usage } from './state.js';
import { RESOURCE_HELP } from './help.js';
import { api } from './http.js';

// Each command loads only what it uses: the specs, LMDB and the datastore cost ~1 s to load.
const resources = () => import('./resources.js');
const login = () => import('./login.js');
const offline = () => import('./offline.js');

const HELP: Record<string, string> = {
  login: 'mesh login URL [-u USER] [-p PASSWORD] [-y]\n  Trusts the controller\'s CA bundle (shown by fingerprint; -y accepts without asking) and logs in with a password on the Management API.\nmesh login --identity IDENTITY.json [URL]\n  Logs in with an enrolled identity\'s certificate on the Client API (URL: the certificate listener, default the file\'s).',
  ...RESOURCE_HELP,
  enroll: 'mesh enroll JWTFILE --out IDENTITY.json\n  Enrolls with a one-time-token JWT: makes a key and CSR, checks the JWT against the controller, writes the identity file (certificate, key, CA bundle, URL).',
  snapshot: 'mesh snapshot\n  Asks the controller for a backup of its datastore and PKI (POST /database/snapshot), written under <dataDir>/snapshots on the controller.',
  backup: 'mesh backup --data-dir DIR [--out FILE]\n  Writes a backup of a data directory (datastore copy, PKI, manifest with checksums); safe while the controller runs.',
  restore: 'mesh restore --data-dir DIR FILE [--replace]\nmesh restore --check FILE\n  Checks a backup (manifest, every checksum) and restores it into DIR with its controller stopped; --replace moves an existing datastore aside.',
  status: 'mesh status --data-dir DIR [--json]\n  Data format, controller id, CAs, datastore size, snapshots, audit files, whether a controller runs there.',
  import: 'mesh import --data-dir DIR FILE [--from-line N] [--batch N]\n  Creates identities in a stopped controller\'s data directory from a JSON-lines file, one POST /identities body per line (docs/cli.md). Stops at the first bad line, naming it; --from-line N goes on from there.',
  admin: 'mesh admin reset-password --data-dir DIR --username U --password P\n  Sets a password in the datastore directly (the controller stopped): the way back in when the admin password is lost.',
  whoami: 'mesh whoami\n  Shows the identity of the saved session.',
};

const USAGE = `Usage: mesh COMMAND [ARGS] [--help]

Online (after \`mesh login\`):
  login URL -u USER -p PASSWORD -y      log in (and trust the controller's CA)
  login --identity FILE [URL]           log in with an enrolled identity's certificate
  whoami                                the logged-in identity
  list FAMILY [FILTER] [--json]         list a Management API family (identities, services, …)
  get|update|delete FAMILY ID|NAME      one entity
  create FAMILY [NAME] [--PROP VALUE]   create (e.g. create identity d1 --type Device --jwt-out d1.jwt)
  enroll JWTFILE --out IDENTITY.json    enroll a device with a one-time token
  snapshot                              backup on the controller (POST /database/snapshot)

Offline, on a data directory:
  backup --data-dir DIR --out FILE      backup of the datastore and the PKI
  restore --data-dir DIR FILE           restore a backup (checked first)
  status --data-dir DIR                 what is in a data directory
  admin reset-password --data-dir DIR --username U --password P
  import --data-dir DIR FILE            create identities from a JSON-lines file

\`mesh COMMAND --help\` for one command. State: $XDG_CONFIG_HOME/mesh (or ~/.config/mesh).
`;

function parse(argv: string[], options: ParseArgsConfig['options'], command: string): { values: Record<string, any>; positionals: string[] } {
  try {
    return parseArgs({ args: argv, options: { ...options, help: { type: 'boolean', short: 'h' } }, allowPositionals: true, strict: true });
  } catch (e) {
    throw usage(`mesh ${command}: ${(e as Error).message}\n\n${HELP[command] ?? USAGE}`);
  }
}

async function run(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(USAGE);
    return;
  }
  if (command === '--version' || command === '-v') {
    const pkg = new URL(import.meta.url.includes('/dist/src/') ? '../../../package.json' : '../../package.json', import.meta.url);
    process.stdout.write(`mesh v${JSON.parse(fs.readFileSync(pkg, 'utf8')).version}\n`);
    return;
  }
  if (['list', 'get', 'create', 'update', 'delete'].includes(command)) return (await resources()).resourceCommand(command as 'list', rest);
  const help = () => void process.stdout.write(HELP[command] + '\n');
  switch (command) {
    case 'login': {
      const { values, positionals } = parse(rest, { username: { type: 'string', short: 'u' }, password: { type: 'string', short: 'p' }, yes: { type: 'boolean', short: 'y' }, identity: { type: 'string' } }, command);
      if (values.help) return help();
      if (positionals.length > 1) throw usage(`mesh login: one URL only\n\n${HELP.login}`);
      if (values.identity) return (await login()).certificateLogin(values.identity as string, positionals[0]);
      if (!positionals[0]) throw usage(`mesh login: the controller URL is missing\n\n${HELP.login}`);
      return (await login()).passwordLogin(positionals[0], { username: values.username as string | undefined, password: values.password as string | undefined, yes: values.yes as boolean | undefined });
    }
    case 'whoami': {
      const { values } = parse(rest, {}, command);
      if (values.help) return help();
      const s = loadSession();
      const r = await api(s, 'GET', '/current-identity');
      process.stdout.write(`${r.body.data.name} (${r.body.data.id}) on ${s.url}, ${s.api} API\n`);
      return;
    }
    case 'enroll': {
      const { values, positionals } = parse(rest, { out: { type: 'string', short: 'o' } }, command);
      if (values.help) return help();
      if (positionals.length !== 1) throw usage(`mesh enroll: one JWT file\n\n${HELP.enroll}`);
      if (!values.out) throw usage(`mesh enroll: --out IDENTITY.json is required\n\n${HELP.enroll}`);
      return (await import('./enroll.js')).enroll(positionals[0], values.out as string);
    }
    case 'snapshot': {
      const { values, positionals } = parse(rest, {}, command);
      if (values.help) return help();
      if (positionals.length) throw usage(`mesh snapshot takes no arguments\n\n${HELP.snapshot}`);
      const s = loadSession();
      const r = await api(s, 'POST', '/database/snapshot');
      process.stdout.write(`snapshot ${r.headers['mesh-snapshot'] ?? ''} written under <dataDir>/snapshots on the controller\n`);
      return;
    }
    case 'backup': {
      const { values, positionals } = parse(rest, { 'data-dir': { type: 'string' }, out: { type: 'string', short: 'o' } }, command);
      if (values.help) return help();
      if (positionals.length) throw usage(`mesh backup: unexpected ${positionals.join(' ')}\n\n${HELP.backup}`);
      return (await offline()).backup({ dataDir: values['data-dir'] as string | undefined, out: values.out as string | undefined });
    }
    case 'restore': {
      const { values, positionals } = parse(rest, { 'data-dir': { type: 'string' }, replace: { type: 'boolean' }, check: { type: 'boolean' } }, command);
      if (values.help) return help();
      if (positionals.length !== 1) throw usage(`mesh restore: one backup file\n\n${HELP.restore}`);
      return (await offline()).restore(positionals[0], { dataDir: values['data-dir'] as string | undefined, replace: values.replace as boolean | undefined, check: values.check as boolean | undefined });
    }
    case 'status': {
      const { values, positionals } = parse(rest, { 'data-dir': { type: 'string' }, json: { type: 'boolean' } }, command);
      if (values.help) return help();
      if (positionals.length) throw usage(`mesh status: unexpected ${positionals.join(' ')}\n\n${HELP.status}`);
      return (await offline()).status({ dataDir: values['data-dir'] as string | undefined, json: values.json as boolean | undefined });
    }
    case 'import': {
      const { values, positionals } = parse(rest, { 'data-dir': { type: 'string' }, 'from-line': { type: 'string' }, batch: { type: 'string' } }, command);
      if (values.help) return help();
      if (positionals.length !== 1) throw usage(`mesh import: one JSON-lines file\n\n${HELP.import}`);
      const num = (v: unknown) => (v === undefined ? undefined : Number(v));
      await (await import('./import.js')).importIdentities(positionals[0], { dataDir: values['data-dir'] as string | undefined, fromLine: num(values['from-line']), batch: num(values.batch) });
      return;
    }
    case 'admin': {
      const [sub, ...args] = rest;
      if (sub === undefined || sub === '--help' || sub === '-h') return help();
      if (sub !== 'reset-password') throw usage(`mesh admin: unknown subcommand "${sub}"\n\n${HELP.admin}`);
      const { values, positionals } = parse(args, { 'data-dir': { type: 'string' }, username: { type: 'string', short: 'u' }, password: { type: 'string', short: 'p' } }, command);
      if (values.help) return help();
      if (positionals.length) throw usage(`mesh admin reset-password: unexpected ${positionals.join(' ')}\n\n${HELP.admin}`);
      return (await offline()).resetPassword({ dataDir: values['data-dir'] as string | undefined, username: values.username as string | undefined, password: values.password as string | undefined });
    }
    default:
      throw usage(`unknown command "${command}"\n\n${USAGE}`);
  }
}

run(process.argv.slice(2)).then(
  () => process.exit(0),
  (e) => {
    if (e instanceof CliError) {
      process.stderr.write(`${e.message.startsWith('mesh ') ? '' : 'mesh: '}${e.message}\n`);
      process.exit(e.exitCode);
    }
    process.stderr.write(`mesh: unexpected failure: ${e?.stack ?? e}\n`);
    process.exit(1);
  },
);
