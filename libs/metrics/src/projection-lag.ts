import type { Pool } from 'pg';
import { comparePositions, EventStore, Position, PostgresEventStore, positionToString } from '../../event-store/src';

/** Counting stops here: a lag shown as this many events means at least as many. */
export const LAG_COUNT_LIMIT = 10_000;

export interface ProjectionLag {
  readonly projection: string;
  /** The stored checkpoint (the read model's progress, whichever instance is active). */
  readonly checkpoint: string | null;
  /** Events of the global log after the checkpoint, up to LAG_COUNT_LIMIT. */
  readonly lagEvents: number;
}

/**
 * How far each projection's stored checkpoint is behind the head of the log, in
 * events. Reads the checkpoints table (so a standby instance, or any process on the
 * database, sees the active instance's progress) and the log head; only a projection
 * behind the head costs a read of the log, one per distinct checkpoint, of at most
 * LAG_COUNT_LIMIT events (on PostgreSQL an index-only count). A checkpoint may lie past events a filtered projection
 * skipped: those count as done.
 */
export async function projectionLag(pool: Pool, store: EventStore, projections: readonly string[]): Promise<ProjectionLag[]> {
  const rows = await pool.query<{ projection: string; commit_position: string; prepare_position: string }>(
    'SELECT projection, commit_position, prepare_position FROM projection_checkpoints WHERE projection = ANY($1)',
    [projections],
  );
  const stored = new Map<string, Position>(
    rows.rows.map((r) => [r.projection, { commit: BigInt(r.commit_position), prepare: BigInt(r.prepare_position) }]),
  );
  const head = await store.headPosition();
  const counted = new Map<string, Promise<number>>();
  const lagAfter = (checkpoint: Position | null): Promise<number> => {
    if (head === null) return Promise.resolve(0);
    if (checkpoint !== null && comparePositions(checkpoint, head) >= 0) return Promise.resolve(0);
    const key = checkpoint === null ? 'start' : positionToString(checkpoint);
    let count = counted.get(key);
    if (count === undefined) {
      count = countEventsAfter(pool, store, checkpoint ?? { commit: 0n, prepare: 0n });
      counted.set(key, count);
    }
    return count;
  };
  return Promise.all(
    projections.map(async (projection) => {
      const checkpoint = stored.get(projection) ?? null;
      return { projection, checkpoint: checkpoint ? positionToString(checkpoint) : null, lagEvents: await lagAfter(checkpoint) };
    }),
  );
}

/** Events of the log after `after` (exclusive), counted up to LAG_COUNT_LIMIT. */
async function countEventsAfter(pool: Pool, store: EventStore, after: Position): Promise<number> {
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
  const events = await store.readAll({ after: after.commit === 0n && after.prepare === 0n ? 'start' : after, maxCount: LAG_COUNT_LIMIT });
  return events.length;
}
