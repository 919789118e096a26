/**
 * Migration payments:0043 leaves the stream catalog one index (its primary key on the
 * stream's name): a second, on (category, name), put every new stream into two randomly
 * keyed B-trees. A rebuild interrupted while it had that index set aside (a row of
 * projection_deferred_indexes) must not create it again when it restores its indexes.
 */
import { migrate } from '#platform/database';
import { allMigrations } from '#payments/composition';
import { createTestDatabase, TestDatabase } from '../support/test-database';

const ONE_INDEX = 'payments:0043_stream_catalog_one_index';

let db: TestDatabase;
beforeAll(async () => {
  db = await createTestDatabase({ migrate: false });
});
afterAll(async () => {
  await db?.drop();
});

const catalogIndexes = async (): Promise<string[]> =>
  (await db.pool.query<{ indexname: string }>(`SELECT indexname FROM pg_indexes WHERE tablename = 'stream_catalog' ORDER BY indexname`)).rows.map(
    (r) => r.indexname,
  );

it('drops the (category, name) index and the record of it set aside by a rebuild', async () => {
  const index = allMigrations.findIndex((m) => m.id === ONE_INDEX);
  expect(index).toBeGreaterThan(0);
  await migrate(db.pool, allMigrations.slice(0, index));
  expect(await catalogIndexes()).toEqual(['stream_catalog_category', 'stream_catalog_pkey']);
  // As a rebuild leaves it when it dies with the index set aside.
  await db.pool.query(
    `INSERT INTO projection_deferred_indexes (projection, index_name, create_statement)
     VALUES ('stream_catalog', 'stream_catalog_category', 'CREATE INDEX stream_catalog_category ON public.stream_catalog USING btree (category, stream_name)')`,
  );

  expect(await migrate(db.pool, allMigrations)).toEqual(allMigrations.slice(index).map((m) => m.id));
  expect(await catalogIndexes()).toEqual(['stream_catalog_pkey']);
  expect((await db.pool.query(`SELECT count(*)::int AS n FROM projection_deferred_indexes WHERE index_name = 'stream_catalog_category'`)).rows[0].n).toBe(0);
});
