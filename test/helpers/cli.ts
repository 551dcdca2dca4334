/**
 * The real `mesh` command (dist/src/cli/main.js), spawned with a small environment: cheap argon2
 * settings, HOME and XDG_CONFIG_HOME in `home` (where it keeps its login state), plus `env`.
 *
 *   const r = await runMesh(home, ['identities', 'list']);   // { code, stdout, stderr }
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const CLI = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'dist', 'src', 'cli', 'main.js');

export interface CliRun { code: number | null; stdout: string; stderr: string }

export function runMesh(home: string, args: string[], env: Record<string, string> = {}): Promise<CliRun> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, [CLI, ...args], {
      env: { PATH: process.env.PATH ?? '', HOME: home, XDG_CONFIG_HOME: home, MESH_ARGON2_MEMORY_KIB: '1024', MESH_ARGON2_ITERATIONS: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    p.stdout.on('data', (d) => (stdout += d));
    p.stderr.on('data', (d) => (stderr += d));
    p.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
