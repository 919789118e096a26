import { randomUUID } from 'node:crypto';
import { createServer, Server, Socket } from 'node:net';
import { PassThrough } from 'node:stream';
import {
  DeadlineExceededError,
  EventStoreDBClient,
  MaxAppendSizeExceededError,
  UnavailableError,
  WrongExpectedVersionError,
  StreamNotFoundError as ClientStreamNotFoundError,
} from '@eventstore/db-client';
import type { AllStreamSubscription, ReadPosition } from '@eventstore/db-client';
import * as plainAppendModule from '@eventstore/db-client/dist/streams/appendToStream/append';
import * as batchAppendModule from '@eventstore/db-client/dist/streams/appendToStream/batchAppend';
import { ReadStream as ClientReadStream } from '@eventstore/db-client/dist/streams/utils/ReadStream';
import { Subscription as ClientSubscription } from '@eventstore/db-client/dist/streams/utils/Subscription';
import { toApiError } from '../../apps/api/src/http/errors/error.filter';
import {
  AppendOutcomeUnknownError,
  AppendTooLargeError,
  EventStoreUnavailableError,
  Position,
  RecordedEvent,
  SubscriptionBatch,
  UnserializableEventError,
  WrongExpectedRevisionError,
} from '#event-store';
import {
  appendRoute,
  batchClientSubscription,
  batchSubscription,
  caughtUpCheckpoint,
  ClientRecordedEvent,
  ClientResolvedEvent,
  compareWithStored,
  EventStoreDbEventStore,
  expectationHolds,
  expectedFirstRevision,
  isSystemEvent,
  lastUserEventPosition,
  pushCheckpointMarker,
  readAllAfter,
  readWithDeadline,
  serverFilter,
  settingsFromConnectionString,
  settleAppendPosition,
  SubscriptionItem,
  toAppendExpectedRevision,
  toJsonObject,
  toPortAppendError,
  toPosition,
  toReadPosition,
  toRecordedEvent,
} from '#event-store/eventstoredb';
import { eventStoreContract } from './event-store.contract';

// ---------------------------------------------------------------------------------
// The contract, against a real server (none can be installed on the build machines).
// ---------------------------------------------------------------------------------

const connectionString = process.env.EVENTSTORE_CONNECTION_STRING;
let store: EventStoreDbEventStore | undefined;

async function open(): Promise<EventStoreDbEventStore> {
  store = EventStoreDbEventStore.fromConnectionString(connectionString!);
  return store;
}

async function close(): Promise<void> {
  await store?.close();
}

if (connectionString) {
  eventStoreContract('EventStoreDB', open, close, { refusesEventIds: 'at-expected-position' });
} else {
  describe('event store contract: EventStoreDB', () => {
    it.todo('runs only when EVENTSTORE_CONNECTION_STRING is set (no EventStoreDB server can be installed on the build machines)');
  });
}

// ---------------------------------------------------------------------------------
// The pure parts of the adapter, without a server.
// ---------------------------------------------------------------------------------

const at = (n: number): Position => ({ commit: BigInt(n), prepare: BigInt(n) });

/** An event of the client, as a read of $all yields it. */
function clientEvent(n: number, streamId = 'order-1', type = 'Placed', revision = 0n): ClientRecordedEvent {
  return {
    id: `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`,
    type,
    streamId,
    revision,
    data: { n },
    metadata: { m: n },
    created: new Date(1_700_000_000_000 + n),
    position: at(n),
  };
}

function recorded(n: number, streamName = 'order-1', type = 'Placed'): RecordedEvent {
  return toRecordedEvent(clientEvent(n, streamName, type));
}

/**
 * $all as the server reads it: `from` is inclusive (an event at that position comes
 * first), at most `count` records, system events included.
 */
function fakeLog(events: readonly ClientRecordedEvent[], options: { inclusive?: boolean } = {}) {
  const inclusive = options.inclusive ?? true;
  const calls: Array<{ from: ReadPosition; count: number }> = [];
  const sorted = [...events].sort((a, b) => Number(a.position!.commit - b.position!.commit));
  const key = (p: Position) => p.commit;
  const forwards = (from: ReadPosition, count: number): AsyncIterable<ClientResolvedEvent> => {
    calls.push({ from, count });
    const page = sorted
      .filter((e) => from === 'start' || (from !== 'end' && (inclusive ? key(e.position!) >= key(from) : key(e.position!) > key(from))))
      .slice(0, count);
    return toAsync(page.map((event) => ({ event })));
  };
  const backwards = (from: ReadPosition, count: number): AsyncIterable<ClientResolvedEvent> => {
    calls.push({ from, count });
    const page = [...sorted]
      .reverse()
      .filter((e) => from === 'end' || (from !== 'start' && (inclusive ? key(e.position!) <= key(from) : key(e.position!) < key(from))))
      .slice(0, count);
    return toAsync(page.map((event) => ({ event })));
  };
  return { forwards, backwards, calls };
}

