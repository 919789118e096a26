/**
 * Migration payments:0042 turns the invoices and payouts tables from the aggregates'
 * folded states into the read models' own rows. It cannot convert rows in SQL (a row is
 * evolved by TypeScript), so it empties both tables and sets their projections back to
 * the start of the log with the rebuild mark, as an interrupted projections:rebuild
 * leaves them: lists answer 503 until the projector has caught up, and the projector
 * clears the mark then. Here on a database migrated up to 0041 and projected to its head.
 */
import { randomBytes } from 'node:crypto';
import { PostgresEventStore } from '#event-store';
import { ProjectionRunner, rebuildProjectionsTogether } from '#event-store/projections';
import { migrate } from '#platform/database';
import { allMigrations, loadConfig } from '#payments/composition';
import { invoicesProjection, payoutsProjection, readModelChecksums } from '#payments/read-models';
import { fixedKeys, SecretBox } from '#platform/secrets';
import { seedLoad } from '../../apps/tools/src/seed/seed-load';
import { visibleHead } from '../support/project-to-head';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { onOlderSchema } from '../support/webhook-project';

const ROWS_MIGRATION = 'payments:0042_read_model_rows';

let db: TestDatabase;
let store: PostgresEventStore;

beforeAll(async () => {
  db = await createTestDatabase({ migrate: false });
  store = new PostgresEventStore(db.pool, { pollIntervalMs: 10 });
}, 60_000);

afterAll(async () => {
  await store.close();
  await db.drop();
});

const marks = async () =>
  (
    await db.pool.query<{ projection: string; commit_position: string; marked: boolean }>(
      `SELECT projection, commit_position::text, rebuild_started_at IS NOT NULL AS marked FROM projection_checkpoints
        WHERE projection IN ('invoices', 'payouts') ORDER BY projection`,
    )
  ).rows;
const count = async (table: string) => Number((await db.pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${table}`)).rows[0]!.n);
const streams = async (prefix: string) =>
  Number((await db.pool.query<{ n: string }>(`SELECT count(DISTINCT stream_name) AS n FROM events WHERE stream_name LIKE $1`, [`${prefix}-%`])).rows[0]!.n);

it('empties invoices and payouts with the rebuild mark; the projector fills them in the new shape and clears it', async () => {
  const index = allMigrations.findIndex((m) => m.id === ROWS_MIGRATION);
  expect(index).toBeGreaterThan(0);
  await migrate(db.pool, allMigrations.slice(0, index));
  await onOlderSchema(db.pool, () =>
    seedLoad(
      { pool: db.pool, store, terms: loadConfig({}), secrets: new SecretBox(fixedKeys([randomBytes(32)])) },
      { events: 3_000, seed: 'rows-upgrade', days: 5 },
    ),
  );
  const head = (await visibleHead(db.pool, store))!;
  // The read models as the code before 0042 left them: at the head, one row per stream, in the old shape.
  await db.pool.query(`INSERT INTO projection_checkpoints (projection, commit_position, prepare_position) VALUES ('invoices', $1, $2), ('payouts', $1, $2)`, [
    head.commit.toString(),
    head.prepare.toString(),
  ]);
  await db.pool.query(
    `INSERT INTO invoices (id, project_id, account_id, mode, order_id, status, amount, method, created_at, expires_at, paid_at, state, last_revision)
     VALUES (gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), 'live', 'old-row', 'created', 100, NULL, now(), now(), NULL, '{"status":"created"}', 0)`,
  );
  const invoiceStreams = await streams('invoice');
  const payoutStreams = await streams('payout');
  expect(invoiceStreams).toBeGreaterThan(0);
  expect(payoutStreams).toBeGreaterThan(0);

  expect(await migrate(db.pool, allMigrations)).toEqual(allMigrations.slice(index).map((m) => m.id));
  expect(await count('invoices')).toBe(0);
  expect(await count('payouts')).toBe(0);
  expect(await marks()).toEqual([
    { projection: 'invoices', commit_position: '0', marked: true },
    { projection: 'payouts', commit_position: '0', marked: true },
  ]);

  // The projector as it runs: from the start of the log, clearing the mark once caught up.
  const runners = [invoicesProjection, payoutsProjection].map((p) => new ProjectionRunner(db.pool, store, p, { batchSize: 500 }));
  runners.forEach((r) => r.start());
  try {
    const deadline = Date.now() + 60_000;
    while ((await marks()).some((m) => m.marked)) {
      if (Date.now() > deadline) throw new Error(`the mark was never cleared: ${JSON.stringify(await marks())}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  } finally {
    await Promise.all(runners.map((r) => r.stop()));
  }
  expect(await count('invoices')).toBe(invoiceStreams);
  expect(await count('payouts')).toBe(payoutStreams);
  // Every row in the read model's own shape: a payout's account is stored masked, no aggregate state.
  const payout = (await db.pool.query<{ item: Record<string, unknown> }>('SELECT item FROM payouts ORDER BY id LIMIT 1')).rows[0]!.item;
  expect(Object.keys(payout)).toContain('netAmount');
  expect(payout).not.toHaveProperty('requested');
  expect(String(payout.account)).toContain('*');
  // What the projector built equals a rebuild of the same log.
  const live = await readModelChecksums(db.pool, ['invoices', 'payouts']);
  await rebuildProjectionsTogether(db.pool, store, [invoicesProjection, payoutsProjection]);
  expect(await readModelChecksums(db.pool, ['invoices', 'payouts'])).toEqual(live);
}, 180_000);
