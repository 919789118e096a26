import {
  ANY,
  BACKWARDS,
  END as ESDB_END,
  ErrorType,
  EventStoreDBClient,
  eventTypeFilter,
  excludeSystemEvents,
  FORWARDS,
  jsonEvent,
  NO_STREAM,
  START as ESDB_START,
  STREAM_EXISTS,
  streamNameFilter,
} from '@eventstore/db-client';
import type {
  AllStreamSubscription,
  AppendExpectedRevision,
  AppendResult as ClientAppendResult,
  Filter,
  Position as ClientPosition,
  ReadPosition,
} from '@eventstore/db-client';
import {
  AllFilter,
  AllSubscription,
  AppendResult,
  comparePositions,
  EventStore,
  EventToAppend,
  ExpectedRevision,
  JsonObject,
  matchesFilter,
  Position,
  ReadAllOptions,
  ReadStreamOptions,
  RecordedEvent,
  StreamNotFoundError,
  SubscribeToAllOptions,
  SubscriptionBatch,
  WrongExpectedRevisionError,
} from '../event-store';

/**
 * The EventStoreDB adapter of the event store port (gRPC client
 * `@eventstore/db-client` 6.x, server 23.10 or later).
 *
 * What the server gives natively: expected revisions, idempotent appends by event
 * id (guaranteed for `no_stream` and exact revisions, best effort for `any`),
 * forwards and backwards reads, `$all` with (commit, prepare) positions, and
 * catch-up subscriptions with server-side filters, checkpoints and caught-up
 * notifications. What this adapter adds: the port's exclusive positions, the
 * exclusion of system events (`$`-prefixed streams and types) from `$all`, and the
 * batching of a subscription into `SubscriptionBatch`es.
 *
 * Differences from the PostgreSQL adapter:
 * - event ids are not unique across streams: EventStoreDB never raises
 *   DuplicateEventIdError (an id reused in another stream is simply written again);
 * - a subscription that fails (server restarted, connection lost, subscription
 *   dropped by the server) ends its iterator with the error, after handing over
 *   what it had received; the consumer resubscribes from its last checkpoint
 *   (ProjectionRunner does this with back-off).
 *
 * Reading `$all` needs a user allowed to (the default ACL allows only $admins and
 * $ops): with a secure server, put the credentials in the connection string.
 */
export class EventStoreDbEventStore implements EventStore {
  private readonly subscriptions = new Set<AllSubscription>();

  constructor(private readonly client: EventStoreDBClient) {}

  /** For example `esdb://localhost:2113?tls=false` or `esdb://admin:changeit@host:2113`. */
  static fromConnectionString(connectionString: string): EventStoreDbEventStore {
    return new EventStoreDbEventStore(EventStoreDBClient.connectionString(connectionString));
  }

  async appendToStream(
    streamName: string,
    events: readonly EventToAppend[],
    options: { expectedRevision?: ExpectedRevision } = {},
  ): Promise<AppendResult> {
    const expected = options.expectedRevision ?? 'any';
    if (events.length === 0) return this.checkOnly(streamName, expected);

    let result: ClientAppendResult;
    try {
      result = await this.client.appendToStream(
        streamName,
        events.map((e) =>
          jsonEvent({ id: e.id, type: e.type, data: e.data, ...(e.metadata === undefined ? {} : { metadata: e.metadata }) }),
        ),
        // Always explicit: the client's default would be ANY.
        { expectedRevision: toAppendExpectedRevision(expected) },
      );
    } catch (error) {
      throw toPortAppendError(streamName, expected, error);
    }
    if (!result.success) {
      // Only with a client built with throwOnAppendFailure=false. The revision it then
      // reports cannot be trusted (6.2.1's batch append reports
      // BigInt(hasCurrentStreamRevision()), i.e. 0 or 1), so ask the stream.
      throw new WrongExpectedRevisionError(streamName, expected, await this.currentRevision(streamName));
    }
    return {
      nextExpectedRevision: result.nextExpectedRevision,
      position: await this.positionOfAppend(streamName, events[events.length - 1]!.id, result),
    };
  }

