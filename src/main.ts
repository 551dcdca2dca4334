/**
 * `npm start`: load the configuration, start the controller, print the bound address, and stop
 * cleanly on SIGTERM/SIGINT (stop accepting, finish in-flight requests, close the store) within 15 s.
 */
import { pino } from 'pino';
import { ConfigError, configHelp, loadConfig } from './config.js';
import { PACKAGE_VERSION, startController } from './app.js';
import { DataFormatError } from './store/data-format.js';
import { DataDirInUse } from './store/data-dir.js';
import { LogStream } from './observability/log-stream.js';

/** Log lines that may wait for a stuck stdout reader before later ones are dropped. */
const LOG_BUFFER_BYTES = 64 * 1024 * 1024;

const USAGE = `Usage: mesh-controller [--help] [--version]

Starts the controller. Settings come from MESH_* environment variables and an optional YAML or JSON
file (MESH_CONFIG, else config.yaml, config.yml or config.json in MESH_DATA_DIR); the environment
wins. The file uses the setting names below (e.g. \`logLevel: debug\`).

Settings (variable, what it does [name in the file; allowed values; default]):
`;

async function main() {
  const arg = process.argv[2];
  if (arg === '--help' || arg === '-h') {
    process.stdout.write(`${USAGE}${configHelp()}\n`);
    return;
  }
  if (arg === '--version' || arg === '-v') {
    process.stdout.write(`mesh-controller v${PACKAGE_VERSION}\n`);
    return;
  }
  if (arg !== undefined) {
    process.stderr.write(`mesh-controller: unknown argument ${JSON.stringify(arg)}; try --help\n`);
    process.exit(2);
  }
  let settings;
  try {
    settings = loadConfig(process.env);
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`mesh-controller: ${e.message}\n`);
      process.exit(2);
    }
    throw e;
  }
  // Batched asynchronous stdout: one write per batch, never one per access-log line (log-stream.ts).
  const log = pino({ level: settings.logLevel, base: { service: 'mesh-controller' } }, new LogStream(1, LOG_BUFFER_BYTES));
  let controller;
  try {
    controller = await startController(settings, log);
  } catch (e) {
    if (e instanceof DataDirInUse) {
      process.stderr.write(`mesh-controller: ${e.message}\n`);
      process.exit(3);
    }
    if (e instanceof DataFormatError) {
      process.stderr.write(`mesh-controller: ${e.message}\n`);
      await log.flush?.();
      process.exit(2);
    }
    throw e;
  }
  log.info({ address: controller.address, certAddress: controller.certAddress, advertised: controller.app.config.advertisedAddress, dataDir: settings.dataDir }, 'listening');
  // Plain lines for people and scripts: the addresses actually bound (port 0 picks one). The
  // second is the mutual-TLS listener (certificate login, enrollment with certificates). On
  // stderr, so that every line on stdout is the JSON log.
  process.stderr.write(`mesh-controller listening on https://${controller.address}\nmesh-controller certificate listener on https://${controller.certAddress}\n`);

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'stopping');
    const hard = setTimeout(() => {
      log.error('shutdown took too long; exiting');
      process.exit(1);
    }, 14_500);
    hard.unref();
    controller.close().then(
      () => {
        log.info('stopped');
        process.exit(0);
      },
      (err) => {
        log.error({ err }, 'error while stopping');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((err) => {
  process.stderr.write(`mesh-controller: failed to start: ${err?.stack ?? err}\n`);
  process.exit(1);
});
