import { BACKWARDS, END as ESDB_END, ErrorType, EventStoreDBClient, FORWARDS, START as ESDB_START } from '@eventstore/db-client';
import type { AppendResult as ClientAppendResult, EventData } from '@eventstore/db-client';
import { append as plainAppend } from '@eventstore/db-client/dist/streams/appendToStream/append';
import {
  AllSubscription,
  AppendResult,
  DuplicateEventIdError,
  EventStore,
  AppendOptions,
  AppendOutcomeUnknownError,
  refuseLateAppend,
  EventStoreUnavailableError,
  EventToAppend,
  ExpectedRevision,
  matchesFilter,
  Position,
  ReadAllOptions,
  ReadStreamOptions,
  RecordedEvent,
  StreamNotFoundError,
  SubscribeToAllOptions,
  WrongExpectedRevisionError,
} from '../event-store';
import { DEFAULT_DEADLINE_MS, EventStoreDbSettings, settingsFromConnectionString } from './connection';
import { caughtUpCheckpoint, lastUserEventPosition, readAllAfter, readAllAfterAs, readWithDeadline, settleAppendPosition } from './log-reads';
import {
  ChainHead,
  chainHashOfMetadata,
  compareWithStored,
  expectationHolds,
  expectedFirstRevision,
  isClientError,
  isSystemEvent,
  ReadPage,
  serverFilter,
  storedChainedEventOf,
  toAppendExpectedRevision,
  toPortAppendError,
  toPosition,
  toProposedEvents,
  toReadPosition,
  toRecordedEvent,
  toUnavailable,
  withChainHashes,
} from './mapping';
import { batchClientSubscription, pushCheckpointMarker } from './subscription';
import type { ChainedLogSource, StoredChainedEvent } from '../hash-chain';

/** A position as the chain check writes it (`commit/prepare`). */
const positionOf = (text: string): Position => {
  const [commit, prepare] = text.split('/');
  return { commit: BigInt(commit!), prepare: BigInt(prepare!) };
};

