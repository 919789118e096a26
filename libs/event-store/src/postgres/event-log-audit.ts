import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import type { Pool } from 'pg';
import { BinaryCopyRows, inTransaction, readBinaryCopy } from '#platform/database';
import type { Position } from '../event-store';
import { LOG_ORDER_SCAN, positionLiteral, xid8Literal } from './log-read-by-copy';
import {
  CHAIN_HASH_BYTES,
  ContentBytesDigest,
  EventLogReport,
  GENESIS_HASH,
  inLogOrder,
  LogCheckpoint,
  LogOrderCheck,
  LogProblem,
  nextLogHash,
  RecordedCheckpoint,
  StreamChainCheck,
  StreamsCheckedAgain,
  RecentStreams,
  LoggedColumns,
  LoggedEvent,
  StoredChainedEvent,
  VerifyEventLogOptions,
} from '../hash-chain';

/** Events visible to readers of the log (see postgres-event-store.ts). */
const VISIBLE = 'transaction_id < pg_snapshot_xmin(pg_current_snapshot())';

/** Arbitrary constant: the transaction-scoped advisory lock under which the checkpoints are extended (never taken by an append). */
export const CHECKPOINT_LOCK = 7_261_903_185;

/** The most events one checkpoint row covers (its chain hashes: 32 bytes each). */
export const CHECKPOINT_SEGMENT_EVENTS = 10_000;

const EMPTY_LOG: LogCheckpoint = { position: '0/0', events: 0n, hash: GENESIS_HASH };

interface CheckpointRow {
  seq: string;
  from_events: string;
  events: string;
  position: string;
  log_hash: Buffer;
  event_hashes: Buffer;
}

const CHECKPOINT_COLUMNS = `seq, from_events, events, position_commit::text || '/' || position_prepare AS position, log_hash, event_hashes`;

const toRecorded = (row: CheckpointRow): RecordedCheckpoint => ({
  seq: BigInt(row.seq),
  fromEvents: BigInt(row.from_events),
  events: BigInt(row.events),
  position: row.position,
  hash: row.log_hash,
  eventHashes: row.event_hashes,
});

/** The most checkpoint rows one transaction of extendLogCheckpoints writes (memory: 320 KB each). */
export const CHECKPOINT_SEGMENTS_PER_TRANSACTION = 10;

/**
 * The log's checkpoint at its visible head (decision 0100): the last recorded one,
 * extended first by the events that became visible after it, in log order, a segment of
 * at most CHECKPOINT_SEGMENT_EVENTS per row. Appends never wait for it: it reads the log
 * like a subscriber and serialises only with other extensions (an advisory lock), and it
 * writes after its reads, so its own transaction never holds the visible horizon back.
 * A long backlog is extended in transactions of at most CHECKPOINT_SEGMENTS_PER_TRANSACTION
 * rows, each committed before the next reads: memory and a transaction's work stay bounded
 * however long the log grew since the last extension, and what one finished is kept.
 */
export async function extendLogCheckpoints(pool: Pool, options: { segmentEvents?: number; segmentsPerTransaction?: number } = {}): Promise<LogCheckpoint> {
  const segmentEvents = options.segmentEvents ?? CHECKPOINT_SEGMENT_EVENTS;
  const segmentsPerTransaction = options.segmentsPerTransaction ?? CHECKPOINT_SEGMENTS_PER_TRANSACTION;
  for (;;) {
    const { head, atHead } = await extendOnce(pool, segmentEvents, segmentsPerTransaction);
    if (atHead) return head;
  }
}

/** One transaction of extendLogCheckpoints: at most `maxSegments` rows; atHead once the visible log ran out. */
async function extendOnce(pool: Pool, segmentEvents: number, maxSegments: number): Promise<{ head: LogCheckpoint; atHead: boolean }> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    try {
      await client.query('SELECT pg_advisory_xact_lock($1)', [CHECKPOINT_LOCK]);
      const last = (await client.query<CheckpointRow>(`SELECT ${CHECKPOINT_COLUMNS} FROM event_log_checkpoints ORDER BY seq DESC LIMIT 1`)).rows[0];
      let seq = last ? BigInt(last.seq) : 0n;
      let head: LogCheckpoint = last ? { position: last.position, events: BigInt(last.events), hash: last.log_hash } : EMPTY_LOG;
      const rows: unknown[][] = [];
      let atHead = false;
      while (!atHead && rows.length < maxSegments) {
        const [commit, prepare] = head.position.split('/');
        const page = await client.query<{ position_commit: string; position_prepare: string; chain_hash: Buffer }>(
          `SELECT transaction_id::text AS position_commit, global_position AS position_prepare, chain_hash FROM events
           WHERE (transaction_id, global_position) > ($1::text::xid8, $2::bigint) AND ${VISIBLE}
           ORDER BY events.transaction_id, events.global_position LIMIT $3`,
          [commit, prepare, segmentEvents],
        );
        atHead = page.rows.length < segmentEvents;
        if (page.rows.length === 0) break;
        let hash = head.hash;
        for (const row of page.rows) hash = nextLogHash(hash, row.chain_hash);
        const lastRow = page.rows[page.rows.length - 1]!;
        seq += 1n;
        const next: LogCheckpoint = {
          position: `${lastRow.position_commit}/${lastRow.position_prepare}`,
          events: head.events + BigInt(page.rows.length),
          hash,
        };
        rows.push([
          seq.toString(),
          head.events.toString(),
          next.events.toString(),
          lastRow.position_commit,
          lastRow.position_prepare,
          hash,
          Buffer.concat(page.rows.map((r) => r.chain_hash)),
        ]);
        head = next;
      }
      for (const row of rows) {
        await client.query(
          `INSERT INTO event_log_checkpoints (seq, from_events, events, position_commit, position_prepare, log_hash, event_hashes)
           VALUES ($1, $2, $3, $4::text::xid8, $5, $6, $7)`,
          row,
        );
      }
      await client.query('COMMIT');
      return { head, atHead };
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    }
  } finally {
    client.release();
  }
}

