/**
 * What the CLI keeps between runs, under `$XDG_CONFIG_HOME/mesh` (or `~/.config/mesh`): the
 * session of the last `mesh login` (controller URL, API, token) and the CA bundle trusted then.
 * Files are readable by their owner only: the token is a credential.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export interface Session {
  /** Controller origin, `https://host:port`. */
  url: string;
  api: 'management' | 'client';
  token: string;
  /** PEM bundle the controller's TLS certificate is checked against. */
  ca: string;
  /** Who logged in, for messages. */
  identity: { id: string; name: string };
  /** Client certificate and key (PEM) when the session came from an identity file. */
  cert?: string;
  key?: string;
}

export class CliError extends Error {
  constructor(message: string, readonly exitCode = 1) {
    super(message);
  }
}

/** A mistake in the command line: exit code 2, as for the controller's own bad settings. */
export const usage = (message: string) => new CliError(message, 2);

function configDir(env = process.env): string {
  const base = env.XDG_CONFIG_HOME && path.isAbsolute(env.XDG_CONFIG_HOME) ? env.XDG_CONFIG_HOME : path.join(os.homedir(), '.config');
  return path.join(base, 'mesh');
}

const sessionFile = () => path.join(configDir(), 'session.json');

export function saveSession(s: Session): string {
  const dir = configDir();
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = sessionFile();
  fs.writeFileSync(file + '.tmp', JSON.stringify(s, null, 2) + '\n', { mode: 0o600 });
  fs.renameSync(file + '.tmp', file);
  return file;
}

export function loadSession(): Session {
  const file = sessionFile();
  if (!fs.existsSync(file)) throw new CliError(`not logged in: run \`mesh login <url>\` first (no ${file})`);
  try {
    return JSON.parse(fs.readFileSync(file, 'utf8')) as Session;
  } catch (e) {
    throw new CliError(`${file}: ${(e as Error).message}; run \`mesh login <url>\` again`);
  }
}