/**
 * The EventStoreDB adapter of the event store port (gRPC client
 * `@eventstore/db-client` 6.x, server 23.10 or later). The modules beside it: mapping
 * (port ⇄ client), log-reads (reads of `$all`, deadlines, positions of appends),
 * subscription (batches, checkpoints, caught-up), connection (connection string).
 *
 * What the server gives natively: expected revisions, idempotent appends by event
 * id (exact for `no_stream` and exact revisions; for `any` and `stream_exists` only
 * through a bounded in-memory cache of recent ids, so best effort), forwards and
 * backwards reads, `$all` with (commit, prepare) positions, and catch-up
 * subscriptions with server-side filters, checkpoints and caught-up notifications.
 * What this adapter adds: the port's exclusive positions, the exclusion of system
 * events (`$`-prefixed streams and types) from `$all`, the batching of a
 * subscription into `SubscriptionBatch`es, deadlines on reads, serialisation before
 * sending, and appends that never use the client's batch-append stream.
 *
 * Differences from the PostgreSQL adapter (docs/event-stores.md, "EventStoreDB"):
 * - event ids are unique only where an append expects to write. An append whose ids
 *   are found at the positions it expected to write, but not as an exact repeat of
 *   it (a partial overlap), is refused with DuplicateEventIdError, as on PostgreSQL.
 *   An id reused at the stream's current revision, or in another stream, is written
 *   again: the server keeps no index of ids, and neither does this adapter;
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
  private readonly settings: EventStoreDbSettings;

  constructor(
    private readonly client: EventStoreDBClient,
    settings: Partial<EventStoreDbSettings> = {},
  ) {
    this.settings = { deadlineMs: DEFAULT_DEADLINE_MS, appendRoute: { kind: 'direct' }, ...settings };
  }

  /** For example `esdb://localhost:2113?tls=false` or `esdb://admin:changeit@host:2113`. */
  static fromConnectionString(connectionString: string): EventStoreDbEventStore {
    return new EventStoreDbEventStore(EventStoreDBClient.connectionString(connectionString), settingsFromConnectionString(connectionString));
  }

  async appendToStream(streamName: string, events: readonly EventToAppend[], options: AppendOptions = {}): Promise<AppendResult> {
    const expected = options.expectedRevision ?? 'any';
    if (events.length === 0) return this.checkOnly(streamName, expected);
    toProposedEvents(streamName, events); // refuses an event without JSON before anything is read or sent
    const proposed = toProposedEvents(streamName, withChainHashes(streamName, await this.chainHead(streamName, expected), events));
    // Checked as it is sent: EventStoreDB has no transaction to check it in (docs/event-stores.md).
    refuseLateAppend(streamName, options.notAfter);

    let result: ClientAppendResult;
    try {
      result = await this.send(streamName, proposed, expected);
    } catch (error) {
      return this.afterFailedAppend(streamName, events, expected, toPortAppendError(streamName, expected, error));
    }
    if (!result.success) {
      // Only with a client built with throwOnAppendFailure=false. The revision it then
      // reports cannot be trusted (6.2.1's batch append reports
      // BigInt(hasCurrentStreamRevision()), i.e. 0 or 1), so ask the stream.
      const actual = await this.currentRevision(streamName);
      return this.afterFailedAppend(streamName, events, expected, new WrongExpectedRevisionError(streamName, expected, actual));
    }
    const last = events[events.length - 1]!;
    const position = await settleAppendPosition(
      { streamName, eventCount: events.length, lastEventId: last.id, reported: toPosition(result.position) },
      async () => (await this.readStream(streamName, { fromRevision: result.nextExpectedRevision, maxCount: 1 }))[0],
    );
    return { nextExpectedRevision: result.nextExpectedRevision, position };
  }

  /**
   * Where the stream's chain goes on (docs/audit-log.md): the chain hash in the metadata
   * of the event at the expected revision (an exact expectation), or of the stream's last
   * event (any, stream exists); none for no_stream. One read before each append. With an
   * exact expectation (the gateway's deciders) a concurrent append makes this append fail
   * on its revision, so the chain stays one; with any or stream_exists two concurrent
   * appends to one stream could chain from the same head (verification reports it).
   */
  private async chainHead(streamName: string, expected: ExpectedRevision): Promise<ChainHead> {
    if (expected === 'no_stream') return { previous: null, firstRevision: 0n };
    try {
      const read = this.client.readStream(
        streamName,
        typeof expected === 'bigint'
          ? { direction: FORWARDS, fromRevision: expected, maxCount: 1, resolveLinkTos: false }
          : { direction: BACKWARDS, fromRevision: ESDB_END, maxCount: 1, resolveLinkTos: false },
      );
      for await (const resolved of readWithDeadline(read, this.settings.deadlineMs, `reading the chain head of ${streamName}`)) {
        if (resolved.event) return { previous: chainHashOfMetadata(resolved.event.metadata), firstRevision: resolved.event.revision + 1n };
      }
    } catch (error) {
      if (!isClientError(error, ErrorType.STREAM_NOT_FOUND)) throw toUnavailable(error, `reading the chain head of ${streamName}`);
    }
    return { previous: null, firstRevision: 0n };
  }

  /** One append call that never takes the client's batch-append stream (see AppendRoute). */
  private send(streamName: string, events: EventData[], expected: ExpectedRevision): Promise<ClientAppendResult> {
    const options = { expectedRevision: toAppendExpectedRevision(expected), deadline: this.settings.deadlineMs };
    const route = this.settings.appendRoute;
    if (route.kind === 'credentials') return this.client.appendToStream(streamName, events, { ...options, credentials: route.credentials });
    return plainAppend.call(this.client, streamName, events, { ...options, batchAppendSize: 0 });
  }

  /**
   * An append that the server refused or did not answer.
   *
   * Refused with a wrong expected revision: EventStoreDB checks ids only where the
   * append expected to write (an exact revision or `no_stream` behind the stream), and
   * answers a partial match (some ids are the stored ones, some not) as a wrong
   * expected version too. The events at those positions are read: ids of the append
   * among them make it DuplicateEventIdError, as on PostgreSQL. For `any` and
   * `stream_exists` on an existing stream the server refuses only a partial match of
   * its cache of recent ids (its first id is in the stream), which is the same error.
   *
   * Not answered (EventStoreUnavailableError): the append may have committed. For an
   * expectation that names a position, the events there are read: if they are this
   * append, it committed and is answered as such; otherwise (or if the read fails too)
   * nobody can tell (AppendOutcomeUnknownError), and a retry with the same ids is
   * recognised by the server.
   */
  private async afterFailedAppend(streamName: string, events: readonly EventToAppend[], expected: ExpectedRevision, error: unknown): Promise<AppendResult> {
    const ids = events.map((e) => e.id);
    const first = expectedFirstRevision(expected);
    if (error instanceof WrongExpectedRevisionError) {
      if (first === null) {
        if (expected === 'any' || error.actual !== 'no_stream') throw new DuplicateEventIdError(streamName, [ids[0]!]);
        throw error;
      }
      // Nothing is stored at the expected position when the stream has not reached it.
      if (error.actual === 'no_stream' || error.actual < first) throw error;
      // (A read that fails leaves the conflict as it is: the caller decides again on a fresh read.)
      const stored = await this.eventsFrom(streamName, first, events.length).catch(() => null);
      const match = stored === null ? null : compareWithStored(stored, ids);
      if (match?.kind === 'overlap') throw new DuplicateEventIdError(streamName, match.ids);
      if (match?.kind === 'same') return this.answerOf(stored!);
      throw error;
    }
    if (error instanceof EventStoreUnavailableError && first !== null) {
      const stored = await this.eventsFrom(streamName, first, events.length).catch(() => null);
      if (stored && compareWithStored(stored, ids).kind === 'same') return this.answerOf(stored);
    }
    // Not answered and not found: it may still have been written (or be on its way).
    if (error instanceof EventStoreUnavailableError && !(error instanceof AppendOutcomeUnknownError))
      throw new AppendOutcomeUnknownError(streamName, { cause: error });
    throw error;
  }

  private answerOf(stored: readonly RecordedEvent[]): AppendResult {
    const last = stored[stored.length - 1]!;
    return { nextExpectedRevision: last.revision, position: last.position };
  }

  /** At most `count` events of the stream from a revision; none when the stream does not exist. */
  private async eventsFrom(streamName: string, revision: bigint, count: number): Promise<RecordedEvent[]> {
    try {
      return await this.readStream(streamName, { fromRevision: revision, maxCount: count });
    } catch (error) {
      if (error instanceof StreamNotFoundError) return [];
      throw error;
    }
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
      for await (const resolved of readWithDeadline(read, this.settings.deadlineMs, `reading ${streamName}`)) {
        if (resolved.event) events.push(toRecordedEvent(resolved.event));
      }
    } catch (error) {
      if (isClientError(error, ErrorType.STREAM_NOT_FOUND)) throw new StreamNotFoundError(streamName);
      throw error;
    }
    return events;
  }

  /** One page of `$all`, with the read deadline. */
  private readonly readAllPage =
    (direction: typeof FORWARDS | typeof BACKWARDS): ReadPage =>
    (from, maxCount) =>
      readWithDeadline(this.client.readAll({ direction, fromPosition: from, maxCount, resolveLinkTos: false }), this.settings.deadlineMs, 'reading $all');

  /**
   * The log as its chain verification reads it (verifyChainedLog, `npm run log:verify`):
   * the user events with the chain hashes their metadata carries, which the port's
   * reads leave out.
   */
  chainedLog(): ChainedLogSource<Position> {
    return {
      logPage: async (after, maxCount) => {
        const events = await readAllAfterAs(this.readAllPage(FORWARDS), after ?? 'start', maxCount, storedChainedEventOf);
        const last = events[events.length - 1];
        return { events, next: last ? positionOf(last.position) : after };
      },
      streamPage: async (streamName, fromRevision, maxCount) => {
        const events: StoredChainedEvent[] = [];
        try {
          const read = this.client.readStream(streamName, { direction: FORWARDS, fromRevision, maxCount, resolveLinkTos: false });
          for await (const resolved of readWithDeadline(read, this.settings.deadlineMs, `reading ${streamName}`)) {
            if (resolved.event) events.push(storedChainedEventOf(resolved.event));
          }
        } catch (error) {
          if (!isClientError(error, ErrorType.STREAM_NOT_FOUND)) throw error;
        }
        return events;
      },
    };
  }

  async readAll(options: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    return readAllAfter(this.readAllPage(FORWARDS), options.after ?? 'start', options.maxCount ?? 1000);
  }

  async headPosition(): Promise<Position | null> {
    return lastUserEventPosition(this.readAllPage(BACKWARDS));
  }

  subscribeToAll(options: SubscribeToAllOptions = {}): AllSubscription {
    const after = options.after ?? 'start';
    const filter = options.filter;
    // A subscription has no deadline (it waits for events as long as the log is quiet);
    // a lost connection is found by gRPC's keep-alive and ends it with an error.
    const client = this.client.subscribeToAll({
      // Exclusive already: a catch-up subscription starts after fromPosition.
      fromPosition: toReadPosition(after),
      resolveLinkTos: false,
      // a checkpoint every (1 x the server's search window, 32 by default) events looked at
      filter: serverFilter(filter, { checkpointInterval: 1, checkpointReached: pushCheckpointMarker }),
    });
    const subscription = batchClientSubscription(client, {
      after,
      maxBatchSize: options.maxBatchSize ?? 500,
      filter,
      // Events it would hand over are still to come: the checkpoint stops before the first.
      confirmCaughtUp: (from) =>
        caughtUpCheckpoint(this.readAllPage(FORWARDS), from, (e) => !isSystemEvent(e) && matchesFilter(filter, { streamName: e.streamId, type: e.type })),
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

export * from './connection';
export * from './log-reads';
export * from './mapping';
export * from './subscription';
