import type { CustomTypesConfig, Pool } from 'pg';
import { types } from 'pg';
import {
  AllSubscription,
  AppendOptions,
  AppendOutcomeUnknownError,
  AppendResult,
  AppendTooLateError,
  refuseLateAppend,
  DuplicateEventIdError,
  eventJson,
  EventStore,
  EventToAppend,
  ExpectedRevision,
  AllFilter,
  LogReadScope,
  Position,
  ReadAllOptions,
  ReadStreamOptions,
  RecordedEvent,
  StreamNotFoundError,
  SubscribeToAllOptions,
  SubscriptionBatch,
  WrongExpectedRevisionError,
} from '../event-store';
import { isConnectionLost, OneTurnBatches, outcomeOf, preparedStatement, writeStatement, WriteOutcomeUnknownError } from '#platform/database';
import { LiveLogWindow, WindowPage } from './live-log-window';
import { LogTailSignal } from './log-tail-signal';
import { parseTimestamptz } from './timestamptz';
import { readLogByCopy } from './log-read-by-copy';
import { APPEND_TOO_LATE_SQLSTATE } from './schema';

interface EventRow {
  global_position: string;
  transaction_id: string;
  stream_name: string;
  stream_revision: string;
  event_id: string;
  event_type: string;
  data: RecordedEvent['data'];
  metadata: RecordedEvent['metadata'];
  created_at: Date;
}

/** Note: `transaction_id` is selected as text; ORDER BY must name `events.transaction_id` (the xid8). */
const EVENT_COLUMNS = 'global_position, transaction_id::text AS transaction_id, stream_name, stream_revision, event_id, event_type, data, metadata, created_at';

/**
 * Only transactions below the oldest one still running are complete: any
 * transaction that could still commit events has an id at or above this horizon.
 */
const VISIBLE = 'transaction_id < pg_snapshot_xmin(pg_current_snapshot())';

/** The log's and the streams' reads: `created_at` by parseTimestamptz, every other type as the pool reads it. */
const LOG_READ_TYPES: CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === types.builtins.TIMESTAMPTZ ? parseTimestamptz : types.getTypeParser(oid, format)) as CustomTypesConfig['getTypeParser'],
};

/** A row of EVENT_COLUMNS read as an array (rowMode 'array'): one object fewer per event. */
type EventArrayRow = [string, string, string, string, string, string, RecordedEvent['data'], RecordedEvent['metadata'], Date];

const eventOfArrayRow = (row: EventArrayRow): RecordedEvent => ({
  id: row[4],
  type: row[5],
  streamName: row[2],
  revision: BigInt(row[3]),
  data: row[6],
  metadata: row[7],
  position: { commit: BigInt(row[1]), prepare: BigInt(row[0]) },
  createdAt: row[8],
});

const toEvent = (row: EventRow): RecordedEvent => ({
  id: row.event_id,
  type: row.event_type,
  streamName: row.stream_name,
  revision: BigInt(row.stream_revision),
  data: row.data,
  metadata: row.metadata,
  position: { commit: BigInt(row.transaction_id), prepare: BigInt(row.global_position) },
  createdAt: row.created_at,
});

/** Namespace of the two-key advisory locks that serialise appends to one stream. */
export const STREAM_APPEND_LOCK_NAMESPACE = 5_406_117;

/**
 * The chain hashes of the appended events (decision 0099): computed by the statement
 * that moves the stream row, from the chain head that row holds (the last of the hashes
 * of its latest append), so the row lock that serialises a stream's appends also orders
 * its chain, with no extra round trip. $3 is the events' JSON ({id, type, data, metadata}).
 */
const FIRST_HASHES = `event_chain_hashes(NULL, $1, 0, $3::jsonb)`;
const NEXT_HASHES = `event_chain_hashes(event_streams.chain_hashes[cardinality(event_streams.chain_hashes)], $1, event_streams.revision + 1, $3::jsonb)`;