/**
 * The log's checkpoint at the event at `position`, from the recorded checkpoints: the
 * running hash of the row before its segment folded with the segment's chain hashes up
 * to it (how many: the events between, counted in log order). null when no recorded
 * checkpoint reaches it (extend them first).
 */
export async function logCheckpointAt(pool: Pick<Pool, 'query'>, position: string): Promise<LogCheckpoint | null> {
  const [commit, prepare] = position.split('/');
  const row = (
    await pool.query<{ from_events: string; before: Buffer | null; k: string; event_hashes: Buffer }>(
      `WITH segment AS (SELECT * FROM event_log_checkpoints WHERE (position_commit, position_prepare) >= ($1::text::xid8, $2::bigint) ORDER BY seq LIMIT 1),
            before AS (SELECT c.* FROM event_log_checkpoints c, segment s WHERE c.seq = s.seq - 1)
       SELECT s.from_events, (SELECT log_hash FROM before) AS before, s.event_hashes,
              (SELECT count(*) FROM events e
                WHERE (e.transaction_id, e.global_position) <= ($1::text::xid8, $2::bigint)
                  AND (e.transaction_id, e.global_position) > COALESCE((SELECT (b.position_commit, b.position_prepare) FROM before b), ('0'::xid8, 0::bigint))) AS k
       FROM segment s`,
      [commit, prepare],
    )
  ).rows[0];
  if (!row) return null;
  let hash = row.before ?? GENESIS_HASH;
  for (let i = 0; i < Number(row.k); i++) hash = nextLogHash(hash, row.event_hashes.subarray(i * CHAIN_HASH_BYTES, (i + 1) * CHAIN_HASH_BYTES));
  return { position, events: BigInt(row.from_events) + BigInt(row.k), hash };
}

/**
 * Recomputes every stream's chain and the log's running hash from the events table
 * (docs/audit-log.md) in one read of the log in log order (decision 0123):
 * each event's chain hash is recomputed over the stored texts (chainContent's
 * netstrings over the row's bytes, in TypeScript: not the SQL of the append path) from
 * the stored hash of its stream's previous revision, which must be earlier in the log:
 * the stream's last event when it was met recently (RecentStreams, a bounded number of
 * streams), else found by the database in batches. An event that does not simply go
 * on its chain flags its stream, and the flagged streams
 * are read again, each in log order, and checked exactly (StreamsCheckedAgain: what
 * StreamChainsInLogOrder and LogOrderCheck find in them). The running hash is folded
 * and compared with every recorded checkpoint (LogOrderCheck); each stream's recorded
 * head (revision and chain head) is compared with its last event by one statement
 * (streamHeadsDiffering). The log read is one statement streamed by COPY (decision
 * 0123) up to a visibility horizon taken when the read starts (the events a reader of
 * the log sees; an append still in flight is verified by the next run). The recorded
 * checkpoints compared are those recorded before the read starts and, with `upTo`, ending
 * at it or before (one recorded during it may cover events after its horizon: the next run
 * compares it). Memory: a few
 * pages, one checkpoint segment, the recent streams, and the names of the streams
 * flagged; nothing that grows with the log.
 */
export async function verifyEventLog(pool: Pool, options: PostgresLogVerifyOptions = {}): Promise<EventLogReport> {
  const order = await LogOrderFollower.start(pool, options.at ?? [], options.upTo ?? null);
  const forward = options.forward;
  const chains = await followLogChains(pool, options, async (page, forwarded) => {
    await order.page(page);
    if (forwarded && forward) await forward.onEvents(order.forwardedEvents(page, forwarded));
    options.onProgress?.('log', Number(order.order.events));
  });
  return order.report(chains);
}

/**
 * A page of the log as the chain check read it: what the order check needs of each
 * event, in columns (posted to another thread by moving a few buffers, not thousands of
 * strings or objects).
 */
export interface LoggedPage {
  /** Per event: its stream's name. */
  readonly streamNames: TextColumn;
  readonly revisions: Float64Array;
  /** Per event: its position's two parts (exact: the page carries `positionTexts` instead when one is beyond 2^53). */
  readonly commits: Float64Array;
  readonly prepares: Float64Array;
  readonly positionTexts: string[] | null;
  /** 32 bytes per event: its stored chain hash (zeros where it has none, see `hashless`; a Uint8Array once posted to another thread). */
  readonly chainHashes: Uint8Array;
  /** 1 for an event without a stored chain hash. */
  readonly hashless: Uint8Array;
}

/** The forwarded events of a page: their places in the page, and their data's jsonb texts. */
export interface ForwardedColumns {
  readonly rows: Int32Array;
  readonly dataJsons: TextColumn;
}

/**
 * Texts as their UTF-8 bytes one after another and where each ends: moved to another
 * thread as two buffers, where posting the strings themselves costs far more (measured
 * 2026-11-24: about 1.8 ms per page of the log against 0.3 ms for serializing them).
 */
export interface TextColumn {
  readonly bytes: Uint8Array;
  readonly ends: Int32Array;
}

/** A TextColumn built from UTF-8 bytes (a field of a row read by COPY, copied as it is), or from strings. */
export class TextColumnBuilder {
  private bytes = Buffer.allocUnsafeSlow(4096);
  private ends: number[] = [];
  private end = 0;

  get length(): number {
    return this.ends.length;
  }

  /** The bytes from..to of `source`, as the next text. */
  addBytes(source: Buffer, from: number, to: number): void {
    this.room(to - from);
    this.end += source.copy(this.bytes, this.end, from, to);
    this.ends.push(this.end);
  }

  add(text: string): void {
    // UTF-8 takes at most 3 bytes per UTF-16 unit; ASCII (nearly all of it) one.
    this.room(3 * text.length);
    this.end += this.bytes.write(text, this.end, 'utf8');
    this.ends.push(this.end);
  }