  /**
   * The port's position of an append is the $all position of its last event, and a
   * retried (idempotent) append must answer the same position as the original one.
   * The server's append response carries the position of the write's commit (for a
   * multi-event write that is not the last event's position), and for an idempotent
   * retry some server versions report another position or none (-1). So the last
   * event is read back, by its revision (one indexed read), and its own position is
   * returned. The client's position is only the fallback when that read does not
   * find the event (for example a follower that has not yet seen it).
   */
  private async positionOfAppend(streamName: string, lastEventId: string, result: ClientAppendResult): Promise<Position> {
    let readError: unknown;
    try {
      const [last] = await this.readStream(streamName, { fromRevision: result.nextExpectedRevision, maxCount: 1 });
      if (last && last.id.toLowerCase() === lastEventId.toLowerCase()) return last.position;
    } catch (error) {
      readError = error; // fall back to the position of the append response
    }
    if (result.position) return { commit: result.position.commit, prepare: result.position.prepare };
    throw new Error(`stream ${streamName}: the append succeeded but its position is unknown`, { cause: readError });
  }

  /** An append of no events: only checks the expectation, as the PostgreSQL adapter does. */
  private async checkOnly(streamName: string, expected: ExpectedRevision): Promise<AppendResult> {
    const actual = await this.currentRevision(streamName);
    if (!expectationHolds(expected, actual)) throw new WrongExpectedRevisionError(streamName, expected, actual);
    const head = await this.headPosition();
    return { nextExpectedRevision: actual === 'no_stream' ? -1n : actual, position: head ?? { commit: 0n, prepare: 0n } };
  }

  /** The revision of the stream's last event; 'no_stream' when it has none (or cannot be read: truncated, deleted). */
  private async currentRevision(streamName: string): Promise<bigint | 'no_stream'> {
    try {
      const [last] = await this.readStream(streamName, { direction: 'backwards', fromRevision: 'end', maxCount: 1 });
      return last ? last.revision : 'no_stream';
    } catch (error) {
      if (error instanceof StreamNotFoundError) return 'no_stream';
      throw error;
    }
  }

  async readStream(streamName: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    const backwards = options.direction === 'backwards';
    if (options.maxCount !== undefined && options.maxCount <= 0) {
      // The server's idea of a zero count is not documented: answer as PostgreSQL does.
      if ((await this.currentRevision(streamName)) === 'no_stream') throw new StreamNotFoundError(streamName);
      return [];
    }
    const events: RecordedEvent[] = [];
    try {
      const read = this.client.readStream(streamName, {
        direction: backwards ? BACKWARDS : FORWARDS,
        // The port's 'start' / 'end' are the client's START / END; a revision is inclusive in both.
        fromRevision: options.fromRevision ?? (backwards ? ESDB_END : ESDB_START),
        ...(options.maxCount === undefined ? {} : { maxCount: options.maxCount }),
        resolveLinkTos: false,
      });
      for await (const resolved of read) {
        if (resolved.event) events.push(toRecordedEvent(resolved.event));
      }
    } catch (error) {
      if (isClientError(error, ErrorType.STREAM_NOT_FOUND)) throw new StreamNotFoundError(streamName);
      throw error;
    }
    return events;
  }

  async readAll(options: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    return readAllAfter(
      (from, maxCount) => this.client.readAll({ direction: FORWARDS, fromPosition: from, maxCount, resolveLinkTos: false }),
      options.after ?? 'start',
      options.maxCount ?? 1000,
    );
  }

  async headPosition(): Promise<Position | null> {
    return lastUserEventPosition((from, maxCount) =>
      this.client.readAll({ direction: BACKWARDS, fromPosition: from, maxCount, resolveLinkTos: false }),
    );
  }

  subscribeToAll(options: SubscribeToAllOptions = {}): AllSubscription {
    const after = options.after ?? 'start';
    const client = this.client.subscribeToAll({
      // Exclusive already: a catch-up subscription starts after fromPosition.
      fromPosition: toReadPosition(after),
      resolveLinkTos: false,
      // a checkpoint every (1 x the server's search window, 32 by default) events looked at
      filter: serverFilter(options.filter, { checkpointInterval: 1, checkpointReached: pushCheckpointMarker }),
    });
    const subscription = batchClientSubscription(client, {
      after,
      maxBatchSize: options.maxBatchSize ?? 500,
      filter: options.filter,
      onClose: () => {
        this.subscriptions.delete(subscription);
      },
    });
    this.subscriptions.add(subscription);
    return subscription;
  }

