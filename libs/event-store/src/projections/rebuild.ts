import type { Pool } from 'pg';
import type { EventStore, Position } from '..';
import { comparePositions } from '..';
import { inTransaction } from '#platform/database';
import type { Logger } from '#platform/logging';
import { readCheckpoint } from './checkpoints';
import type { Projection } from './projection';
import { ProjectionRunner } from './projection-runner';

export interface RebuildProgress {
  readonly projection: string;
  readonly eventsApplied: bigint;
  /** Rough share of the log done, from log positions. */
  readonly fraction: number;
  readonly done: boolean;
}

/**
 * Empties the projection's tables and moves its checkpoint back to the start of the
 * log, in one transaction. A projector that is running this projection notices on
 * its next batch (its compare-and-set fails) and follows from the start.
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

/**
 * Rebuilds a projection from position zero up to the head of the log as it is now.
 * This process does the work if no projector holds the projection; otherwise the
 * running projector does it and this call follows its progress. Either way, batches
 * and checkpoints commit together, so killing the process mid-way and starting a
 * projector again ends with the same read model.
 */
export async function rebuildProjection(
  pool: Pool,
  store: EventStore,
  projection: Projection,
  options: { onProgress?: (p: RebuildProgress) => void; log?: Logger; batchSize?: number; resume?: boolean } = {},
): Promise<{ eventsApplied: bigint; seconds: number }> {
  const started = Date.now();
  const head = await store.headPosition();
  if (!options.resume) await resetProjection(pool, projection);
  const runner = new ProjectionRunner(pool, store, projection, {
    batchSize: options.batchSize,
    log: options.log,
    standbyRetryMs: 500,
  });
  runner.start();
  try {
    for (;;) {
      const row = await readCheckpoint(pool, projection.name);
      const position = row?.position ?? { commit: 0n, prepare: 0n };
      const done = head === null || comparePositions(position, head) >= 0;
      options.onProgress?.({
        projection: projection.name,
        eventsApplied: row?.eventsApplied ?? 0n,
        fraction: fractionDone(position, head),
        done,
      });
      if (done) {
        await pool.query('UPDATE projection_checkpoints SET rebuild_started_at = NULL WHERE projection = $1', [projection.name]);
        return { eventsApplied: row?.eventsApplied ?? 0n, seconds: (Date.now() - started) / 1000 };
      }
      const status = runner.status();
      if (status.state === 'failing') options.log?.warn({ error: status.lastError }, 'rebuild batch failed; retrying');
      await new Promise((r) => setTimeout(r, 100));
    }
  } finally {
    await runner.stop();
  }
}

function fractionDone(position: Position, head: Position | null): number {
  if (head === null || head.prepare === 0n) return 1;
  return Math.min(1, Number(position.prepare) / Number(head.prepare));
}
