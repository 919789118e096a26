import { createHash } from 'node:crypto';
import { ClientBase, Pool, PoolClient, QueryConfig, QueryResult, QueryResultRow, types } from 'pg';
import { statementTimeoutIn, watchStatements } from './statement-watchdog';

// bigint columns (positions, revisions) come back as strings unless told otherwise;
// we parse them where they are read, as BigInt, never as a lossy number.
types.setTypeParser(types.builtins.INT8, (v: string) => v);

export type Database = Pool;

/**
 * Bounds on every session of a pool, set when the connection opens (in milliseconds,
 * 0 = none). `idleInTransactionTimeoutMs` cuts a session that sits inside an open
 * transaction without sending anything: such a transaction, once it holds a
 * transaction id, hides every event appended after it from every subscriber of the
 * cluster until it ends. `statementTimeoutMs` cancels one statement that runs longer.
 */
export interface SessionLimits {
  readonly statementTimeoutMs: number;
  readonly idleInTransactionTimeoutMs: number;
}

/**
 * The serving processes (API, projector, `npm start`): their statements take
 * milliseconds (a projection batch is a few statements over at most 500 events, a
 * lag count reads at most 10,000 index entries), and their transactions run
 * statement after statement with nothing to wait for in between.
 */
export const SERVING_SESSION_LIMITS: SessionLimits = { statementTimeoutMs: 30_000, idleInTransactionTimeoutMs: 10_000 };

/**
 * The operator's commands (projections:rebuild, ledger:verify, seed:load,
 * read-models:checksum): a checksum of a large table or a TRUNCATE waiting for a
 * running projector's batch may take minutes, and the operator watches them and can
 * interrupt them, so no statement bound; a session idle inside a transaction is still
 * cut, later (a stopped command must not stall the cluster's subscribers for good).
 */
export const COMMAND_SESSION_LIMITS: SessionLimits = { statementTimeoutMs: 0, idleInTransactionTimeoutMs: 60_000 };

/**
 * TCP keepalive on both ends of every connection. The client (Node) probes after 10 s
 * of silence; the server probes its side after 10 s, every 5 s, and drops the
 * connection after 3 unanswered probes, so a session whose host died without closing
 * TCP ends (and its advisory locks and transaction with it) about 25 s later instead of
 * after the kernel's default two hours. Not for Unix-domain sockets, where it is moot.
 */
export const TCP_KEEPALIVE = { idleSeconds: 10, intervalSeconds: 5, count: 3 } as const;

/**
 * The startup `options` that set the limits and the server-side keepalive for each
 * session; `readOnly` makes every transaction of the session read-only by default
 * (a command that must write nothing, whatever its role may do).
 */
export function sessionOptions(limits: SessionLimits, readOnly = false): string {
  return [
    ...(readOnly ? ['-c default_transaction_read_only=on'] : []),
    `-c statement_timeout=${limits.statementTimeoutMs}`,
    `-c idle_in_transaction_session_timeout=${limits.idleInTransactionTimeoutMs}`,
    `-c tcp_keepalives_idle=${TCP_KEEPALIVE.idleSeconds}`,
    `-c tcp_keepalives_interval=${TCP_KEEPALIVE.intervalSeconds}`,
    `-c tcp_keepalives_count=${TCP_KEEPALIVE.count}`,
  ].join(' ');
}

/**
 * The URL without its own `options` parameter, and that parameter: node-postgres lets
 * the connection string's fields override the pool's, so ours go first and the URL's
 * own options (an operator's choice) are appended after them, where they win.
 */
function splitOptions(url: string): { url: string; options: string | null } {
  try {
    const parsed = new URL(url);
    const options = parsed.searchParams.get('options');
    if (options === null) return { url, options: null };
    parsed.searchParams.delete('options');
    return { url: parsed.toString(), options };
  } catch {
    return { url, options: null };
  }
}