  async close(): Promise<void> {
    await Promise.all([...this.subscriptions].map((s) => s.unsubscribe()));
    await this.client.dispose();
  }
}

// ---------------------------------------------------------------------------------
// Mapping between the port and the client. Exported for the unit tests; not part of
// the port.
// ---------------------------------------------------------------------------------

/** The fields of the client's RecordedEvent that the adapter uses (the client's type is assignable to it). */
export interface ClientRecordedEvent {
  readonly id: string;
  readonly type: string;
  readonly streamId: string;
  readonly revision: bigint;
  /** Parsed JSON for JSON events, a Uint8Array for binary ones. */
  readonly data: unknown;
  /** Parsed JSON, a Uint8Array when not JSON, undefined when empty. */
  readonly metadata?: unknown;
  /** A Date in client 6.x; older clients gave .NET ticks (100 ns) since the Unix epoch. */
  readonly created: unknown;
  /** Optional in the client's typings (servers before 22.6 did not send it on stream reads). */
  readonly position?: ClientPosition;
}

/** What a read of the client yields (its ResolvedEvent and AllStreamResolvedEvent are assignable to it). */
export interface ClientResolvedEvent {
  readonly event?: ClientRecordedEvent;
}

export type ReadPage = (from: ReadPosition, maxCount: number) => AsyncIterable<ClientResolvedEvent>;

export function toAppendExpectedRevision(expected: ExpectedRevision): AppendExpectedRevision {
  switch (expected) {
    case 'any':
      return ANY;
    case 'no_stream':
      return NO_STREAM;
    case 'stream_exists':
      return STREAM_EXISTS;
    default:
      // The server's revision is a uint64: a negative one would fail to serialize.
      if (expected < 0n) throw new RangeError(`not a stream revision: ${expected}`);
      return expected;
  }
}

/** The client's WrongExpectedVersionError becomes the port's error; anything else is left as it is. */
export function toPortAppendError(streamName: string, expected: ExpectedRevision, error: unknown): unknown {
  if (!isClientError(error, ErrorType.WRONG_EXPECTED_VERSION)) return error;
  const actual = (error as { actualVersion?: unknown }).actualVersion;
  return new WrongExpectedRevisionError(streamName, expected, typeof actual === 'bigint' ? actual : 'no_stream');
}

/** Whether `error` is the client's error of this type (by its `type`, which survives two copies of the client package). */
export function isClientError(error: unknown, type: ErrorType): boolean {
  return error instanceof Error && (error as { type?: unknown }).type === type;
}

export function expectationHolds(expected: ExpectedRevision, actual: bigint | 'no_stream'): boolean {
  return (
    expected === 'any' ||
    (expected === 'no_stream' && actual === 'no_stream') ||
    (expected === 'stream_exists' && actual !== 'no_stream') ||
    (typeof expected === 'bigint' && actual === expected)
  );
}

/**
 * The client's read position for the port's exclusive `after`. (0, 0) is the
 * PostgreSQL adapter's "nothing read yet" (and a checkpoint store's initial value),
 * and it is before every event of EventStoreDB's log too: ask for the start.
 */
export function toReadPosition(after: Position | 'start'): ReadPosition {
  if (after === 'start' || (after.commit === 0n && after.prepare === 0n)) return ESDB_START;
  return { commit: after.commit, prepare: after.prepare };
}

/** EventStoreDB's own events: system streams (`$…`, metadata streams `$$…`) and system types (`$…`, links `$>`). */
export function isSystemEvent(event: { readonly streamId: string; readonly type: string }): boolean {
  return event.streamId.startsWith('$') || event.type.startsWith('$');
}

export function toRecordedEvent(event: ClientRecordedEvent): RecordedEvent {
  if (!event.position) {
    throw new Error(`EventStoreDB did not send the position of event ${event.id} (server older than 22.6?)`);
  }
  return {
    id: event.id,
    type: event.type,
    streamName: event.streamId,
    revision: event.revision,
    data: toJsonObject(event.data),
    metadata: toJsonObject(event.metadata),
    position: { commit: event.position.commit, prepare: event.position.prepare },
    createdAt: toCreatedDate(event.created),
  };
}

