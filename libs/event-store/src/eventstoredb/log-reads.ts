import { END as ESDB_END } from '@eventstore/db-client';
import type { ReadPosition } from '@eventstore/db-client';
import { AppendOutcomeUnknownError, comparePositions, EventStoreUnavailableError, Position, RecordedEvent } from '../event-store';
import { ClientRecordedEvent, isSystemEvent, ReadPage, toPosition, toReadPosition, toRecordedEvent, toUnavailable } from './mapping';

/** A read of the client: its ReadStream (a Readable of resolved events that can cancel its gRPC call). */
export interface CancellableRead<T> extends AsyncIterable<T> {
  cancel(): Promise<void>;
  destroy(error?: Error): unknown;
}

/**
 * A read of the client with a deadline. The client gives reads and subscriptions an
 * infinite gRPC deadline (its `deadline` option is overridden for them), so a server
 * that accepts the call and then stalls would hold the read, and the command that
 * waits for it, for ever. When the deadline passes, the call is cancelled and the read
 * fails with EventStoreUnavailableError (cancelling alone would not end it: the
 * client's read ignores the cancellation error of its own call and never ends). Other
 * errors that mean "no answer" become the same error.
 */
export async function* readWithDeadline<T>(read: CancellableRead<T>, deadlineMs: number, what: string): AsyncGenerator<T> {
  const timer = setTimeout(() => {
    void read.cancel().catch(() => undefined);
    read.destroy(new EventStoreUnavailableError(`EventStoreDB did not answer within ${deadlineMs} ms while ${what}`));
  }, deadlineMs);
  try {
    for await (const item of read) yield item;
  } catch (error) {
    throw toUnavailable(error, what);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The user events of `$all` after `after` (exclusive), at most `maxCount`, in log
 * order. The server's read includes the event at its start position and has no
 * filter in this client: events at or before the cursor and system events are
 * skipped here, and pages are read until `maxCount` user events are found or the
 * log ends, so that a short answer always means "end of the log" (which is how
 * callers page through it).
 */
export function readAllAfter(readPage: ReadPage, after: Position | 'start', maxCount: number): Promise<RecordedEvent[]> {
  return readAllAfterAs(readPage, after, maxCount, toRecordedEvent);
}

/** readAllAfter, each event given as `map` makes it of the client's event (the chain check reads the metadata the port leaves out). */
export async function readAllAfterAs<T>(readPage: ReadPage, after: Position | 'start', maxCount: number, map: (event: ClientRecordedEvent) => T): Promise<T[]> {
  const found: T[] = [];
  let cursor: Position | null = after === 'start' ? null : after;
  while (found.length < maxCount) {
    // +1: a page from the cursor starts with the event at the cursor itself.
    const pageSize = maxCount - found.length + 1;
    let read = 0;
    let advanced = false;
    // The page is read to its end (never left early), so that no call stays open.
    for await (const resolved of readPage(cursor === null ? toReadPosition('start') : toReadPosition(cursor), pageSize)) {
      read++;
      const event = resolved.event;
      const position = toPosition(event?.position);
      if (!event || !position) continue;
      if (cursor !== null && comparePositions(position, cursor) <= 0) continue;
      cursor = position;
      advanced = true;
      if (found.length < maxCount && !isSystemEvent(event)) found.push(map(event));
    }
    if (read < pageSize) break; // the end of the log
    if (!advanced) throw new Error('reading $all made no progress: a full page held no event after the cursor');
  }
  return found;
}

/** The position of the last user event of `$all`, reading backwards past system events; null when there is none. */
export async function lastUserEventPosition(readPageBackwards: ReadPage, pageSize = 100): Promise<Position | null> {
  let cursor: Position | null = null;
  for (;;) {
    let read = 0;
    let advanced = false;
    let found: Position | null = null;
    const from: ReadPosition = cursor === null ? ESDB_END : toReadPosition(cursor);
    for await (const resolved of readPageBackwards(from, pageSize)) {
      read++;
      const event: ClientRecordedEvent | undefined = resolved.event;
      const position = toPosition(event?.position);
      if (found || !event || !position) continue; // read the page to its end
      if (cursor !== null && comparePositions(position, cursor) >= 0) continue;
      cursor = position;
      advanced = true;
      if (!isSystemEvent(event)) found = position;
    }
    if (found) return found;
    if (read < pageSize) return null; // reached the start of the log
    if (!advanced) throw new Error('reading $all backwards made no progress');
  }
}

/**
 * Where a subscription that has just caught up may put its checkpoint.
 *
 * A filtered subscription of EventStoreDB reports a checkpoint every
 * (checkpoint interval × search window, 32 by default) events it looked at, and the
 * position it reports is the start of the page it read; when it reaches the end of
 * the log it says "caught up", with no position. So a consumer whose filter matches
 * none of the last events of the log would keep a checkpoint short of the head for
 * as long as no new event comes (a rebuild that waits for the head would wait for
 * new traffic, and the lag would show events that are not there).
 *
 * On caught-up, every event the subscription will hand over up to this moment has
 * been handed over: the log after `from` (at or past the last event and checkpoint
 * handed over) is read, and the checkpoint may move to the last record before the
 * first event the subscription still has to hand over (`pending`: one the server
 * will send live, appended after it caught up), or to the end of the log when there
 * is none. Returns null when there is nothing after `from`. The read stops after
 * `budget` records, with the position reached so far.
 */
export async function caughtUpCheckpoint(
  readPage: ReadPage,
  from: Position | 'start',
  pending: (event: ClientRecordedEvent) => boolean,
  options: { pageSize?: number; budget?: number } = {},
): Promise<Position | null> {
  const pageSize = options.pageSize ?? 256;
  const budget = options.budget ?? 4096;
  let cursor: Position | null = from === 'start' ? null : from;
  let confirmed: Position | null = null;
  let looked = 0;
  for (;;) {
    let read = 0;
    let advanced = false;
    let stop = false;
    for await (const resolved of readPage(cursor === null ? toReadPosition('start') : toReadPosition(cursor), pageSize)) {
      read++;
      const event = resolved.event;
      const position = toPosition(event?.position);
      if (stop || !event || !position) continue; // read the page to its end
      if (cursor !== null && comparePositions(position, cursor) <= 0) continue;
      if (pending(event)) {
        stop = true;
        continue;
      }
      cursor = position;
      confirmed = position;
      advanced = true;
      looked++;
    }
    if (stop || read < pageSize || looked >= budget) return confirmed;
    if (!advanced) throw new Error('reading $all made no progress: a full page held no event after the cursor');
  }
}

/**
 * The port's position of an append: the $all position of its last event, also for
 * a retry that the server recognised (idempotent).
 *
 * The server's answer carries one position, taken from its commit (the same value
 * as commit and prepare): for an append of one event that is the event's own
 * position, fresh or repeated, and it is used as it is, with no further round trip.
 * For an append of several events it is not the last event's, and some servers
 * answer an idempotent retry with none; then the last event is read back by its
 * revision (the event at a revision never changes, so the read cannot race with
 * other appends), checking its id. The append has committed by then, so a failed
 * read is tried again (`retryDelaysMs`) before giving up; then the answer's position
 * serves if there is one, else AppendOutcomeUnknownError (the append is not lost:
 * a retry with the same ids is recognised and answers its position).
 */
export async function settleAppendPosition(
  append: { readonly streamName: string; readonly eventCount: number; readonly lastEventId: string; readonly reported: Position | null },
  readLastEvent: () => Promise<RecordedEvent | undefined>,
  retryDelaysMs: readonly number[] = [50, 250],
): Promise<Position> {
  if (append.eventCount === 1 && append.reported) return append.reported;
  let readError: unknown = null;
  for (let attempt = 0; ; attempt++) {
    try {
      const last = await readLastEvent();
      if (last && last.id.toLowerCase() === append.lastEventId.toLowerCase()) return last.position;
      readError = new Error(`stream ${append.streamName}: the last event of the append is not where the server said`);
    } catch (error) {
      readError = error;
    }
    const delay = retryDelaysMs[attempt];
    if (delay === undefined) break;
    await new Promise((resolve) => setTimeout(resolve, delay));
  }
  if (append.reported) return append.reported;
  // Written, so never "nothing written" (EventStoreUnavailableError lets a request's Idempotency-Key go): outcome unknown to the caller.
  throw new AppendOutcomeUnknownError(append.streamName, { cause: readError });
}