export function createPool(
  url: string,
  options: {
    max?: number;
    applicationName?: string;
    limits?: SessionLimits;
    /** Every session read-only (default_transaction_read_only): for the commands that only read. */
    readOnly?: boolean;
  } = {},
): Pool {
  const own = splitOptions(url);
  const limits = options.limits ?? SERVING_SESSION_LIMITS;
  // The statement bound the server applies (the URL's own options win; one this cannot read: not watched).
  const fromUrl = own.options === null ? undefined : statementTimeoutIn(own.options);
  const statementTimeoutMs = fromUrl === undefined ? limits.statementTimeoutMs : fromUrl;
  const pool = new Pool({
    connectionString: own.url,
    max: options.max ?? 20,
    application_name: options.applicationName ?? 'payment-gateway',
    idleTimeoutMillis: 30_000,
    connectionTimeoutMillis: 10_000,
    onConnect: confirmBackend,
    keepAlive: true,
    keepAliveInitialDelayMillis: TCP_KEEPALIVE.idleSeconds * 1000,
    options: [sessionOptions(limits, options.readOnly), own.options].filter((o) => o !== null).join(' '),
  });
  // An idle client losing its connection (database restart) must not crash the process.
  pool.on('error', () => undefined);
  // Nor may a checked-out one (confirmBackend gives each new client its listener): pg-pool
  // listens for a client's 'error' only while it is idle, and a connection terminated
  // between two queries of a checked-out client (a transaction waiting on other work when
  // the server shuts down) emits 'error' with nobody listening, which kills the process.
  // Its next query fails on its own ("not queryable", a 503 for the API) and the pool
  // discards it when it is released.
  pool.on('connect', (client) => {
    // A bounded session's statement that gets no answer past its bound: the server does not run (frozen).
    if (statementTimeoutMs) watchStatements(client, statementTimeoutMs);
  });
  return pool;
}

/** How a transaction begins (PostgreSQL's defaults when absent). */
export interface TransactionOptions {
  readonly isolation?: 'REPEATABLE READ' | 'SERIALIZABLE';
  readonly readOnly?: boolean;
  /** `off`: the commit does not wait for its WAL flush (for work that a crash only makes redo). */
  readonly synchronousCommit?: 'off';
}

/** BEGIN with its options, in one statement (one round trip). */
function beginStatement(options: TransactionOptions): string {
  let begin = 'BEGIN';
  if (options.isolation) begin += ` ISOLATION LEVEL ${options.isolation}`;
  if (options.readOnly) begin += ' READ ONLY';
  if (options.synchronousCommit) begin += `; SET LOCAL synchronous_commit = ${options.synchronousCommit}`;
  return begin;
}

/**
 * Runs `work` in one transaction on a connection the caller holds: commits what it
 * did, or rolls back on any error and rethrows it. The one place the gateway writes
 * BEGIN, COMMIT and ROLLBACK.
 */
export async function inTransactionOn<T>(client: PoolClient, work: () => Promise<T>, options: TransactionOptions = {}): Promise<T> {
  await client.query(beginStatement(options));
  let result: T;
  try {
    result = await work();
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  }
  try {
    await client.query('COMMIT');
  } catch (error) {
    // The connection lost while the COMMIT was on its way: it may have committed (a loss
    // before it undid the transaction); a read-only one wrote nothing either way.
    throw lostInFlight(error) && !options.readOnly ? new WriteOutcomeUnknownError(error, backendOf(client)) : error;
  }
  return result;
}

/** Runs `work` in one transaction on a connection of the pool; rolls back on any error. */
export async function inTransaction<T>(pool: Pool, work: (client: PoolClient) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
  const client = await pool.connect();
  try {
    return await inTransactionOn(client, () => work(client), options);
  } catch (error) {
    if (error instanceof WriteOutcomeUnknownError) error.settleOn ??= pool;
    throw error;
  } finally {
    client.release();
  }
}

const statementNames = new Map<string, string>();

/**
 * A query run as a named prepared statement: each connection parses and plans the
 * text once and then only binds and executes it, which saves the database most of
 * the work of a short query on the hot paths (key lookup, stream reads, appends).
 * The name derives from the text, so one text always has one name. For texts built
 * from a fixed set of fragments only: each distinct text is remembered (here and on
 * every connection), so a text carrying values inline would grow without bound.
 */
export function preparedStatement(text: string, values: unknown[] = []): QueryConfig {
  let name = statementNames.get(text);
  if (name === undefined) {
    name = `s_${createHash('sha1').update(text).digest('hex').slice(0, 20)}`;
    statementNames.set(text, name);
  }
  return { name, text, values };
}

/**
 * The connection broke while a statement ran (the server ended the session, it shut
 * down or crashed, or the socket failed): the statement may or may not have committed.
 * Not a refused connection nor a statement cancelled by a timeout (those wrote nothing).
 */
export function isConnectionLost(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  if (error instanceof WriteOutcomeUnknownError) return true;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string') {
    // Socket errors; PostgreSQL's connection exceptions (08xxx) and admin/crash shutdown (57P01, 57P02).
    if (['ECONNRESET', 'EPIPE', 'ETIMEDOUT'].includes(code)) return true;
    if (/^08/.test(code) || code === '57P01' || code === '57P02') return true;
  }
  const message = (error as { message?: unknown }).message;
  return typeof message === 'string' && /Connection terminated|Client has encountered a connection error|not queryable/i.test(message);
}