/**
 * How the stream row moves for each kind of expected revision. Each either moves
 * the revision (locking the row until commit) or returns nothing, which means the
 * expectation did not hold. It reads the `append_lock` CTE first: see APPEND_LOCK.
 *   $1 stream name, $2 number of events, $3 the events, $4 expected revision (exact only)
 */
const STREAM_CLAIM: Record<'any' | 'no_stream' | 'stream_exists' | 'exact', string> = {
  no_stream: `INSERT INTO event_streams (stream_name, revision, chain_hashes) SELECT $1, $2 - 1, ${FIRST_HASHES} FROM append_lock
              ON CONFLICT (stream_name) DO NOTHING RETURNING revision, chain_hashes`,
  any: `INSERT INTO event_streams (stream_name, revision, chain_hashes) SELECT $1, $2 - 1, ${FIRST_HASHES} FROM append_lock
        ON CONFLICT (stream_name) DO UPDATE SET revision = event_streams.revision + $2, chain_hashes = ${NEXT_HASHES} RETURNING revision, chain_hashes`,
  stream_exists: `UPDATE event_streams SET revision = revision + $2, chain_hashes = ${NEXT_HASHES} FROM append_lock WHERE stream_name = $1
                  RETURNING revision, chain_hashes`,
  exact: `UPDATE event_streams SET revision = $4::bigint + $2, chain_hashes = ${NEXT_HASHES} FROM append_lock
          WHERE stream_name = $1 AND revision = $4::bigint RETURNING revision, chain_hashes`,
};

/**
 * Positions order the log by transaction id, and a transaction gets its id at its
 * first write. Two appends to one stream could otherwise take their ids in one order
 * and the stream row's lock in the other (an 'any' append gets its id, then waits
 * for the row another append has just locked): the later revisions would then sit
 * earlier in $all. Taking a transaction-scoped advisory lock per stream before any
 * write (it needs no transaction id) makes the append that wrote first also the one
 * with the smaller id, so $all always keeps each stream's order.
 */
const APPEND_LOCK = `SELECT pg_advisory_xact_lock(${STREAM_APPEND_LOCK_NAMESPACE}, hashtext($1)) AS locked`;

export interface PostgresEventStoreOptions {
  /** How often a waiting subscription looks for events appended by other processes. */
  readonly pollIntervalMs?: number;
  /** Close the pool on close(). */
  readonly ownsPool?: boolean;
  /**
   * Live subscriptions take new events from one shared read of the log (LiveLogWindow)
   * instead of a query each (default true; false: every subscription reads for itself).
   */
  readonly sharedLiveReads?: boolean;
  /** The appends of one event-loop turn share one statement and transaction (default true; false: one statement each). */
  readonly groupAppends?: boolean;
  /** The forward stream reads of one event-loop turn share one statement (default true; false: one statement each). */
  readonly groupReads?: boolean;
}

/** A forward (or backward, never grouped) stream read: from a revision (null: the stream's start or end), at most `limit` events. */
interface PendingRead {
  readonly streamName: string;
  readonly from: bigint | null;
  readonly limit: number;
}

/** An append waiting for its turn's statement. */
interface PendingAppend {
  readonly streamName: string;
  readonly events: readonly EventToAppend[];
  readonly expected: ExpectedRevision;
  /** The events as the statement takes them: a JSON array of {id, type, data, metadata}. */
  readonly eventsJson: string;
  readonly notAfter?: Date | undefined;
}

interface Settle<T> {
  readonly resolve: (value: T) => void;
  readonly reject: (error: unknown) => void;
}

/** Answers a waiting caller with what `answer` gives, or its error. */
async function settle<T>(waiting: Settle<T>, answer: () => Promise<T>): Promise<void> {
  try {
    waiting.resolve(await answer());
  } catch (error) {
    waiting.reject(error);
  }
}

