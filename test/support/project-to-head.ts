import type { Pool } from 'pg';
import { comparePositions, EventStore, Position, RecordedEvent } from '#event-store';
import { Projection, ProjectionRunner } from '#event-store/projections';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The head of the PostgreSQL log once every event written so far is visible. The store
 * shows only what no open transaction of the cluster can still precede, and the test
 * databases share one cluster, so a transaction of another test file can hide events just
 * written for a moment: the head read then is stale, or null.
 */
export async function visibleHead(pool: Pool, store: EventStore, timeoutMs = 60_000): Promise<Position | null> {
  const deadline = Date.now() + timeoutMs;
  const hidden = async () =>
    (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM events WHERE NOT transaction_id < pg_snapshot_xmin(pg_current_snapshot())')).rows[0]!.n;
  while ((await hidden()) > 0) {
    if (Date.now() > deadline) throw new Error('the events written never all became visible');
    await sleep(20);
  }
  return store.headPosition();
}

/** The whole visible log, in log order, read by readAll pages of `pageSize`. */
export async function wholeLog(store: EventStore, pageSize = 700): Promise<RecordedEvent[]> {
  const all: RecordedEvent[] = [];
  for (;;) {
    const page = await store.readAll({ after: all.length > 0 ? all[all.length - 1]!.position : 'start', maxCount: pageSize });
    all.push(...page);
    if (page.length < pageSize) return all;
  }
}

/**
 * Runs `projection` until it has applied the whole log as it stands now, then stops it
 * (also when it fails: a runner left running would hold the checkpoint from the next one).
 */
export async function projectToHead(pool: Pool, store: EventStore, projection: Projection, batchSize = 250): Promise<void> {
  const deadline = Date.now() + 60_000;
  const runner = new ProjectionRunner(pool, store, projection, { batchSize });
  runner.start();
  try {
    const head = await visibleHead(pool, store);
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