/** The connection broke while a statement sent on it ran (not a client already broken, which sends nothing). */
function lostInFlight(error: unknown): boolean {
  return isConnectionLost(error) && !/not queryable/i.test(String((error as { message?: unknown }).message));
}

/**
 * A write whose outcome nobody knows: the connection was lost while its statement (or
 * its transaction's COMMIT) was in flight, after the server may have committed it. It
 * counts as a lost connection (isConnectionLost); the caller looks, if it cheaply can.
 */
export class WriteOutcomeUnknownError extends Error {
  constructor(
    cause: unknown,
    /** The server process that ran the write (null: not known): until it has ended, a read may not see its commit. */
    readonly backend: Backend | null = null,
    /** Where to make sure that process has ended before looking (outcomeOf). */
    public settleOn: Pick<Pool, 'query'> | null = null,
  ) {
    super(`the outcome of a write is unknown: ${reasonOf(cause)}`, { cause });
    this.name = 'WriteOutcomeUnknownError';
  }

  /** Where the one who asked for the write can see whether it was done, when not a GET of what it changes (the API's 503 says it). */
  howToCheck: string | null = null;
}

/**
 * A server process: its id and when it started, in microseconds since the epoch (an id
 * is used again by a later process; the two together name one process). A number, not
 * text: a timestamp's text depends on the session's DateStyle and TimeZone.
 */
export interface Backend {
  readonly pid: number;
  readonly startedAt: string;
}

/** backend_start as Backend.startedAt. */
const STARTED = '(extract(epoch FROM backend_start) * 1000000)::bigint::text';

/** The server process of each connection of createPool's pools, as the server itself told it. */
const confirmedBackends = new WeakMap<object, Backend>();

/**
 * Asks the server which process serves a new connection, before the pool hands it out
 * (pg-pool's onConnect): the id the connection was given is the server process's only
 * when nothing stands between (PgBouncer gives each client a random key in its place),
 * and only a confirmed one is ended and waited for when a write's answer is lost. A
 * server that does not answer within CONFIRM_WAIT_MS fails the connection.
 */
async function confirmBackend(client: ClientBase): Promise<void> {
  client.on('error', () => undefined);
  const given = (client as unknown as { processID?: number | null }).processID;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    // Worded as pg-pool's own connect timeout: the database not reached (503; at start-up, exit 2), nothing sent.
    const message = `Connection terminated due to connection timeout: the database did not answer a new connection within ${CONFIRM_WAIT_MS} ms`;
    timer = setTimeout(() => reject(new Error(message)), CONFIRM_WAIT_MS).unref();
  });
  try {
    const { rows } = await Promise.race([
      client.query<{ pid: number; started: string | null }>(`SELECT pid, ${STARTED} AS started FROM pg_stat_activity WHERE pid = pg_backend_pid()`),
      late,
    ]);
    const row = rows[0];
    if (typeof given === 'number' && row?.pid === given && row.started !== null) confirmedBackends.set(client, { pid: given, startedAt: row.started });
  } finally {
    clearTimeout(timer);
  }
}
const CONFIRM_WAIT_MS = 10_000;

/** The server process of `client` once the server confirmed it, else null (a write lost on it then stays in doubt). */
export const backendOf = (client: PoolClient): Backend | null => confirmedBackends.get(client) ?? null;

/** How long a look waits for the lost write's server process to end. */
const SETTLE_WAIT_MS = 5_000;

/**
 * Whether the server process of a lost write has ended (ended here if need be): only then
 * is its outcome final (a client-side break leaves it running its COMMIT, which another
 * session does not see yet) and a read that finds nothing proof that nothing was written.
 */
