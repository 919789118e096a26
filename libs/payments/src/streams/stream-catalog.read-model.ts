import type { PoolClient } from 'pg';
import type { Migration } from '#platform/database';
import { Position, RecordedEvent, STREAM_ORDER_SCAN, streamCategory, streamSummariesThrough } from '#event-store';
import type { Projection } from '#event-store/projections';
import { copyRowsUnlessTaken } from '#platform/database';

/** From how many streams begun in a batch their rows go by COPY (a rebuild's pages). */
export const STREAM_CATALOG_COPY_MIN_ROWS = 256;

/**
 * The catalog keeps one index, on the stream's name: a second on (category, name) would
 * put every new stream into two randomly keyed B-trees, and on a large log nearly each
 * such insert writes its leaf page whole into the WAL after a checkpoint
 * (docs/benchmarks.md). Nothing in the gateway reads the catalog by category; an
 * auditor's query by category scans it (one row per stream).
 */
export const streamCatalogMigration: Migration = {
  id: 'payments:0001_read_model_stream_catalog',
  sql: `
CREATE TABLE stream_catalog (
  stream_name text PRIMARY KEY,
  category text NOT NULL,
  event_count bigint NOT NULL,
  last_revision bigint NOT NULL,
  last_event_type text NOT NULL,
  first_event_at timestamptz NOT NULL,
  last_event_at timestamptz NOT NULL
);
CREATE TRIGGER stream_catalog_reset_counted AFTER TRUNCATE ON stream_catalog FOR EACH STATEMENT EXECUTE FUNCTION count_projection_reset('stream_catalog');
`,
};

/**
 * Every stream of the log with its category, length, last event and the times of its
 * earliest and latest events: the auditor's index into the raw streams. Idempotent:
 * counts are derived from revisions, so applying an event twice changes nothing; and
 * the same whatever the batches. A rebuild computes it in the database from the log's
 * table when the log is there (rebuildInDatabase, decision 0095).
 */
export const streamCatalogProjection: Projection = {
  name: 'stream_catalog',
  tables: ['stream_catalog'],
  // A stream's name, revisions, last type and times: never an event's data.
  readsEventData: false,
  async apply(tx: PoolClient, events: readonly RecordedEvent[]): Promise<void> {
    // Per stream: its first and last events of the batch (by revision) and its earliest
    // and latest event times, which need not be theirs (an append's time is its
    // transaction's start): so the rows do not depend on how the log is cut into batches.
    const latest = new Map<string, { first: RecordedEvent; last: RecordedEvent; firstAt: Date; lastAt: Date }>();
    for (const event of events) {
      const seen = latest.get(event.streamName);
      if (!seen) {
        latest.set(event.streamName, { first: event, last: event, firstAt: event.createdAt, lastAt: event.createdAt });
        continue;
      }
      if (event.revision > seen.last.revision) seen.last = event;
      if (event.createdAt < seen.firstAt) seen.firstAt = event.createdAt;
      if (event.createdAt > seen.lastAt) seen.lastAt = event.createdAt;
    }
    if (latest.size === 0) return;
    let rows = [...latest.values()];
    // Streams that begin in this batch have no row yet (but for a batch applied again):
    // many of them (a rebuild's pages) go by COPY, and if any is there after all, the
    // COPY is undone and every row goes by the upsert below.
    const begun = rows.filter((r) => r.first.revision === 0n);
    if (begun.length >= STREAM_CATALOG_COPY_MIN_ROWS) {
      const copied = await copyRowsUnlessTaken(
        tx,
        'stream_catalog',
        [
          { name: 'stream_name', type: 'text' },
          { name: 'category', type: 'text' },
          { name: 'event_count', type: 'bigint' },
          { name: 'last_revision', type: 'bigint' },
          { name: 'last_event_type', type: 'text' },
          { name: 'first_event_at', type: 'timestamptz' },
          { name: 'last_event_at', type: 'timestamptz' },
        ],
        begun.map((r) => [r.last.streamName, streamCategory(r.last.streamName), r.last.revision + 1n, r.last.revision, r.last.type, r.firstAt, r.lastAt]),
      );
      if (copied) rows = rows.filter((r) => r.first.revision !== 0n);
      if (rows.length === 0) return;
    }
    // The rows as one JSON parameter (jsonb_to_recordset): see foldBatchIntoTable.
    await tx.query(
      `INSERT INTO stream_catalog AS c (stream_name, category, event_count, last_revision, last_event_type, first_event_at, last_event_at)
       SELECT s.name, s.category, s.revision + 1, s.revision, s.type, s.first_at, s.last_at
       FROM jsonb_to_recordset($1::jsonb) AS s(name text, category text, revision bigint, type text, first_at timestamptz, last_at timestamptz)
       ON CONFLICT (stream_name) DO UPDATE SET
         event_count = GREATEST(c.event_count, EXCLUDED.event_count),
         last_revision = GREATEST(c.last_revision, EXCLUDED.last_revision),
         last_event_type = CASE WHEN EXCLUDED.last_revision >= c.last_revision THEN EXCLUDED.last_event_type ELSE c.last_event_type END,
         first_event_at = LEAST(c.first_event_at, EXCLUDED.first_event_at),
         last_event_at = GREATEST(c.last_event_at, EXCLUDED.last_event_at)`,
      [
        JSON.stringify(
          rows.map((r) => ({
            name: r.last.streamName,
            category: streamCategory(r.last.streamName),
            revision: r.last.revision.toString(),
            type: r.last.type,
            first_at: r.firstAt.toISOString(),
            last_at: r.lastAt.toISOString(),
          })),
        ),
      ],
    );
  },
  // Every stream's row from the log's table in one statement (decision 0095): the events are not read into Node at all.
  async rebuildInDatabase(tx: PoolClient, upTo: Position): Promise<number> {
    for (const setting of STREAM_ORDER_SCAN) await tx.query(`SET LOCAL ${setting}`);
    const r = await tx.query<{ events: string }>(
      `WITH summaries AS MATERIALIZED (${streamSummariesThrough(upTo)}),
       inserted AS (
         INSERT INTO stream_catalog (stream_name, category, event_count, last_revision, last_event_type, first_event_at, last_event_at)
         SELECT stream_name, coalesce(substring(stream_name FROM '${SQL_STREAM_CATEGORY}'), stream_name),
                last_revision + 1, last_revision, last_event_type, first_event_at, last_event_at
         FROM summaries)
       SELECT coalesce(sum(events), 0)::text AS events FROM summaries`,
    );
    return Number(r.rows[0]!.events);
  },
};

/**
 * streamCategory's pattern as a PostgreSQL regular expression: the category is the
 * group (letters, digits and underscores before the first dash, the rest of the name
 * neither empty nor holding a line terminator, as JavaScript's `.` and `$` read it).
 */
const SQL_STREAM_CATEGORY = '^([a-z][a-z0-9_]*)-[^\\n\\r\\u2028\\u2029]+$';