/** The stored rows are exactly one append of these ids to this stream, in order, at a place the expectation allows. */
function isSameAppend(rows: readonly EventRow[], streamName: string, ids: readonly string[], expected: ExpectedRevision): boolean {
  return (
    rows.length === ids.length &&
    rows.length > 0 &&
    rows.every(
      (row, i) => row.stream_name === streamName && row.event_id === ids[i] && BigInt(row.stream_revision) === BigInt(rows[0]!.stream_revision) + BigInt(i),
    ) &&
    expectationMatches(expected, BigInt(rows[0]!.stream_revision))
  );
}

export class PostgresEventStore implements EventStore {
  private readonly tail: LogTailSignal;
  private readonly subscriptions = new Set<AllSubscription>();
  private readonly window: LiveLogWindow | null;

  constructor(
    private readonly pool: Pool,
    private readonly options: PostgresEventStoreOptions = {},
  ) {
    this.appendsOfTheTurn = options.groupAppends === false ? null : new OneTurnBatches((group) => void this.appendGroup(group));
    this.readsOfTheTurn = options.groupReads === false ? null : new OneTurnBatches((group) => void this.readGroup(group));
    this.tail = new LogTailSignal(() => this.headPosition(), options.pollIntervalMs ?? 20);
    this.window =
      options.sharedLiveReads === false
        ? null
        : new LiveLogWindow(
            (after, maxCount) => this.readAll({ after, maxCount }),
            () => this.tail.generation,
            { fetchSize: 1000, keep: 10_000, quietMs: 250 },
          );
  }

  async appendToStream(streamName: string, events: readonly EventToAppend[], options: AppendOptions = {}): Promise<AppendResult> {
    const expected = options.expectedRevision ?? 'any';
    if (events.length === 0) return this.checkOnly(streamName, expected);

    // Each event's JSON is made here, so an event without one (a BigInt, a cycle) is
    // refused as UnserializableEventError before anything reaches the database.
    const eventsJson = `[${events
      .map(
        (e) =>
          `{"id":${JSON.stringify(e.id)},"type":${JSON.stringify(e.type)},"data":${eventJson(streamName, e, 'data')},"metadata":${eventJson(streamName, e, 'metadata')}}`,
      )
      .join(',')}]`;
    const append: PendingAppend = { streamName, events, expected, eventsJson, notAfter: options.notAfter };
    // One with a deadline alone: the group's statement would make its lateness every append's failure.
    if (!this.appendsOfTheTurn || append.notAfter) return this.appendAlone(append);
    return new Promise((resolve, reject) => this.appendsOfTheTurn!.add({ ...append, resolve, reject }));
  }

  /**
   * Group commit (decision 0099): the appends of one event-loop turn go to PostgreSQL as
   * one statement and one transaction (append_event_group, event-store:0001), each with
   * its own expected revision and answer; an append alone in its turn is the single
   * statement below. A group whose statement fails wrote nothing (one transaction): its
   * appends are then made one by one, in arrival order, each with its own answer.
   */
  private readonly appendsOfTheTurn: OneTurnBatches<PendingAppend & Settle<AppendResult>> | null;

