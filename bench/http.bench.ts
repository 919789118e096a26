import { ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { promisify } from 'node:util';
import { Client, Pool } from 'pg';
import { seedHistory } from './history';
import type { BenchContext, BenchSection } from './run';
import { repoRoot } from './paths';
import { percentiles, sleep } from './stats';
import { fixed, integer, Table } from './table';

/**
 * The request path against a bare service, as issue 15 states it: the gateway with its
 * default limits (60 requests/s per key, the 3 s poll mark of GET /v1/invoices/{id}
 * on), 200 merchants so that the per-key limit is not what is measured, 32 connections;
 * the gateway and the bare service (bench/baseline-server.ts: Fastify + pg doing one
 * INSERT or one SELECT by key per request, in its own process) alternate in five rounds
 * of 5 s, and the figure is the median of the per-round ratios. Only 2xx answers count
 * as throughput; p50/p99 are of the 2xx answers.
 *
 * Two topologies, one after the other on the same database: `npm start` (API,
 * projector and workers in one process) and `start:api` with `start:projector` in a
 * second process.
 *
 * BENCH_HTTP_CPU_PROF=<dir> starts the gateway (or the API) with `--cpu-prof
 * --cpu-prof-dir=<dir>/<topology>` (the profile is written when it stops; summarise it
 * with `node dist/bench/cpu-profile-summary.js <file>`); BENCH_HTTP_KINDS=POST measures
 * only the POST rounds; BENCH_HTTP_NODE_ARGS adds Node options to the gateway's processes
 * (e.g. `-r ./counter.js` to count statements).
 */
const runFile = promisify(execFile);

export const httpBench: BenchSection = {
  name: 'http',
  description:
    'HTTP req/s (autocannon): POST/GET /v1/invoices on the gateway vs a bare Fastify+pg service, alternating rounds, median ratios; on an empty log, then on a seed:load history (--events, default 1,000,000)',
  run,
};

interface Settings {
  readonly connections: number;
  readonly rounds: number;
  readonly roundSeconds: number;
  readonly warmupSeconds: number;
  readonly merchants: number;
  /**
   * Invoices created per merchant before the GET rounds: the poll mark answers a second GET of an
   * invoice within 3 s with 429, so they must outlast 3 s of the fastest GETs (30,000: 10,000/s).
   */
  readonly invoicesPerMerchant: number;
}

const FULL: Settings = { connections: 32, rounds: 5, roundSeconds: 5, warmupSeconds: 2, merchants: 200, invoicesPerMerchant: 150 };
const QUICK: Settings = { connections: 32, rounds: 2, roundSeconds: 2, warmupSeconds: 1, merchants: 20, invoicesPerMerchant: 20 };

/** Every POST body carries a distinct orderId: bench-<counter>, one counter for the whole run. */
let orderCounter = 0;
const nextOrderBody = (): string => JSON.stringify({ amount: '1000.00', orderId: `bench-${++orderCounter}`, method: 'card' });

// ---------------------------------------------------------------------------
// Child processes (as test/support/gateway-process.ts starts them)

export interface ChildServer {
  readonly name: string;
  readonly child: ChildProcess;
  readonly baseUrl: string;
  output(): string;
  /** The exit code or signal, or null while running. */
  exitCode(): number | string | null;
  /** SIGTERM, then waits for the exit (SIGKILL after 20 s); resolves with the code or signal. */
  stop(): Promise<number | string>;
}

/** How much of a child's output is kept (its tail). */
const OUTPUT_KEPT = 256 * 1024;

/** Starts a child; it is ready when its output matches `ready` (a server: its address, the first group). */
export async function startServer(
  name: string,
  script: string,
  env: Record<string, string>,
  nodeArgs: readonly string[] = [],
  ready: RegExp = /listening on (http:\/\/127\.0\.0\.1:\d+)/,
): Promise<ChildServer> {
  const root = repoRoot();
  const child = spawn(process.execPath, [...nodeArgs, path.join(root, script)], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // If the bench is interrupted (Ctrl-C, SIGTERM), its servers must not outlive it.
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  child.once('exit', () => process.removeListener('exit', killOnExit));
  let text = '';
  let wake: () => void = () => undefined;
  // The output is read as a log shipper would and only its tail kept (for errors): at the
  // default level a gateway writes a line per request.
  const onData = (chunk: Buffer) => {
    text = (text + chunk.toString('utf8')).slice(-OUTPUT_KEPT);
    wake();
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  let exitedWith: number | string | null = null;
  const exited = new Promise<number | string>((resolve) => {
    child.on('exit', (code, signal) => {
      exitedWith = code ?? signal ?? 'unknown';
      resolve(exitedWith);
      wake();
    });
  });

  const stop = async (): Promise<number | string> => {
    if (exitedWith !== null) return exitedWith;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    try {
      return await exited;
    } finally {
      clearTimeout(timer);
    }
  };

  try {
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${name} was not ready within 60 s; output:\n${text}`)), 60_000);
      wake = () => {
        const match = ready.exec(text);
        if (match) {
          clearTimeout(timer);
          resolve(match[1] ?? '');
        } else if (exitedWith !== null) {
          clearTimeout(timer);
          reject(new Error(`${name} exited (${exitedWith}) before listening; output:\n${text}`));
        }
      };
      wake();
    });
    wake = () => undefined;
    return { name, child, baseUrl: url, output: () => text, exitCode: () => exitedWith, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

// ---------------------------------------------------------------------------
// Small HTTP client for the set-up (fetch, Node >= 20)

export async function call(
  baseUrl: string,
  method: 'GET' | 'POST',
  route: string,
  token: string | null,
  body?: unknown,
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a JSON body of any shape
): Promise<{ status: number; body: any }> {
  const headers: Record<string, string> = {};
  if (token !== null) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`${baseUrl}${route}`, {
    method,
    headers,
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON: keep the text
  }
  return { status: response.status, body: parsed };
}

export async function expectStatus(
  what: string,
  expected: number,
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a JSON body of any shape
  pending: Promise<{ status: number; body: any }>,
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a JSON body of any shape
): Promise<any> {
  const { status, body } = await pending;
  if (status !== expected) throw new Error(`${what}: expected ${expected}, got ${status}: ${JSON.stringify(body)}`);
  return body;
}

/** Creates `count` invoices (or baseline rows) with `concurrency` requests in flight; returns their ids. */
async function seed(count: number, concurrency: number, create: () => Promise<string>): Promise<string[]> {
  const ids: string[] = [];
  let started = 0;
  const worker = async () => {
    while (started < count) {
      started++;
      ids.push(await create());
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return ids;
}

// ---------------------------------------------------------------------------
// Measurements

type Kind = 'POST' | 'GET';

interface Target {
  readonly server: 'gateway' | 'baseline';
  readonly kind: Kind;
  readonly baseUrl: string;
  readonly request: autocannon.Request;
  /** Waits until the server is quiet before a measurement (the gateway: projections caught up). */
  settle(): Promise<void>;
  /** The server's processes (their CPU time is counted per answer). */
  pids(): readonly number[];
}

interface Round {
  /** 2xx answers per second. */
  readonly perSecond: number;
  readonly p50: number;
  readonly p99: number;
  readonly answers: number;
  readonly statusCodes: ReadonlyMap<number, number>;
  readonly errors: number;
  /** Database transactions (each statement outside BEGIN..COMMIT is one) per answer, over the whole database. */
  readonly transactionsPerAnswer: number;
  /** WAL bytes and full-page images the server wrote per answer, and blocks the database read outside shared buffers. */
  readonly walBytesPerAnswer: number;
  readonly fullPagesPerAnswer: number;
  readonly blocksReadPerAnswer: number;
  /** CPU time of the server's processes per answer, in µs (user + system, until it settled). */
  readonly serverCpuPerAnswer: number;
  /** CPU time of the whole PostgreSQL server per answer, in µs (NaN when it is not a local process). */
  readonly databaseCpuPerAnswer: number;
}

function cannon(
  target: Target,
  connections: number,
  seconds: number,
  onResponse?: (statusCode: number, responseTime: number) => void,
): Promise<autocannon.Result> {
  return new Promise((resolve, reject) => {
    const instance = autocannon({ url: target.baseUrl, connections, duration: seconds, requests: [target.request] }, (error: unknown, result) =>
      error ? reject(error instanceof Error ? error : new Error(String(error))) : resolve(result),
    );
    if (onResponse) instance.on('response', (_client, statusCode, _bytes, responseTime) => onResponse(statusCode, responseTime));
  });
}

/** Committed and rolled-back transactions of the database so far (pg_stat_database; its statistics lag by up to a second). */
/**
 * The database's cumulative counters: its transactions and the blocks it read outside
 * shared buffers (pg_stat_database), and the whole server's WAL: bytes and full-page
 * images (pg_stat_wal; the rounds run one at a time, so the other's writes are not in them).
 */
async function databaseCounters(db: Client): Promise<{ transactions: number; blocksRead: number; walBytes: number; fullPages: number }> {
  await db.query('SELECT pg_stat_force_next_flush()');
  const { rows } = await db.query<{ transactions: string; blocks_read: string; wal_bytes: string; wal_fpi: string }>(
    `SELECT (d.xact_commit + d.xact_rollback)::text AS transactions, d.blks_read::text AS blocks_read, w.wal_bytes::text AS wal_bytes, w.wal_fpi::text AS wal_fpi
     FROM pg_stat_database d, pg_stat_wal w WHERE d.datname = current_database()`,
  );
  const row = rows[0]!;
  return { transactions: Number(row.transactions), blocksRead: Number(row.blocks_read), walBytes: Number(row.wal_bytes), fullPages: Number(row.wal_fpi) };
}

/** Clock ticks per second of /proc/<pid>/stat's times (USER_HZ: 100 on Linux). */
const TICKS_PER_SECOND = 100;

/** A process's CPU ticks: [utime, stime, cutime, cstime] and its parent, or null when it is gone or not on this machine. */
function processTimes(pid: number): { ppid: number; own: number; children: number } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name (which may hold spaces): state ppid ... utime(14) stime(15) cutime(16) cstime(17).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { ppid: Number(fields[1]), own: Number(fields[11]) + Number(fields[12]), children: Number(fields[13]) + Number(fields[14]) };
  } catch {
    return null;
  }
}

/** CPU milliseconds of the given processes so far. */
function cpuMillis(pids: readonly number[]): number {
  return pids.reduce((sum, pid) => sum + (processTimes(pid)?.own ?? 0), 0) * (1000 / TICKS_PER_SECOND);
}

/**
 * CPU milliseconds of the whole PostgreSQL server so far: the postmaster, its live
 * children (backends, writers), and the children it has reaped (their times are added
 * to the postmaster's cutime and cstime). NaN when the server is not a local process.
 */
function databaseCpuMillis(postmasterPid: number | null): number {
  if (postmasterPid === null) return Number.NaN;
  const postmaster = processTimes(postmasterPid);
  if (!postmaster) return Number.NaN;
  let ticks = postmaster.own + postmaster.children;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const times = processTimes(Number(entry));
    if (times && times.ppid === postmasterPid) ticks += times.own;
  }
  return ticks * (1000 / TICKS_PER_SECOND);
}

/** The postmaster of the bench's database, when it runs on this machine. */
async function postmasterOf(db: Client): Promise<number | null> {
  const { rows } = await db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
  return processTimes(rows[0]!.pid)?.ppid ?? null;
}

async function measureRound(target: Target, settings: Settings, db: Client, postmasterPid: number | null): Promise<Round> {
  await target.settle();
  const before = await databaseCounters(db);
  const serverCpuBefore = cpuMillis(target.pids());
  const databaseCpuBefore = databaseCpuMillis(postmasterPid);
  const latencies: number[] = [];
  const statusCodes = new Map<number, number>();
  let answers = 0;
  const result = await cannon(target, settings.connections, settings.roundSeconds, (statusCode, responseTime) => {
    answers++;
    statusCodes.set(statusCode, (statusCodes.get(statusCode) ?? 0) + 1);
    if (statusCode >= 200 && statusCode < 300) latencies.push(responseTime);
  });
  const [p50, p99] = percentiles(latencies, [50, 99]);
  // Until the projections have applied what the round wrote: their work is part of a request's cost.
  await target.settle();
  const after = await databaseCounters(db);
  const transactions = after.transactions - before.transactions;
  const perAnswer = (n: number) => (answers > 0 ? n / answers : 0);
  const serverCpu = cpuMillis(target.pids()) - serverCpuBefore;
  const databaseCpu = databaseCpuMillis(postmasterPid) - databaseCpuBefore;
  // result.duration is the run's real length (autocannon stops on its first 1 s sample after `duration`).
  return {
    perSecond: latencies.length / (result.duration || settings.roundSeconds),
    p50: p50!,
    p99: p99!,
    answers,
    statusCodes,
    errors: result.errors,
    transactionsPerAnswer: answers > 0 ? transactions / answers : 0,
    walBytesPerAnswer: perAnswer(after.walBytes - before.walBytes),
    fullPagesPerAnswer: perAnswer(after.fullPages - before.fullPages),
    blocksReadPerAnswer: perAnswer(after.blocksRead - before.blocksRead),
    serverCpuPerAnswer: answers > 0 ? (serverCpu * 1000) / answers : 0,
    databaseCpuPerAnswer: answers > 0 ? (databaseCpu * 1000) / answers : Number.NaN,
  };
}

export const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

// ---------------------------------------------------------------------------

/**
 * A fresh database of this section's own on the run's server: the gateway must not
 * start on the log the other sections filled (its projections would first catch up
 * on a million events).
 */
export async function ownDatabase(runDatabaseUrl: string, prefix = 'bench_http'): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `${prefix}_${randomBytes(4).toString('hex')}`;
  const admin = new Client({ connectionString: runDatabaseUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(runDatabaseUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const client = new Client({ connectionString: runDatabaseUrl });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await client.end();
    },
  };
}

/**
 * The same measurement on an empty log and on a log that already holds a history
 * (`--events N`, default 1,000,000; 100,000 with --quick): seed:load's history, then
 * projections:rebuild, as an operator's database is after normal use (seed:load
 * leaves the reactors and the outbox at its head). Flatness is the change
 * of each median ratio between the two, in the same run.
 */
async function run(runContext: BenchContext): Promise<Table[]> {
  const histories = runContext.events.length > 0 ? runContext.events : [runContext.quick ? 100_000 : 1_000_000];
  const measured: { logEvents: number; results: readonly TopologyResult[] }[] = [];
  const tables: Table[] = [];
  for (const events of [0, ...histories]) {
    const own = await ownDatabase(runContext.databaseUrl);
    try {
      let env: Record<string, string> = {};
      let logEvents = 0;
      if (events > 0) {
        const pool = new Pool({ connectionString: own.url, max: 8, application_name: 'gateway-bench-http-seed' });
        try {
          const seeded = await seedHistory(pool, events, runContext, 'http');
          logEvents = seeded.logEvents;
          env = { SECRETS_KEY: seeded.secretsKey };
        } finally {
          await pool.end();
        }
        runContext.progress(`http: projections:rebuild over ${logEvents} events`);
        await runFile(process.execPath, [path.join(repoRoot(), 'dist/apps/projector/src/rebuild.js')], {
          env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'warn', DATABASE_URL: own.url, ...env },
          maxBuffer: 16 * 1024 * 1024,
        });
      }
      const result = await runOn({ ...runContext, databaseUrl: own.url }, env, logEvents);
      measured.push({ logEvents, results: result.results });
      tables.push(...result.tables);
    } finally {
      await own.drop();
    }
  }
  tables.push(flatness(measured));
  return tables;
}

/** Each median ratio with a history in the log against the same on an empty log (goal: within 10 %). */
function flatness(measured: readonly { logEvents: number; results: readonly TopologyResult[] }[]): Table {
  const empty = measured[0]!;
  const medianRatio = (r: TopologyResult) => median(r.gateway.map((g, i) => g.perSecond / r.baseline[i]!.perSecond));
  const rows: (string | number)[][] = [];
  const summary = [];
  for (const full of measured.slice(1)) {
    for (const r of full.results) {
      const before = empty.results.find((e) => e.topology === r.topology && e.kind === r.kind);
      if (!before) continue;
      const change = (medianRatio(r) / medianRatio(before) - 1) * 100;
      const route = `${r.kind} /v1/invoices${r.kind === 'GET' ? '/{id}' : ''}`;
      rows.push([r.topology, route, full.logEvents, fixed(2)(medianRatio(before)), fixed(2)(medianRatio(r)), `${change >= 0 ? '+' : ''}${fixed(1)(change)} %`]);
      summary.push({
        measure: `${route}, ${r.topology}: gw/bare with ${full.logEvents} events in the log vs empty`,
        figure: `${fixed(2)(medianRatio(r))} vs ${fixed(2)(medianRatio(before))}`,
        ratio: `${change >= 0 ? '+' : ''}${fixed(1)(change)} %`,
      });
    }
  }
  return {
    title: 'HTTP request path as history grows: median gw/bare on an empty log and on a seeded one (goal: within 10 %)',
    headers: ['topology', 'route', 'log events', 'gw/bare, empty log', 'gw/bare, with the history', 'change'],
    rows,
    summary,
  };
}

interface Merchant {
  readonly authorization: string;
  readonly invoiceIds: string[];
}

interface TopologyResult {
  readonly topology: string;
  readonly kind: Kind;
  readonly gateway: readonly Round[];
  readonly baseline: readonly Round[];
}

/**
 * BENCH_HTTP_KINDS=POST (or GET) measures one route only (for a CPU profile of one load);
 * BENCH_HTTP_TOPOLOGIES names the topologies to run (comma-separated, as printed; default both).
 */
const KINDS = (['POST', 'GET'] as const).filter((k) => (process.env.BENCH_HTTP_KINDS ?? 'POST,GET').split(',').includes(k));

const TOPOLOGIES = [
  { name: 'npm start (one process)', scripts: [['gateway', 'dist/apps/gateway/src/main.js']] },
  {
    name: 'start:api + start:projector',
    scripts: [
      ['api', 'dist/apps/api/src/main.js'],
      ['projector', 'dist/apps/projector/src/main.js'],
    ],
  },
] as const;

async function runOn(context: BenchContext, gatewayEnv: Record<string, string>, logEvents: number): Promise<{ results: TopologyResult[]; tables: Table[] }> {
  const settings = context.quick ? QUICK : FULL;
  const notes: string[] = [];
  const db = new Client({ connectionString: context.databaseUrl, application_name: 'gateway-bench-http' });
  await db.connect();
  let baseline: ChildServer | null = null;
  try {
    await db.query(`CREATE TABLE IF NOT EXISTS bench_baseline (
      id uuid PRIMARY KEY,
      order_id text NOT NULL UNIQUE,
      body jsonb NOT NULL,
      created_at timestamptz NOT NULL
    )`);
    await db.query('TRUNCATE bench_baseline');
    const adminToken = randomBytes(24).toString('base64url'); // 32 characters
    const profileDir = process.env.BENCH_HTTP_CPU_PROF;
    const postmasterPid = await postmasterOf(db);
    context.progress('http: starting the baseline server (dist/bench/baseline-server.js)');
    baseline = await startServer('baseline', 'dist/bench/baseline-server.js', { PORT: '0', DATABASE_URL: context.databaseUrl });
    const baselineUrl = baseline.baseUrl;

    const merchants: Merchant[] = [];
    const baselineIds: string[] = [];
    const results: TopologyResult[] = [];
    for (const topology of TOPOLOGIES.filter((t) => !process.env.BENCH_HTTP_TOPOLOGIES || process.env.BENCH_HTTP_TOPOLOGIES.split(',').includes(t.name))) {
      context.progress(`http: starting ${topology.name}`);
      const children: ChildServer[] = [];
      try {
        for (const [name, script] of topology.scripts) {
          const profiled = profileDir && name !== 'projector';
          children.push(
            await startServer(
              name,
              script,
              // The default limits (60 requests/s per key, 3 s poll interval) and log level
              // (info: a line per request), as npm start runs it: not changed.
              // start:projector serves no page: the address its webhooks carry is PUBLIC_URL's.
              {
                PORT: '0',
                DATABASE_URL: context.databaseUrl,
                ADMIN_TOKEN: adminToken,
                ...(name === 'projector' ? { PUBLIC_URL: 'https://pay.example.com' } : {}),
                ...gatewayEnv,
              },
              [
                ...(profiled ? ['--cpu-prof', `--cpu-prof-dir=${path.resolve(profileDir, topology.name.replace(/\W+/g, '-'))}`] : []),
                ...(process.env.BENCH_HTTP_NODE_ARGS ?? '').split(' ').filter(Boolean),
              ],
              name === 'projector' ? /running (\d+) projections/ : undefined,
            ),
          );
        }
        const api = children[0]!;
        const alive = () => {
          for (const child of [...children, baseline!]) {
            if (child.exitCode() !== null) throw new Error(`${child.name} exited (${child.exitCode()}); output:\n${child.output()}`);
          }
        };
        if (merchants.length === 0) {
          context.progress(`http: ${settings.merchants} merchants, ${settings.invoicesPerMerchant} invoices each, and as many baseline rows`);
          merchants.push(...(await createMerchants(api.baseUrl, adminToken, settings)));
          let seedCounter = 0;
          baselineIds.push(
            ...(await seed(settings.merchants * settings.invoicesPerMerchant, 16, async () => {
              const body = await expectStatus(
                'POST /baseline (seed)',
                201,
                call(baselineUrl, 'POST', '/baseline', null, { amount: '1000.00', orderId: `seed-${++seedCounter}`, method: 'card' }),
              );
              return body.id as string;
            })),
          );
        }
        const settleGateway = () => waitForProjections(db, alive, context, notes);
        const settleBaseline = async () => {
          alive();
          await db.query('CHECKPOINT').catch(() => undefined);
        };
        const targets = requestTargets(api.baseUrl, baselineUrl, merchants, baselineIds, settleGateway, settleBaseline, {
          gateway: () => children.map((c) => c.child.pid!),
          baseline: () => [baseline!.child.pid!],
        });
        for (const kind of KINDS) {
          const gw = targets.find((t) => t.server === 'gateway' && t.kind === kind)!;
          const base = targets.find((t) => t.server === 'baseline' && t.kind === kind)!;
          context.progress(`http: ${topology.name}: ${kind}, warm-up ${settings.warmupSeconds} s each`);
          await gw.settle();
          await cannon(gw, settings.connections, settings.warmupSeconds);
          await cannon(base, settings.connections, settings.warmupSeconds);
          const result = { topology: topology.name, kind, gateway: [] as Round[], baseline: [] as Round[] };
          for (let round = 1; round <= settings.rounds; round++) {
            context.progress(
              `http: ${topology.name}: ${kind} round ${round}/${settings.rounds}, ${settings.roundSeconds} s gateway then ${settings.roundSeconds} s bare`,
            );
            result.gateway.push(await measureRound(gw, settings, db, postmasterPid));
            result.baseline.push(await measureRound(base, settings, db, postmasterPid));
            alive();
          }
          results.push(result);
        }
      } finally {
        for (const child of children.reverse()) {
          const code = await child.stop();
          if (code !== 0) context.progress(`http: ${child.name} exited with ${code}; the end of its output:\n${child.output().slice(-4000)}`);
        }
      }
    }
    return { results, tables: tables(results, settings, notes, logEvents) };
  } finally {
    if (baseline) await baseline.stop();
    await db.query('DROP TABLE IF EXISTS bench_baseline').catch(() => undefined);
    await db.end();
  }
}

/** Accounts and projects through the operator API, then invoices through the merchant API, round-robin over the merchants. */
async function createMerchants(apiUrl: string, adminToken: string, settings: Settings): Promise<Merchant[]> {
  const merchants: Merchant[] = [];
  for (let i = 0; i < settings.merchants; i++) {
    const account = await expectStatus(
      'POST /admin/v1/accounts',
      201,
      call(apiUrl, 'POST', '/admin/v1/accounts', adminToken, { name: `Bench merchant ${i}`, email: `bench${i}@example.com` }),
    );
    const project = await expectStatus(
      'POST /admin/v1/projects',
      201,
      call(apiUrl, 'POST', '/admin/v1/projects', adminToken, { accountId: account.id, name: `Bench project ${i}` }),
    );
    merchants.push({ authorization: project.keys.test.secretKey as string, invoiceIds: [] });
  }
  let created = 0;
  await seed(settings.merchants * settings.invoicesPerMerchant, 16, async () => {
    const merchant = merchants[created++ % merchants.length]!;
    const body = await expectStatus(
      'POST /v1/invoices (seed)',
      201,
      call(apiUrl, 'POST', '/v1/invoices', merchant.authorization, { amount: '1000.00', orderId: `seed-${created}`, method: 'card' }),
    );
    merchant.invoiceIds.push(body.id as string);
    return body.id as string;
  });
  return merchants.map((m) => ({ ...m, authorization: `Bearer ${m.authorization}` }));
}

/**
 * The four targets: POST spreads over the merchants' keys (each body a distinct
 * orderId); GET cycles over every invoice, merchant by merchant in turn, each with its
 * owner's key (an invoice comes round again only after all the others: the poll mark).
 */
function requestTargets(
  apiUrl: string,
  baselineUrl: string,
  merchants: readonly Merchant[],
  baselineIds: readonly string[],
  settleGateway: () => Promise<void>,
  settleBaseline: () => Promise<void>,
  pids: { gateway: () => readonly number[]; baseline: () => readonly number[] },
): Target[] {
  let nextKey = 0;
  const gets: { path: string; authorization: string }[] = [];
  for (let i = 0; gets.length < merchants.reduce((n, m) => n + m.invoiceIds.length, 0); i++) {
    for (const m of merchants) if (m.invoiceIds[i]) gets.push({ path: `/v1/invoices/${m.invoiceIds[i]}`, authorization: m.authorization });
  }
  let nextGet = 0;
  let nextBaseline = 0;
  return [
    {
      server: 'gateway',
      kind: 'POST',
      baseUrl: apiUrl,
      request: {
        method: 'POST',
        path: '/v1/invoices',
        headers: { 'content-type': 'application/json' },
        setupRequest: (request) => ({
          ...request,
          headers: { ...request.headers, authorization: merchants[nextKey++ % merchants.length]!.authorization },
          body: nextOrderBody(),
        }),
      },
      settle: settleGateway,
      pids: pids.gateway,
    },
    {
      server: 'baseline',
      kind: 'POST',
      baseUrl: baselineUrl,
      request: {
        method: 'POST',
        path: '/baseline',
        headers: { 'content-type': 'application/json' },
        setupRequest: (request) => ({ ...request, body: nextOrderBody() }),
      },
      settle: settleBaseline,
      pids: pids.baseline,
    },
    {
      server: 'gateway',
      kind: 'GET',
      baseUrl: apiUrl,
      request: {
        method: 'GET',
        path: '/v1/invoices/',
        setupRequest: (request) => {
          const get = gets[nextGet++ % gets.length]!;
          return { ...request, path: get.path, headers: { ...request.headers, authorization: get.authorization } };
        },
      },
      settle: settleGateway,
      pids: pids.gateway,
    },
    {
      server: 'baseline',
      kind: 'GET',
      baseUrl: baselineUrl,
      request: {
        method: 'GET',
        path: '/baseline/',
        setupRequest: (request) => ({ ...request, path: `/baseline/${baselineIds[nextBaseline++ % baselineIds.length]}` }),
      },
      settle: settleBaseline,
      pids: pids.baseline,
    },
  ];
}

/** The gateway is quiet when every projection checkpoint is at the head of the log (30 s without progress: noted, not waited for). */
async function waitForProjections(db: Client, alive: () => void, context: BenchContext, notes: string[]): Promise<void> {
  const started = Date.now();
  let lastSignature = '';
  let lastProgress = started;
  for (;;) {
    alive();
    // A checkpoint is a log position (transaction id, global position), and the log is
    // ordered by both: with group commit the last event in log order need not carry the
    // largest global position, so the head is read in the same order.
    const { rows } = await db.query<{ projection: string; position: string; behind: boolean }>(
      `WITH head AS (
         SELECT transaction_id::text::numeric AS commit, global_position AS prepare FROM events
         ORDER BY transaction_id DESC, global_position DESC LIMIT 1)
       SELECT c.projection, c.commit_position || '/' || c.prepare_position AS position,
              coalesce((c.commit_position, c.prepare_position) < (h.commit, h.prepare), false) AS behind
       FROM projection_checkpoints c LEFT JOIN head h ON true`,
    );
    const behind = rows.filter((r) => r.behind);
    if (rows.length > 0 && behind.length === 0) break;
    const signature = behind.map((r) => `${r.projection}@${r.position}`).join(',');
    if (signature !== lastSignature) {
      lastSignature = signature;
      lastProgress = Date.now();
    } else if (Date.now() - lastProgress > 30_000) {
      notes.push(`projections ${signature} did not move for 30 s; not waited for`);
      break;
    }
    await sleep(100);
  }
  const waited = Date.now() - started;
  if (waited >= 1_000) context.progress(`http: waited ${(waited / 1000).toFixed(1)} s for the projections`);
  await db.query('CHECKPOINT').catch(() => undefined);
}

function tables(results: readonly TopologyResult[], settings: Settings, notes: readonly string[], logEvents: number): Table[] {
  const log = logEvents === 0 ? 'an empty log' : `${logEvents} events already in the log`;
  const ms = fixed(2);
  const ratio = fixed(2);
  const cpu = (us: number) => (Number.isNaN(us) ? 'n/a' : integer(us));
  const codes = (rounds: readonly Round[]) => {
    const all = new Map<number, number>();
    for (const r of rounds) for (const [code, n] of r.statusCodes) all.set(code, (all.get(code) ?? 0) + n);
    return (
      [...all]
        .sort(([a], [b]) => a - b)
        .map(([code, n]) => `${code}:${n}`)
        .join(' ') || '-'
    );
  };
  const rows = results.map((r) => {
    const ratios = r.gateway.map((g, i) => g.perSecond / r.baseline[i]!.perSecond);
    return [
      r.topology,
      `${r.kind} ${r.kind === 'POST' ? '/v1/invoices' : '/v1/invoices/{id}'}`,
      integer(median(r.gateway.map((g) => g.perSecond))),
      ms(median(r.gateway.map((g) => g.p50))),
      ms(median(r.gateway.map((g) => g.p99))),
      integer(median(r.baseline.map((b) => b.perSecond))),
      ms(median(r.baseline.map((b) => b.p50))),
      ms(median(r.baseline.map((b) => b.p99))),
      ms(median(r.gateway.map((g, i) => g.p99 - r.baseline[i]!.p99))),
      ratio(median(ratios)),
      ratio(Math.min(...ratios)),
      ratios.map(ratio).join(' '),
      fixed(1)(median(r.gateway.map((g) => g.transactionsPerAnswer))),
      fixed(1)(median(r.baseline.map((b) => b.transactionsPerAnswer))),
      integer(median(r.gateway.map((g) => g.serverCpuPerAnswer))),
      integer(median(r.baseline.map((b) => b.serverCpuPerAnswer))),
      cpu(median(r.gateway.map((g) => g.databaseCpuPerAnswer))),
      cpu(median(r.baseline.map((b) => b.databaseCpuPerAnswer))),
      `${integer(median(r.gateway.map((g) => g.walBytesPerAnswer)))} / ${integer(median(r.baseline.map((b) => b.walBytesPerAnswer)))}`,
      `${fixed(2)(median(r.gateway.map((g) => g.fullPagesPerAnswer)))} / ${fixed(2)(median(r.baseline.map((b) => b.fullPagesPerAnswer)))}`,
      `${fixed(2)(median(r.gateway.map((g) => g.blocksReadPerAnswer)))} / ${fixed(2)(median(r.baseline.map((b) => b.blocksReadPerAnswer)))}`,
      codes(r.gateway),
    ];
  });
  const summary = results.map((r) => {
    const ratios = r.gateway.map((g, i) => g.perSecond / r.baseline[i]!.perSecond);
    return {
      measure: `${r.kind} /v1/invoices${r.kind === 'GET' ? '/{id}' : ''}, ${settings.connections} conns, ${r.topology}, ${log}`,
      figure: `${integer(median(r.gateway.map((g) => g.perSecond)))} req/s`,
      p50: ms(median(r.gateway.map((g) => g.p50))),
      p99: ms(median(r.gateway.map((g) => g.p99))),
      baseline: `${integer(median(r.baseline.map((b) => b.perSecond)))} req/s`,
      ratio: ratio(median(ratios)),
    };
  });
  const cores = os.cpus().length;
  const footnote = [
    `Notes: autocannon (this process), the gateway, the bare service and PostgreSQL share this machine's ${cores} cores.`,
    `  ${settings.connections} connections; ${settings.rounds} rounds of ${settings.roundSeconds} s, the gateway then the bare service in each (after ${settings.warmupSeconds} s warm-up of each);`,
    '  req/s, p50, p99: medians over the rounds of 2xx answers only; gw/bare: the median of the per-round ratios (listed after it);',
    "  p99 gw − bare: the median over the rounds of the gateway's p99 less the bare service's (goal ≤ 5 ms); worst round: the lowest ratio.",
    `  ${settings.merchants} merchants (the default 60 requests/s per key and 3 s poll mark on); POST: keys in turn, distinct orderIds;`,
    `  GET: ${settings.merchants * settings.invoicesPerMerchant} invoices in turn, each with its owner's key. Bare: Fastify + pg Pool(20), one INSERT or one SELECT by key.`,
    '  Before each gateway round: every projection at the head of the log, then a CHECKPOINT.',
    '  db tx/req: transactions of the database (pg_stat_database; a statement outside BEGIN..COMMIT is one) per answer,',
    "  counted until the gateway's projections have applied the round's events.",
    "  cpu µs/req: user + system CPU time of the server's own processes (the gateway's, or the API's and the projector's) per answer,",
    '  and of the whole PostgreSQL server (db cpu), over the round until the projections caught up (/proc; robust to a busy machine).',
    "  WAL B/req, full pages/req: the server's WAL bytes and full-page images (pg_stat_wal) per answer; blocks read/req: blocks the",
    '  database read from outside shared buffers (pg_stat_database.blks_read) per answer; same span as db tx/req.',
    ...notes.map((n) => `  ! ${n}`),
  ];
  return [
    {
      title: `HTTP request path on ${log}: the gateway against a bare service (autocannon on 127.0.0.1)`,
      headers: [
        'topology',
        'route',
        'gw req/s',
        'gw p50 ms',
        'gw p99 ms',
        'bare req/s',
        'bare p50 ms',
        'bare p99 ms',
        'p99 gw − bare ms',
        'gw/bare',
        'worst round',
        'per round',
        'gw db tx/req',
        'bare db tx/req',
        'gw cpu µs/req',
        'bare cpu µs/req',
        'gw db cpu µs/req',
        'bare db cpu µs/req',
        'WAL B/req gw / bare',
        'full pages/req gw / bare',
        'blocks read/req gw / bare',
        'gw status codes',
      ],
      rows,
      summary,
    },
    { title: footnote[0]!, headers: [footnote[1]!], rows: footnote.slice(2).map((line) => [line]) },
  ];
}
