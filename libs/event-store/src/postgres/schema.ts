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

/**
 * The hash chain of each stream (docs/audit-log.md, decision 0099). Every event gets
 * `chain_hash` = SHA-256(previous chain hash of its stream ‖ its content), computed by
 * the statement that inserts it (event_chain_hashes) over the jsonb text of its data
 * and metadata: the same bytes as chainContent/canonicalJson in #event-store/hash-chain.
 * The stream row keeps the chain hashes of its latest append (the last is the stream's
 * chain head): the append's UPDATE of that row, which already serialises the appends of
 * a stream, reads the head and computes the new hashes once.
 *
 * Events stored before this migration get their chains here, stream by stream in
 * revision order, exactly as the append path would have written them.
 */
export const eventHashChainMigration: Migration = {
  id: 'event-store:0005_event_hash_chain',
  sql: `
ALTER TABLE events ADD COLUMN chain_hash bytea;
ALTER TABLE event_streams ADD COLUMN chain_hashes bytea[];

-- The chain hashes of events appended after previous (NULL: a stream's first events),
-- the first at first_revision; events: a JSON array of {id, type, data, metadata}. An
-- event's content is six netstrings (<UTF-8 byte length>:<bytes>,): stream name,
-- revision, id, type, data::text, metadata::text (chainContent in #event-store/hash-chain).
CREATE FUNCTION event_chain_hashes(previous bytea, stream_name text, first_revision bigint, events jsonb) RETURNS bytea[]
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
  hash bytea := coalesce(previous, decode(repeat('00', 32), 'hex'));
  hashes bytea[] := '{}';
  event jsonb;
  revision text;
  id text;
  type text;
  data text;
  metadata text;
BEGIN
  FOR i IN 0 .. jsonb_array_length(events) - 1 LOOP
    event := events -> i;
    revision := (first_revision + i)::text;
    id := (event->>'id')::uuid::text;
    type := event->>'type';
    data := (event->'data')::text;
    metadata := (event->'metadata')::text;
    hash := sha256(hash || convert_to(
         octet_length(convert_to(stream_name, 'UTF8')) || ':' || stream_name || ','
      || octet_length(revision) || ':' || revision || ','
      || octet_length(id) || ':' || id || ','
      || octet_length(convert_to(type, 'UTF8')) || ':' || type || ','
      || octet_length(convert_to(data, 'UTF8')) || ':' || data || ','
      || octet_length(convert_to(metadata, 'UTF8')) || ':' || metadata || ',', 'UTF8'));
    hashes := hashes || hash;
  END LOOP;
  RETURN hashes;
END
$fn$;

DO $fill$
DECLARE
  event record;
  stream text := NULL;
  hash bytea;
BEGIN
  CREATE TEMP TABLE event_chain_fill (global_position bigint PRIMARY KEY, chain_hash bytea NOT NULL) ON COMMIT DROP;
  FOR event IN SELECT global_position, stream_name, stream_revision, event_id, event_type, data, metadata
               FROM events ORDER BY stream_name, stream_revision LOOP
    IF event.stream_name IS DISTINCT FROM stream THEN
      stream := event.stream_name;
      hash := NULL;
    END IF;
    hash := (event_chain_hashes(hash, event.stream_name, event.stream_revision,
               jsonb_build_array(jsonb_build_object('id', event.event_id, 'type', event.event_type, 'data', event.data, 'metadata', event.metadata))))[1];
    INSERT INTO event_chain_fill VALUES (event.global_position, hash);
  END LOOP;
  UPDATE events SET chain_hash = f.chain_hash FROM event_chain_fill f WHERE f.global_position = events.global_position;
END
$fill$;

UPDATE event_streams s SET chain_hashes = ARRAY[head.chain_hash]
FROM (SELECT DISTINCT ON (stream_name) stream_name, chain_hash FROM events ORDER BY stream_name, stream_revision DESC) head
WHERE head.stream_name = s.stream_name;

ALTER TABLE events ALTER COLUMN chain_hash SET NOT NULL;
`,
};

/**
 * Checkpoints of the whole log (decision 0100): each row extends the previous one by the
 * events visible after it, in log order, with the running hash after its last event and
 * the chain hashes of its events (32 bytes each), so that a verification names the
 * first event the log no longer holds where the checkpoint saw it. Written lazily (when
 * a checkpoint is asked for), never by an append.
 */
export const eventLogCheckpointsMigration: Migration = {
  id: 'event-store:0006_event_log_checkpoints',
  sql: `
CREATE TABLE event_log_checkpoints (
  seq bigint PRIMARY KEY,
  from_events bigint NOT NULL,
  events bigint NOT NULL,
  position_commit xid8 NOT NULL,
  position_prepare bigint NOT NULL,
  log_hash bytea NOT NULL,
  event_hashes bytea NOT NULL,
  CONSTRAINT event_log_checkpoints_segment CHECK (events > from_events AND octet_length(event_hashes) = 32 * (events - from_events))
);
`,
};