  private async appendGroup(group: (PendingAppend & Settle<AppendResult>)[]): Promise<void> {
    if (group.length === 1) return settle(group[0]!, () => this.appendAlone(group[0]!));
    let rows: {
      appended_revision: string | null;
      appended_position: string | null;
      appended_commit: string | null;
      ids_stored: boolean;
      revision_then: string | null;
    }[];
    try {
      const result = await writeStatement<(typeof rows)[number]>(
        this.pool,
        preparedStatement(
          `SELECT appended_revision::text AS appended_revision, appended_position::text AS appended_position, appended_commit,
             ids_stored, revision_then::text AS revision_then
           FROM append_event_group($1::text[], $2::text[], $3::bigint[], $4::jsonb) ORDER BY append_ord`,
          [
            group.map((a) => a.streamName),
            group.map((a) => (typeof a.expected === 'bigint' ? 'exact' : a.expected)),
            group.map((a) => (typeof a.expected === 'bigint' ? a.expected.toString() : null)),
            `[${group.map((a) => a.eventsJson).join(',')}]`,
          ],
        ),
      );
      rows = result.rows;
    } catch (groupError) {
      // A group whose connection broke may have committed: each append made again finds
      // its events if so (a retry of the same ids is answered as it was); one that cannot
      // be made again for want of the database cannot tell. Made again only once the
      // group's server process has ended: while it may still commit (a break on this
      // side), an append refused now could be written by it later, so each is unknown.
      if (groupError instanceof WriteOutcomeUnknownError) {
        const ended = await outcomeOf(
          () => Promise.reject(groupError),
          async () => null,
        ).catch((after: unknown) => !(after instanceof WriteOutcomeUnknownError));
        if (!ended) {
          for (const append of group) append.reject(new AppendOutcomeUnknownError(append.streamName, { cause: groupError.cause }));
          return;
        }
      }
      const mayHaveCommitted = isConnectionLost(groupError);
      const alone = (append: PendingAppend) =>
        this.appendAlone(append).catch((error: unknown) => {
          const refused = error instanceof WrongExpectedRevisionError || error instanceof DuplicateEventIdError || error instanceof AppendOutcomeUnknownError;
          throw mayHaveCommitted && !refused ? new AppendOutcomeUnknownError(append.streamName, { cause: groupError }) : error;
        });
      for (const append of group) await settle(append, () => alone(append));
      return;
    }
    if (rows.some((row) => row.appended_revision !== null)) this.tail.notify();
    if (rows.length !== group.length) {
      // Not one answer per append: the statement ran (any of them may be written), none can be told.
      const cause = new Error(`append_event_group answered ${rows.length} rows for ${group.length} appends`);
      for (const append of group) append.reject(new AppendOutcomeUnknownError(append.streamName, { cause }));
      return;
    }
    await Promise.all(
      group.map((append, i) => {
        const row = rows[i]!;
        if (row.ids_stored) return settle(append, () => this.afterRefusedAppend(append.streamName, append.events, append.expected));
        if (row.appended_revision === null) {
          // The conflict names the revision the stream had at this append's turn in the group.
          append.reject(
            new WrongExpectedRevisionError(append.streamName, append.expected, row.revision_then === null ? 'no_stream' : BigInt(row.revision_then)),
          );
          return Promise.resolve();
        }
        return settle(append, async () => ({
          nextExpectedRevision: BigInt(row.appended_revision!),
          position: { commit: BigInt(row.appended_commit!), prepare: BigInt(row.appended_position!) },
        }));
      }),
    );
  }

