import type { Pool } from 'pg';
import { inTransaction } from '#platform/database';
import type { Position, RecordedEvent } from '..';
import { advanceCheckpoint } from './checkpoints';
import type { Projection } from './projection';

/**
 * One batch of a projection, the way every consumer of the log applies it: the
 * projection's `prepare` first, outside any transaction (an open write transaction
 * hides every later event from every subscriber of the cluster), then `apply` and the
 * checkpoint's compare-and-set from `from` to `to` in one transaction, so the batch
 * is applied exactly once or not at all (CheckpointMovedError when the checkpoint is
 * no longer at `from`: nothing applied). `events` are the batch's events that match
 * the projection's filter (none: only the checkpoint moves past what was skipped).
 *
 * The commit does not wait for its WAL flush: a read model is derived from the log
 * and its rows commit together with the checkpoint, so a crash of the database can
 * only lose a last batch whole, which is then applied again.
 */
export async function applyBatchWithCheckpoint(
  pool: Pool,
  projection: Projection,
  batch: { readonly from: Position; readonly to: Position; readonly events: readonly RecordedEvent[] },
): Promise<void> {
  const prepared = batch.events.length > 0 && projection.prepare ? await projection.prepare(batch.events) : undefined;
  await inTransaction(
    pool,
    async (client) => {
      if (batch.events.length > 0) await projection.apply(client, batch.events, prepared);
      await advanceCheckpoint(client, projection.name, batch.from, batch.to, batch.events.length);
    },
    { synchronousCommit: 'off' },
  );
}
