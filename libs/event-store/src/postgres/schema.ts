import type { Migration } from '#platform/database';

/**
 * The PostgreSQL event log.
 *
 * - `events.transaction_id` records the writing transaction (pg_current_xact_id()):
 *   readers of the global log take only rows of transactions below the oldest one still
 *   running and order by (transaction_id, global_position), so a transaction that took
 *   its positions early but committed late is never skipped.
 * - The hash chain of each stream (docs/audit-log.md, decision 0099): every event's
 *   `chain_hash` = SHA-256(previous chain hash of its stream ‖ its content), computed by
 *   the statement that inserts it (event_chain_hashes) over the jsonb text of its data
 *   and metadata, the same bytes as chainContent/canonicalJson in #event-store/hash-chain.
 *   The stream row keeps the chain hashes of its latest append (the last is the chain's
 *   head): the append's UPDATE of that row, which already serialises a stream's appends,
 *   reads the head and computes the new hashes once.
 * - Checkpoints of the whole log (decision 0100): each row extends the previous one by
 *   the events visible after it, in log order, with the running hash after its last event
 *   and the chain hashes of its events (32 bytes each), so that a verification names the
 *   first event the log no longer holds where the checkpoint saw it. Written when a
 *   checkpoint is asked for, never by an append.
 * - Group commit (decision 0099): the appends one process makes in one turn of its event
 *   loop are one call of append_event_group, one transaction, each append with its own
 *   expected revision and answer. The advisory locks of all the group's streams are
 *   taken first, in one order (APPEND_LOCK in postgres-event-store.ts). A group whose
 *   streams and event ids are all distinct and whose appends each carry events (a turn of
 *   creations) is written by one set-based statement; any other runs the loop, per
 *   append in arrival order what the single append does. An append one of whose event
 *   ids is stored writes nothing and is answered `ids_stored` (the caller then looks
 *   whether it was a retry or a reused id); one whose expectation fails writes nothing
 *   and is answered the stream's revision at that point (`revision_then`, null: no
 *   stream). Every table is reached by key whatever the plan cache holds: PL/pgSQL keeps
 *   a generic plan per session, and one made on a young log (an empty table) would scan
 *   or hash-join the whole events table on every call; hence no sequential scan, hash or
 *   merge join in the function.
 */