  /** The column of the texts added, and an empty builder. */
  take(): TextColumn {
    const column = { bytes: this.bytes.subarray(0, this.end), ends: Int32Array.from(this.ends) };
    this.bytes = Buffer.allocUnsafeSlow(Math.max(4096, this.end));
    this.ends = [];
    this.end = 0;
    return column;
  }

  private room(size: number): void {
    if (this.end + size <= this.bytes.length) return;
    const larger = Buffer.allocUnsafeSlow(Math.max(2 * this.bytes.length, this.end + size));
    this.bytes.copy(larger, 0, 0, this.end);
    this.bytes = larger;
  }
}

/** The k-th text of a column (as posted: `bytes` may have become a plain Uint8Array). */
export function textAt(column: TextColumn, k: number): string {
  const bytes = column.bytes;
  const view = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return view.toString('utf8', k === 0 ? 0 : column.ends[k - 1]!, column.ends[k]!);
}

/** The buffers of a page that can be moved to another thread rather than copied. */
export const pageBuffers = (page: LoggedPage, forwarded: ForwardedColumns | null): ArrayBuffer[] => [
  ...new Set(
    [
      page.streamNames.bytes,
      page.streamNames.ends,
      page.revisions,
      page.commits,
      page.prepares,
      page.chainHashes,
      page.hashless,
      ...(forwarded ? [forwarded.rows, forwarded.dataJsons.bytes, forwarded.dataJsons.ends] : []),
    ].map((column) => column.buffer as ArrayBuffer),
  ),
];

/** An event's position as text (`commit/prepare`). */
const positionOf = (page: LoggedPage, i: number): string => page.positionTexts?.[i] ?? `${page.commits[i]}/${page.prepares[i]}`;

/** A page as LogOrderCheck reads it (LoggedColumns): each event made an object only for a problem. */
class PageColumns implements LoggedColumns {
  readonly chainHashes: Buffer;
  readonly hashless: Uint8Array;

  constructor(private readonly page: LoggedPage) {
    this.chainHashes = Buffer.from(page.chainHashes.buffer, page.chainHashes.byteOffset, page.chainHashes.byteLength);
    this.hashless = page.hashless;
  }

  event(i: number): LoggedEvent {
    return {
      streamName: textAt(this.page.streamNames, i),
      revision: BigInt(this.page.revisions[i]!),
      position: positionOf(this.page, i),
      chainHash: this.hashless[i] === 1 ? null : this.chainHashes.subarray(i * CHAIN_HASH_BYTES, (i + 1) * CHAIN_HASH_BYTES),
    };
  }
}

/** What the chain check of the log found: its streams and events, and the problems of the chains and of the streams' recorded heads. */
export interface ChainsFollowed {
  readonly streams: number;
  readonly events: number;
  readonly problems: readonly LogProblem[];
  /** The problems naming an event whose content does not give its stored chain hash (StreamChainCheck's). */
  readonly contentDiffers: readonly LogProblem[];
}

/**
 * The log's running hash and its comparison with every recorded checkpoint
 * (LogOrderCheck) fed page by page with what the chain check read (LoggedPage), on
 * whichever thread assembles the report; the recorded checkpoints are read from `pool`
 * as the log reaches them.
 */
export class LogOrderFollower {
  readonly order = new LogOrderCheck();
  private readonly at = new Map<string, LogCheckpoint>();
  private lastPosition = '0/0';

  private constructor(
    private readonly pool: Pool,
    private readonly wanted: ReadonlySet<string>,
    /** The last checkpoint compared: the last recorded before the read started. */
    private readonly lastSeq: bigint,
    private nextCheckpoint: RecordedCheckpoint | null,
  ) {}

  static async start(pool: Pool, at: readonly string[], upTo: Position | null = null): Promise<LogOrderFollower> {
    // The checkpoints recorded before the read of the log starts: each covers events that were
    // visible then, so within what the read takes. One recorded during the read may cover
    // events after its horizon: it is left to the next run. A read bounded by `upTo`, chosen
    // before, takes only those that end at it or before (one recorded meanwhile may end past it).
    const last = (
      await pool.query<{ seq: string }>(
        `SELECT coalesce(max(seq), 0) AS seq FROM event_log_checkpoints
         WHERE $1::text IS NULL OR (position_commit, position_prepare) <= ($1::text::xid8, $2::bigint)`,
        [upTo?.commit.toString() ?? null, upTo?.prepare.toString() ?? null],
      )
    ).rows[0]!.seq;
    const recordedBefore = BigInt(last);
    return new LogOrderFollower(pool, new Set(at), recordedBefore, await checkpointAfter(pool, 0n, recordedBefore));
  }

  async page(page: LoggedPage): Promise<void> {
    const { order } = this;
    const columns = new PageColumns(page);
    const n = page.revisions.length;
    for (let i = 0; i < n; i++) {
      while (this.nextCheckpoint && this.nextCheckpoint.fromEvents <= order.events) {
        order.checkpoint(this.nextCheckpoint);
        this.nextCheckpoint = await checkpointAfter(this.pool, this.nextCheckpoint.seq, this.lastSeq);
      }
      order.eventInColumns(columns, i);
      if (this.wanted.size > 0) {
        const position = positionOf(page, i);
        if (this.wanted.has(position)) this.at.set(position, { position, events: order.events, hash: order.runningHash });
      }
    }
    if (n > 0) this.lastPosition = positionOf(page, n - 1);
  }