  /** One append, one statement: the stream row moved by its expectation, then its events inserted. */
  private async appendAlone({ streamName, events, expected, eventsJson, notAfter }: PendingAppend): Promise<AppendResult> {
    refuseLateAppend(streamName, notAfter);
    const kind = typeof expected === 'bigint' ? 'exact' : expected;
    const params: unknown[] = [streamName, events.length, eventsJson];
    if (typeof expected === 'bigint') params.push(expected.toString());
    if (notAfter) params.push(notAfter.toISOString());
    // A deadline is checked once the statement has written (its transaction has begun): on time, every report that
    // waits for the transactions begun before it sees this one (event-store:0004).
    const inTime = notAfter ? `, event_append_in_time($${params.length}::timestamptz)` : '';
    const sql = `
      WITH append_lock AS (${APPEND_LOCK}), stream AS (${STREAM_CLAIM[kind]})
      INSERT INTO events (stream_name, stream_revision, event_id, event_type, data, metadata, chain_hash)
      SELECT $1, stream.revision - $2 + e.ord, (e.value->>'id')::uuid, e.value->>'type', e.value->'data', e.value->'metadata', stream.chain_hashes[e.ord::int]
      FROM stream, jsonb_array_elements($3::jsonb) WITH ORDINALITY AS e(value, ord)
      ORDER BY e.ord
      RETURNING global_position, transaction_id::text AS transaction_id, stream_revision${inTime}`;

    try {
      const result = await writeStatement<{ global_position: string; transaction_id: string; stream_revision: string }>(
        this.pool,
        preparedStatement(sql, params),
      );
      if (result.rows.length === 0) return await this.afterRefusedAppend(streamName, events, expected);
      const last = result.rows.reduce((a, b) => (BigInt(a.global_position) > BigInt(b.global_position) ? a : b));
      this.tail.notify();
      return {
        nextExpectedRevision: BigInt(last.stream_revision),
        position: { commit: BigInt(last.transaction_id), prepare: BigInt(last.global_position) },
      };
    } catch (error) {
      if (notAfter && (error as { code?: string }).code === APPEND_TOO_LATE_SQLSTATE) throw new AppendTooLateError(streamName, notAfter);
      if ((error as { code?: string; constraint?: string }).constraint === 'events_event_id_unique') {
        return this.afterRefusedAppend(streamName, events, expected);
      }
      if (error instanceof WriteOutcomeUnknownError) {
        // The connection broke with the statement sent: it may have committed with its
        // answer lost, or its server process may still commit it (a break on this side:
        // a server that stopped answering). Once that process has ended, its events are
        // looked for on another connection: there, where it expected them, it committed
        // and is answered so (its caller must not tell its client that nothing was
        // written); not there, the lost connection stands; if the process is not known to
        // have ended or the look fails, nobody can tell (AppendOutcomeUnknownError).
        try {
          return await outcomeOf(
            () => Promise.reject(error),
            () => this.storedAppend(streamName, events, expected),
          );
        } catch (after) {
          if (after instanceof WriteOutcomeUnknownError) throw new AppendOutcomeUnknownError(streamName, { cause: error.cause });
          throw after;
        }
      }
      throw error;
    }
  }

  /** This append's events as stored, all of them, in order, where it expected to write them: its answer; else null. */
  private async storedAppend(streamName: string, events: readonly EventToAppend[], expected: ExpectedRevision): Promise<AppendResult | null> {
    const ids = events.map((e) => e.id);
    const stored = await this.pool.query<EventRow>(`SELECT ${EVENT_COLUMNS} FROM events WHERE event_id = ANY($1::uuid[]) ORDER BY events.global_position`, [
      ids,
    ]);
    if (!isSameAppend(stored.rows, streamName, ids, expected)) return null;
    const last = toEvent(stored.rows[stored.rows.length - 1]!);
    return { nextExpectedRevision: last.revision, position: last.position };
  }

  /**
   * The append wrote nothing. If exactly these events are already in the stream, in
   * this order, and where this append expected to put them, it is a retry of an
   * append that succeeded: answer as that append did. The same ids anywhere else
   * are a different append reusing them (as in EventStoreDB: idempotent only at the
   * expected revision).
   */
  private async afterRefusedAppend(streamName: string, events: readonly EventToAppend[], expected: ExpectedRevision): Promise<AppendResult> {
    const ids = events.map((e) => e.id);
    const stored = await this.pool.query<EventRow>(`SELECT ${EVENT_COLUMNS} FROM events WHERE event_id = ANY($1::uuid[]) ORDER BY events.global_position`, [
      ids,
    ]);
    if (stored.rows.length > 0) {
      if (!isSameAppend(stored.rows, streamName, ids, expected))
        throw new DuplicateEventIdError(
          streamName,
          stored.rows.map((r) => r.event_id),
        );
      const last = toEvent(stored.rows[stored.rows.length - 1]!);
      return { nextExpectedRevision: last.revision, position: last.position };
    }
    throw new WrongExpectedRevisionError(streamName, expected, await this.currentRevision(streamName));
  }

  private async currentRevision(streamName: string): Promise<bigint | 'no_stream'> {
    const row = await this.pool.query<{ revision: string }>('SELECT revision FROM event_streams WHERE stream_name = $1', [streamName]);
    return row.rows.length === 0 ? 'no_stream' : BigInt(row.rows[0]!.revision);
  }

