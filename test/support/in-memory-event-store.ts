import {
  AllSubscription,
  AppendOptions,
  AppendResult,
  refuseLateAppend,
  DuplicateEventIdError,
  EventStore,
  EventToAppend,
  eventJson,
  ExpectedRevision,
  matchesFilter,
  Position,
  ReadAllOptions,
  ReadStreamOptions,
  RecordedEvent,
  StreamNotFoundError,
  SubscribeToAllOptions,
  SubscriptionBatch,
  WrongExpectedRevisionError,
} from '#event-store';

/**
 * How the store treats an event id it already holds.
 * - 'unique_in_store' (as the PostgreSQL adapter): an id is stored once in the whole
 *   store; an append reusing one is refused (DuplicateEventIdError), unless it is a
 *   retry of the very append that stored it.
 * - 'checked_at_expected_revision' (as EventStoreDB): an append whose events are
 *   exactly the ones already stored right after its expected revision is a retry and
 *   succeeds again without writing; one that partly repeats the events standing where
 *   it expects to write (an exact revision or no_stream, behind the stream) is refused
 *   with DuplicateEventIdError; otherwise ids are not looked at, so an old id appended
 *   at the end of a stream is stored a second time.
 */
export type EventIdCheck = 'unique_in_store' | 'checked_at_expected_revision';

/**
 * The event store port in memory, for unit tests that need no database: streams,
 * expected revisions, reads forwards and backwards, the global log and catch-up
 * subscriptions, with event ids checked the way `eventIds` says. Not a fake server:
 * an implementation of the port (it passes the port's contract suite).
 */
export class InMemoryEventStore implements EventStore {
  private readonly log: RecordedEvent[] = [];
  private readonly streams = new Map<string, RecordedEvent[]>();
  private readonly byId = new Map<string, RecordedEvent>();
  private readonly wakers = new Set<() => void>();
  private readonly subscriptions = new Set<AllSubscription>();

  constructor(readonly options: { readonly eventIds: EventIdCheck }) {}

  /** Every append, in order (tests inspect it). */
  get size(): number {
    return this.log.length;
  }

  async appendToStream(streamName: string, events: readonly EventToAppend[], options: AppendOptions = {}): Promise<AppendResult> {
    await Promise.resolve(); // an append is asynchronous, as it is on a real store
    refuseLateAppend(streamName, options.notAfter);
    // As stored: JSON, made before anything is written (an event without one is refused).
    const json = events.map((e) => ({ data: eventJson(streamName, e, 'data'), metadata: eventJson(streamName, e, 'metadata') }));
    const expected = options.expectedRevision ?? 'any';
    const stream = this.streams.get(streamName);
    const actual: bigint | 'no_stream' = stream ? BigInt(stream.length - 1) : 'no_stream';

    const retried = this.retriedAppend(stream, events, expected);
    if (retried) return retried;
    if (this.options.eventIds === 'unique_in_store') {
      const reused = events.filter((e) => this.byId.has(e.id)).map((e) => e.id);
      if (reused.length > 0) throw new DuplicateEventIdError(streamName, reused);
    } else if (stream && (expected === 'no_stream' || typeof expected === 'bigint')) {
      // Only the events standing where this append expects to write are looked at.
      const start = expected === 'no_stream' ? 0 : Number(expected) + 1;
      const standing = new Set(stream.slice(start, start + events.length).map((e) => e.id));
      const overlap = events.filter((e) => standing.has(e.id)).map((e) => e.id);
      if (overlap.length > 0) throw new DuplicateEventIdError(streamName, overlap);
    }
    const holds =
      expected === 'any' ||
      (expected === 'no_stream' && actual === 'no_stream') ||
      (expected === 'stream_exists' && actual !== 'no_stream') ||
      (typeof expected === 'bigint' && actual === expected);
    if (!holds) throw new WrongExpectedRevisionError(streamName, expected, actual);
    if (events.length === 0) {
      return { nextExpectedRevision: actual === 'no_stream' ? -1n : actual, position: this.log[this.log.length - 1]?.position ?? ZERO };
    }

    const target = stream ?? [];
    if (!stream) this.streams.set(streamName, target);
    for (const [i, e] of events.entries()) {
      const n = BigInt(this.log.length + 1);
      const recorded: RecordedEvent = {
        id: e.id,
        type: e.type,
        streamName,
        revision: BigInt(target.length),
        data: JSON.parse(json[i]!.data) as RecordedEvent['data'],
        metadata: JSON.parse(json[i]!.metadata) as RecordedEvent['metadata'],
        position: { commit: n, prepare: n },
        createdAt: new Date(),
      };
      target.push(recorded);
      this.log.push(recorded);
      if (!this.byId.has(e.id)) this.byId.set(e.id, recorded);
    }
    for (const wake of [...this.wakers]) wake();
    const last = target[target.length - 1]!;
    return { nextExpectedRevision: last.revision, position: last.position };
  }