async function* toAsync<T>(items: readonly T[]): AsyncGenerator<T> {
  for (const item of items) yield item;
}

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('EventStoreDB adapter: mapping to the client', () => {
  it('maps every expected revision explicitly', () => {
    expect(toAppendExpectedRevision('any')).toBe('any');
    expect(toAppendExpectedRevision('no_stream')).toBe('no_stream');
    expect(toAppendExpectedRevision('stream_exists')).toBe('stream_exists');
    expect(toAppendExpectedRevision(0n)).toBe(0n);
    expect(toAppendExpectedRevision(41n)).toBe(41n);
    expect(() => toAppendExpectedRevision(-1n)).toThrow(RangeError);
  });

  it("turns the client's WrongExpectedVersionError into the port's, with the actual revision", () => {
    const behind = new WrongExpectedVersionError(undefined, { streamName: 'order-1', expected: 1n, current: 2n });
    const mapped = toPortAppendError('order-1', 1n, behind);
    expect(mapped).toBeInstanceOf(WrongExpectedRevisionError);
    expect(mapped).toMatchObject({ streamName: 'order-1', expected: 1n, actual: 2n });

    const missing = new WrongExpectedVersionError(undefined, { streamName: 'order-2', expected: 0n, current: 'no_stream' });
    expect(toPortAppendError('order-2', 0n, missing)).toMatchObject({ expected: 0n, actual: 'no_stream' });

    const other = new ClientStreamNotFoundError(undefined, 'order-3');
    expect(toPortAppendError('order-3', 'any', other)).toBe(other);
    const plain = new Error('boom');
    expect(toPortAppendError('order-3', 'any', plain)).toBe(plain);
  });

  it('checks an expectation against the actual revision (appends of no events)', () => {
    expect(expectationHolds('any', 'no_stream')).toBe(true);
    expect(expectationHolds('no_stream', 'no_stream')).toBe(true);
    expect(expectationHolds('no_stream', 0n)).toBe(false);
    expect(expectationHolds('stream_exists', 'no_stream')).toBe(false);
    expect(expectationHolds('stream_exists', 3n)).toBe(true);
    expect(expectationHolds(3n, 3n)).toBe(true);
    expect(expectationHolds(2n, 3n)).toBe(false);
    expect(expectationHolds(0n, 'no_stream')).toBe(false);
  });

  it('reads from the start for "start" and for the zero position, else from the position', () => {
    expect(toReadPosition('start')).toBe('start');
    expect(toReadPosition({ commit: 0n, prepare: 0n })).toBe('start');
    expect(toReadPosition({ commit: 1200n, prepare: 1150n })).toEqual({ commit: 1200n, prepare: 1150n });
  });

  it('knows system events by stream or type', () => {
    expect(isSystemEvent({ streamId: 'order-1', type: 'Placed' })).toBe(false);
    expect(isSystemEvent({ streamId: '$stats-127.0.0.1:2113', type: '$statsCollected' })).toBe(true);
    expect(isSystemEvent({ streamId: '$$order-1', type: '$metadata' })).toBe(true);
    expect(isSystemEvent({ streamId: 'order-1', type: '$>' })).toBe(true);
  });

  it("maps the client's recorded event to the port's", () => {
    const event = toRecordedEvent({
      id: 'b3c4b1a2-0000-4000-8000-000000000001',
      type: 'Placed',
      streamId: 'order-1',
      revision: 4n,
      data: { amount: 10 },
      metadata: undefined,
      created: new Date('2024-05-01T10:00:00Z'),
      position: { commit: 900n, prepare: 880n },
    });
    expect(event).toEqual({
      id: 'b3c4b1a2-0000-4000-8000-000000000001',
      type: 'Placed',
      streamName: 'order-1',
      revision: 4n,
      data: { amount: 10 },
      metadata: {},
      position: { commit: 900n, prepare: 880n },
      createdAt: new Date('2024-05-01T10:00:00Z'),
    });
    expect(() => toRecordedEvent({ ...clientEvent(1), position: undefined })).toThrow('position');
  });

  it('makes JSON objects of any data or metadata', () => {
    expect(toJsonObject({ a: 1 })).toEqual({ a: 1 });
    expect(toJsonObject(undefined)).toEqual({});
    expect(toJsonObject(new Uint8Array())).toEqual({});
    expect(toJsonObject([1, 2])).toEqual({ value: [1, 2] });
    expect(toJsonObject('not json {')).toEqual({ value: 'not json {' });
    expect(toJsonObject(new TextEncoder().encode('{"a":2}'))).toEqual({ a: 2 });
    expect(toJsonObject(new Uint8Array([0, 255, 1]))).toEqual({ binary: Buffer.from([0, 255, 1]).toString('base64') });
    // a view into a larger buffer: only its own bytes
    const big = new TextEncoder().encode('xx{"b":3}yy');
    expect(toJsonObject(big.subarray(2, 9))).toEqual({ b: 3 });
  });

  it('filters on stream names on the server when it can, else on types, else leaves out system events', () => {
    const checkpoints = { checkpointInterval: 1, checkpointReached: pushCheckpointMarker };
    expect(serverFilter({ streamNamePrefixes: ['order-', 'refund-'] }, checkpoints)).toMatchObject({
      filterOn: 'streamName',
      prefixes: ['order-', 'refund-'],
      checkpointInterval: 1,
      checkpointReached: pushCheckpointMarker,
    });
    expect(serverFilter({ streamNamePrefixes: ['order-'], eventTypePrefixes: ['Paid'] }, checkpoints)).toMatchObject({
      filterOn: 'streamName',
      prefixes: ['order-'],
    });
    expect(serverFilter({ eventTypePrefixes: ['Paid'] }, checkpoints)).toMatchObject({ filterOn: 'eventType', prefixes: ['Paid'] });
    const none = serverFilter(undefined, checkpoints);
    expect(none).toMatchObject({ filterOn: 'eventType', regex: '^[^$].*', checkpointReached: pushCheckpointMarker });
    expect(serverFilter({ streamNamePrefixes: [] }, checkpoints)).toMatchObject({ filterOn: 'eventType', regex: '^[^$].*' });
  });
});

