import type { Pool } from 'pg';
import { BinaryCopyRows, POSTGRES_EPOCH_MS, readBinaryCopy } from '#platform/database';
import type { AllFilter, LogReadScope, Position, RecordedEvent } from '../event-store';
import { parseTimestamptz } from './timestamptz';

/** The columns of the read, in order (COPY's binary format: text as UTF-8, bigint and xid8 as 8 bytes, timestamptz as microseconds). */
const enum Column {
  Prepare,
  Commit,
  StreamName,
  Revision,
  EventId,
  Type,
  Data,
  Metadata,
  CreatedAt,
}
const COLUMNS = 9;

/**
 * Events read by one statement of readLogByCopy: a statement holds its snapshot while
 * it runs, and with it the horizon below which PostgreSQL may prune old row versions;
 * rows updated again and again meanwhile (a rebuild's balances and checkpoints) then
 * grow chains of versions every later update walks.
 */
export const LOG_COPY_STATEMENT_EVENTS = 10_000;

/**
 * The events of the log after `after` (exclusive) up to `upTo` (inclusive), in log
 * order, each handed to `onEvent` as it arrives: one statement, `COPY (SELECT ...) TO
 * STDOUT (FORMAT binary)` (readBinaryCopy), one snapshot and one scan of the log's
 * index, where pages of `readAll` were a statement each, every row parsed by `pg` as
 * text. Only events below the horizon of visibility (taken once, when the statement
 * starts: an InitPlan, the same VISIBLE readAll has) are read, so an append still in
 * flight is never handed over and skipped later; `upTo` is meant to be a head taken
 * with that horizon (headPosition), below which every transaction has ended, so the
 * events read are exactly those a series of readAll pages up to it would give. Each
 * event is the same value readAll gives (data and metadata parsed from their JSON
 * text, as `pg` does; created_at to the millisecond, as parseTimestamptz). `onEvent`
 * may answer a promise: the read waits for it (TCP holds the server back meanwhile).
 * With a `scope`, only the events it asks for are read, and only those whose data it
 * asks for carry it (the others `{}`), both tested in SQL: the rows and the JSON a
 * reader does not want are neither sent nor parsed. Returns the number of events read.
 */
export async function readLogByCopy(
  pool: Pool,
  range: { readonly after: Position | 'start'; readonly upTo: Position },
  onEvent: (event: RecordedEvent) => void | Promise<void>,
  statementEvents = LOG_COPY_STATEMENT_EVENTS,
  scope: LogReadScope = {},
): Promise<number> {
  let after = range.after === 'start' ? { commit: 0n, prepare: 0n } : range.after;
  let read = 0;
  const data = scope.withDataOf === undefined ? 'data::text' : `CASE WHEN ${anyFilterSql(scope.withDataOf)} THEN data::text ELSE '{}' END`;
  const matching = scope.matching === undefined ? '' : `AND (${anyFilterSql(scope.matching)})`;
  for (;;) {
    const select = `SELECT global_position, transaction_id, stream_name, stream_revision, event_id::text, event_type, ${data}, metadata::text, created_at
      FROM events
      WHERE (transaction_id, global_position) > ${positionLiteral(after)}
        AND (transaction_id, global_position) <= ${positionLiteral(range.upTo)}
        AND transaction_id < (SELECT pg_snapshot_xmin(pg_current_snapshot()))
        ${matching}
      ORDER BY transaction_id, global_position
      LIMIT ${statementEvents}`;
    let inStatement = 0;
    let last: Position | null = null;
    await readBinaryCopy(
      pool,
      select,
      COLUMNS,
      (rows) => {
        inStatement++;
        const event = eventOfRow(rows);
        last = event.position;
        return onEvent(event);
      },
      LOG_ORDER_SCAN,
    );
    read += inStatement;
    if (inStatement < statementEvents || last === null) return read;
    after = last;
  }
}

/** The current row as a RecordedEvent. */
function eventOfRow(rows: BinaryCopyRows): RecordedEvent {
  const { bytes, starts, ends } = rows;
  return {
    id: rows.text(Column.EventId)!,
    type: rows.text(Column.Type)!,
    streamName: rows.text(Column.StreamName)!,
    revision: bytes.readBigInt64BE(eightBytes(rows, Column.Revision)),
    data: JSON.parse(bytes.toString('utf8', starts[Column.Data]!, ends[Column.Data]!)) as RecordedEvent['data'],
    metadata: jsonAt(bytes, starts[Column.Metadata]!, ends[Column.Metadata]!) as RecordedEvent['metadata'],
    position: { commit: bytes.readBigUInt64BE(eightBytes(rows, Column.Commit)), prepare: bytes.readBigInt64BE(eightBytes(rows, Column.Prepare)) },
    createdAt: timestampOf(rows, Column.CreatedAt),
  };
}