/**
 * The port's data and metadata are JSON objects. Events written by this adapter
 * always are; events written by other tools may not be:
 * - missing / empty → `{}`;
 * - JSON that is not an object (array, string, number; or text the client could not
 *   parse, which it hands over as a string) → `{ value: <it> }`;
 * - binary content: parsed if it is a JSON object (written without the JSON content
 *   type), else `{ binary: '<base64>' }`.
 */
export function toJsonObject(value: unknown): JsonObject {
  if (value === undefined || value === null) return {};
  if (value instanceof Uint8Array) {
    if (value.length === 0) return {};
    const bytes = Buffer.from(value.buffer, value.byteOffset, value.byteLength);
    try {
      const parsed: unknown = JSON.parse(bytes.toString('utf8'));
      if (isJsonObject(parsed)) return parsed;
    } catch {
      // not JSON
    }
    return { binary: bytes.toString('base64') };
  }
  if (isJsonObject(value)) return value;
  return { value };
}

function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Uint8Array);
}

const TICKS_PER_MILLISECOND = 10_000n;

/** The client 6.x gives a Date; earlier clients gave the raw "created" metadata: .NET ticks since the Unix epoch. */
export function toCreatedDate(created: unknown): Date {
  if (created instanceof Date) return created;
  if (typeof created === 'bigint') return new Date(Number(created / TICKS_PER_MILLISECOND));
  if (typeof created === 'string' && /^\d+$/.test(created)) return toCreatedDate(BigInt(created));
  if (typeof created === 'number' && Number.isFinite(created)) {
    // Ticks of today are ~1.7e16, milliseconds ~1.7e12: anything above 1e14 (year 5138 in ms) is ticks.
    return new Date(created > 1e14 ? Math.floor(created / 10_000) : created);
  }
  return new Date(0);
}

/**
 * The user events of `$all` after `after` (exclusive), at most `maxCount`, in log
 * order. The server's read includes the event at its start position and has no
 * filter in this client: events at or before the cursor and system events are
 * skipped here, and pages are read until `maxCount` user events are found or the
 * log ends, so that a short answer always means "end of the log" (which is how
 * callers page through it).
 */