  private async checkOnly(streamName: string, expected: ExpectedRevision): Promise<AppendResult> {
    const actual = await this.currentRevision(streamName);
    const holds =
      expected === 'any' ||
      (expected === 'no_stream' && actual === 'no_stream') ||
      (expected === 'stream_exists' && actual !== 'no_stream') ||
      (typeof expected === 'bigint' && actual === expected);
    if (!holds) throw new WrongExpectedRevisionError(streamName, expected, actual);
    const head = await this.headPosition();
    return { nextExpectedRevision: actual === 'no_stream' ? -1n : actual, position: head ?? { commit: 0n, prepare: 0n } };
  }

  async readStream(streamName: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    const backwards = options.direction === 'backwards';
    const from = options.fromRevision ?? (backwards ? 'end' : 'start');
    const read: PendingRead = { streamName, from: typeof from === 'bigint' ? from : null, limit: options.maxCount ?? Number.MAX_SAFE_INTEGER };
    if (backwards || !this.readsOfTheTurn) return this.readAlone(read, backwards);
    return new Promise((resolve, reject) => this.readsOfTheTurn!.add({ ...read, resolve, reject }));
  }

  /**
   * The forward stream reads of one event-loop turn (a GET of one invoice, a command
   * loading its stream) share one statement; a read alone in its turn is the single
   * statement below. Each read sees what was committed when the statement ran, which is
   * after the read was asked: read-your-writes holds as for a read alone.
   */
  private readonly readsOfTheTurn: OneTurnBatches<PendingRead & Settle<RecordedEvent[]>> | null;

  private async readGroup(group: (PendingRead & Settle<RecordedEvent[]>)[]): Promise<void> {
    if (group.length === 1) return settle(group[0]!, () => this.readAlone(group[0]!, false));
    let rows: (EventRow & { read_ord: number })[];
    try {
      const result = await this.pool.query<EventRow & { read_ord: number }>({
        ...preparedStatement(
          `SELECT r.ord::int AS read_ord, e.*
           FROM unnest($1::text[], $2::bigint[], $3::bigint[]) WITH ORDINALITY AS r(stream_name, from_revision, max_count, ord)
           JOIN event_streams s ON s.stream_name = r.stream_name
           LEFT JOIN LATERAL (
             SELECT ${EVENT_COLUMNS} FROM events WHERE events.stream_name = r.stream_name AND events.stream_revision >= coalesce(r.from_revision, 0)
             ORDER BY events.stream_revision LIMIT r.max_count
           ) e ON true
           ORDER BY r.ord, e.stream_revision`,
          [group.map((r) => r.streamName), group.map((r) => (r.from === null ? null : r.from.toString())), group.map((r) => r.limit)],
        ),
        types: LOG_READ_TYPES,
      });
      rows = result.rows;
    } catch (error) {
      for (const read of group) read.reject(error);
      return;
    }
    const byRead = new Map<number, EventRow[]>();
    for (const row of rows) {
      const found = byRead.get(row.read_ord);
      if (found) found.push(row);
      else byRead.set(row.read_ord, [row]);
    }
    group.forEach((read, i) => {
      const found = byRead.get(i + 1);
      if (!found) read.reject(new StreamNotFoundError(read.streamName));
      else read.resolve(found.filter((r) => r.event_id !== null).map(toEvent));
    });
  }

  private async readAlone({ streamName, from, limit }: PendingRead, backwards: boolean): Promise<RecordedEvent[]> {
    const params: unknown[] = [streamName, limit];
    let bound = '';
    if (from !== null) {
      params.push(from.toString());
      bound = backwards ? 'AND stream_revision <= $3' : 'AND stream_revision >= $3';
    }
    // One round trip: no row at all means no stream; one row of nulls, a stream with
    // no event in the range.
    const result = await this.pool.query<EventRow | Record<keyof EventRow, null>>({
      ...preparedStatement(
        `SELECT e.* FROM (SELECT 1 FROM event_streams WHERE stream_name = $1) s
         LEFT JOIN LATERAL (
           SELECT ${EVENT_COLUMNS} FROM events WHERE stream_name = $1 ${bound}
           ORDER BY events.stream_revision ${backwards ? 'DESC' : 'ASC'} LIMIT $2
         ) e ON true`,
        params,
      ),
      types: LOG_READ_TYPES,
    });
    if (result.rows.length === 0) throw new StreamNotFoundError(streamName);
    return result.rows.filter((r): r is EventRow => r.event_id !== null).map(toEvent);
  }