  /** The forwarded events of a page. */
  forwardedEvents(page: LoggedPage, forwarded: ForwardedColumns): ForwardedEvent[] {
    const events = new Array<ForwardedEvent>(forwarded.rows.length);
    const texts = page.positionTexts;
    for (let k = 0; k < events.length; k++) {
      const i = forwarded.rows[k]!;
      const position = texts?.[i];
      events[k] = {
        streamName: textAt(page.streamNames, i),
        revision: BigInt(page.revisions[i]!),
        commit: position === undefined ? String(page.commits[i]) : position.slice(0, position.indexOf('/')),
        prepare: position === undefined ? String(page.prepares[i]) : position.slice(position.indexOf('/') + 1),
        dataJson: textAt(forwarded.dataJsons, k),
      };
    }
    return events;
  }

  /** After the last page: the checkpoints past the end of the log (it lost events they covered), and the report. */
  async report(chains: ChainsFollowed): Promise<EventLogReport> {
    const { order } = this;
    while (this.nextCheckpoint) {
      order.checkpoint(this.nextCheckpoint);
      this.nextCheckpoint = await checkpointAfter(this.pool, this.nextCheckpoint.seq, this.lastSeq);
    }
    order.finish();
    return {
      streams: chains.streams,
      events: chains.events,
      checkpointsCompared: order.checkpointsCompared,
      head: { position: this.lastPosition, events: order.events, hash: order.runningHash },
      at: this.at,
      problems: inLogOrder([...chains.problems, ...order.problems]),
      contentDiffers: inLogOrder(chains.contentDiffers)[0] ?? null,
    };
  }
}

/**
 * Reads the visible log in log order (up to `upTo`, when given) in one statement
 * streamed by COPY (decision 0123: PostgreSQL produces the rows while Node checks them), checks each event against its stream's
 * previous revision as it arrives (LoggedPageBuilder) and hands the events on in pages
 * of `pageSize` (`onPage`: what the order check needs, and the events `forward` asks
 * for; the read waits for each to settle); then checks the streams it flagged again,
 * exactly (StreamsCheckedAgain), and compares each stream's recorded head with its
 * last event (streamHeadsDiffering, run while the log is read).
 */
export async function followLogChains(
  pool: Pool,
  options: { pageSize?: number; upTo?: Position; forward?: { streamNamePrefix: string; eventType: string }; recentStreams?: number },
  onPage: (page: LoggedPage, forwarded: ForwardedColumns | null) => Promise<void>,
): Promise<ChainsFollowed> {
  const pageSize = options.pageSize ?? 1000;
  const heads = streamHeadsDiffering(pool);
  heads.catch(() => undefined);
  const set = await logSetRead(pool, options.upTo ?? null);
  const page = new LoggedPageBuilder(pageSize, options.forward ?? null, new RecentStreams(options.recentStreams ?? RECENT_STREAMS));
  await readBinaryCopy(
    pool,
    `SELECT ${EVENT_COLUMNS} FROM events WHERE ${set.where} ORDER BY transaction_id, global_position`,
    EVENT_FIELDS,
    (rows) => {
      page.event(rows);
      const answered = page.unanswered.length >= UNANSWERED_AT_ONCE ? page.answer(pool) : null;
      if (page.size === pageSize) return answered ? answered.then(() => page.take(onPage)) : page.take(onPage);
      return answered ?? undefined;
    },
    LOG_ORDER_SCAN,
  );
  if (page.size > 0) await page.take(onPage);
  await page.answer(pool);

  const again = new StreamsCheckedAgain();
  for (const name of await revisionsTwice(pool, set)) page.flagged.add(name);
  if (page.flagged.size > 0) {
    const names = [...page.flagged].sort();
    const select = `SELECT ${EVENT_COLUMNS} FROM events WHERE ${set.where} AND stream_name = ANY('${arrayLiteral(names)}'::text[])
      ORDER BY stream_name, transaction_id, global_position`;
    await readBinaryCopy(pool, select, EVENT_FIELDS, (rows) => again.event(storedEvent(rows)));
  }
  again.finish();

  const headProblems: LogProblem[] = [];
  for (const row of await heads) {
    const last = row.last_revision === null ? null : { revision: BigInt(row.last_revision), position: row.last_position! };
    const headCheck = new StreamChainCheck();
    headCheck.streamHead(row.stream_name, BigInt(row.revision), last);
    headProblems.push(...headCheck.problems);
    if (headCheck.problems.length === 0 && last !== null && !row.head_matches) {
      headProblems.push({
        kind: 'chain_hash_mismatch',
        streamName: row.stream_name,
        revision: last.revision,
        position: last.position,
        detail: "the stream's recorded chain head is not its last event's chain hash",
      });
    }
  }
  return {
    streams: page.revisionZeros + again.streamsLessRevisionZeros,
    events: page.events,
    problems: [...again.problems, ...headProblems],
    contentDiffers: again.contentDiffers,
  };
}

interface StreamHeadRow {
  stream_name: string;
  revision: string;
  last_revision: string | null;
  last_position: string | null;
  head_matches: boolean;
}

/**
 * The streams whose recorded head (the stream row's revision and chain head) is not
 * their last event, with that last event (none when the stream has no event left), in
 * name order: one statement over every stream row, each joined with its last event by
 * the index of streams and revisions, in one snapshot (an append writes both at once).
 */
async function streamHeadsDiffering(pool: Pool): Promise<StreamHeadRow[]> {
  return (
    await pool.query<StreamHeadRow>(
      `SELECT s.stream_name, s.revision, last.stream_revision AS last_revision, last.position AS last_position,
              coalesce(s.chain_hashes[cardinality(s.chain_hashes)] = last.chain_hash, false) AS head_matches
       FROM event_streams s
       LEFT JOIN LATERAL (SELECT stream_revision, chain_hash, transaction_id::text || '/' || global_position AS position FROM events e
                          WHERE e.stream_name = s.stream_name ORDER BY stream_revision DESC LIMIT 1) last ON true
       WHERE last.stream_revision IS DISTINCT FROM s.revision OR s.chain_hashes[cardinality(s.chain_hashes)] IS DISTINCT FROM last.chain_hash
       ORDER BY s.stream_name`,
    )
  ).rows;
}

