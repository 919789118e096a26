import type { Pool } from 'pg';
import { inTransaction } from '#platform/database';
import type { Position, RecordedEvent } from '..';
import { advanceCheckpoint } from './checkpoints';
import { isReactor, LogSubscriber } from './reactor';

/** One batch of a subscriber: the events of the log from `from` (exclusive) to `to` that match its filter. */
export interface SubscriberBatch {
  readonly from: Position;
  readonly to: Position;
  readonly events: readonly RecordedEvent[];
}

/**
 * A batch's work before its transaction, outside any transaction (an open write
 * transaction hides every later event from every subscriber of the cluster): a
 * reactor's reactions, or a projection's `prepare` (its result is handed to `apply`).
 */
export async function prepareBatch(subscriber: LogSubscriber, events: readonly RecordedEvent[]): Promise<unknown> {
  if (events.length === 0) return undefined;
  if (isReactor(subscriber)) return subscriber.react(events);
  return subscriber.prepare?.(events);
}

/**
 * A batch's transaction: a projection's `apply` (a reactor has none) and the
 * checkpoint's compare-and-set from `from` to `to`, so the batch is applied exactly
 * once or not at all (CheckpointMovedError when the checkpoint is no longer at
 * `from`: nothing applied).
 *
 * The commit does not wait for its WAL flush: a read model is derived from the log
 * and its rows commit together with the checkpoint, so a crash of the database can
 * only lose a last batch whole, which is then applied again (a reactor's, reacted to
 * again: once per cause). A later commit that depends on it, such as a webhook
 * attempt, flushes it.
 */
export async function commitBatch(pool: Pool, subscriber: LogSubscriber, batch: SubscriberBatch, prepared: unknown): Promise<void> {
  await inTransaction(
    pool,
    async (client) => {
      if (batch.events.length > 0 && !isReactor(subscriber)) await subscriber.apply(client, batch.events, prepared);
      await advanceCheckpoint(client, subscriber.name, batch.from, batch.to, batch.events.length);
    },
    { synchronousCommit: 'off' },
  );
}

/**
 * One batch, the way every consumer of the log applies it: prepareBatch, then
 * commitBatch. `events` are the batch's events that match the subscriber's filter
 * (none: only the checkpoint moves past what was skipped).
 */
export async function applyBatchWithCheckpoint(pool: Pool, subscriber: LogSubscriber, batch: SubscriberBatch): Promise<void> {
  await commitBatch(pool, subscriber, batch, await prepareBatch(subscriber, batch.events));
}
