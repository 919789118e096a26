import { execFile } from 'node:child_process';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { promisify } from 'node:util';
import { Client, Pool } from 'pg';
import { COMMAND_SESSION_LIMITS, createPool, readBinaryCopy } from '#platform/database';
import { PostgresEventStore } from '#event-store';
import { Projection, ProjectionRunner, readCheckpoint, resetForRebuild } from '#event-store/projections';
import { comparePositions } from '#event-store';
import { allProjections, readModelChecksums } from '#payments/read-models';
import type { BenchContext, BenchSection } from './run';
import { repoRoot } from './paths';
import { seedHistory } from './history';
import { fixed, integer, SummaryRow, Table } from './table';

const run = promisify(execFile);

/**
 * Replay at scale: `seed:load` writes a realistic history (merchants' invoices,
 * refunds, payouts and their ledger entries) into a database of its own on the bench
 * server, for each size asked (`--events 100000,1000000`; default 1,000,000, 100,000
 * with --quick). Then, in alternating rounds, every read model is rebuilt from
 * position zero two ways: as the command did before the one-pass rebuild (rebuildProjection,
 * a runner per projection, one after another, in this process, with today's
 * projections, each from its events) and `npm run projections:rebuild` as an operator runs
 * it (npm, the build check, the command in a process of its own: passes at once on two threads, each reading its
 * part of the log, the stream catalog computed in SQL; it prints its peak RSS, both
 * threads'); the read models of both must have the same checksums, which also checks
 * the catalog's SQL against its events at that size. Then `npm run ledger:verify` and
 * `npm run log:verify` over the same log. Each round first measures the
 * physical floor on the same database (floorRead: one binary COPY of the whole log, read
 * to its end and discarded), and every command is reported as a ratio to it, beside the
 * goal of issue 35 (rebuild ≤ 3×, each verification ≤ 2×; printed, not asserted).
 * Figures are medians of the rounds; each process's peak RSS is its own maximum.
 */
export const rebuildBench: BenchSection = {
  name: 'rebuild',
  description:
    'seed:load of 1,000,000 events (100,000 with --quick; --events for other sizes), then the floor (one COPY of the log), the rebuild of every read model, ledger:verify and log:verify',
  run: runSection,
};

async function runSection(context: BenchContext): Promise<Table[]> {
  const sizes = context.events.length > 0 ? context.events : [context.quick ? 100_000 : 1_000_000];
  const tables: Table[] = [];
  const rows: (string | number)[][] = [];
  const summary: SummaryRow[] = [];
  for (const events of sizes) {
    const measured = await measure(context, events);
    tables.push(measured.seedTable);
    rows.push(...measured.rows);
    summary.push(...measured.summary);
  }
  tables.push({
    title: `Replay of seed:load histories (${new Date().toISOString().slice(0, 16)}Z, load average ${os.loadavg()[0]!.toFixed(2)} at the end; medians of the rounds)`,
    headers: ['log events', 'measure', 'rounds', 'seconds', 'log events/s', 'peak RSS MiB', '× floor', 'goal'],
    rows,
    summary,
  });
  return tables;
}