  /** The answer of the append that stored exactly these events where this one expects to put them, or null. */
  private retriedAppend(stream: RecordedEvent[] | undefined, events: readonly EventToAppend[], expected: ExpectedRevision): AppendResult | null {
    if (!stream || events.length === 0) return null;
    const first = this.byId.get(events[0]!.id);
    if (!first || this.streams.get(first.streamName) !== stream) return null;
    const start = Number(first.revision);
    const same = events.every((e, i) => stream[start + i]?.id === e.id);
    const where =
      expected === 'any' ||
      (expected === 'no_stream' && start === 0) ||
      (expected === 'stream_exists' && start > 0) ||
      (typeof expected === 'bigint' && BigInt(start) === expected + 1n);
    if (!same || !where) return null;
    const last = stream[start + events.length - 1]!;
    return { nextExpectedRevision: last.revision, position: last.position };
  }

  async readStream(streamName: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    await Promise.resolve();
    const stream = this.streams.get(streamName);
    if (!stream) throw new StreamNotFoundError(streamName);
    const backwards = options.direction === 'backwards';
    const from = options.fromRevision ?? (backwards ? 'end' : 'start');
    const limit = options.maxCount ?? Number.MAX_SAFE_INTEGER;
    if (backwards) {
      const top = from === 'end' ? stream.length - 1 : from === 'start' ? 0 : Math.min(Number(from), stream.length - 1);
      const out: RecordedEvent[] = [];
      for (let i = top; i >= 0 && out.length < limit; i--) out.push(stream[i]!);
      return out;
    }
    const start = from === 'start' ? 0 : from === 'end' ? stream.length : Number(from);
    return stream.slice(start, start + limit);
  }

  async readAll(options: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    await Promise.resolve();
    const start = indexAfter(options.after);
    return this.log.slice(start, start + (options.maxCount ?? 1000));
  }

  async headPosition(): Promise<Position | null> {
    return this.log[this.log.length - 1]?.position ?? null;
  }

  subscribeToAll(options: SubscribeToAllOptions = {}): AllSubscription {
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the async iterator below reads the store
    const store = this;
    const batchSize = options.maxBatchSize ?? 500;
    let next = indexAfter(options.after);
    let active = true;
    let announcedCaughtUp = false;
    let wake: (() => void) | null = null;

    async function* batches(): AsyncGenerator<SubscriptionBatch> {
      while (active) {
        await Promise.resolve();
        const page = store.log.slice(next, next + batchSize);
        const caughtUp = next + page.length >= store.log.length;
        if (page.length > 0) {
          next += page.length;
          announcedCaughtUp = caughtUp;
          yield { events: page.filter((e) => matchesFilter(options.filter, e)), checkpoint: page[page.length - 1]!.position, caughtUp };
        } else if (!announcedCaughtUp) {
          announcedCaughtUp = true;
          yield { events: [], checkpoint: store.log[next - 1]?.position ?? ZERO, caughtUp: true };
        }
        if (caughtUp && active && next >= store.log.length) {
          await new Promise<void>((resolve) => {
            wake = () => {
              store.wakers.delete(wake!);
              resolve();
            };
            store.wakers.add(wake);
          });
        }
      }
    }

    const iterator = batches();
    const subscription: AllSubscription = {
      [Symbol.asyncIterator]: () => iterator,
      unsubscribe: async () => {
        active = false;
        store.subscriptions.delete(subscription);
        const waiting = wake as (() => void) | null;
        waiting?.();
        await iterator.return(undefined);
      },
    };
    this.subscriptions.add(subscription);
    return subscription;
  }

  async close(): Promise<void> {
    await Promise.all([...this.subscriptions].map((s) => s.unsubscribe()));
  }
}

const ZERO: Position = { commit: 0n, prepare: 0n };

/** Positions are 1, 2, 3…: the index in the log of the first event after `after`. */
const indexAfter = (after: Position | 'start' | undefined): number => (after === undefined || after === 'start' ? 0 : Number(after.prepare));