describe('EventStoreDB adapter: reading $all from an exclusive position', () => {
  const log = [
    clientEvent(10, 'order-a'),
    clientEvent(20, '$stats-node', '$statsCollected'),
    clientEvent(30, 'order-b'),
    clientEvent(40, '$$order-b', '$metadata'),
    clientEvent(50, 'order-c'),
    clientEvent(60, 'order-c', '$>'),
    clientEvent(70, 'order-d'),
  ];
  const positions = (events: readonly RecordedEvent[]) => events.map((e) => Number(e.position.commit));

  it('skips the event at the position the server starts from, and system events', async () => {
    const { forwards } = fakeLog(log);
    expect(positions(await readAllAfter(forwards, 'start', 100))).toEqual([10, 30, 50, 70]);
    expect(positions(await readAllAfter(forwards, at(10), 100))).toEqual([30, 50, 70]);
    expect(positions(await readAllAfter(forwards, at(30), 100))).toEqual([50, 70]);
    expect(positions(await readAllAfter(forwards, at(70), 100))).toEqual([]);
    // a position between events (a checkpoint) and the zero position
    expect(positions(await readAllAfter(forwards, at(35), 100))).toEqual([50, 70]);
    expect(positions(await readAllAfter(forwards, { commit: 0n, prepare: 0n }, 100))).toEqual([10, 30, 50, 70]);
  });

  it('also when the server does not include the start position', async () => {
    const { forwards } = fakeLog(log, { inclusive: false });
    expect(positions(await readAllAfter(forwards, at(10), 100))).toEqual([30, 50, 70]);
  });

  it('answers maxCount user events while the log has them, reading past system events', async () => {
    const { forwards, calls } = fakeLog(log);
    expect(positions(await readAllAfter(forwards, 'start', 2))).toEqual([10, 30]);
    expect(positions(await readAllAfter(forwards, at(10), 3))).toEqual([30, 50, 70]);
    // pages of (still wanted + 1 for the start), each from the last record seen, system ones included
    calls.length = 0;
    expect(positions(await readAllAfter(forwards, at(10), 2))).toEqual([30, 50]);
    expect(calls).toEqual([
      { from: at(10), count: 3 }, // 10 (the start), 20 ($stats), 30
      { from: at(30), count: 2 }, // 30 (the start), 40 ($$order-b)
      { from: at(40), count: 2 }, // 40 (the start), 50
    ]);
  });

  it('reads many system events in a row without losing or repeating user events', async () => {
    const noisy: ClientRecordedEvent[] = [];
    for (let i = 1; i <= 300; i++) {
      noisy.push(i % 7 === 0 ? clientEvent(i, `order-${i}`) : clientEvent(i, '$stats-node', '$statsCollected'));
    }
    const { forwards } = fakeLog(noisy);
    const all: RecordedEvent[] = [];
    let cursor: Position | 'start' = 'start';
    for (;;) {
      const page = await readAllAfter(forwards, cursor, 5);
      all.push(...page);
      if (page.length < 5) break;
      cursor = page[page.length - 1]!.position;
    }
    expect(positions(all)).toEqual(Array.from({ length: 42 }, (_, i) => (i + 1) * 7));
  });

  it('finds the head of the log: the last user event, or null', async () => {
    expect(await lastUserEventPosition(fakeLog(log).backwards)).toEqual(at(70));
    const tail = [...log, ...Array.from({ length: 25 }, (_, i) => clientEvent(100 + i, '$stats-node', '$statsCollected'))];
    expect(await lastUserEventPosition(fakeLog(tail).backwards, 4)).toEqual(at(70));
    expect(await lastUserEventPosition(fakeLog(tail, { inclusive: false }).backwards, 4)).toEqual(at(70));
    expect(await lastUserEventPosition(fakeLog([clientEvent(1, '$stats-node', '$x')]).backwards, 4)).toBeNull();
    expect(await lastUserEventPosition(fakeLog([]).backwards)).toBeNull();
  });
});

/** A subscription source that the test feeds; counts what was pulled from it. */
class FakeSource implements AsyncIterable<SubscriptionItem> {
  private readonly items: SubscriptionItem[] = [];
  private wake: (() => void) | null = null;
  private ended = false;
  private error: unknown = null;
  pulled = 0;
  finished = false;

  push(...items: SubscriptionItem[]): void {
    this.items.push(...items);
    this.notify();
  }
  end(): void {
    this.ended = true;
    this.notify();
  }
  fail(error: unknown): void {
    this.error = error;
    this.notify();
  }
  private notify(): void {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }
  async *[Symbol.asyncIterator](): AsyncGenerator<SubscriptionItem> {
    try {
      for (;;) {
        while (this.items.length === 0) {
          if (this.error) throw this.error;
          if (this.ended) return;
          await new Promise<void>((resolve) => (this.wake = resolve));
        }
        this.pulled++;
        yield this.items.shift()!;
      }
    } finally {
      this.finished = true;
    }
  }
}

const ev = (n: number, stream = 'order-1', type = 'Placed'): SubscriptionItem => ({ kind: 'event', event: recorded(n, stream, type) });
const checkpoint = (n: number): SubscriptionItem => ({ kind: 'checkpoint', position: at(n) });
const caughtUp: SubscriptionItem = { kind: 'caughtUp' };
const fellBehind: SubscriptionItem = { kind: 'fellBehind' };
const summary = (b: SubscriptionBatch) => ({
  events: b.events.map((e) => Number(e.position.commit)),
  checkpoint: Number(b.checkpoint.commit),
  caughtUp: b.caughtUp,
});