async function measure(context: BenchContext, events: number): Promise<{ seedTable: Table; rows: (string | number)[][]; summary: SummaryRow[] }> {
  const database = await ownDatabase(context.databaseUrl);
  const pool = createPool(database.url, { max: 20, applicationName: 'gateway-bench-rebuild', limits: COMMAND_SESSION_LIMITS });
  const store = new PostgresEventStore(pool);
  try {
    // The commands below open the database as the gateway does: with the key the webhook secrets were sealed with.
    const seeded = await seedHistory(pool, events, context, 'rebuild');
    const { logEvents, secretsKey } = seeded;

    // Rounds: three of the floor, projections:rebuild and the verifications, in that order
    // in each round (their medians are the figures: single runs on a shared machine vary
    // by more than a change is worth); the runner per projection is a few times slower,
    // and at a million events runs once.
    const rounds = 3;
    const baselineRounds = events >= 500_000 ? 1 : 3;
    const baseline: number[] = [];
    const floors: number[] = [];
    const rebuilds: Run[] = [];
    const ledgerVerifies: Run[] = [];
    const logVerifies: Run[] = [];
    const env = { DATABASE_URL: database.url, SECRETS_KEY: secretsKey };
    context.progress(`rebuild: the floor's plan: ${await floorPlan(pool)}`);
    let afterBaseline: unknown = null;
    for (let round = 1; round <= rounds; round++) {
      if (round <= baselineRounds) {
        context.progress(`rebuild: round ${round}/${baselineRounds}, one projection after another over ${logEvents} events`);
        const started = Date.now();
        for (const projection of allProjections) await rebuildWithRunner(pool, store, projection);
        baseline.push((Date.now() - started) / 1000);
        afterBaseline = await readModelChecksums(pool);
      }

      context.progress(`rebuild: round ${round}/${rounds}, the floor: one binary COPY of the ${logEvents}-event log`);
      await settle(pool);
      floors.push(await floorRead(pool, logEvents));

      context.progress(`rebuild: round ${round}/${rounds}, projections:rebuild over ${logEvents} events`);
      await settle(pool);
      const rebuilt = await command('projections:rebuild', env);
      rebuilds.push({ seconds: rebuilt.seconds, rss: peakRss(rebuilt.output) });
      // Where its time went, as the command tells it (per projection, the pass's reads).
      for (const line of rebuilt.output.split('\n').filter((l) => /^(rebuilt |marked |read |pass)/.test(l.trim())))
        context.progress(`rebuild:   ${line.trim()}`);
      const afterOnePass = await readModelChecksums(pool);
      if (JSON.stringify(afterOnePass) !== JSON.stringify(afterBaseline)) {
        throw new Error(
          `projections:rebuild gave other read models than a runner per projection:\n${JSON.stringify({ afterBaseline, afterOnePass }, null, 1)}`,
        );
      }

      context.progress(`rebuild: round ${round}/${rounds}, ledger:verify and log:verify over ${logEvents} events`);
      await settle(pool);
      const ledger = await command('ledger:verify', env);
      if (!ledger.output.includes('OK: every entry balances')) throw new Error(`ledger:verify did not pass:\n${ledger.output}`);
      ledgerVerifies.push({ seconds: ledger.seconds, rss: peakRss(ledger.output) });
      await settle(pool);
      const chains = await command('log:verify', env);
      if (!chains.output.includes('OK: every stream chain recomputes')) throw new Error(`log:verify did not pass:\n${chains.output}`);
      logVerifies.push({ seconds: chains.seconds, rss: peakRss(chains.output) });
    }

    const floor = median(floors);
    const base = median(baseline);
    const measured = (name: string, runs: readonly Run[], goal: number) => {
      const seconds = median(runs.map((r) => r.seconds));
      return {
        row: [
          logEvents,
          `${name} (rounds: ${runs.map((r) => secs(r.seconds)).join(', ')} s)`,
          runs.length,
          secs(seconds),
          integer(logEvents / seconds),
          Math.max(...runs.map((r) => r.rss)),
          ratio(seconds / floor),
          `≤ ${goal}×`,
        ],
        summary: {
          measure: `${name}, ${logEvents}-event log`,
          figure: `${secs(seconds)} s (${integer(logEvents / seconds)} log events/s)`,
          baseline: `floor ${secs2(floor)} s`,
          ratio: `${ratio(seconds / floor)} (goal ≤ ${goal}×)`,
        },
      };
    };
    const figures = [
      measured('projections:rebuild, passes at once', rebuilds, 3),
      measured('ledger:verify', ledgerVerifies, 2),
      measured('log:verify', logVerifies, 2),
    ];
    const rows = [
      [
        logEvents,
        `floor: one binary COPY of the log (rounds: ${floors.map(secs2).join(', ')} s)`,
        rounds,
        secs2(floor),
        integer(logEvents / floor),
        '-',
        '1.0×',
        '-',
      ],
      ...figures.map((f) => f.row),
      [logEvents, 'rebuild, one runner per projection after another', baselineRounds, secs(base), integer(logEvents / base), '-', ratio(base / floor), '-'],
    ];
    const seedRate = seeded.eventsWritten / seeded.seconds;
    return {
      seedTable: {
        title: `Seeding the log (seed:load: ${seeded.merchants} merchants, ${seeded.counts.InvoiceCreated ?? 0} invoices, ${seeded.counts.InvoiceRefundRequested ?? 0} refund requests, ${seeded.counts.PayoutRequested ?? 0} payouts)`,
        headers: ['events', 'appends', 'seconds', 'events/s'],
        rows: [[seeded.eventsWritten, seeded.appends, secs(seeded.seconds), integer(seedRate)]],
        summary: [{ measure: `seed:load, ${seeded.eventsWritten} events`, figure: `${integer(seedRate)} events/s` }],
      },
      rows,
      summary: [
        { measure: `floor: one binary COPY of the ${logEvents}-event log`, figure: `${secs2(floor)} s (${integer(logEvents / floor)} log events/s)` },
        ...figures.map((f) => f.summary),
      ],
    };
  } finally {
    await store.close();
    await pool.end();
    await database.drop();
  }
}

