import { randomBytes } from 'node:crypto';
import { Client } from 'pg';
import { seedLoad } from '../apps/tools/src/seed/seed-load';
import { loadConfig } from '#payments/composition';
import { fixedKeys, SecretBox } from '#platform/secrets';
import { COMMAND_SESSION_LIMITS, createPool, migrate } from '#platform/database';
import { allMigrations } from '#payments/composition';
import { PostgresEventStore } from '#event-store';
import { rebuildProjection } from '#event-store/projections';
import { allProjections } from '#payments/read-models';
import type { BenchContext, BenchSection } from './run';
import { fixed, integer, Table } from './table';

/**
 * Replay at scale: `seed:load` writes a realistic history (merchants' invoices,
 * refunds, payouts and their ledger entries; 1,000,000 events, 100,000 with
 * --quick) into a database of its own on the bench server, then every read model
 * is rebuilt from position zero with the rebuild API of `projections:rebuild`, one
 * after another as the command does. Per projection: the events it applies per
 * second, and the log events per second it gets through (each rebuild reads the
 * whole log, skipping what its filter leaves out).
 */
export const rebuildBench: BenchSection = {
  name: 'rebuild',
  description: 'seed:load of 1,000,000 events (100,000 with --quick), then the rebuild of every read model: events/s per projection',
  run,
};

async function run(context: BenchContext): Promise<Table[]> {
  const events = context.quick ? 100_000 : 1_000_000;
  const database = await ownDatabase(context.databaseUrl);
  const pool = createPool(database.url, { max: 20, applicationName: 'gateway-bench-rebuild', limits: COMMAND_SESSION_LIMITS });
  const store = new PostgresEventStore(pool);
  try {
    await migrate(pool, allMigrations);
    context.progress(`rebuild: seeding a history of about ${events} events`);
    let reported = Date.now();
    const seeded = await seedLoad(
      { pool, store, terms: loadConfig({}), secrets: new SecretBox(fixedKeys([randomBytes(32)])) },
      {
        events,
        seed: 'bench',
        onProgress: (p) => {
          if (Date.now() - reported < 10_000 && !p.done) return;
          reported = Date.now();
          context.progress(`rebuild: seeded ${p.eventsWritten} events (${(p.fraction * 100).toFixed(0)} %)`);
        },
      },
    );
    const logEvents = Number((await pool.query<{ n: string }>('SELECT count(*) AS n FROM events')).rows[0]!.n);
    // What autovacuum would have done by now, so that the first rebuild does not pay for it alone.
    await pool.query('VACUUM (ANALYZE) events');

    const rows: (string | number)[][] = [];
    let totalSeconds = 0;
    let totalApplied = 0;
    for (const projection of allProjections) {
      context.progress(`rebuild: ${projection.name} over ${logEvents} events`);
      let last = Date.now();
      const result = await rebuildProjection(pool, store, projection, {
        onProgress: (p) => {
          if (Date.now() - last < 10_000) return;
          last = Date.now();
          context.progress(`rebuild: ${projection.name} ${(p.fraction * 100).toFixed(0)} %, ${p.eventsApplied} events applied`);
        },
      });
      const applied = Number(result.eventsApplied);
      totalSeconds += result.seconds;
      totalApplied += applied;
      rows.push([projection.name, applied, secs(result.seconds), integer(applied / result.seconds), integer(logEvents / result.seconds)]);
    }
    rows.push(['all, one after another', totalApplied, secs(totalSeconds), integer(totalApplied / totalSeconds), integer(logEvents / totalSeconds)]);

    const seedRate = seeded.eventsWritten / seeded.seconds;
    return [
      {
        title: `Seeding the log (seed:load: ${seeded.merchants} merchants, ${seeded.counts.InvoiceCreated ?? 0} invoices, ${seeded.counts.InvoiceRefundRequested ?? 0} refund requests, ${seeded.counts.PayoutRequested ?? 0} payouts)`,
        headers: ['events', 'appends', 'seconds', 'events/s'],
        rows: [[seeded.eventsWritten, seeded.appends, secs(seeded.seconds), integer(seedRate)]],
        summary: [{ measure: `seed:load, ${seeded.eventsWritten} events`, figure: `${integer(seedRate)} events/s` }],
      },
      {
        title: `Projection rebuild from position zero over a log of ${logEvents} events`,
        headers: ['projection', 'events applied', 'seconds', 'applied events/s', 'log events/s'],
        rows,
        summary: [
          ...rows.slice(0, -1).map((r) => ({ measure: `rebuild ${r[0]}, ${logEvents}-event log`, figure: `${r[3]} events/s` })),
          {
            measure: `rebuild of every read model, ${logEvents}-event log`,
            figure: `${integer(logEvents / totalSeconds)} log events/s (${secs(totalSeconds)} s)`,
          },
        ],
      },
    ];
  } finally {
    await store.close();
    await pool.end();
    await database.drop();
  }
}

const secs = fixed(1);

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