export const eventLogMigration: Migration = {
  id: 'event-store:0001_event_log',
  sql: `
CREATE TABLE event_streams (
  stream_name text PRIMARY KEY,
  revision bigint NOT NULL,
  chain_hashes bytea[]
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
  chain_hash bytea NOT NULL,
  CONSTRAINT events_stream_revision_unique UNIQUE (stream_name, stream_revision),
  CONSTRAINT events_event_id_unique UNIQUE (event_id)
);

CREATE INDEX events_log_order ON events (transaction_id, global_position);

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

CREATE FUNCTION append_event_group(group_streams text[], group_kinds text[], group_expected bigint[], group_events jsonb)
RETURNS TABLE (append_ord int, appended_revision bigint, appended_position bigint, appended_commit text, ids_stored boolean, revision_then bigint)
LANGUAGE plpgsql SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off AS $fn$
DECLARE
  lock_key int;
  v_stream text;
  v_kind text;
  v_expected bigint;
  v_events jsonb;
  v_count int;
  v_revision bigint;
  v_hashes bytea[];
  v_position bigint;
  v_commit text := NULL;
  v_ids uuid[];
  v_stored uuid[];
BEGIN
  PERFORM pg_advisory_xact_lock(5406117, k.lock_key)
  FROM (SELECT DISTINCT hashtext(s) AS lock_key FROM unnest(group_streams) AS s ORDER BY 1) AS k;

  -- Every event id of the group, read from the JSON once.
  v_ids := ARRAY(SELECT (x.value->>'id')::uuid FROM jsonb_array_elements(group_events) AS a(events), jsonb_array_elements(a.events) AS x(value));
  IF (SELECT count(DISTINCT s) FROM unnest(group_streams) AS s) = cardinality(group_streams)
     AND (SELECT count(DISTINCT i) FROM unnest(v_ids) AS i) = cardinality(v_ids)
     AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(group_events) AS a(events) WHERE jsonb_array_length(a.events) = 0) THEN
    -- The group's ids already stored: one index scan of an array (a join may become a walk of the whole index).
    v_stored := ARRAY(SELECT e.event_id FROM events e WHERE e.event_id = ANY (v_ids));
    RETURN QUERY
    WITH appends AS MATERIALIZED (
      SELECT u.ord::int AS ord, u.stream, u.kind, u.expected, group_events -> (u.ord::int - 1) AS events,
             jsonb_array_length(group_events -> (u.ord::int - 1)) AS n
      FROM unnest(group_streams, group_kinds, group_expected) WITH ORDINALITY AS u(stream, kind, expected, ord)
    ),
    stored AS MATERIALIZED (
      SELECT DISTINCT a.ord FROM appends a, jsonb_array_elements(a.events) AS x(value)
      WHERE (x.value->>'id')::uuid = ANY (v_stored)
    ),
    plan AS MATERIALIZED (
      SELECT a.*, s.revision AS current,
             CASE a.kind WHEN 'no_stream' THEN s.stream_name IS NULL
                         WHEN 'any' THEN true
                         WHEN 'stream_exists' THEN s.stream_name IS NOT NULL
                         ELSE s.revision IS NOT DISTINCT FROM a.expected END AS ok
      FROM appends a LEFT JOIN event_streams s ON s.stream_name = a.stream
      WHERE a.ord NOT IN (SELECT ord FROM stored)
    ),
    created AS (
      INSERT INTO event_streams AS s (stream_name, revision, chain_hashes)
      SELECT p.stream, p.n - 1, event_chain_hashes(NULL, p.stream, 0, p.events) FROM plan p WHERE p.ok AND p.current IS NULL ORDER BY p.ord
      ON CONFLICT (stream_name) DO NOTHING
      RETURNING s.stream_name, s.revision, s.chain_hashes
    ),
    moved AS (
      UPDATE event_streams AS s SET revision = s.revision + p.n,
        chain_hashes = event_chain_hashes(s.chain_hashes[cardinality(s.chain_hashes)], p.stream, s.revision + 1, p.events)
      FROM plan p WHERE p.ok AND p.current IS NOT NULL AND s.stream_name = p.stream AND s.revision = p.current
      RETURNING s.stream_name, s.revision, s.chain_hashes
    ),
    written AS (SELECT * FROM created UNION ALL SELECT * FROM moved),
    inserted AS (
      INSERT INTO events (stream_name, stream_revision, event_id, event_type, data, metadata, chain_hash)
      SELECT w.stream_name, w.revision - p.n + e.ord, (e.value->>'id')::uuid, e.value->>'type', e.value->'data', e.value->'metadata', w.chain_hashes[e.ord::int]
      FROM written w JOIN plan p ON p.stream = w.stream_name, jsonb_array_elements(p.events) WITH ORDINALITY AS e(value, ord)
      ORDER BY p.ord, e.ord
      RETURNING stream_name, global_position
    ),
    positions AS (SELECT i.stream_name, max(i.global_position) AS position FROM inserted i GROUP BY i.stream_name)
    SELECT a.ord, w.revision, pos.position, CASE WHEN w.stream_name IS NOT NULL THEN pg_current_xact_id()::text END,
           st.ord IS NOT NULL, CASE WHEN w.stream_name IS NULL AND st.ord IS NULL THEN p.current END
    FROM appends a
    LEFT JOIN stored st ON st.ord = a.ord
    LEFT JOIN plan p ON p.ord = a.ord
    LEFT JOIN written w ON w.stream_name = a.stream
    LEFT JOIN positions pos ON pos.stream_name = a.stream
    ORDER BY a.ord;
    RETURN;
  END IF;
  FOR i IN 1 .. cardinality(group_streams) LOOP
    v_stream := group_streams[i];
    v_kind := group_kinds[i];
    v_expected := group_expected[i];
    v_events := group_events -> (i - 1);
    v_count := jsonb_array_length(v_events);
    append_ord := i;
    appended_revision := NULL;
    appended_position := NULL;
    appended_commit := NULL;
    ids_stored := false;
    revision_then := NULL;
    v_ids := ARRAY(SELECT (x.value->>'id')::uuid FROM jsonb_array_elements(v_events) AS x(value));
    IF EXISTS (SELECT 1 FROM events e WHERE e.event_id = ANY (v_ids)) THEN
      ids_stored := true;
      RETURN NEXT;
      CONTINUE;
    END IF;
    IF v_kind = 'no_stream' THEN
      INSERT INTO event_streams AS s (stream_name, revision, chain_hashes) VALUES (v_stream, v_count - 1, event_chain_hashes(NULL, v_stream, 0, v_events))
      ON CONFLICT (stream_name) DO NOTHING RETURNING s.revision, s.chain_hashes INTO v_revision, v_hashes;
    ELSIF v_kind = 'any' THEN
      INSERT INTO event_streams AS s (stream_name, revision, chain_hashes) VALUES (v_stream, v_count - 1, event_chain_hashes(NULL, v_stream, 0, v_events))
      ON CONFLICT (stream_name) DO UPDATE SET revision = s.revision + v_count,
        chain_hashes = event_chain_hashes(s.chain_hashes[cardinality(s.chain_hashes)], v_stream, s.revision + 1, v_events)
      RETURNING s.revision, s.chain_hashes INTO v_revision, v_hashes;
    ELSIF v_kind = 'stream_exists' THEN
      UPDATE event_streams AS s SET revision = s.revision + v_count,
        chain_hashes = event_chain_hashes(s.chain_hashes[cardinality(s.chain_hashes)], v_stream, s.revision + 1, v_events)
      WHERE s.stream_name = v_stream RETURNING s.revision, s.chain_hashes INTO v_revision, v_hashes;
    ELSE
      UPDATE event_streams AS s SET revision = v_expected + v_count,
        chain_hashes = event_chain_hashes(s.chain_hashes[cardinality(s.chain_hashes)], v_stream, s.revision + 1, v_events)
      WHERE s.stream_name = v_stream AND s.revision = v_expected RETURNING s.revision, s.chain_hashes INTO v_revision, v_hashes;
    END IF;
    IF NOT FOUND THEN
      SELECT s.revision INTO revision_then FROM event_streams AS s WHERE s.stream_name = v_stream;
      RETURN NEXT;
      CONTINUE;
    END IF;
    WITH inserted AS (
      INSERT INTO events (stream_name, stream_revision, event_id, event_type, data, metadata, chain_hash)
      SELECT v_stream, v_revision - v_count + e.ord, (e.value->>'id')::uuid, e.value->>'type', e.value->'data', e.value->'metadata', v_hashes[e.ord::int]
      FROM jsonb_array_elements(v_events) WITH ORDINALITY AS e(value, ord)
      ORDER BY e.ord
      RETURNING global_position
    )
    SELECT max(global_position) INTO v_position FROM inserted;
    IF v_commit IS NULL THEN
      v_commit := pg_current_xact_id()::text;
    END IF;
    appended_revision := v_revision;
    appended_position := v_position;
    appended_commit := v_commit;
    RETURN NEXT;
  END LOOP;
END
$fn$;
`,
};

/** The error event_append_in_time raises: the append's deadline passed (AppendTooLateError). */
export const APPEND_TOO_LATE_SQLSTATE = 'GWL01';

/**
 * Appends dated by their decision carry a deadline (AppendOptions.notAfter), checked by the
 * statement once it has written, on the server's clock: an append not in time is rolled back.
 */
export const appendDeadlineMigration: Migration = {
  id: 'event-store:0004_append_deadline',
  sql: `
CREATE FUNCTION event_append_in_time(deadline timestamptz) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
  IF clock_timestamp() > deadline THEN
    RAISE EXCEPTION 'append past its deadline %', deadline USING ERRCODE = '${APPEND_TOO_LATE_SQLSTATE}';
  END IF;
  RETURN true;
END
$fn$;
`,
};