/** The events a verification reads: below a visibility horizon, and up to a position when one is given (a condition on `events`, literals only). */
interface LogSet {
  readonly where: string;
}

/**
 * The set of events read: those of transactions below the visibility horizon now (every
 * one of them has ended, so a later read finds the same set: the flagged streams' second
 * read takes exactly their events of the first), up to `upTo` when given.
 */
async function logSetRead(pool: Pool, upTo: Position | null): Promise<LogSet> {
  const horizon = (await pool.query<{ horizon: string }>('SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS horizon')).rows[0]!.horizon;
  const bound = upTo ? ` AND (transaction_id, global_position) <= ${positionLiteral(upTo)}` : '';
  return { where: `transaction_id < ${xid8Literal(BigInt(horizon))}${bound}` };
}

/**
 * The streams with a revision twice in the set: none while the unique constraint on
 * streams and revisions holds (looked up in the catalog); only without it are the
 * events counted. A revision twice is then no longer flagged by its predecessor alone
 * (both copies may follow it), so these streams are checked again too.
 */
async function revisionsTwice(pool: Pool, set: LogSet): Promise<string[]> {
  const unique = await pool.query(
    `SELECT 1 FROM pg_constraint WHERE conrelid = 'events'::regclass AND contype IN ('u', 'p') AND convalidated
       AND conkey::smallint[] @> ARRAY[(SELECT attnum FROM pg_attribute WHERE attrelid = 'events'::regclass AND attname = 'stream_name'),
                                       (SELECT attnum FROM pg_attribute WHERE attrelid = 'events'::regclass AND attname = 'stream_revision')]
       AND cardinality(conkey) = 2`,
  );
  if (unique.rows.length > 0) return [];
  const twice = await pool.query<{ stream_name: string }>(
    `SELECT DISTINCT stream_name FROM events WHERE ${set.where} GROUP BY stream_name, stream_revision HAVING count(*) > 1`,
  );
  return twice.rows.map((r) => r.stream_name);
}

/** The event columns of a read of the log, in order (COPY's binary format: text as UTF-8, bigint and xid8 as 8 bytes, bytea as is, boolean as 1 byte). */
const enum LogColumn {
  StreamName,
  Revision,
  EventId,
  Type,
  Data,
  Metadata,
  ChainHash,
  Commit,
  Prepare,
}
const EVENT_COLUMNS = `stream_name, stream_revision, event_id::text, event_type, data::text, metadata::text, chain_hash, transaction_id, global_position`;
const EVENT_FIELDS = 9;
/**
 * Streams per generation of the recent streams the read remembers (RecentStreams, at
 * most twice as many): in the 1M seed:load history, 99 % of the events whose stream
 * returns do so within 50,000 events of its previous one (2026-11-24).
 */
const RECENT_STREAMS = 8_192;
/** Events waiting for their previous revision from the database, beyond which the read waits for the answer. */
const UNANSWERED_AT_ONCE = 500;

/** Stream names as a text[] literal of a COPY statement (each quoted; quotes and backslashes escaped, then quotes doubled for SQL). */
function arrayLiteral(names: readonly string[]): string {
  return `{${names.map((n) => `"${n.replace(/[\\"]/g, '\\$&')}"`).join(',')}}`.replace(/'/g, "''");
}

/** An event whose stream's previous revision is asked of the database: what its check needs, its content's bytes copied from the row. */
interface Unanswered {
  readonly streamName: string;
  readonly revision: number;
  readonly commit: string;
  readonly prepare: string;
  /** The row's fields from the stream's name to the metadata, with their places in it. */
  readonly content: Buffer;
  readonly starts: Int32Array;
  readonly ends: Int32Array;
  readonly storedHash: string;
}

function unansweredEvent(rows: BinaryCopyRows, streamName: string, revision: number, storedHash: string): Unanswered {
  const from = rows.starts[LogColumn.StreamName]!;
  const to = rows.ends[LogColumn.Metadata]!;
  const starts = new Int32Array(EVENT_FIELDS);
  const ends = new Int32Array(EVENT_FIELDS);
  for (let f = LogColumn.StreamName; f <= LogColumn.Metadata; f++) {
    starts[f] = rows.starts[f]! - from;
    ends[f] = rows.ends[f]! - from;
  }
  return {
    streamName,
    revision,
    commit: rows.integerText(LogColumn.Commit, true),
    prepare: rows.integerText(LogColumn.Prepare, false),
    content: Buffer.from(rows.bytes.subarray(from, to)),
    starts,
    ends,
    storedHash,
  };
}

/** The current row (EVENT_COLUMNS) as an event object. */
function storedEvent(rows: BinaryCopyRows): StoredChainedEvent {
  const hashStart = rows.starts[LogColumn.ChainHash]!;
  return {
    streamName: rows.text(LogColumn.StreamName)!,
    revision: BigInt(rows.integerText(LogColumn.Revision, false)),
    id: rows.text(LogColumn.EventId)!,
    type: rows.text(LogColumn.Type)!,
    dataJson: rows.text(LogColumn.Data)!,
    metadataJson: rows.text(LogColumn.Metadata)!,
    position: positionText(rows),
    // A copy: the row's buffer is not kept.
    storedHash: hashStart < 0 ? null : Buffer.from(rows.bytes.subarray(hashStart, rows.ends[LogColumn.ChainHash]!)),
  };
}

/**
 * The page of the log being read: each event checked against its stream's previous
 * revision as it arrives, and what the order check needs of it put in columns
 * (LoggedPage), with the events `forward` asks for (ForwardedColumns).
 */
