import type { Pool } from 'pg';
import { AllFilter, comparePositions, EventStore, matchesFilter, Position, PostgresEventStore, positionToString } from '#event-store';
import { readCheckpointPositions } from '#event-store/projections';

/** Counting stops here: a lag shown as this many events means at least as many. */
export const LAG_COUNT_LIMIT = 10_000;

export interface ProjectionLag {
  readonly projection: string;
  /** The stored checkpoint (the read model's progress, whichever instance is active). */
  readonly checkpoint: string | null;
  /** Events of the global log after the checkpoint, up to LAG_COUNT_LIMIT. */
  readonly lagEvents: number;
}

/** A projection as the lag sees it: its name (the checkpoint row) and what it reads of the log. */
export interface LaggingProjection {
  readonly name: string;
  readonly filter?: AllFilter;
}

/**
 * How far each projection's stored checkpoint is behind the head of the log, in
 * events. Reads the checkpoints table (so a standby instance, or any process on the
 * database, sees the active instance's progress) and the log head; only a projection
 * behind the head costs a read of the log, of at most LAG_COUNT_LIMIT events (on
 * PostgreSQL an index-only count, one per distinct checkpoint). A checkpoint may lie
 * past events a filtered projection skipped: those count as done. On another store
 * (EventStoreDB) only the events after the checkpoint that the projection's filter
 * takes count: its subscriptions move the checkpoint past skipped events only every
 * few dozen events looked at (server checkpoints), so a quiet projection's checkpoint
 * may sit a little behind events it will never handle, which is no lag.
 */
export async function projectionLag(pool: Pool, store: EventStore, projections: readonly LaggingProjection[]): Promise<ProjectionLag[]> {
  const stored = await readCheckpointPositions(
    pool,
    projections.map((p) => p.name),
  );
  const head = await store.headPosition();
  const counted = new Map<string, Promise<number | readonly RecordedEventHeader[]>>();
  const lagAfter = async (projection: LaggingProjection, checkpoint: Position | null): Promise<number> => {
    if (head === null) return 0;
    if (checkpoint !== null && comparePositions(checkpoint, head) >= 0) return 0;
    const key = checkpoint === null ? 'start' : positionToString(checkpoint);
    let count = counted.get(key);
    if (count === undefined) {
      count = eventsAfter(pool, store, checkpoint ?? { commit: 0n, prepare: 0n });
      counted.set(key, count);
    }
    const after = await count;
    return typeof after === 'number' ? after : after.filter((e) => matchesFilter(projection.filter, e)).length;
  };
  return Promise.all(
    projections.map(async (projection) => {
      const checkpoint = stored.get(projection.name) ?? null;
      return {
        projection: projection.name,
        checkpoint: checkpoint ? positionToString(checkpoint) : null,
        lagEvents: await lagAfter(projection, checkpoint),
      };
    }),
  );
}

type RecordedEventHeader = { readonly streamName: string; readonly type: string };

/**
 * The events of the log after `after` (exclusive), up to LAG_COUNT_LIMIT: on
 * PostgreSQL only their number (an index-only count), elsewhere the events, for the
 * projections' filters.
 */
async function eventsAfter(pool: Pool, store: EventStore, after: Position): Promise<number | readonly RecordedEventHeader[]> {
  if (store instanceof PostgresEventStore) {
    // The adapter's log order and visibility rule (transactions still in flight are not in the log yet).
    const result = await pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM (
         SELECT 1 FROM events
         WHERE (transaction_id, global_position) > ($1::text::xid8, $2::bigint) AND transaction_id < pg_snapshot_xmin(pg_current_snapshot())
         LIMIT $3) behind`,
      [after.commit.toString(), after.prepare.toString(), LAG_COUNT_LIMIT],
    );
    return Number(result.rows[0]!.n);
  }
  return store.readAll({ after: after.commit === 0n && after.prepare === 0n ? 'start' : after, maxCount: LAG_COUNT_LIMIT });
}