describe('EventStoreDB adapter: batching a subscription', () => {
  function subscribe(source: FakeSource, options: Partial<Parameters<typeof batchSubscription>[1]> = {}) {
    const onClose = jest.fn(() => source.end());
    const subscription = batchSubscription(source, { after: 'start', maxBatchSize: 500, onClose, ...options });
    return { subscription, iterator: subscription[Symbol.asyncIterator](), onClose };
  }

  it('hands over everything buffered at once, and waits when nothing is', async () => {
    const source = new FakeSource();
    const { subscription, iterator } = subscribe(source);
    source.push(ev(1), ev(2), ev(3));
    await tick();
    expect(summary((await iterator.next()).value)).toEqual({ events: [1, 2, 3], checkpoint: 3, caughtUp: false });

    const pending = iterator.next();
    let settled = false;
    void pending.then(() => (settled = true));
    await tick();
    expect(settled).toBe(false);
    source.push(ev(4));
    expect(summary((await pending).value)).toEqual({ events: [4], checkpoint: 4, caughtUp: false });
    await subscription.unsubscribe();
  });

  it('splits at maxBatchSize, the checkpoint being the last event handed over', async () => {
    const source = new FakeSource();
    const { subscription, iterator } = subscribe(source, { maxBatchSize: 2, highWaterMark: 10 });
    source.push(ev(1), ev(2), ev(3), ev(4), ev(5), caughtUp);
    await tick();
    const batches = [];
    for (let i = 0; i < 3; i++) batches.push(summary((await iterator.next()).value));
    expect(batches).toEqual([
      { events: [1, 2], checkpoint: 2, caughtUp: false },
      { events: [3, 4], checkpoint: 4, caughtUp: false },
      { events: [5], checkpoint: 5, caughtUp: true },
    ]);
    // live, but a batch that leaves events behind is not caught up
    source.push(ev(6), ev(7), ev(8));
    await tick();
    expect(summary((await iterator.next()).value)).toEqual({ events: [6, 7], checkpoint: 7, caughtUp: false });
    expect(summary((await iterator.next()).value)).toEqual({ events: [8], checkpoint: 8, caughtUp: true });
    await subscription.unsubscribe();
  });

  it('applies the filter and leaves out system events, still moving the checkpoint past them', async () => {
    const source = new FakeSource();
    const { subscription, iterator } = subscribe(source, { filter: { streamNamePrefixes: ['order-'], eventTypePrefixes: ['Paid'] } });
    source.push(ev(1, 'order-1', 'Placed'), ev(2, 'refund-1', 'Paid'), ev(3, 'order-1', 'Paid'), ev(4, '$stats', '$statsCollected'));
    await tick();
    expect(summary((await iterator.next()).value)).toEqual({ events: [3], checkpoint: 4, caughtUp: false });
    source.push(ev(5, 'refund-2', 'Paid'));
    expect(summary((await iterator.next()).value)).toEqual({ events: [], checkpoint: 5, caughtUp: false });
    await subscription.unsubscribe();
  });

  it('hands over server checkpoints as empty batches, never moving backwards', async () => {
    const source = new FakeSource();
    const { subscription, iterator } = subscribe(source, { after: at(100) });
    source.push(checkpoint(90), checkpoint(100), checkpoint(150), checkpoint(120));
    await tick();
    expect(summary((await iterator.next()).value)).toEqual({ events: [], checkpoint: 150, caughtUp: false });
    // a checkpoint that does not move and an event it already passed (server checkpoint ahead): the event
    // is handed over, the checkpoint stays
    source.push(checkpoint(150), ev(140), ev(160));
    await tick();
    expect(summary((await iterator.next()).value)).toEqual({ events: [140, 160], checkpoint: 160, caughtUp: false });
    await subscription.unsubscribe();
  });

  it('starts after `after` and drops events it already handed over', async () => {
    const source = new FakeSource();
    const { subscription, iterator } = subscribe(source, { after: at(10) });
    source.push(ev(5), ev(10), ev(11), ev(11), ev(9), ev(12));
    await tick();
    expect(summary((await iterator.next()).value)).toEqual({ events: [11, 12], checkpoint: 12, caughtUp: false });
    await subscription.unsubscribe();
  });

  it('is caught up once the server says so and nothing is left; not after it fell behind', async () => {
    const source = new FakeSource();
    const { subscription, iterator } = subscribe(source);
    source.push(ev(1), ev(2));
    await tick();
    expect(summary((await iterator.next()).value)).toEqual({ events: [1, 2], checkpoint: 2, caughtUp: false });
    source.push(caughtUp);
    expect(summary((await iterator.next()).value)).toEqual({ events: [], checkpoint: 2, caughtUp: true });
    source.push(ev(3));
    expect(summary((await iterator.next()).value)).toEqual({ events: [3], checkpoint: 3, caughtUp: true });
    source.push(fellBehind, ev(4));
    await tick();
    expect(summary((await iterator.next()).value)).toEqual({ events: [4], checkpoint: 4, caughtUp: false });
    // caught up with no new event and no new checkpoint: still worth a batch
    source.push(caughtUp);
    expect(summary((await iterator.next()).value)).toEqual({ events: [], checkpoint: 4, caughtUp: true });
    await subscription.unsubscribe();
  });

  it('reads ahead no more than highWaterMark items while the consumer does not ask', async () => {
    const source = new FakeSource();
    const { subscription, iterator } = subscribe(source, { maxBatchSize: 2, highWaterMark: 3 });
    source.push(...Array.from({ length: 20 }, (_, i) => ev(i + 1)));
    for (let i = 0; i < 5; i++) await tick();
    expect(source.pulled).toBe(3);
    expect(summary((await iterator.next()).value).events).toEqual([1, 2]);
    for (let i = 0; i < 5; i++) await tick();
    expect(source.pulled).toBe(5);
    await subscription.unsubscribe();
  });

  it('unsubscribe ends a waiting next() and the source, once', async () => {
    const source = new FakeSource();
    const { subscription, iterator, onClose } = subscribe(source);
    const pending = iterator.next();
    await tick();
    await subscription.unsubscribe();
    await expect(pending).resolves.toEqual({ done: true, value: undefined });
    await expect(iterator.next()).resolves.toEqual({ done: true, value: undefined });
    await subscription.unsubscribe();
    expect(onClose).toHaveBeenCalledTimes(1);
    expect(source.finished).toBe(true);
  });

  it('leaving a for-await loop unsubscribes', async () => {
    const source = new FakeSource();
    const { subscription, onClose } = subscribe(source);
    source.push(ev(1));
    for await (const batch of subscription) {
      expect(batch.events).toHaveLength(1);
      break;
    }
    expect(onClose).toHaveBeenCalledTimes(1);
    expect(source.finished).toBe(true);
  });

  it('hands over what came before a failure of the source, then throws it', async () => {
    const source = new FakeSource();
    const { iterator, onClose } = subscribe(source);
    source.push(ev(1), ev(2));
    source.fail(new Error('connection lost'));
    await tick();
    expect(summary((await iterator.next()).value).events).toEqual([1, 2]);
    await expect(iterator.next()).rejects.toThrow('connection lost');
    expect(onClose).toHaveBeenCalledTimes(1);
    await expect(iterator.next()).resolves.toMatchObject({ done: true });
  });

  it('ends when the source ends', async () => {
    const source = new FakeSource();
    const { iterator } = subscribe(source);
    source.push(ev(1));
    source.end();
    expect(summary((await iterator.next()).value).events).toEqual([1]);
    await expect(iterator.next()).resolves.toMatchObject({ done: true });
  });
});