  async readAll(options: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    const after = options.after && options.after !== 'start' ? options.after : { commit: 0n, prepare: 0n };
    const result = await this.pool.query<EventArrayRow>({
      text: `SELECT ${EVENT_COLUMNS} FROM events
       WHERE (transaction_id, global_position) > ($1::text::xid8, $2::bigint) AND ${VISIBLE}
       ORDER BY events.transaction_id, events.global_position LIMIT $3`,
      values: [after.commit.toString(), after.prepare.toString(), options.maxCount ?? 1000],
      rowMode: 'array',
      types: LOG_READ_TYPES,
    });
    return result.rows.map(eventOfArrayRow);
  }

  keepsLogIn(pool: Pool): boolean {
    return pool === this.pool;
  }

  readAllThrough(
    range: { readonly after: Position | 'start'; readonly upTo: Position },
    onEvent: (event: RecordedEvent) => void | Promise<void>,
    scope?: LogReadScope,
  ): Promise<number> {
    return readLogByCopy(this.pool, range, onEvent, undefined, scope);
  }

  /**
   * A page of the log for a filtered subscription: every event's position (so the
   * cursor moves past what does not match), but data and metadata only of the events
   * that match, tested in SQL: a projection that wants one category does not fetch and
   * parse every other event's JSON.
   */
  private async readAllMatching(
    after: Position,
    maxCount: number,
    filter: AllFilter,
  ): Promise<{ events: RecordedEvent[]; last: Position | null; count: number }> {
    const patterns = (prefixes: readonly string[] | undefined) => (prefixes ? prefixes.map((p) => `${p.replace(/[\\%_]/g, '\\$&')}%`) : null);
    const result = await this.pool.query<EventRow & { matches: boolean }>({
      text: `SELECT global_position, transaction_id::text AS transaction_id, stream_name, stream_revision, event_id, event_type,
              CASE WHEN matches THEN data END AS data, CASE WHEN matches THEN metadata END AS metadata, created_at, matches
       FROM (SELECT *, (($4::text[] IS NULL OR stream_name LIKE ANY($4::text[])) AND ($5::text[] IS NULL OR event_type LIKE ANY($5::text[]))) AS matches
             FROM events
             WHERE (transaction_id, global_position) > ($1::text::xid8, $2::bigint) AND ${VISIBLE}
             ORDER BY events.transaction_id, events.global_position LIMIT $3) page
       ORDER BY page.transaction_id, page.global_position`,
      values: [after.commit.toString(), after.prepare.toString(), maxCount, patterns(filter.streamNamePrefixes), patterns(filter.eventTypePrefixes)],
      types: LOG_READ_TYPES,
    });
    const rows = result.rows;
    const lastRow = rows[rows.length - 1];
    return {
      events: rows.filter((r) => r.matches).map(toEvent),
      last: lastRow ? { commit: BigInt(lastRow.transaction_id), prepare: BigInt(lastRow.global_position) } : null,
      count: rows.length,
    };
  }

  async headPosition(): Promise<Position | null> {
    return visibleLogHead(this.pool);
  }

