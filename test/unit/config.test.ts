/** Configuration: MESH_* environment, the optional config file, defaults and every rejection. */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { ConfigError, loadConfig, splitHostPort } from '../../src/config.js';

function refused(fn: () => unknown): Error | undefined {
  try {
    fn();
  } catch (e) {
    return e as Error;
  }
  return undefined;
}

t.test('defaults', async (t) => {
  const c = loadConfig({});
  t.equal(c.dataDir, './data');
  t.equal(c.address, '127.0.0.1:1280');
  t.equal(c.advertisedAddress, undefined);
  t.equal(c.adminPassword, undefined);
  t.equal(c.logLevel, 'info');
  t.equal(c.sessionTimeoutMinutes, 30);
  t.equal(c.minuteMs, 60_000, 'minutes are real ones unless a test shortens them');
  t.equal(c.maxBodyBytes, 512 * 1024);
});

t.test('environment variables, numbers parsed, empty values ignored', async (t) => {
  const c = loadConfig({
    MESH_DATA_DIR: '/tmp/x',
    MESH_ADDRESS: '0.0.0.0:0',
    MESH_ADVERTISED_ADDRESS: 'ctrl.example.com:443',
    MESH_ADMIN_PASSWORD: 'secret123',
    MESH_LOG_LEVEL: 'debug',
    MESH_SESSION_TIMEOUT_MINUTES: '5',
    MESH_WORKERS: '',
  });
  t.equal(c.dataDir, '/tmp/x');
  t.equal(c.address, '0.0.0.0:0');
  t.equal(c.advertisedAddress, 'ctrl.example.com:443');
  t.equal(c.adminPassword, 'secret123');
  t.equal(c.logLevel, 'debug');
  t.equal(c.sessionTimeoutMinutes, 5);
  t.equal(c.workers, 0, 'empty value keeps the default');
});

t.test('config file in the data directory, overridden by the environment', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-config-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify({ logLevel: 'warn', sessionTimeoutMinutes: 60, address: '127.0.0.1:2000' }));
  const c = loadConfig({ MESH_DATA_DIR: dir, MESH_ADDRESS: '127.0.0.1:3000' });
  t.equal(c.logLevel, 'warn');
  t.equal(c.sessionTimeoutMinutes, 60);
  t.equal(c.address, '127.0.0.1:3000', 'environment wins');
});

t.test('bad settings are refused with a message naming them', async (t) => {
  const bad: [Record<string, string>, RegExp][] = [
    [{ MESH_ADDRESS: 'no-port' }, /address/],
    [{ MESH_ADDRESS: 'host:99999999' }, /address/],
    [{ MESH_LOG_LEVEL: 'loud' }, /logLevel/],
    [{ MESH_SESSION_TIMEOUT_MINUTES: '0' }, /sessionTimeoutMinutes/],
    [{ MESH_SESSION_TIMEOUT_MINUTES: 'soon' }, /sessionTimeoutMinutes/],
    [{ MESH_MINUTE_MS: '999' }, /minuteMs/],
    [{ MESH_MINUTE_MS: '60001' }, /minuteMs/],
    [{ MESH_ADMIN_PASSWORD: 'abc' }, /adminPassword/],
    [{ MESH_CONFIG: '/nonexistent/config.json' }, /does not exist/],
  ];
  for (const [env, msg] of bad) {
    const e = refused(() => loadConfig(env));
    t.type(e, ConfigError, `refused: ${JSON.stringify(env)}`);
    t.match(e?.message, msg, `message names the setting for ${JSON.stringify(env)}`);
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-config-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'c.json');
  fs.writeFileSync(file, '{not json');
  t.type(refused(() => loadConfig({ MESH_CONFIG: file })), ConfigError, 'unparseable file');
  fs.writeFileSync(file, JSON.stringify({ colour: 'blue' }));
  t.throws(() => loadConfig({ MESH_CONFIG: file }), /unknown setting/, 'unknown key');
});

t.test('splitHostPort', async (t) => {
  t.same(splitHostPort('127.0.0.1:1280'), { host: '127.0.0.1', port: 1280 });
  t.same(splitHostPort('[::1]:0'), { host: '::1', port: 0 });
});

t.test('YAML config file, by MESH_CONFIG or in the data directory', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'mesh-config-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.writeFileSync(path.join(dir, 'config.yaml'), '# operator settings\nlogLevel: debug\nsessionTimeoutMinutes: 45\nrequestLog: false\n');
  const c = loadConfig({ MESH_DATA_DIR: dir });
  t.equal(c.logLevel, 'debug');
  t.equal(c.sessionTimeoutMinutes, 45);
  t.equal(c.requestLog, false);
  const other = path.join(dir, 'other.yml');
  fs.writeFileSync(other, 'address: 127.0.0.1:4000\n');
  t.equal(loadConfig({ MESH_CONFIG: other }).address, '127.0.0.1:4000');
  fs.writeFileSync(other, 'address: [unclosed\n');
  t.throws(() => loadConfig({ MESH_CONFIG: other }), /config file .*other\.yml/, 'a YAML syntax error names the file');
  fs.writeFileSync(other, '- a\n- b\n');
  t.throws(() => loadConfig({ MESH_CONFIG: other }), /must hold a mapping/, 'a list is refused');
});

t.test('one message per bad setting, naming the variable and the allowed values; secrets never echoed', async (t) => {
  const e = refused(() => loadConfig({ MESH_LOG_LEVEL: 'loud', MESH_WORKERS: '99', MESH_ADMIN_PASSWORD: 'abc' }));
  t.type(e, ConfigError);
  const lines = e!.message.split('\n').slice(1);
  t.equal(lines.length, 3, `three lines: ${e!.message}`);
  t.match(e!.message, 'logLevel (MESH_LOG_LEVEL) = "loud": must be one of trace, debug, info, warn, error, fatal, silent');
  t.match(e!.message, 'workers (MESH_WORKERS) = 99: must be a whole number from 0 to 64');
  t.match(e!.message, 'adminPassword (MESH_ADMIN_PASSWORD): must be a string of 5 to 100 characters');
  t.notMatch(e!.message, /"abc"/, 'the password is not repeated');
});
