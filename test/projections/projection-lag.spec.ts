import { randomUUID } from 'node:crypto';
import { EventStore, Position, PostgresEventStore } from '#event-store';
import { LaggingProjection, projectionLag } from '#payments/observability';
import { createTestDatabase, TestDatabase } from '../support/test-database';

/**
 * The lag of a projection on a store other than PostgreSQL (EventStoreDB), shown with
 * the PostgreSQL store seen only through the port: the lag then reads the log as it
 * does on EventStoreDB, whose filtered subscriptions leave the checkpoint behind
 * events the projection skips until the server's next checkpoint.
 */
describe('projection lag on a store other than PostgreSQL', () => {
  let db: TestDatabase;
  let postgres: PostgresEventStore;
  let store: EventStore;

  beforeAll(async () => {
    db = await createTestDatabase();
    postgres = new PostgresEventStore(db.pool);
    store = {
      appendToStream: (...args) => postgres.appendToStream(...args),
      readStream: (...args) => postgres.readStream(...args),
      readAll: (...args) => postgres.readAll(...args),
      subscribeToAll: (...args) => postgres.subscribeToAll(...args),
      headPosition: () => postgres.headPosition(),
      close: () => postgres.close(),
    };
  });
  afterAll(async () => {
    await postgres.close();
    await db.drop();
  });

  const append = async (stream: string): Promise<Position> =>
    (await store.appendToStream(stream, [{ id: randomUUID(), type: 'Happened', data: {} }], { expectedRevision: 'no_stream' })).position;

  async function setCheckpoint(projection: string, at: Position): Promise<void> {
    await db.pool.query(
      `INSERT INTO projection_checkpoints (projection, commit_position, prepare_position) VALUES ($1, $2, $3)
       ON CONFLICT (projection) DO UPDATE SET commit_position = $2, prepare_position = $3`,
      [projection, at.commit.toString(), at.prepare.toString()],
    );
  }

  /** The lags once the log shows `total` events after the checkpoint (the PostgreSQL log shows a commit once older transactions ended). */
  async function lagsOnce(projections: readonly LaggingProjection[], total: number): Promise<Record<string, number>> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const lags = Object.fromEntries((await projectionLag(db.pool, store, projections)).map((l) => [l.projection, l.lagEvents]));
      if (lags.everything === total || Date.now() > deadline) return lags;
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  it('counts only the events after the checkpoint that the projection takes', async () => {
    const projections: LaggingProjection[] = [{ name: 'orders_only', filter: { streamNamePrefixes: ['order-'] } }, { name: 'everything' }];
    const handled = await append(`order-${randomUUID()}`);
    for (let i = 0; i < 5; i++) await append(`refund-${randomUUID()}`);
    await setCheckpoint('orders_only', handled);
    await setCheckpoint('everything', handled);

    expect(await lagsOnce(projections, 5)).toEqual({ orders_only: 0, everything: 5 });

    await append(`order-${randomUUID()}`);
    expect(await lagsOnce(projections, 6)).toEqual({ orders_only: 1, everything: 6 });
  });
});