/**
 * The client's own subscription stream (its Transform over the gRPC call), fed by a
 * fake gRPC call: checks that checkpoints and caught-up reach the batches in log
 * order even when the consumer lags and events wait in the stream's buffer.
 */
describe("EventStoreDB adapter: markers in the client's subscription stream", () => {
  type FakeResp = Record<string, () => unknown>;
  const eventResp = (n: number, stream = 'order-1'): FakeResp => ({
    hasEvent: () => true,
    getEvent: () => ({ event: clientEvent(n, stream) }),
  });
  const checkpointResp = (n: number): FakeResp => ({
    hasCheckpoint: () => true,
    getCheckpoint: () => ({ getCommitPosition: () => String(n), getPreparePosition: () => String(n) }),
  });
  const caughtUpResp: FakeResp = { hasCaughtUp: () => true };

  function clientSubscription() {
    const call = Object.assign(new PassThrough({ objectMode: true }), { cancel: jest.fn() });
    const identity = (e: unknown) => e;
    const client = new ClientSubscription(
      (async () => call) as unknown as ConstructorParameters<typeof ClientSubscription<unknown>>[0],
      identity as ConstructorParameters<typeof ClientSubscription<unknown>>[1],
      {},
      pushCheckpointMarker as ConstructorParameters<typeof ClientSubscription<unknown>>[3],
    ) as unknown as AllStreamSubscription;
    return { call, client };
  }

  it('a checkpoint and caught-up come after the events sent before them', async () => {
    const { call, client } = clientSubscription();
    // A consumer that lags: the read ahead stops at 2 items, so events wait in the client's
    // stream (16 objects) while it already transforms the checkpoint and caught-up that follow.
    const subscription = batchClientSubscription(client, { after: 'start', maxBatchSize: 3, highWaterMark: 2 });
    const iterator = subscription[Symbol.asyncIterator]();
    for (let n = 1; n <= 40; n++) call.write(eventResp(n, n % 2 === 0 ? 'order-1' : '$stats'));
    call.write(checkpointResp(45));
    call.write(caughtUpResp);
    call.write(eventResp(50));

    const seen: Array<ReturnType<typeof summary>> = [];
    while (seen.length === 0 || seen[seen.length - 1]!.checkpoint < 50) {
      seen.push(summary((await iterator.next()).value));
    }
    const events = seen.flatMap((b) => b.events);
    expect(events).toEqual([...Array.from({ length: 20 }, (_, i) => (i + 1) * 2), 50]);
    // every batch's checkpoint is at or past its own events and never ahead of an event still to come
    let handed = 0;
    for (const batch of seen) {
      for (const e of batch.events) expect(e).toBeLessThanOrEqual(batch.checkpoint);
      handed += batch.events.length;
      const next = events[handed];
      if (next !== undefined) expect(batch.checkpoint).toBeLessThan(next);
    }
    // caught up only once everything before the caught-up marker was handed over
    expect(seen[seen.length - 1]!.caughtUp).toBe(true);
    expect(seen.filter((b) => b.caughtUp).every((b) => b.checkpoint >= 45)).toBe(true);

    await subscription.unsubscribe();
    expect(call.cancel).toHaveBeenCalled();
    expect(client.destroyed).toBe(true);
  });

  it('unsubscribe ends the batches even though cancelling the call does not end the stream', async () => {
    const { client } = clientSubscription();
    const subscription = batchClientSubscription(client, { after: 'start', maxBatchSize: 500 });
    const pending = subscription[Symbol.asyncIterator]().next();
    await tick();
    await subscription.unsubscribe();
    await expect(pending).resolves.toEqual({ done: true, value: undefined });
  });

  it('an error of the call ends the batches with it', async () => {
    const { call, client } = clientSubscription();
    const subscription = batchClientSubscription(client, { after: 'start', maxBatchSize: 500 });
    const iterator = subscription[Symbol.asyncIterator]();
    call.write(eventResp(2));
    await tick();
    call.emit('error', new Error('server went away'));
    expect(summary((await iterator.next()).value).events).toEqual([2]);
    await expect(iterator.next()).rejects.toThrow('server went away');
  });
});