/**
 * Before a timed round: the database settled from what ran before it (the seeding, the
 * runner per projection, the last round). No autovacuum worker of this database is at
 * work (waited for, at most a minute), and a checkpoint has written the dirty pages
 * (skipped when the role may not checkpoint). Otherwise a round pays for the writes of
 * the one before it: the first round after the runner per projection took about 1 s
 * longer than the next two (2026-11-24 13:39 UTC).
 */
async function settle(pool: Pool): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const busy = await pool.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE backend_type = 'autovacuum worker' AND datname = current_database()`,
    );
    if (busy.rows[0]!.n === 0) break;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  await pool.query('CHECKPOINT').catch(() => undefined);
}

const secs = fixed(1);
const secs2 = fixed(2);
const ratio = (r: number) => `${r.toFixed(1)}×`;

/** A command's run: its seconds (process start included) and the peak RSS it printed. */
interface Run {
  readonly seconds: number;
  readonly rss: number;
}

/** The floor's statement: the whole log in log order, every column, in COPY's binary format (issue 35). */
const FLOOR_SELECT = 'SELECT * FROM events ORDER BY global_position';

/**
 * The physical floor of a replay, in seconds: one `COPY (SELECT * FROM events ORDER BY
 * global_position) TO STDOUT (FORMAT binary)` of the whole log, on a connection of the
 * bench's pool, read to its trailer by the code the log's reads use (readBinaryCopy:
 * each row's fields found, nothing decoded) and discarded. No replay can read the log
 * faster than this; the commands are reported as ratios to it.
 */
async function floorRead(pool: Pool, logEvents: number): Promise<number> {
  const fields = (await pool.query(`${FLOOR_SELECT} LIMIT 0`)).fields.length;
  let rows = 0;
  const started = Date.now();
  await readBinaryCopy(pool, FLOOR_SELECT, fields, () => {
    rows++;
  });
  const seconds = (Date.now() - started) / 1000;
  if (rows !== logEvents) throw new Error(`the floor's COPY read ${rows} rows of a ${logEvents}-event log`);
  return seconds;
}

/** How PostgreSQL runs the floor's statement (its plan's nodes, outermost first), for the progress lines. */
async function floorPlan(pool: Pool): Promise<string> {
  const plan = await pool.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${FLOOR_SELECT}`);
  return plan.rows.map((r) => r['QUERY PLAN'].trim().replace(/\s+\(cost=.*$/, '')).join(' / ');
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** The peak RSS a command printed (`peak RSS N MiB`). */
function peakRss(output: string): number {
  const match = /peak RSS (\d+) MiB/.exec(output);
  if (!match) throw new Error(`no peak RSS in the output:\n${output}`);
  return Number(match[1]);
}

/**
 * Runs an operator command as the docs tell an operator to run it, `npm run <script>`
 * (its build check, npm's start and the script's Node flags included), and times it
 * from start to exit.
 */
async function command(
  script: 'projections:rebuild' | 'ledger:verify' | 'log:verify',
  env: Record<string, string>,
): Promise<{ seconds: number; output: string }> {
  const started = Date.now();
  // The scripts' `node` is the first on PATH, as for an operator; the bench's own node goes first on it.
  const { stdout } = await run('npm', ['run', '--silent', script], {
    cwd: repoRoot(),
    env: { PATH: `${path.dirname(process.execPath)}${path.delimiter}${process.env.PATH ?? ''}`, HOME: process.env.HOME ?? '', LOG_LEVEL: 'warn', ...env },
    maxBuffer: 16 * 1024 * 1024,
  });
  return { seconds: (Date.now() - started) / 1000, output: stdout };
}

/** A fresh database on the bench server, so the figures are about this history alone. */
async function ownDatabase(serverUrl: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `bench_rebuild_${randomBytes(4).toString('hex')}`;
  const onServer = async (sql: string) => {
    const client = new Client({ connectionString: serverUrl });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  await onServer(`CREATE DATABASE ${name}`);
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: () => onServer(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`) };
}

/** The baseline: a projection reset and built again by a runner of its own, from zero to the head of the log. */
async function rebuildWithRunner(pool: Pool, store: PostgresEventStore, projection: Projection): Promise<void> {
  const head = await store.headPosition();
  await resetForRebuild(pool, [projection], { keepIndexes: true });
  const runner = new ProjectionRunner(pool, store, projection, { standbyRetryMs: 500 });
  runner.start();
  try {
    for (;;) {
      const at = (await readCheckpoint(pool, projection.name))?.position;
      if (head === null || (at !== undefined && comparePositions(at, head) >= 0)) return;
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    await runner.stop();
  }
}
