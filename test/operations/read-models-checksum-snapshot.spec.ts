/**
 * `read-models:checksum` prints where each read model stands against the head of the
 * log, all of the checksums' one snapshot (docs/operations.md): it locks the tables it
 * reads before it takes its snapshot, so an append and a projection's checkpoint moved
 * while it waits for a table (held by a lock the test holds on `invoices`) are printed
 * with the rows of that moment, and no read model is printed ahead of the head.
 */
import { randomUUID } from 'node:crypto';
import type { PoolClient } from 'pg';
import { comparePositions, PostgresEventStore, Position, positionFromString, positionToString, visibleLogHead } from '#event-store';
import { ensureCheckpoint } from '#event-store/projections';
import { startProcess } from '../support/gateway-process';
import { poll } from '../support/merchant-fixtures';
import { createTestDatabase, TestDatabase } from '../support/test-database';

describe('read-models:checksum reads the head and the checkpoints in its snapshot', () => {
  let db: TestDatabase;
  let store: PostgresEventStore;

  beforeAll(async () => {
    // LOCK TABLE … ACCESS EXCLUSIVE takes a transaction id (wal_level replica), held while the command starts:
    // the cluster's horizon, on a server of its own (test/support/test-database.ts says why).
    db = await createTestDatabase({ serverOfItsOwn: true });
    store = new PostgresEventStore(db.pool);
  });
  afterAll(async () => {
    await store?.close();
    await db?.drop();
  });

  const append = async (): Promise<Position> =>
    (await store.appendToStream(`probe-${randomUUID()}`, [{ id: randomUUID(), type: 'Probed', data: { n: 1 } }])).position;
  const moveInvoicesTo = (to: Position) =>
    db.pool.query(`UPDATE projection_checkpoints SET commit_position = $1, prepare_position = $2 WHERE projection = 'invoices'`, [
      to.commit.toString(),
      to.prepare.toString(),
    ]);

  it('an append and a checkpoint moved while it waits for a table are printed, no read model past the head', async () => {
    const first = await append();
    await ensureCheckpoint(db.pool, 'invoices');
    await moveInvoicesTo(first);
    // The log's visible head (the cluster's horizon) has reached the first event.
    await poll(
      () => visibleLogHead(db.pool),
      (head) => head !== null && comparePositions(head, first) >= 0,
      'the first event to be visible',
      60_000,
    );

    const lock: PoolClient = await db.pool.connect();
    let output = '';
    let second: Position | undefined;
    try {
      await lock.query('BEGIN');
      await lock.query('LOCK TABLE invoices IN ACCESS EXCLUSIVE MODE');
      const run = startProcess('read-models-checksum', { DATABASE_URL: db.url }, ['invoices']);
      // The command waits for the lock before its snapshot.
      await poll(
        async () =>
          (
            await db.pool.query(
              `SELECT 1 FROM pg_stat_activity WHERE application_name = 'gateway-read-models-checksum' AND wait_event_type = 'Lock' AND state = 'active'`,
            )
          ).rowCount,
        (n) => n === 1,
        'read-models:checksum to wait for the lock on invoices',
        60_000,
      );
      // Meanwhile the log grows and the projection follows it.
      second = await append();
      await moveInvoicesTo(second);
      await lock.query('COMMIT');
      expect(await run.exited).toBe(0);
      output = run.output();
    } finally {
      await lock.query('ROLLBACK').catch(() => undefined);
      lock.release();
    }

    const head = /^log head: (\d+\/\d+)$/m.exec(output)?.[1];
    const invoices = /^ {2}invoices: at (\d+\/\d+)/m.exec(output)?.[1];
    expect({ head, invoices }).toEqual({ head: expect.any(String), invoices: positionToString(second!) });
    expect(comparePositions(positionFromString(invoices!), positionFromString(head!))).toBeLessThanOrEqual(0);
  }, 120_000);
});