// ---------------------------------------------------------------------------------
// The sharp edges of the client (issue 19), without a server: the client's own
// classes, and a real client against a port where nothing listens or a peer that
// accepts connections and never answers (a stalled server).
// ---------------------------------------------------------------------------------

/** A TCP port on which nothing listens. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A peer that accepts TCP connections and never sends a byte: what a stalled server looks like to the client. */
async function stalledServer(): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const userEvent = (data: Record<string, unknown> = {}, metadata?: Record<string, unknown>) => ({
  id: randomUUID(),
  type: 'Something',
  data,
  ...(metadata === undefined ? {} : { metadata }),
});

describe("EventStoreDB adapter: appends never take the client's batch-append stream", () => {
  let plainAppend: jest.SpyInstance;
  let batchAppend: jest.SpyInstance;
  beforeEach(() => {
    plainAppend = jest.spyOn(plainAppendModule, 'append');
    batchAppend = jest.spyOn(batchAppendModule, 'batchAppend');
  });
  afterEach(() => jest.restoreAllMocks());

  it.each([
    ['credentials of the connection string', 'esdb://admin:changeit@127.0.0.1:PORT?tls=false'],
    ['no credentials, no TLS', 'esdb://127.0.0.1:PORT?tls=false'],
    ['TLS without user:password (anonymous or user certificates)', 'esdb://127.0.0.1:PORT'],
  ])('%s: the plain append call, and the server that cannot be reached is EventStoreUnavailableError', async (_, template) => {
    const store = EventStoreDbEventStore.fromConnectionString(template.replace('PORT', String(await closedPort())));
    try {
      const refused = await store.appendToStream('order-1', [userEvent()], { expectedRevision: 'no_stream' }).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(EventStoreUnavailableError);
      expect(plainAppend).toHaveBeenCalledTimes(1);
      expect(batchAppend).not.toHaveBeenCalled();
    } finally {
      await store.close();
    }
  });

  it('passes the connection string’s credentials on each append, an empty pair without TLS (which the client ignores), none with TLS and no password', () => {
    expect(appendRoute({ defaultCredentials: { username: 'ops', password: 'secret' } })).toEqual({
      kind: 'credentials',
      credentials: { username: 'ops', password: 'secret' },
    });
    expect(appendRoute({ tls: false })).toEqual({ kind: 'credentials', credentials: { username: '', password: '' } });
    expect(appendRoute({})).toEqual({ kind: 'direct' });
    expect(settingsFromConnectionString('esdb://admin:changeit@db:2113?tls=false&defaultDeadline=2500')).toEqual({
      deadlineMs: 2500,
      appendRoute: { kind: 'credentials', credentials: { username: 'admin', password: 'changeit' } },
    });
    expect(settingsFromConnectionString('esdb://db:2113').deadlineMs).toBe(10_000);
  });
});

describe('EventStoreDB adapter: deadlines and an unavailable server', () => {
  it('a stalled server fails reads and appends with EventStoreUnavailableError once the deadline has passed', async () => {
    const server = await stalledServer();
    const store = EventStoreDbEventStore.fromConnectionString(`esdb://127.0.0.1:${server.port}?tls=false&defaultDeadline=200`);
    try {
      const outcomes = await Promise.allSettled([
        store.readStream('order-1'),
        store.readAll({ maxCount: 10 }),
        store.headPosition(),
        store.appendToStream('order-1', [userEvent()], { expectedRevision: 0n }),
      ]);
      for (const outcome of outcomes) {
        expect(outcome.status).toBe('rejected');
        expect((outcome as PromiseRejectedResult).reason).toBeInstanceOf(EventStoreUnavailableError);
      }
    } finally {
      await store.close();
      await server.close();
    }
  }, 20_000);

  it('a server that cannot be reached fails reads with EventStoreUnavailableError', async () => {
    const store = EventStoreDbEventStore.fromConnectionString(`esdb://127.0.0.1:${await closedPort()}?tls=false`);
    try {
      await expect(store.readStream('order-1')).rejects.toBeInstanceOf(EventStoreUnavailableError);
      await expect(store.headPosition()).rejects.toBeInstanceOf(EventStoreUnavailableError);
    } finally {
      await store.close();
    }
  });

  it("the deadline cancels the gRPC call of the client's read, which would otherwise never end", async () => {
    const call = Object.assign(new PassThrough({ objectMode: true }), { cancel: jest.fn() });
    const read = new ClientReadStream(
      (async () => call) as unknown as ConstructorParameters<typeof ClientReadStream>[0],
      ((e: unknown) => e) as ConstructorParameters<typeof ClientReadStream>[1],
      {},
    );
    const reading = (async () => {
      for await (const _ of readWithDeadline(read, 30, 'reading order-1')) void _;
    })();
    await expect(reading).rejects.toBeInstanceOf(EventStoreUnavailableError);
    await new Promise((resolve) => setImmediate(resolve));
    expect(call.cancel).toHaveBeenCalled();
  });

  it("maps the client's errors: no answer → EventStoreUnavailableError, maximum append size → AppendTooLargeError", () => {
    expect(toPortAppendError('order-1', 0n, new UnavailableError())).toBeInstanceOf(EventStoreUnavailableError);
    expect(toPortAppendError('order-1', 0n, new DeadlineExceededError())).toBeInstanceOf(EventStoreUnavailableError);
    const tooLarge = toPortAppendError('order-1', 0n, MaxAppendSizeExceededError.fromMaxAppendSize(1_048_576));
    expect(tooLarge).toBeInstanceOf(AppendTooLargeError);
    expect(tooLarge).toMatchObject({ streamName: 'order-1', maxAppendSizeBytes: 1_048_576 });
    const notFound = new ClientStreamNotFoundError(undefined, 'order-3');
    expect(toPortAppendError('order-3', 'any', notFound)).toBe(notFound);
  });

  it('the API answers EventStoreUnavailableError with 503 provider_unavailable and Retry-After', () => {
    const answer = toApiError(new EventStoreUnavailableError('EventStoreDB did not answer within 10000 ms'));
    expect(answer.status).toBe(503);
    expect(answer.body()).toEqual({ error: { code: 'provider_unavailable', message: expect.any(String) } });
    expect(answer.headers).toEqual({ 'Retry-After': '1' });
  });
});