class LoggedPageBuilder {
  size = 0;
  events = 0;
  /** Events at revision 0: the log's streams, but for the flagged ones (StreamsCheckedAgain counts those). */
  revisionZeros = 0;
  /** Streams with an event that did not simply go on the stream's chain: checked again. */
  readonly flagged = new Set<string>();
  private readonly streamNames = new TextColumnBuilder();
  private revisions: Float64Array;
  private commits: Float64Array;
  private prepares: Float64Array;
  private positionTexts: string[] | null = null;
  private chainHashes: Buffer;
  private hashless: Uint8Array;
  private forwardedRows: number[] = [];
  private readonly dataTexts = new TextColumnBuilder();
  private readonly forwardType: Buffer | null;
  private readonly forwardPrefix: Buffer | null;
  private readonly digest = new ContentBytesDigest({
    streamName: LogColumn.StreamName,
    id: LogColumn.EventId,
    type: LogColumn.Type,
    data: LogColumn.Data,
    metadata: LogColumn.Metadata,
  });

  /** Events whose stream's previous revision was not met recently: checked when the database has answered (`answer`). */
  unanswered: Unanswered[] = [];

  constructor(
    private readonly pageSize: number,
    forward: { streamNamePrefix: string; eventType: string } | null,
    private readonly recent: RecentStreams,
  ) {
    this.revisions = new Float64Array(pageSize);
    this.commits = new Float64Array(pageSize);
    this.prepares = new Float64Array(pageSize);
    this.chainHashes = Buffer.alloc(pageSize * CHAIN_HASH_BYTES);
    this.hashless = new Uint8Array(pageSize);
    this.forwardType = forward ? Buffer.from(forward.eventType, 'utf8') : null;
    this.forwardPrefix = forward ? Buffer.from(forward.streamNamePrefix, 'utf8') : null;
  }

  /**
   * The next event of the log: the current row of `rows`. It goes on its stream's
   * chain when it is in order (revision 0, or its previous revision is earlier in the
   * log) and its digest over the row's bytes (ContentBytesDigest), from the previous
   * revision's stored hash, is its own stored hash. The previous revision is nearly
   * always the stream's last event met recently (RecentStreams); otherwise the event
   * waits, its content copied, until the database answers for its previous revision
   * (`answer`). An event that does not go on flags its stream, to be checked again with
   * all its events. None of its texts is decoded but the stream's name (and the data of
   * a forwarded event).
   */
  event(rows: BinaryCopyRows): void {
    const i = this.size;
    const { chainHashes, recent } = this;
    const { bytes, starts, ends } = rows;
    const streamName = rows.text(LogColumn.StreamName)!;
    const revisionNumber = rows.safeInteger(LogColumn.Revision);
    const hashStart = starts[LogColumn.ChainHash]!;
    const hashed = hashStart >= 0 && ends[LogColumn.ChainHash]! - hashStart === CHAIN_HASH_BYTES;
    if (hashed) bytes.copy(chainHashes, i * CHAIN_HASH_BYTES, hashStart, hashStart + CHAIN_HASH_BYTES);
    else this.hashless[i] = 1;
    const commit = rows.safeInteger(LogColumn.Commit, true);
    const prepare = rows.safeInteger(LogColumn.Prepare);
    const position = commit === null || prepare === null || this.positionTexts !== null ? positionText(rows) : null;

    if (revisionNumber === 0) this.revisionZeros += 1;
    const slot = revisionNumber === null ? -1 : recent.find(streamName);
    if (!hashed || revisionNumber === null) {
      this.flagged.add(streamName);
    } else {
      const stored = chainHashes.toString('hex', i * CHAIN_HASH_BYTES, (i + 1) * CHAIN_HASH_BYTES);
      if (revisionNumber === 0) {
        if (this.digest.digest(null, 0, bytes, starts, ends, 0) !== stored) this.flagged.add(streamName);
      } else if (slot >= 0 && recent.revisions[slot] === revisionNumber - 1) {
        // Its previous revision was this stream's last event met: earlier in the log, in the set.
        const goesOn = recent.hashed[slot] === 1 && this.digest.digest(recent.hashes, slot * CHAIN_HASH_BYTES, bytes, starts, ends, revisionNumber) === stored;
        if (!goesOn) this.flagged.add(streamName);
      } else {
        this.unanswered.push(unansweredEvent(rows, streamName, revisionNumber, stored));
      }
    }
    if (revisionNumber !== null) recent.remember(streamName, revisionNumber, hashed ? bytes : null, hashStart, slot);

    this.streamNames.addBytes(bytes, starts[LogColumn.StreamName]!, ends[LogColumn.StreamName]!);
    this.revisions[i] = revisionNumber ?? Number(rows.integerText(LogColumn.Revision, false));
    this.commits[i] = commit ?? Number.NaN;
    this.prepares[i] = prepare ?? Number.NaN;
    if (position !== null) {
      // A position beyond 2^53: from here on this page carries every position as text.
      if (this.positionTexts === null) this.positionTexts = Array.from({ length: i }, (_, k) => `${this.commits[k]}/${this.prepares[k]}`);
      this.positionTexts.push(position);
    }
    if (this.forwardType && this.forwards(rows)) {
      this.forwardedRows.push(i);
      this.dataTexts.addBytes(bytes, starts[LogColumn.Data]!, ends[LogColumn.Data]!);
    }
    this.size = i + 1;
    this.events += 1;
  }

