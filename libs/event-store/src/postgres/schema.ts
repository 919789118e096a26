import type { Migration } from '#platform/database';

/**
 * The PostgreSQL event store. `events.transaction_id` records the writing
 * transaction (pg_current_xact_id()); readers of the global log take only rows of
 * transactions below the oldest one still running and order by
 * (transaction_id, global_position), so a transaction that took its positions
 * early but committed late is never skipped.
 */
export const eventStoreMigration: Migration = {
  id: 'event-store:0001_event_store',
  legacyVersion: 1,
  sql: `
CREATE TABLE event_streams (
  stream_name text PRIMARY KEY,
  revision bigint NOT NULL
);

CREATE TABLE events (
  global_position bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  transaction_id xid8 NOT NULL DEFAULT pg_current_xact_id(),
  stream_name text NOT NULL,
  stream_revision bigint NOT NULL,
  event_id uuid NOT NULL,
  event_type text NOT NULL,
  data jsonb NOT NULL,
  metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
  created_at timestamptz NOT NULL DEFAULT now(),
  CONSTRAINT events_stream_revision_unique UNIQUE (stream_name, stream_revision),
  CONSTRAINT events_event_id_unique UNIQUE (event_id)
);

CREATE INDEX events_log_order ON events (transaction_id, global_position);
`,
};