/**
 * The JSON value of bytes[start, end): most events' metadata is `{}`, a new empty object
 * without decoding or parsing text (what JSON.parse gives for it).
 */
function jsonAt(bytes: Buffer, start: number, end: number): unknown {
  if (end - start === 2 && bytes[start] === 0x7b && bytes[start + 1] === 0x7d) return {};
  return JSON.parse(bytes.toString('utf8', start, end));
}

/** Where the current row's i-th field starts, checked to be 8 bytes (bigint, xid8, timestamptz; the columns read are NOT NULL). */
function eightBytes(rows: BinaryCopyRows, i: number): number {
  const start = rows.starts[i]!;
  if (start < 0 || rows.ends[i]! - start !== 8) throw new Error(`log read: field ${i} is not 8 bytes`);
  return start;
}

/**
 * A binary timestamptz (microseconds from 2000-01-01 UTC) as the Date parseTimestamptz
 * gives for its text: the digits below a millisecond dropped (the instant floored to
 * the millisecond), infinity as that parser reads it.
 */
function timestampOf(rows: BinaryCopyRows, i: number): Date {
  const start = eightBytes(rows, i);
  const micros = rows.safeInteger(i);
  if (micros === null) {
    const raw = rows.bytes.readBigInt64BE(start);
    if (raw === 0x7fffffffffffffffn) return parseTimestamptz('infinity');
    if (raw === -0x8000000000000000n) return parseTimestamptz('-infinity');
    throw new Error(`log read: timestamp ${raw} out of range`);
  }
  return new Date(POSTGRES_EPOCH_MS + Math.floor(micros / 1000));
}

/**
 * The settings of a read of the log in log order by COPY (readBinaryCopy's, for its
 * statement only): the index scan in log order, with sorts and sequential scans off.
 * PostgreSQL would otherwise plan a sort of the whole log, which spills it to disk.
 */
export const LOG_ORDER_SCAN: readonly string[] = ['enable_sort = off', 'enable_seqscan = off'];

/** A log position as a literal of a COPY statement (it takes no parameters), to compare with `(transaction_id, global_position)`. */
export function positionLiteral(position: Position): string {
  return `(${xid8Literal(position.commit)}, ${integerLiteral(position.prepare)})`;
}

/** SQL true for an event that matches one of the filters (matchesAnyFilter's test on the `events` row; none: false). */
function anyFilterSql(filters: readonly AllFilter[]): string {
  if (filters.length === 0) return 'false';
  return filters.map((f) => `(${prefixesSql('stream_name', f.streamNamePrefixes)} AND ${prefixesSql('event_type', f.eventTypePrefixes)})`).join(' OR ');
}

/** SQL true when the column starts with one of the prefixes (no prefixes given: true; an empty list: false, as matchesFilter). */
function prefixesSql(column: 'stream_name' | 'event_type', prefixes: readonly string[] | undefined): string {
  if (prefixes === undefined) return 'true';
  if (prefixes.length === 0) return 'false';
  return `(${prefixes.map((p) => `starts_with(${column}, ${textLiteral(p)})`).join(' OR ')})`;
}

/** A string as an escaped literal of a COPY statement (E'...': backslashes and quotes doubled, whatever standard_conforming_strings says). */
function textLiteral(value: string): string {
  if (value.includes('\0')) throw new Error('a text literal cannot hold a NUL character');
  return `E'${value.replace(/[\\']/g, (c) => c + c)}'`;
}

/** A transaction id as an xid8 literal of a COPY statement. */
export function xid8Literal(value: bigint): string {
  return `'${integerLiteral(value)}'::xid8`;
}

/** A position's part as a literal of a COPY statement: its digits, checked to be nothing else. */
function integerLiteral(value: bigint): string {
  const text = value.toString();
  if (!/^[0-9]+$/.test(text)) throw new Error(`not a log position: ${text}`);
  return text;
}