export async function readAllAfter(readPage: ReadPage, after: Position | 'start', maxCount: number): Promise<RecordedEvent[]> {
  const found: RecordedEvent[] = [];
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
      if (!event?.position) continue;
      if (cursor !== null && comparePositions(event.position, cursor) <= 0) continue;
      cursor = { commit: event.position.commit, prepare: event.position.prepare };
      advanced = true;
      if (found.length < maxCount && !isSystemEvent(event)) found.push(toRecordedEvent(event));
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
      if (found || !event?.position) continue; // read the page to its end
      if (cursor !== null && comparePositions(event.position, cursor) >= 0) continue;
      const position: Position = { commit: event.position.commit, prepare: event.position.prepare };
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
 * The server-side filter of a subscription. EventStoreDB filters on one thing only,
 * stream name or event type (by prefixes or a regex): with both kinds of prefixes
 * in the port's filter, the stream names go to the server and the types are checked
 * here (the batches apply the whole port filter again). Without prefixes, the server
 * leaves out system events. A filtered subscription is also what makes the server
 * send checkpoints, which let a consumer move past events the filter skipped.
 */
export function serverFilter(
  filter: AllFilter | undefined,
  checkpoints: { checkpointInterval: number; checkpointReached: NonNullable<Filter['checkpointReached']> },
): Filter {
  if (filter?.streamNamePrefixes && filter.streamNamePrefixes.length > 0) {
    return streamNameFilter({ prefixes: [...filter.streamNamePrefixes], ...checkpoints });
  }
  if (filter?.eventTypePrefixes && filter.eventTypePrefixes.length > 0) {
    return eventTypeFilter({ prefixes: [...filter.eventTypePrefixes], ...checkpoints });
  }
  // (Empty prefix lists match nothing: the server then sends all user events and the
  // batches drop them, keeping only the checkpoints.)
  return excludeSystemEvents(checkpoints);
}

// ---------------------------------------------------------------------------------
// Subscriptions
// ---------------------------------------------------------------------------------

/** What a subscription source yields, in log order. */
export type SubscriptionItem =
  | { readonly kind: 'event'; readonly event: RecordedEvent }
  /** The server looked at the log up to here (events past the filter were skipped). */
  | { readonly kind: 'checkpoint'; readonly position: Position }
  /** The subscription reached the end of the log and is live. */
  | { readonly kind: 'caughtUp' }
  /** The subscription fell behind the live log and is catching up again. */
  | { readonly kind: 'fellBehind' };

type SubscriptionMarkerItem = Exclude<SubscriptionItem, { kind: 'event' }>;

/**
 * The client reports checkpoints (a callback) and caught-up / fell-behind (events)
 * out of band from the events, which reach us through the stream's buffer: a
 * checkpoint may be reported while events before it still sit in that buffer, and
 * a consumer that saved it before handling them would skip them on restart. Both
 * are reported from inside the client's transform of the server's message, so
 * pushing a marker into the same stream at that moment puts it in log order, after
 * every event the server sent before it.
 */
const MARKER = Symbol('eventstoredb-subscription-marker');
interface SubscriptionMarker {
  readonly [MARKER]: SubscriptionMarkerItem;
}
const marker = (item: SubscriptionMarkerItem): SubscriptionMarker => ({ [MARKER]: item });
const isMarker = (chunk: unknown): chunk is SubscriptionMarker =>
  typeof chunk === 'object' && chunk !== null && MARKER in chunk;

function pushMarker(target: AllStreamSubscription, item: SubscriptionMarkerItem): void {
  // The checks keep a late report from pushing into a finished stream (which would emit an error).
  if (target.destroyed || target.readableEnded) return;
  target.push(marker(item));
}

/** The `checkpointReached` of a subscription's filter: a checkpoint marker, in log order. */
export function pushCheckpointMarker(subscription: AllStreamSubscription, position: ClientPosition): void {
  pushMarker(subscription, { kind: 'checkpoint', position: { commit: position.commit, prepare: position.prepare } });
}

/**
 * The port's subscription over a subscription of the client whose filter reports
 * checkpoints with pushCheckpointMarker.
 */
export function batchClientSubscription(client: AllStreamSubscription, options: BatchSubscriptionOptions): AllSubscription {
  // Sent by servers 23.10 and later. An older server never says so, and batches then
  // never carry caughtUp: true (a stand-in such as "no event for a while" would lie
  // to a consumer that is far behind on a slow link).
  client.on('caughtUp', () => pushMarker(client, { kind: 'caughtUp' }));
  client.on('fellBehind', () => pushMarker(client, { kind: 'fellBehind' }));
  return batchSubscription(subscriptionItems(client), {
    ...options,
    onClose: async () => {
      try {
        await options.onClose?.();
      } finally {
        await client.unsubscribe().catch(() => undefined);
        // Cancelling the gRPC call does not end the client's stream: destroy it, so
        // that the read ahead (subscriptionItems) finishes.
        client.destroy();
      }
    },
  });
}

async function* subscriptionItems(client: AllStreamSubscription): AsyncGenerator<SubscriptionItem> {
  // The stream holds the client's resolved events and our markers.
  for await (const chunk of client as AsyncIterable<ClientResolvedEvent | SubscriptionMarker>) {
    if (isMarker(chunk)) yield chunk[MARKER];
    else if (chunk.event) yield { kind: 'event', event: toRecordedEvent(chunk.event) };
  }
}

export interface BatchSubscriptionOptions {
  /** Exclusive start of the subscription. */
  readonly after: Position | 'start';
  readonly maxBatchSize: number;
  /** Applied to every event (again: the server filter may be coarser); system events are always left out. */
  readonly filter?: AllFilter;
  /**
   * How many items are read ahead of the consumer before the source stops being
   * pulled (it is then paused: the client's stream stops reading from gRPC, whose
   * flow control holds the server). Default: twice maxBatchSize.
   */
  readonly highWaterMark?: number;
  /** Called once when the subscription ends (unsubscribe, end or failure of the source); must make the source finish. */
  readonly onClose?: () => Promise<void> | void;
}

/**
 * Groups the items of a subscription source into the port's batches. The source is
 * read ahead into a bounded buffer; each next() hands over everything buffered (up
 * to maxBatchSize events), or waits for the next item. A batch is handed over when
 * it has events, when its checkpoint moved (events skipped by the filter, a server
 * checkpoint), or when caught-up changed. `caughtUp` is true when the server said
 * the subscription is live (and did not say it fell behind since) and nothing is
 * left in the buffer after this batch. Events at or before the last event handed
 * over are dropped (the subscription is exclusive of `after`), and the checkpoint
 * never moves backwards. A failure of the source is thrown by next() once the
 * items received before it have been handed over.
 */
export function batchSubscription(source: AsyncIterable<SubscriptionItem>, options: BatchSubscriptionOptions): AllSubscription {
  const maxBatchSize = Math.max(1, Math.floor(options.maxBatchSize));
  const highWaterMark = Math.max(1, options.highWaterMark ?? 2 * maxBatchSize);
  const start: Position = options.after === 'start' ? { commit: 0n, prepare: 0n } : options.after;

  const buffer: SubscriptionItem[] = [];
  let sourceEnded = false;
  let failure: { error: unknown } | null = null;
  let closed = false;
  let closing: Promise<void> | null = null;
  let consumerWaiting: Array<() => void> = [];
  let producerWaiting: (() => void) | null = null;

  let checkpoint = start;
  let lastEvent: Position | null = options.after === 'start' ? null : options.after;
  let live = false;
  let handedCheckpoint = start;
  let handedCaughtUp = false;

  const wakeConsumer = () => {
    const waiting = consumerWaiting;
    consumerWaiting = [];
    for (const wake of waiting) wake();
  };
  const wakeProducer = () => {
    const wake = producerWaiting;
    producerWaiting = null;
    wake?.();
  };

  const readAhead = (async () => {
    const iterator = source[Symbol.asyncIterator]();
    try {
      while (!closed) {
        if (buffer.length >= highWaterMark) {
          await new Promise<void>((resolve) => (producerWaiting = resolve));
          continue;
        }
        const next = await iterator.next();
        if (next.done || closed) break;
        buffer.push(next.value);
        wakeConsumer();
      }
    } catch (error) {
      if (!closed) failure = { error };
    } finally {
      sourceEnded = true;
      wakeConsumer();
    }
    // Left because of unsubscribe while the source sits at a yield: let it run its finally blocks.
    if (closed && !failure) await iterator.return?.().catch(() => undefined);
  })();

  const close = (): Promise<void> => {
    if (!closing) {
      closed = true;
      buffer.length = 0;
      wakeProducer();
      wakeConsumer();
      closing = (async () => {
        try {
          await options.onClose?.();
        } finally {
          await readAhead;
        }
      })();
    }
    return closing;
  };

  const takeBatch = (): SubscriptionBatch | null => {
    const events: RecordedEvent[] = [];
    let taken = 0;
    while (taken < buffer.length && events.length < maxBatchSize) {
      const item = buffer[taken++]!;
      switch (item.kind) {
        case 'event': {
          const position = item.event.position;
          if (lastEvent !== null && comparePositions(position, lastEvent) <= 0) break;
          lastEvent = position;
          if (comparePositions(position, checkpoint) > 0) checkpoint = position;
          if (!isSystemEvent({ streamId: item.event.streamName, type: item.event.type }) && matchesFilter(options.filter, item.event)) {
            events.push(item.event);
          }
          break;
        }
        case 'checkpoint':
          if (comparePositions(item.position, checkpoint) > 0) checkpoint = item.position;
          break;
        case 'caughtUp':
          live = true;
          break;
        case 'fellBehind':
          live = false;
          break;
      }
    }
    buffer.splice(0, taken);
    if (taken > 0) wakeProducer();
    const caughtUp = live && buffer.length === 0;
    if (events.length === 0 && comparePositions(checkpoint, handedCheckpoint) <= 0 && caughtUp === handedCaughtUp) return null;
    handedCheckpoint = checkpoint;
    handedCaughtUp = caughtUp;
    return { events, checkpoint, caughtUp };
  };

  const done: IteratorReturnResult<undefined> = { done: true, value: undefined };
  const iterator: AsyncIterator<SubscriptionBatch> = {
    async next(): Promise<IteratorResult<SubscriptionBatch>> {
      for (;;) {
        if (closed) return done;
        const batch = takeBatch();
        if (batch) return { done: false, value: batch };
        if (sourceEnded) {
          const failed = failure;
          await close();
          if (failed) throw failed.error;
          return done;
        }
        await new Promise<void>((resolve) => consumerWaiting.push(resolve));
      }
    },
    async return(): Promise<IteratorResult<SubscriptionBatch>> {
      await close();
      return done;
    },
  };

  return {
    [Symbol.asyncIterator]: () => iterator,
    unsubscribe: close,
  };
}