describe('EventStoreDB adapter: events without a JSON form', () => {
  afterEach(() => jest.restoreAllMocks());

  it('are refused with UnserializableEventError before the client sees them, with no unhandled rejection', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    const client = EventStoreDBClient.connectionString(`esdb://127.0.0.1:${await closedPort()}?tls=false`);
    const clientAppend = jest.spyOn(client, 'appendToStream');
    const plainAppend = jest.spyOn(plainAppendModule, 'append');
    const store = new EventStoreDbEventStore(client);
    try {
      const cycle: Record<string, unknown> = {};
      cycle.self = cycle;
      const bigint = await store.appendToStream('order-1', [userEvent(), userEvent({ amount: 1n })]).catch((e: unknown) => e);
      expect(bigint).toBeInstanceOf(UnserializableEventError);
      expect(bigint).toMatchObject({ streamName: 'order-1', part: 'data' });
      const cyclic = await store.appendToStream('order-1', [userEvent({}, cycle)]).catch((e: unknown) => e);
      expect(cyclic).toMatchObject({ name: 'UnserializableEventError', part: 'metadata' });
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(clientAppend).not.toHaveBeenCalled();
      expect(plainAppend).not.toHaveBeenCalled();
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
      await store.close();
    }
  });
});

describe('EventStoreDB adapter: event ids where an append expected to write', () => {
  const stored = (...ids: string[]) => ids.map((id) => ({ id }));

  it('tells an exact repeat from a partial overlap and from other events', () => {
    expect(compareWithStored(stored('A', 'B'), ['a', 'b'])).toEqual({ kind: 'same' });
    expect(compareWithStored(stored('A'), ['A', 'C'])).toEqual({ kind: 'overlap', ids: ['A'] });
    expect(compareWithStored(stored('A', 'B'), ['B', 'A'])).toEqual({ kind: 'overlap', ids: ['B', 'A'] });
    expect(compareWithStored(stored('A', 'B'), ['A'])).toEqual({ kind: 'overlap', ids: ['A'] });
    expect(compareWithStored(stored('X'), ['A'])).toEqual({ kind: 'none' });
    expect(compareWithStored([], ['A'])).toEqual({ kind: 'none' });
  });

  it('knows where an expectation puts the first event: only no_stream and exact revisions name a position', () => {
    expect(expectedFirstRevision('no_stream')).toBe(0n);
    expect(expectedFirstRevision(4n)).toBe(5n);
    expect(expectedFirstRevision('any')).toBeNull();
    expect(expectedFirstRevision('stream_exists')).toBeNull();
  });
});

describe('EventStoreDB adapter: positions', () => {
  it('a position of 0/0 (protobuf defaults) or uint64 -1 is no position', () => {
    expect(toPosition(undefined)).toBeNull();
    expect(toPosition({ commit: 0n, prepare: 0n })).toBeNull();
    expect(toPosition({ commit: 2n ** 64n - 1n, prepare: 2n ** 64n - 1n })).toBeNull();
    expect(toPosition({ commit: 1200n, prepare: 1150n })).toEqual({ commit: 1200n, prepare: 1150n });
    expect(() => toRecordedEvent({ ...clientEvent(1), position: { commit: 0n, prepare: 0n } })).toThrow('position');
  });

  it('a checkpoint without a position is not handed on', () => {
    const target = new PassThrough({ objectMode: true });
    pushCheckpointMarker(target as unknown as AllStreamSubscription, { commit: 0n, prepare: 0n });
    expect(target.readableLength).toBe(0);
    pushCheckpointMarker(target as unknown as AllStreamSubscription, { commit: 7n, prepare: 7n });
    expect(target.readableLength).toBe(1);
  });

  describe('of an append', () => {
    const event = recorded(40, 'order-1');
    const append = (eventCount: number, reported: Position | null, lastEventId = event.id) => ({
      streamName: 'order-1',
      eventCount,
      lastEventId,
      reported,
    });

    it("one event: the server's answer, with no read", async () => {
      const readLast = jest.fn(async () => event);
      expect(await settleAppendPosition(append(1, at(33)), readLast, [])).toEqual(at(33));
      expect(readLast).not.toHaveBeenCalled();
    });

    it('several events, or no position in the answer: the last event read back by its revision', async () => {
      const readLast = jest.fn(async () => event);
      expect(await settleAppendPosition(append(3, at(33)), readLast, [])).toEqual(at(40));
      expect(await settleAppendPosition(append(1, null), readLast, [])).toEqual(at(40));
      expect(readLast).toHaveBeenCalledTimes(2);
    });

    it('reads again before failing an append that committed', async () => {
      let calls = 0;
      const flaky = async () => {
        if (++calls < 3) throw new EventStoreUnavailableError('no answer');
        return event;
      };
      expect(await settleAppendPosition(append(3, null), flaky, [0, 0])).toEqual(at(40));
      expect(calls).toBe(3);

      const failing = jest.fn(async (): Promise<RecordedEvent> => {
        throw new EventStoreUnavailableError('no answer');
      });
      expect(await settleAppendPosition(append(3, at(33)), failing, [0, 0])).toEqual(at(33));
      expect(failing).toHaveBeenCalledTimes(3);
      // Committed: an outcome unknown to the caller (a 503 that keeps the request's Idempotency-Key), never "nothing written".
      await expect(settleAppendPosition(append(3, null), failing, [0])).rejects.toBeInstanceOf(AppendOutcomeUnknownError);
      await expect(settleAppendPosition(append(3, null, 'another-id'), async () => event, [0])).rejects.toBeInstanceOf(AppendOutcomeUnknownError);
    });
  });
});

