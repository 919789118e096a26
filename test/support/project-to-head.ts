import type { Pool } from 'pg';
import { comparePositions, EventStore } from '#event-store';
import { Projection, ProjectionRunner } from '#event-store/projections';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Runs `projection` until it has applied the whole log as it stands now, then stops it
 * (also when it fails: a runner left running would hold the checkpoint from the next one).
 *
 * The head is read once every event written is visible: the PostgreSQL store shows only what no open transaction of the cluster can still
 * precede, and the test databases share one cluster, so a transaction of another test file
 * can hide events just written for a moment.
 */
export async function projectToHead(pool: Pool, store: EventStore, projection: Projection, batchSize = 250): Promise<void> {
  const deadline = Date.now() + 60_000;
  const runner = new ProjectionRunner(pool, store, projection, { batchSize });
  runner.start();
  try {
    // The events of transactions the PostgreSQL store does not show yet (see its visibility rule).
    const hidden = async () =>
      (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM events WHERE NOT transaction_id < pg_snapshot_xmin(pg_current_snapshot())')).rows[0]!.n;
    while ((await hidden()) > 0) {
      if (Date.now() > deadline) throw new Error('the events written never all became visible');
      await sleep(20);
    }
    const head = await store.headPosition();
    if (!head) return;
    for (;;) {
      const checkpoint = runner.status().checkpoint;
      if (checkpoint && comparePositions(checkpoint, head) >= 0) return;
      if (Date.now() > deadline) throw new Error(`${projection.name} projection did not catch up`);
      await sleep(20);
    }
  } finally {
    await runner.stop();
  }
}
