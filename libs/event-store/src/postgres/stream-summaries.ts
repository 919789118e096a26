import type { Position } from '../event-store';
import { LOG_ORDER_SCAN, positionLiteral } from './log-read-by-copy';

/**
 * The streams of the log up to `upTo` (a head from headPosition, inclusive), one row
 * each, computed in SQL from the `events` table: `stream_name`, `last_revision` and
 * `last_event_type` (its event of the highest revision), `first_event_at` and
 * `last_event_at` (its earliest and latest event times, to the millisecond, as the
 * log's reads give them) and `events` (how many of its events lie in the range). For a
 * read model that summarizes streams, rebuilt in the database that holds the log
 * (Projection.rebuildInDatabase) instead of event by event in Node. Rows in the order
 * of `events_stream_revision_unique` (stream name, revision), which the statement
 * reads (STREAM_ORDER_SCAN): no sort of the log.
 */
export function streamSummariesThrough(upTo: Position): string {
  // The last type by one lookup of the stream's last event: an array of the stream's types
  // (array_agg) grows with the stream, and one of 45 million events passes PostgreSQL's 1 GB.
  return `SELECT s.stream_name, s.last_revision,
      (SELECT x.event_type FROM events x WHERE x.stream_name = s.stream_name AND x.stream_revision = s.last_revision) AS last_event_type,
      s.first_event_at, s.last_event_at, s.events
    FROM (SELECT stream_name, max(stream_revision) AS last_revision,
        date_trunc('milliseconds', min(created_at)) AS first_event_at,
        date_trunc('milliseconds', max(created_at)) AS last_event_at,
        count(*) AS events
      FROM events
      WHERE (transaction_id, global_position) <= ${positionLiteral(upTo)}
        AND transaction_id < (SELECT pg_snapshot_xmin(pg_current_snapshot()))
      GROUP BY stream_name) s`;
}

/**
 * The settings (SET LOCAL, for the transaction of the rebuild) under which the
 * summaries read the log in stream order from its unique index, grouped as they come:
 * otherwise PostgreSQL sorts the whole log, spilling it to disk. The log read's own
 * (no sort, no sequential scan), which leave the index as the only way.
 */
export const STREAM_ORDER_SCAN: readonly string[] = LOG_ORDER_SCAN;