describe('EventStoreDB adapter: the checkpoint of a caught-up subscription', () => {
  /** 10 events of order-1, then 40 of other streams, then whatever `tail` adds. */
  const logWith = (...tail: ClientRecordedEvent[]) => [
    ...Array.from({ length: 10 }, (_, i) => clientEvent(i + 1, 'order-1', 'Placed', BigInt(i))),
    ...Array.from({ length: 40 }, (_, i) => clientEvent(i + 11, i % 9 === 0 ? '$stats-node' : `refund-${i}`, i % 9 === 0 ? '$statsCollected' : 'Paid')),
    ...tail,
  ];
  const pendingOrders = (e: ClientRecordedEvent) => !isSystemEvent(e) && e.streamId.startsWith('order-');

  it('moves to the end of the log when nothing the subscription hands over is left, else stops before it', async () => {
    expect(await caughtUpCheckpoint(fakeLog(logWith()).forwards, at(10), pendingOrders, { pageSize: 8 })).toEqual(at(50));
    expect(await caughtUpCheckpoint(fakeLog(logWith(clientEvent(51, 'order-2'))).forwards, at(10), pendingOrders, { pageSize: 8 })).toEqual(at(50));
    expect(await caughtUpCheckpoint(fakeLog(logWith()).forwards, at(50), pendingOrders)).toBeNull();
    // a server checkpoint from the start of its last page: events at or before it were handed over
    expect(await caughtUpCheckpoint(fakeLog(logWith()).forwards, at(5), (e) => pendingOrders(e) && e.position!.commit > 10n)).toEqual(at(50));
    // a budget: as far as it read
    expect(await caughtUpCheckpoint(fakeLog(logWith()).forwards, at(10), pendingOrders, { pageSize: 8, budget: 20 })).toEqual(at(31));
  });

  function confirmingSubscription(log: readonly ClientRecordedEvent[]) {
    const call = Object.assign(new PassThrough({ objectMode: true }), { cancel: jest.fn() });
    const client = new ClientSubscription(
      (async () => call) as unknown as ConstructorParameters<typeof ClientSubscription<unknown>>[0],
      ((e: unknown) => e) as ConstructorParameters<typeof ClientSubscription<unknown>>[1],
      {},
      pushCheckpointMarker as ConstructorParameters<typeof ClientSubscription<unknown>>[3],
    ) as unknown as AllStreamSubscription;
    const subscription = batchClientSubscription(client, {
      after: 'start',
      maxBatchSize: 500,
      filter: { streamNamePrefixes: ['order-'] },
      confirmCaughtUp: (from) => caughtUpCheckpoint(fakeLog(log).forwards, from, pendingOrders, { pageSize: 8 }),
    });
    return { call, subscription, iterator: subscription[Symbol.asyncIterator]() };
  }
  const send = (call: PassThrough, n: number, stream = 'order-1') => call.write({ hasEvent: () => true, getEvent: () => ({ event: clientEvent(n, stream) }) });
  const sendCheckpoint = (call: PassThrough, n: number) =>
    call.write({ hasCheckpoint: () => true, getCheckpoint: () => ({ getCommitPosition: () => String(n), getPreparePosition: () => String(n) }) });
  const sendCaughtUp = (call: PassThrough) => call.write({ hasCaughtUp: () => true });

  async function until(iterator: AsyncIterator<SubscriptionBatch>, done: (b: ReturnType<typeof summary>) => boolean) {
    const seen: Array<ReturnType<typeof summary>> = [];
    while (seen.length === 0 || !done(seen[seen.length - 1]!)) seen.push(summary((await iterator.next()).value));
    return seen;
  }

  it('a filter that matches none of the last events still reaches the head once caught up', async () => {
    const { call, subscription, iterator } = confirmingSubscription(logWith());
    for (let n = 1; n <= 10; n++) send(call, n);
    sendCheckpoint(call, 5); // the server's: the start of the last page it read
    sendCaughtUp(call);
    const seen = await until(iterator, (b) => b.caughtUp);
    expect(seen.flatMap((b) => b.events)).toEqual(Array.from({ length: 10 }, (_, i) => i + 1));
    expect(seen[seen.length - 1]).toMatchObject({ checkpoint: 50, caughtUp: true });
    await subscription.unsubscribe();
  });

  it('never moves past an event still to be handed over (appended after the server caught up)', async () => {
    const { call, subscription, iterator } = confirmingSubscription(logWith(clientEvent(51, 'refund-x', 'Paid'), clientEvent(52, 'order-2')));
    for (let n = 1; n <= 10; n++) send(call, n);
    sendCaughtUp(call);
    const seen = await until(iterator, (b) => b.caughtUp);
    expect(seen[seen.length - 1]).toMatchObject({ checkpoint: 51, caughtUp: true });
    send(call, 52, 'order-2'); // the server sends it live
    expect(summary((await iterator.next()).value)).toEqual({ events: [52], checkpoint: 52, caughtUp: true });
    await subscription.unsubscribe();
  });
});
