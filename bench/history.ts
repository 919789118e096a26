import { randomBytes } from 'node:crypto';
import type { Pool } from 'pg';
import { seedLoad } from '../apps/tools/src/seed/seed-load';
import { allMigrations, loadConfig } from '#payments/composition';
import { fixedKeys, SecretBox } from '#platform/secrets';
import { migrate } from '#platform/database';
import { PostgresEventStore } from '#event-store';
import type { BenchContext } from './run';

export type SeededHistory = Awaited<ReturnType<typeof seedLoad>> & {
  /** The key the webhook secrets were sealed with: the gateway and the commands open the database with it (SECRETS_KEY). */
  readonly secretsKey: string;
  /** Events in the log once seeded. */
  readonly logEvents: number;
};

/**
 * A history of about `events` events written by `seed:load` (its own code, its seed
 * 'bench') into a migrated database, vacuumed and analysed as autovacuum would have
 * left it: the database a section measures "after normal use".
 */
export async function seedHistory(pool: Pool, events: number, context: BenchContext, section: string): Promise<SeededHistory> {
  await migrate(pool, allMigrations);
  const secretsKey = randomBytes(32);
  context.progress(`${section}: seeding a history of about ${events} events`);
  let reported = Date.now();
  const seeded = await seedLoad(
    { pool, store: new PostgresEventStore(pool), terms: loadConfig({}), secrets: new SecretBox(fixedKeys([secretsKey])) },
    {
      events,
      seed: 'bench',
      onProgress: (p) => {
        if (Date.now() - reported < 10_000 && !p.done) return;
        reported = Date.now();
        context.progress(`${section}: seeded ${p.eventsWritten} events (${(p.fraction * 100).toFixed(0)} %)`);
      },
    },
  );
  const logEvents = Number((await pool.query<{ n: string }>('SELECT count(*) AS n FROM events')).rows[0]!.n);
  // What autovacuum would have done by now, so that the first measurement does not pay for it alone.
  await pool.query('VACUUM (ANALYZE) events');
  return { ...seeded, secretsKey: secretsKey.toString('hex'), logEvents };
}
