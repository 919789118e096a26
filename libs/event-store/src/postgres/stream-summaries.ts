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
  return `SELECT stream_name, max(stream_revision) AS last_revision,
      (array_agg(event_type ORDER BY stream_revision))[count(*)] AS last_event_type,
      date_trunc('milliseconds', min(created_at)) AS first_event_at,
      date_trunc('milliseconds', max(created_at)) AS last_event_at,
      count(*) AS events
    FROM events
    WHERE (transaction_id, global_position) <= ${positionLiteral(upTo)}
      AND transaction_id < (SELECT pg_snapshot_xmin(pg_current_snapshot()))
    GROUP BY stream_name`;
}

/**
 * The settings (SET LOCAL, for the transaction of the rebuild) under which the
 * summaries read the log in stream order from its unique index, grouped as they come:
 * otherwise PostgreSQL sorts the whole log, spilling it to disk. The log read's own
 * (no sort, no sequential scan), which leave the index as the only way.
 */
export const STREAM_ORDER_SCAN: readonly string[] = LOG_ORDER_SCAN;