  subscribeToAll(options: SubscribeToAllOptions = {}): AllSubscription {
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the async iterator below reads the store
    const store = this;
    const batchSize = options.maxBatchSize ?? 500;
    let cursor: Position = options.after && options.after !== 'start' ? options.after : { commit: 0n, prepare: 0n };
    let active = true;
    let announcedCaughtUp = false;

    async function* batches(): AsyncGenerator<SubscriptionBatch> {
      // Reads of its own until it has caught up with the log, then pages of the shared
      // window while its cursor lies inside it (back to its own reads if it falls behind).
      let live = false;
      while (active) {
        // Read before the log: an append or a poll that sees the log grow while this
        // subscription reads (or while its consumer handles the batch) ends the wait below at once.
        const seen = store.tail.generation;
        let page: { events: RecordedEvent[]; last: Position | null; caughtUp: boolean };
        try {
          const fromWindow: WindowPage | null = live && store.window ? await store.window.page(cursor, batchSize, options.filter) : null;
          if (fromWindow) page = fromWindow;
          else if (options.filter) {
            const read = await store.readAllMatching(cursor, batchSize, options.filter);
            page = { events: read.events, last: read.last, caughtUp: read.count < batchSize };
          } else {
            const events = await store.readAll({ after: cursor, maxCount: batchSize });
            page = { events, last: events[events.length - 1]?.position ?? null, caughtUp: events.length < batchSize };
          }
          live = fromWindow !== null || page.caughtUp;
        } catch (error) {
          if (!active) return;
          // the database went away: wait and read again from the same cursor
          await store.tail.wait(1000);
          if (isFatal(error)) throw error;
          continue;
        }
        if (!active) return;
        const caughtUp = page.caughtUp;
        if (page.last) {
          cursor = page.last;
          announcedCaughtUp = caughtUp;
          yield { events: page.events, checkpoint: cursor, caughtUp };
        } else if (!announcedCaughtUp) {
          announcedCaughtUp = true;
          yield { events: [], checkpoint: cursor, caughtUp: true };
        }
        if (caughtUp && active) await store.tail.wait(1000, seen);
      }
    }

    const iterator = batches();
    const subscription: AllSubscription = {
      [Symbol.asyncIterator]: () => iterator,
      unsubscribe: async () => {
        active = false;
        store.subscriptions.delete(subscription);
        store.tail.notify();
        await iterator.return(undefined);
      },
    };
    this.subscriptions.add(subscription);
    return subscription;
  }

  async close(): Promise<void> {
    await Promise.all([...this.subscriptions].map((s) => s.unsubscribe()));
    this.tail.close();
    if (this.options.ownsPool) await this.pool.end();
  }
}

/** Would an append with this expectation have put its first event at `firstRevision`? */
function expectationMatches(expected: ExpectedRevision, firstRevision: bigint): boolean {
  if (typeof expected === 'bigint') return firstRevision === expected + 1n;
  if (expected === 'no_stream') return firstRevision === 0n;
  if (expected === 'stream_exists') return firstRevision > 0n;
  return true;
}

/** Errors a retry cannot cure: a programming or schema error rather than a lost connection. */
function isFatal(error: unknown): boolean {
  const code = (error as { code?: string }).code;
  return typeof code === 'string' && /^(42|22)/.test(code);
}

/**
 * The position of the last event visible to readers of the log (null: none), read by
 * `db`: in a transaction of REPEATABLE READ, the head as of its snapshot (what a read
 * made with other reads in one snapshot needs: read-models:checksum).
 */
export async function visibleLogHead(db: Pick<Pool, 'query'>): Promise<Position | null> {
  const result = await db.query<{ transaction_id: string; global_position: string }>(
    `SELECT transaction_id::text AS transaction_id, global_position FROM events WHERE ${VISIBLE}
     ORDER BY events.transaction_id DESC, events.global_position DESC LIMIT 1`,
  );
  const row = result.rows[0];
  return row ? { commit: BigInt(row.transaction_id), prepare: BigInt(row.global_position) } : null;
}

/**
 * About how many events are visible to readers of the log now, for a progress bar's
 * total: the visible head's global position, one index read where a count would read
 * the whole log (the count unless an append refused after taking a position left a gap).
 */
export async function visibleLogEvents(db: Pick<Pool, 'query'>): Promise<number> {
  return Number((await visibleLogHead(db))?.prepare ?? 0n);
}