  /**
   * Checks the events waiting for their previous revision: one statement finds each
   * one's previous revision by the index of streams and revisions (one row of it,
   * should it be there twice) and whether it is earlier in the log, which makes it one
   * of the set read (the set is a prefix of the log below the horizon).
   */
  async answer(pool: Pool): Promise<void> {
    const waiting = this.unanswered;
    if (waiting.length === 0) return;
    this.unanswered = [];
    const rows = (
      await pool.query<{ k: string; chain_hash: Buffer | null; earlier: boolean }>(
        `SELECT w.k, q.chain_hash, (q.transaction_id, q.global_position) < (w.commit::xid8, w.prepare) AS earlier
         FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[]) WITH ORDINALITY AS w(stream_name, revision, commit, prepare, k)
         JOIN LATERAL (SELECT chain_hash, transaction_id, global_position FROM events q
                       WHERE q.stream_name = w.stream_name AND q.stream_revision = w.revision - 1 LIMIT 1) q ON true`,
        [waiting.map((e) => e.streamName), waiting.map((e) => e.revision), waiting.map((e) => e.commit), waiting.map((e) => e.prepare)],
      )
    ).rows;
    const previous = new Array<{ chain_hash: Buffer | null; earlier: boolean } | undefined>(waiting.length);
    for (const row of rows) previous[Number(row.k) - 1] = row;
    waiting.forEach((e, k) => {
      const found = previous[k];
      const goesOn =
        found !== undefined &&
        found.earlier &&
        found.chain_hash !== null &&
        found.chain_hash.length === CHAIN_HASH_BYTES &&
        this.digest.digest(found.chain_hash, 0, e.content, e.starts, e.ends, e.revision) === e.storedHash;
      if (!goesOn) this.flagged.add(e.streamName);
    });
  }

  /** Whether the current row is of the type `forward` asks for, in a stream named with its prefix (compared as bytes). */
  private forwards(rows: BinaryCopyRows): boolean {
    const { bytes, starts, ends } = rows;
    const type = this.forwardType!;
    const prefix = this.forwardPrefix!;
    const typeStart = starts[LogColumn.Type]!;
    const nameStart = starts[LogColumn.StreamName]!;
    return (
      ends[LogColumn.Type]! - typeStart === type.length &&
      bytes.compare(type, 0, type.length, typeStart, typeStart + type.length) === 0 &&
      ends[LogColumn.StreamName]! - nameStart >= prefix.length &&
      bytes.compare(prefix, 0, prefix.length, nameStart, nameStart + prefix.length) === 0
    );
  }

  /** Hands the page on (its columns cut to its events) and starts the next. */
  take(onPage: (page: LoggedPage, forwarded: ForwardedColumns | null) => Promise<void>): Promise<void> {
    const n = this.size;
    const logged: LoggedPage = {
      streamNames: this.streamNames.take(),
      revisions: n === this.pageSize ? this.revisions : this.revisions.slice(0, n),
      commits: n === this.pageSize ? this.commits : this.commits.slice(0, n),
      prepares: n === this.pageSize ? this.prepares : this.prepares.slice(0, n),
      positionTexts: this.positionTexts,
      chainHashes: n === this.pageSize ? this.chainHashes : this.chainHashes.subarray(0, n * CHAIN_HASH_BYTES),
      hashless: n === this.pageSize ? this.hashless : this.hashless.slice(0, n),
    };
    const forwarded: ForwardedColumns | null =
      this.forwardedRows.length > 0 ? { rows: Int32Array.from(this.forwardedRows), dataJsons: this.dataTexts.take() } : null;
    this.size = 0;
    // Fresh columns: the page's own are moved to another thread with it.
    this.revisions = new Float64Array(this.pageSize);
    this.commits = new Float64Array(this.pageSize);
    this.prepares = new Float64Array(this.pageSize);
    this.positionTexts = null;
    this.chainHashes = Buffer.alloc(this.pageSize * CHAIN_HASH_BYTES);
    this.hashless = new Uint8Array(this.pageSize);
    this.forwardedRows = [];
    return onPage(logged, forwarded);
  }
}

/** The current row's position as exact text (`commit/prepare`). */
const positionText = (rows: BinaryCopyRows): string => `${rows.integerText(LogColumn.Commit, true)}/${rows.integerText(LogColumn.Prepare, false)}`;

/** An event handed on by verifyEventLog as it meets it (`forward`): its place and its data's jsonb text. */
export interface ForwardedEvent {
  readonly streamName: string;
  readonly revision: bigint;
  /** Its position's two parts, as text (`commit/prepare`). */
  readonly commit: string;
  readonly prepare: string;
  readonly dataJson: string;
}

/** What verifyEventLog takes on PostgreSQL beyond what every store's verification takes. */
export interface PostgresLogVerifyOptions extends VerifyEventLogOptions {
  /** Verify the log only up to this position (an audit as of a point; ledger:verify's head). */
  readonly upTo?: Position;
  /** Streams per generation of those whose last event the read remembers (RecentStreams; tests make it small). */
  readonly recentStreams?: number;
  /**
   * Events of one type in streams named with a prefix, handed on page by page as the
   * read of the log meets them (ledger:verify replays the ledgers from them, decision
   * 0123); the read waits for each `onEvents` to settle.
   */
  readonly forward?: {
    readonly streamNamePrefix: string;
    readonly eventType: string;
    readonly onEvents: (events: ForwardedEvent[]) => void | Promise<void>;
  };
}

/** The recorded checkpoint after `seq`, up to `lastSeq`. */
async function checkpointAfter(pool: Pool, seq: bigint, lastSeq: bigint): Promise<RecordedCheckpoint | null> {
  const row = (
    await pool.query<CheckpointRow>(`SELECT ${CHECKPOINT_COLUMNS} FROM event_log_checkpoints WHERE seq > $1 AND seq <= $2 ORDER BY seq LIMIT 1`, [
      seq.toString(),
      lastSeq.toString(),
    ])
  ).rows[0];
  return row ? toRecorded(row) : null;
}

/**
 * verifyEventLog with its read of the log and its chains on a thread of its own
 * (worker_threads, with a pool of its own; followLogChains) and the order check, the
 * running hash and the forwarded events on this one (LogOrderFollower, reading the
 * checkpoints from `pool`): what `ledger:verify` runs, so that recomputing the chains (a
 * SHA-256 per event, and the parsing of every event) and replaying the ledgers from the
 * forwarded events use both cores. The pages reach this thread in log order; the read of
 * the log runs at most a few pages ahead of them. Runs the compiled module (dist/): not
 * from the TypeScript sources.
 */
