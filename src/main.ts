/**
 * `npm start`: load the configuration, start the controller, print the bound address, and stop
 * cleanly on SIGTERM/SIGINT (stop accepting, finish in-flight requests, close the store) within 15 s.
 *
 * Signals: `npm start` execs this process in place of its shell, and npm forwards SIGTERM and
 * SIGINT to it; signalling the whole process group (Ctrl-C, a supervisor) delivers the same
 * signal twice, once directly and once through npm. The first starts the shutdown, later ones
 * are ignored. A signal during the start stops the controller as soon as it has started.
 */
import { pino } from 'pino';
import { ConfigError, configHelp, loadConfig } from './config.js';
import { PACKAGE_VERSION, startController } from './app.js';
import { DataFormatError } from './store/data-format.js';
import { DataDirInUse } from './store/data-dir.js';
import { ListenError } from './http/ports.js';
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
  let stop: ((signal: string) => void) | undefined;
  let signalled: string | undefined;
  const onSignal = (signal: string) => {
    if (stop) stop(signal);
    else if (!signalled) {
      signalled = signal;
      // The start may wait on something that never comes (an unreachable etcd): bounded like a stop.
      setTimeout(() => {
        process.stderr.write(`mesh-controller: ${signal} during start-up, and the start did not finish in time; exiting\n`);
        process.exit(1);
      }, 14_500).unref();
    }
  };
  process.on('SIGTERM', () => onSignal('SIGTERM'));
  process.on('SIGINT', () => onSignal('SIGINT'));
  // Batched asynchronous stdout: one write per batch, never one per access-log line (log-stream.ts).
  const log = pino({ level: settings.logLevel, base: { service: 'mesh-controller' } }, new LogStream(1, LOG_BUFFER_BYTES));
  let controller;
  try {
    controller = await startController(settings, log);
  } catch (e) {
    if (e instanceof DataDirInUse || e instanceof ListenError) {
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
  stop = (signal: string) => {
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
  if (signalled) stop(signalled);
}

main().catch((err) => {
  process.stderr.write(`mesh-controller: failed to start: ${err?.stack ?? err}\n`);
  process.exit(1);
});
