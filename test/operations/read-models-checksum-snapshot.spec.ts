/**
 * `read-models:checksum` prints where each read model stands against the head of the
 * log, all of the checksums' one snapshot (docs/operations.md): it locks the tables it
 * reads before it takes its snapshot, so an append and a projection's checkpoint moved
 * while it waits for a table are printed with the rows of that moment; once its snapshot
 * is taken, what moves while it reads (held at the `invoices` index) is not printed. No
 * read model is printed ahead of the head.
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

  /**
   * Runs the command while a session holds `hold` (in a transaction), and once the
   * command waits for it appends an event and moves the invoices checkpoint to it: what
   * it printed, and the positions before and after.
   */
  async function checksumWhileHeld(hold: string): Promise<{ first: Position; second: Position; head: string; invoices: string }> {
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
    try {
      await lock.query('BEGIN');
      await lock.query(hold);
      const run = startProcess('read-models-checksum', { DATABASE_URL: db.url }, ['invoices']);
      await poll(
        async () =>
          (
            await db.pool.query(
              `SELECT 1 FROM pg_stat_activity WHERE application_name = 'gateway-read-models-checksum' AND wait_event_type = 'Lock' AND state = 'active'`,
            )
          ).rowCount,
        (n) => n === 1,
        'read-models:checksum to wait for the lock',
        60_000,
      );
      // Meanwhile the log grows and the projection follows it.
      const second = await append();
      await moveInvoicesTo(second);
      await lock.query('COMMIT');
      expect(await run.exited).toBe(0);
      const output = run.output();
      const head = /^log head: (\d+\/\d+)$/m.exec(output)?.[1];
      const invoices = /^ {2}invoices: at (\d+\/\d+)/m.exec(output)?.[1];
      expect({ head, invoices }).toEqual({ head: expect.any(String), invoices: expect.any(String) });
      // No read model printed past the head.
      expect(comparePositions(positionFromString(invoices!), positionFromString(head!))).toBeLessThanOrEqual(0);
      return { first, second, head: head!, invoices: invoices! };
    } finally {
      await lock.query('ROLLBACK').catch(() => undefined);
      lock.release();
    }
  }

  it('waiting for a table, it has taken no snapshot yet: it prints what was moved meanwhile', async () => {
    // A TRUNCATE's lock: the command locks its tables before its snapshot.
    const { second, invoices } = await checksumWhileHeld('LOCK TABLE invoices IN ACCESS EXCLUSIVE MODE');
    expect(invoices).toBe(positionToString(second));
  }, 120_000);

  it('waiting inside its read, it prints the head and the checkpoints of its snapshot, not what moved meanwhile', async () => {
    // REINDEX holds the table's index (the checksum's read waits for it) but not the table against the command's lock.
    const { first, invoices } = await checksumWhileHeld('REINDEX INDEX invoices_pkey');
    expect(invoices).toBe(positionToString(first));
  }, 120_000);
});