export async function verifyEventLogInWorker(
  pool: Pool,
  databaseUrl: string,
  options: {
    applicationName?: string;
    /** The thread's sessions read-only, as the caller's (a command that writes nothing). */
    readOnly?: boolean;
    upTo?: Position;
    at?: readonly string[];
    forward?: PostgresLogVerifyOptions['forward'];
    onProgress?: VerifyEventLogOptions['onProgress'];
  } = {},
): Promise<EventLogReport> {
  const forward = options.forward;
  const order = await LogOrderFollower.start(pool, options.at ?? [], options.upTo ?? null);
  const worker = new Worker(join(__dirname, 'event-log-audit-worker.js'), {
    workerData: {
      databaseUrl,
      applicationName: options.applicationName ?? 'gateway-log-verify',
      readOnly: options.readOnly ?? false,
      upTo: options.upTo ?? null,
      forward: forward ? { streamNamePrefix: forward.streamNamePrefix, eventType: forward.eventType } : null,
    },
  });
  let taken: Promise<void> = Promise.resolve();
  try {
    const chains = await new Promise<ChainsFollowed>((resolve, reject) => {
      worker.on('message', (message: { page?: LoggedPage; forwarded?: ForwardedColumns | null; chains?: ChainsFollowed; error?: string }) => {
        if (message.page) {
          const { page, forwarded } = message;
          // Taken in turn: the next page waits until this one's order check and onEvents have settled.
          taken = taken
            .then(async () => {
              await order.page(page);
              if (forwarded && forward) await forward.onEvents(order.forwardedEvents(page, forwarded));
              options.onProgress?.('log', Number(order.order.events));
            })
            .then(
              () => worker.postMessage('taken'),
              (error: unknown) => reject(error),
            );
        } else if (message.chains) {
          resolve(message.chains);
        } else {
          reject(new Error(message.error ?? 'the log verification thread sent no report'));
        }
      });
      worker.once('error', reject);
      worker.once('exit', (code) => reject(new Error(`the log verification thread exited with code ${code} before it reported`)));
    });
    await taken;
    return await order.report(chains);
  } finally {
    await worker.terminate();
  }
}

/** A data field whose repeated values repeatedDataFields looks for: within each stream, or across them all. */
export interface RepeatedField {
  /** The data property (letters only), e.g. `cause`. */
  readonly field: string;
  readonly withinStream: boolean;
}

/** Events that carry the same value of a data field (in one stream when the field is looked for within streams), in log order. */
export interface RepeatedValue {
  readonly field: string;
  readonly value: string;
  readonly events: readonly { streamName: string; revision: bigint; position: Position; data: Record<string, unknown> }[];
}

/**
 * Values of data fields carried by more than one of the visible events of one type in
 * streams named with a prefix, up to `upTo`: what a check that a value is never used
 * twice (a ledger's causes and entry ids) needs from a log, without holding every value
 * seen in memory. One statement finds the repeated values by hashing, in PostgreSQL's
 * memory (spilling to disk beyond its work_mem); a second one, only when there are
 * some, reads the events that carry them.
 */
export async function repeatedDataFields(
  pool: Pool,
  options: { streamNamePrefix: string; eventType: string; upTo: Position; fields: readonly RepeatedField[] },
): Promise<RepeatedValue[]> {
  if (options.fields.length === 0) return [];
  for (const { field } of options.fields) if (!/^[A-Za-z]+$/.test(field)) throw new Error(`not a data field name: ${field}`);
  const pattern = `${options.streamNamePrefix.replace(/[\\%_]/g, '\\$&')}%`;
  const where = `stream_name LIKE $1 AND event_type = $2 AND (transaction_id, global_position) <= ($3::text::xid8, $4::bigint) AND ${VISIBLE}`;
  const params = [pattern, options.eventType, options.upTo.commit.toString(), options.upTo.prepare.toString()];
  const columns = options.fields.map(({ field }, i) => `data->>'${field}' AS f${i}`).join(', ');
  const groups = options.fields
    .map(
      ({ withinStream }, i) => `SELECT ${i} AS field, ${withinStream ? 'stream_name' : 'NULL::text'} AS stream_name, f${i} AS value FROM carried
       WHERE f${i} IS NOT NULL GROUP BY ${withinStream ? 'stream_name, ' : ''}f${i} HAVING count(*) > 1`,
    )
    .join('\nUNION ALL\n');
  const repeated = await inTransaction(pool, async (client) => {
    await client.query(`SET LOCAL work_mem = '64MB'`);
    return (
      await client.query<{ field: number; stream_name: string | null; value: string }>(
        `WITH carried AS MATERIALIZED (SELECT stream_name, ${columns} FROM events WHERE ${where})
         ${groups}`,
        params,
      )
    ).rows;
  });
  const found: RepeatedValue[] = [];
  for (const [i, { field }] of options.fields.entries()) {
    const ofField = repeated.filter((r) => r.field === i);
    if (ofField.length === 0) continue;
    const rows = await pool.query<{
      stream_name: string;
      stream_revision: string;
      commit: string;
      prepare: string;
      value: string;
      data: Record<string, unknown>;
    }>(
      `SELECT stream_name, stream_revision, transaction_id::text AS commit, global_position AS prepare, data->>'${field}' AS value, data FROM events
       WHERE ${where} AND data->>'${field}' = ANY($5::text[]) ORDER BY transaction_id, global_position`,
      [...params, [...new Set(ofField.map((r) => r.value))]],
    );
    for (const group of ofField) {
      const events = rows.rows
        .filter((r) => r.value === group.value && (group.stream_name === null || r.stream_name === group.stream_name))
        .map((r) => ({
          streamName: r.stream_name,
          revision: BigInt(r.stream_revision),
          position: { commit: BigInt(r.commit), prepare: BigInt(r.prepare) },
          data: r.data,
        }));
      found.push({ field, value: group.value, events });
    }
  }
  return found;
}
