import type { Pool } from 'pg';
import { inTransaction } from '#platform/database';
import type { Projection } from './projection';

export interface RebuildProgress {
  readonly projection: string;
  readonly eventsApplied: bigint;
  /** Rough share of the log done, from log positions. */
  readonly fraction: number;
  readonly done: boolean;
  /** False: computed from the log's table in SQL, in one statement (Projection.rebuildInDatabase), not read through the log page by page. */
  readonly readsLog: boolean;
}

/**
 * Empties the projection's tables and moves its checkpoint back to the start of the
 * log, in one transaction, for its runner to build again from the first event. The
 * caller makes sure no runner is active meanwhile (a test, or a rebuild holding the
 * projection's lock).
 */
export async function resetProjection(pool: Pool, projection: Projection): Promise<void> {
  await inTransaction(pool, async (tx) => {
    if (projection.tables.length > 0) await tx.query(`TRUNCATE ${projection.tables.join(', ')}`);
    await tx.query(
      `INSERT INTO projection_checkpoints (projection, commit_position, prepare_position, events_applied, updated_at, rebuild_started_at)
       VALUES ($1, 0, 0, 0, now(), now())
       ON CONFLICT (projection) DO UPDATE SET commit_position = 0, prepare_position = 0, events_applied = 0,
         updated_at = now(), rebuild_started_at = now()`,
      [projection.name],
    );
  });
}