async function settled(error: WriteOutcomeUnknownError): Promise<boolean> {
  const { backend, settleOn: pool } = error;
  if (backend === null || pool === null) return false;
  // That process only: its id alone may by now be another session's. Ended: no process of
  // that id, or one started at another time; one whose start is not shown is not known to be another.
  const ended = async () => {
    const { rows } = await pool.query<{ started: string | null }>(`SELECT ${STARTED} AS started FROM pg_stat_activity WHERE pid = $1`, [backend.pid]);
    return rows.length === 0 || (rows[0]!.started !== null && rows[0]!.started !== backend.startedAt);
  };
  try {
    await pool.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid = $1 AND ${STARTED} = $2`, [backend.pid, backend.startedAt]);
    for (const deadline = Date.now() + SETTLE_WAIT_MS; Date.now() < deadline; await new Promise((resolve) => setTimeout(resolve, 50))) {
      if (await ended()) return true;
    }
  } catch {
    // the database out of reach again: the outcome stays unknown
  }
  return false;
}

/**
 * One write statement on its own (autocommit) on a connection of the pool. A failure to
 * connect sent nothing and is thrown as it is; a connection lost once the statement was
 * sent throws WriteOutcomeUnknownError. On a client (its transaction the caller's, whose
 * COMMIT tells) the statement just runs.
 */
export async function writeStatement<R extends QueryResultRow = QueryResultRow>(
  pool: Pick<Pool, 'connect' | 'query'> | PoolClient,
  text: string | QueryConfig,
  values: unknown[] = [],
): Promise<QueryResult<R>> {
  const run = (on: Pick<Pool, 'query'> | PoolClient) => (typeof text === 'string' ? on.query<R>(text, values) : on.query<R>(text));
  if ('release' in pool) return run(pool);
  const client = await pool.connect();
  let broken = false;
  try {
    return await run(client);
  } catch (error) {
    broken = isConnectionLost(error);
    throw lostInFlight(error) ? new WriteOutcomeUnknownError(error, backendOf(client), pool) : error;
  } finally {
    client.release(broken);
  }
}

/**
 * The answer of `write`; when its outcome is unknown (WriteOutcomeUnknownError), looks
 * with `lookup` (a read: the write's answer when it happened, null when it did not), once
 * the write's server process has ended. Not written: the lost connection is thrown, as for
 * one lost before the write was sent. The look failing or unsure (it throws), or that
 * process not known to have ended (nothing found then proves nothing), or no answer
 * within LOOK_DEADLINE_MS: the write's WriteOutcomeUnknownError.
 */
export async function outcomeOf<T>(write: () => Promise<T>, lookup: () => Promise<T | null>, howToCheck: string | null = null): Promise<T> {
  try {
    return await write();
  } catch (error) {
    if (!(error instanceof WriteOutcomeUnknownError)) throw error;
    // Said by the 503 when the look cannot tell either.
    error.howToCheck ??= howToCheck;
    const look = (async () => ({ final: await settled(error), found: await lookup() }))();
    // A server that does not answer (frozen) would hold each of the look's statements up to its bound: unknown sooner.
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), LOOK_DEADLINE_MS).unref()));
    const result = await Promise.race([look, late])
      .catch(() => null)
      .finally(() => clearTimeout(timer));
    look.catch(() => undefined);
    if (result === null) throw error;
    if (result.found !== null) return result.found;
    throw result.final ? error.cause : error;
  }
}

/** How long outcomeOf looks (the lost write's process ended, then the read) before it calls the outcome unknown. */
const LOOK_DEADLINE_MS = 10_000;

/**
 * The database did not let this process in: the connection was refused, timed out or
 * broke, its host does not resolve, the server refused the role or its password, the
 * database does not exist, or the server was starting, stopping or full.
 */
export function isDatabaseNotReached(error: unknown): boolean {
  if (isConnectionLost(error)) return true;
  if (typeof error !== 'object' || error === null) return false;
  const { code, syscall, message, errors } = error as { code?: unknown; syscall?: unknown; message?: unknown; errors?: unknown };
  // A host name of several addresses (localhost: ::1 and 127.0.0.1): Node's AggregateError of each connect's failure.
  if (Array.isArray(errors) && errors.length > 0) return errors.every(isDatabaseNotReached);
  // A socket that could not connect (refused, unreachable, a missing Unix socket), a name that does not resolve.
  if (syscall === 'connect' || syscall === 'getaddrinfo') return true;
  if (typeof code === 'string' && SOCKET_NOT_REACHED.includes(code)) return true;
  // 28xxx: the role or its password refused; 3D000: no such database; 53300: too many connections; 57P03: cannot connect now.
  if (typeof code === 'string' && (/^28/.test(code) || ['3D000', '53300', '57P03'].includes(code))) return true;
  return typeof message === 'string' && /timeout exceeded when trying to connect|connection timeout/i.test(message);
}

/** Socket errors that mean the server was not reached, whichever call reported them. */
const SOCKET_NOT_REACHED = ['ECONNREFUSED', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN', 'ENOTFOUND'];

/** The database could not be reached when the process opened it (isDatabaseNotReached): a command could not run. */
export class DatabaseNotReachedError extends Error {
  constructor(cause: unknown) {
    super(reasonOf(cause), { cause });
  }
}

/** An error's message; an AggregateError of every address tried has none of its own: its parts', joined. */
function reasonOf(error: unknown): string {
  const { message, code, errors } = error as { message?: unknown; code?: unknown; errors?: unknown };
  if (typeof message === 'string' && message !== '') return message;
  if (Array.isArray(errors) && errors.length > 0) return errors.map(reasonOf).join('; ');
  return `the database could not be reached (${String(code)})`;
}
