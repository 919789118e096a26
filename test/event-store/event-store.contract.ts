import { randomUUID } from 'node:crypto';
import {
  AllSubscription,
  AppendTooLateError,
  comparePositions,
  DuplicateEventIdError,
  EventStore,
  EventToAppend,
  Position,
  RecordedEvent,
  StreamNotFoundError,
  UnserializableEventError,
  WrongExpectedRevisionError,
} from '#event-store';

/**
 * What the stores truly do differently, declared per adapter; the suite holds each to
 * its declaration (docs/event-stores.md explains them).
 */
export interface EventStoreCapabilities {
  /**
   * Which event ids already stored an append is refused for (DuplicateEventIdError):
   * - 'everywhere' (PostgreSQL): an id stored anywhere in the log, unless the append is
   *   an exact repeat of the events at its expected position;
   * - 'at-expected-position' (EventStoreDB): only ids found at the positions the append
   *   expects to write (an exact revision or no_stream behind the stream), when the
   *   append is not an exact repeat of them. It keeps no index of ids: an id reused at
   *   the stream's current revision or in another stream is written again, and at a
   *   stale expected revision where other events stand the append conflicts
   *   (WrongExpectedRevisionError).
   * Both refuse a partial overlap at the expected position and accept an exact repeat.
   */
  readonly refusesEventIds: 'everywhere' | 'at-expected-position';
}

/**
 * The behaviour every event store adapter must have. Each test works in streams of
 * its own category (a random prefix), so the suite also runs against a shared
 * EventStoreDB whose $all holds other events.
 */
export function eventStoreContract(
  adapterName: string,
  open: () => Promise<EventStore>,
  close: () => Promise<void>,
  capabilities: EventStoreCapabilities,
): void {
  describe(`event store contract: ${adapterName}`, () => {
    let store: EventStore;
    let category: string;
    const stream = (id: string) => `${category}-${id}`;
    const ours = (events: readonly RecordedEvent[]) => events.filter((e) => e.streamName.startsWith(`${category}-`));

    beforeAll(async () => {
      store = await open();
    });
    afterAll(async () => {
      await close();
    });
    beforeEach(() => {
      category = `c${randomUUID().replace(/-/g, '').slice(0, 12)}`;
    });

    const event = (type = 'Something', data: Record<string, unknown> = {}): EventToAppend => ({
      id: randomUUID(),
      type,
      data,
      metadata: { test: true },
    });

    describe('append with an expected revision', () => {
      it('no_stream creates the stream with revisions from 0, and refuses once it exists', async () => {
        const result = await store.appendToStream(stream('a'), [event(), event(), event()], { expectedRevision: 'no_stream' });
        expect(result.nextExpectedRevision).toBe(2n);
        const read = await store.readStream(stream('a'));
        expect(read.map((e) => e.revision)).toEqual([0n, 1n, 2n]);

        await expect(store.appendToStream(stream('a'), [event()], { expectedRevision: 'no_stream' })).rejects.toBeInstanceOf(WrongExpectedRevisionError);
      });

      it('an exact revision appends when it matches and conflicts, naming the actual revision, when it does not', async () => {
        await store.appendToStream(stream('b'), [event(), event()], { expectedRevision: 'no_stream' });
        const ok = await store.appendToStream(stream('b'), [event()], { expectedRevision: 1n });
        expect(ok.nextExpectedRevision).toBe(2n);

        const conflict = await store.appendToStream(stream('b'), [event()], { expectedRevision: 1n }).catch((e) => e);
        expect(conflict).toBeInstanceOf(WrongExpectedRevisionError);
        expect((conflict as WrongExpectedRevisionError).actual).toBe(2n);
        expect(await store.readStream(stream('b'))).toHaveLength(3);
      });

      it('an append whose notAfter has passed is refused with AppendTooLateError, nothing written; one in time is written', async () => {
        await store.appendToStream(stream('dated'), [event()], { expectedRevision: 'no_stream' });
        const late = await store.appendToStream(stream('dated'), [event()], { expectedRevision: 0n, notAfter: new Date(Date.now() - 1) }).catch((e) => e);
        expect(late).toBeInstanceOf(AppendTooLateError);
        expect(await store.readStream(stream('dated'))).toHaveLength(1);
        const inTime = await store.appendToStream(stream('dated'), [event()], { expectedRevision: 0n, notAfter: new Date(Date.now() + 60_000) });
        expect(inTime.nextExpectedRevision).toBe(1n);
      });

      it('an exact revision on a stream that does not exist conflicts', async () => {
        await expect(store.appendToStream(stream('missing'), [event()], { expectedRevision: 0n })).rejects.toBeInstanceOf(WrongExpectedRevisionError);
        await expect(store.readStream(stream('missing'))).rejects.toBeInstanceOf(StreamNotFoundError);
      });

      it('stream_exists refuses a missing stream and appends to an existing one', async () => {
        await expect(store.appendToStream(stream('c'), [event()], { expectedRevision: 'stream_exists' })).rejects.toBeInstanceOf(WrongExpectedRevisionError);
        await store.appendToStream(stream('c'), [event()], { expectedRevision: 'no_stream' });
        const result = await store.appendToStream(stream('c'), [event()], { expectedRevision: 'stream_exists' });
        expect(result.nextExpectedRevision).toBe(1n);
      });

      it('any appends to a new and to an existing stream', async () => {
        expect((await store.appendToStream(stream('d'), [event()], { expectedRevision: 'any' })).nextExpectedRevision).toBe(0n);
        expect((await store.appendToStream(stream('d'), [event(), event()], { expectedRevision: 'any' })).nextExpectedRevision).toBe(2n);
      });

      it('concurrent appends with the same exact revision: exactly one wins', async () => {
        await store.appendToStream(stream('race'), [event()], { expectedRevision: 'no_stream' });
        const outcomes = await Promise.allSettled(Array.from({ length: 10 }, () => store.appendToStream(stream('race'), [event()], { expectedRevision: 0n })));
        expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
        for (const o of outcomes) {
          if (o.status === 'rejected') expect(o.reason).toBeInstanceOf(WrongExpectedRevisionError);
        }
        expect(await store.readStream(stream('race'))).toHaveLength(2);
      });
    });

    describe('idempotent retries', () => {
      it('a retried append with the same event ids succeeds and writes nothing twice', async () => {
        const batch = [event('A'), event('B')];
        const first = await store.appendToStream(stream('e'), batch, { expectedRevision: 'no_stream' });
        const retry = await store.appendToStream(stream('e'), batch, { expectedRevision: 'no_stream' });
        expect(retry.nextExpectedRevision).toBe(first.nextExpectedRevision);
        expect(comparePositions(retry.position, first.position)).toBe(0);
        expect((await store.readStream(stream('e'))).map((e) => e.id)).toEqual(batch.map((e) => e.id));
      });

      it('a retry of an exact-revision append after later appends still writes nothing twice', async () => {
        const first = [event()];
        await store.appendToStream(stream('f'), first, { expectedRevision: 'no_stream' });
        const second = [event()];
        await store.appendToStream(stream('f'), second, { expectedRevision: 0n });
        await store.appendToStream(stream('f'), second, { expectedRevision: 0n });
        expect(await store.readStream(stream('f'))).toHaveLength(2);
      });
    });

    describe('event ids', () => {
      const ids = (events: readonly { id: string }[]) => events.map((e) => e.id);

      it('ids that partly repeat the events at the expected position are refused with DuplicateEventIdError, writing nothing', async () => {
        // one event stored, the append repeats it and adds one
        const a = event();
        await store.appendToStream(stream('dup1'), [a], { expectedRevision: 'no_stream' });
        const grown = await refused(store.appendToStream(stream('dup1'), [a, event()], { expectedRevision: 'no_stream' }));
        expect(grown).toBeInstanceOf(DuplicateEventIdError);
        expect((grown as DuplicateEventIdError).eventIds).toEqual([a.id]);
        expect(ids(await store.readStream(stream('dup1')))).toEqual([a.id]);

        // the same ids in another order
        const [b, c] = [event(), event()];
        await store.appendToStream(stream('dup2'), [b, c], { expectedRevision: 'no_stream' });
        const reordered = await refused(store.appendToStream(stream('dup2'), [c, b], { expectedRevision: 'no_stream' }));
        expect(reordered).toBeInstanceOf(DuplicateEventIdError);
        expect([...(reordered as DuplicateEventIdError).eventIds].sort()).toEqual([b.id, c.id].sort());
        expect(ids(await store.readStream(stream('dup2')))).toEqual([b.id, c.id]);

        // at an exact revision behind the stream: the stored event, then a new one
        const [d, e] = [event(), event()];
        await store.appendToStream(stream('dup3'), [d], { expectedRevision: 'no_stream' });
        await store.appendToStream(stream('dup3'), [e], { expectedRevision: 0n });
        const stale = await refused(store.appendToStream(stream('dup3'), [e, event()], { expectedRevision: 0n }));
        expect(stale).toBeInstanceOf(DuplicateEventIdError);
        expect((stale as DuplicateEventIdError).eventIds).toEqual([e.id]);
        expect(ids(await store.readStream(stream('dup3')))).toEqual([d.id, e.id]);
      });

      it('an exact repeat of a no_stream append after later appends is its retry', async () => {
        const first = [event()];
        const original = await store.appendToStream(stream('again'), first, { expectedRevision: 'no_stream' });
        await store.appendToStream(stream('again'), [event()], { expectedRevision: 0n });
        const retry = await store.appendToStream(stream('again'), first, { expectedRevision: 'no_stream' });
        expect(retry.nextExpectedRevision).toBe(0n);
        expect(comparePositions(retry.position, original.position)).toBe(0);
        expect(await store.readStream(stream('again'))).toHaveLength(2);
      });

      if (capabilities.refusesEventIds === 'everywhere') {
        it('everywhere: an id already stored is refused at the current revision, in another stream and at a stale revision', async () => {
          const a = event();
          await store.appendToStream(stream('reuse'), [a], { expectedRevision: 'no_stream' });
          await store.appendToStream(stream('reuse'), [event()], { expectedRevision: 0n });
          await expect(store.appendToStream(stream('reuse'), [a], { expectedRevision: 1n })).rejects.toBeInstanceOf(DuplicateEventIdError);
          await expect(store.appendToStream(stream('elsewhere'), [a], { expectedRevision: 'no_stream' })).rejects.toBeInstanceOf(DuplicateEventIdError);
          await expect(store.appendToStream(stream('reuse'), [a], { expectedRevision: 0n })).rejects.toBeInstanceOf(DuplicateEventIdError);
          expect(await store.readStream(stream('reuse'))).toHaveLength(2);
          await expect(store.readStream(stream('elsewhere'))).rejects.toBeInstanceOf(StreamNotFoundError);
        });
      } else {
        it('at the expected position only: an id reused at the current revision or in another stream is written again; at a stale revision it conflicts', async () => {
          const a = event();
          await store.appendToStream(stream('reuse'), [a], { expectedRevision: 'no_stream' });
          await store.appendToStream(stream('reuse'), [event()], { expectedRevision: 0n });
          // No index of ids: the store cannot know that this id is already in the stream.
          await store.appendToStream(stream('reuse'), [a], { expectedRevision: 1n });
          await store.appendToStream(stream('elsewhere'), [a], { expectedRevision: 'no_stream' });
          await expect(store.appendToStream(stream('reuse'), [a], { expectedRevision: 0n })).rejects.toBeInstanceOf(WrongExpectedRevisionError);
          expect(ids(await store.readStream(stream('reuse'))).filter((id) => id === a.id)).toHaveLength(2);
          expect(ids(await store.readStream(stream('elsewhere')))).toEqual([a.id]);
        });
      }
    });

    describe('what an append answers and refuses', () => {
      it('answers the log position of its last event, for one event, several, and a retry', async () => {
        const single = [event()];
        const one = await store.appendToStream(stream('pos'), single, { expectedRevision: 'no_stream' });
        const several = [event(), event(), event()];
        const three = await store.appendToStream(stream('pos'), several, { expectedRevision: 0n });
        const stored = await store.readStream(stream('pos'));
        expect(one.position).toEqual(stored[0]!.position);
        expect(three.position).toEqual(stored[3]!.position);
        expect((await store.appendToStream(stream('pos'), single, { expectedRevision: 'no_stream' })).position).toEqual(stored[0]!.position);
        expect((await store.appendToStream(stream('pos'), several, { expectedRevision: 0n })).position).toEqual(stored[3]!.position);
      });

      it('refuses an event without a JSON form (a BigInt, a cycle) before writing anything, and stays usable', async () => {
        const cycle: Record<string, unknown> = { n: 1 };
        cycle.self = cycle;
        const bigint = await refused(store.appendToStream(stream('json'), [event('Ok'), event('Big', { amount: 10n })], { expectedRevision: 'no_stream' }));
        expect(bigint).toBeInstanceOf(UnserializableEventError);
        expect(bigint).toMatchObject({ streamName: stream('json'), part: 'data' });
        const cyclic = await refused(store.appendToStream(stream('json'), [{ ...event('Cycle'), metadata: cycle }], { expectedRevision: 'no_stream' }));
        expect(cyclic).toBeInstanceOf(UnserializableEventError);
        expect(cyclic).toMatchObject({ part: 'metadata' });
        await expect(store.readStream(stream('json'))).rejects.toBeInstanceOf(StreamNotFoundError);
        await store.appendToStream(stream('json'), [event('Ok')], { expectedRevision: 'no_stream' });
        expect(await store.readStream(stream('json'))).toHaveLength(1);
      });
    });

    describe('reading a stream', () => {
      it('reads forwards and backwards, from a revision, at most maxCount', async () => {
        const batch = Array.from({ length: 6 }, (_, i) => event('Numbered', { n: i }));
        await store.appendToStream(stream('g'), batch, { expectedRevision: 'no_stream' });

        const forwards = await store.readStream(stream('g'));
        expect(forwards.map((e) => e.data.n)).toEqual([0, 1, 2, 3, 4, 5]);
        expect(forwards[0]).toMatchObject({ type: 'Numbered', streamName: stream('g'), metadata: { test: true } });
        expect(forwards[0]!.createdAt).toBeInstanceOf(Date);

        const backwards = await store.readStream(stream('g'), { direction: 'backwards' });
        expect(backwards.map((e) => e.data.n)).toEqual([5, 4, 3, 2, 1, 0]);

        const slice = await store.readStream(stream('g'), { fromRevision: 2n, maxCount: 3 });
        expect(slice.map((e) => e.revision)).toEqual([2n, 3n, 4n]);

        const lastTwo = await store.readStream(stream('g'), { direction: 'backwards', fromRevision: 'end', maxCount: 2 });
        expect(lastTwo.map((e) => e.revision)).toEqual([5n, 4n]);

        const backFrom = await store.readStream(stream('g'), { direction: 'backwards', fromRevision: 1n });
        expect(backFrom.map((e) => e.revision)).toEqual([1n, 0n]);
      });
    });

    describe('the global log', () => {
      it('reads $all in append order, from an exclusive position', async () => {
        for (const id of ['x', 'y', 'z']) {
          await store.appendToStream(stream(id), [event('Step', { id })], { expectedRevision: 'no_stream' });
        }
        // $all is eventually consistent on PostgreSQL: a committed event shows once every
        // older transaction of the cluster has ended (the gap protection), so read until it does.
        let all: RecordedEvent[] = [];
        await eventually(async () => {
          all = ours(await readWholeLog(store));
          return all.length >= 3;
        });
        expect(all.map((e) => e.data.id)).toEqual(['x', 'y', 'z']);
        for (let i = 1; i < all.length; i++) expect(comparePositions(all[i - 1]!.position, all[i]!.position)).toBeLessThan(0);

        const afterFirst = ours(await readWholeLog(store, all[0]!.position));
        expect(afterFirst.map((e) => e.data.id)).toEqual(['y', 'z']);
        const afterLast = ours(await readWholeLog(store, all[2]!.position));
        expect(afterLast).toEqual([]);
      });

      it('a catch-up subscription delivers history, then turns live', async () => {
        await store.appendToStream(stream('s'), [event('Old', { n: 1 }), event('Old', { n: 2 })], { expectedRevision: 'no_stream' });
        const subscription = store.subscribeToAll({ filter: { streamNamePrefixes: [`${category}-`] } });
        const received: RecordedEvent[] = [];
        let sawCaughtUp = false;
        const collecting = collect(subscription, received, 4, (caughtUp) => {
          if (caughtUp) sawCaughtUp = true;
        });
        await waitFor(() => received.length === 2 && sawCaughtUp);
        await store.appendToStream(stream('s'), [event('New', { n: 3 })], { expectedRevision: 1n });
        await store.appendToStream(stream('t'), [event('New', { n: 4 })], { expectedRevision: 'no_stream' });
        await collecting;
        await subscription.unsubscribe();
        expect(received.map((e) => e.data.n)).toEqual([1, 2, 3, 4]);
        expect(received.every((e) => e.streamName.startsWith(`${category}-`))).toBe(true);
      });

      it('a subscription from a position starts after it', async () => {
        await store.appendToStream(stream('p'), [event('E', { n: 1 }), event('E', { n: 2 }), event('E', { n: 3 })], {
          expectedRevision: 'no_stream',
        });
        const [first] = await store.readStream(stream('p'));
        const subscription = store.subscribeToAll({ after: first!.position, filter: { streamNamePrefixes: [`${category}-`] } });
        const received: RecordedEvent[] = [];
        await collect(subscription, received, 2);
        await subscription.unsubscribe();
        expect(received.map((e) => e.data.n)).toEqual([2, 3]);
      });

      it('a filtered subscription that caught up has its checkpoint at the head, also when the last events do not match', async () => {
        const before = await store.headPosition();
        const wanted = event('Wanted');
        await store.appendToStream(stream('a'), [wanted], { expectedRevision: 'no_stream' });
        // More than one server page (32 events looked at on EventStoreDB) of events the filter skips.
        for (let i = 0; i < 40; i++) await store.appendToStream(stream(`b${i}`), [event('Other')], { expectedRevision: 'no_stream' });
        const last = (await store.readStream(stream('b39')))[0]!.position;

        const subscription = store.subscribeToAll({ after: before ?? 'start', filter: { streamNamePrefixes: [stream('a')] } });
        // Waits for it at most 30 s (the subscription ends then), whatever comes or not.
        const giveUp = setTimeout(() => void subscription.unsubscribe(), 30_000);
        const received: RecordedEvent[] = [];
        let reached: Position | null = null;
        for await (const batch of subscription) {
          received.push(...batch.events);
          if (batch.caughtUp && comparePositions(batch.checkpoint, last) >= 0) {
            reached = batch.checkpoint;
            break;
          }
        }
        clearTimeout(giveUp);
        await subscription.unsubscribe();
        expect(received.map((e) => e.id)).toEqual([wanted.id]);
        expect(reached).not.toBeNull();
      });

      it("concurrent 'any' appends to one stream keep that stream's order in $all", async () => {
        // Many writers racing for the same stream row: the order in which they take
        // the stream must be the order of their events in the global log.
        const writers = 16;
        const appendsPerWriter = 25;
        await Promise.all(
          Array.from({ length: writers }, async (_, w) => {
            for (let i = 0; i < appendsPerWriter; i++) {
              await store.appendToStream(stream('hot'), [event('Hot', { w, i }), event('Hot', { w, i })], {
                expectedRevision: i % 2 === 0 ? 'any' : 'stream_exists',
              });
            }
          }),
        );
        let all: RecordedEvent[] = [];
        await eventually(async () => {
          all = ours(await readWholeLog(store));
          return all.length >= writers * appendsPerWriter * 2;
        });
        expect(all.map((e) => Number(e.revision))).toEqual(all.map((_, i) => i));
      });

      it('thousands of events from many concurrent writers reach a live subscriber exactly once, in stream order', async () => {
        const writers = 24;
        const appendsPerWriter = 50;
        const streams = 60;
        const expected = writers * appendsPerWriter * 2;
        const subscription = store.subscribeToAll({ filter: { streamNamePrefixes: [`${category}-`] } });
        const received: RecordedEvent[] = [];
        const collecting = collect(subscription, received, expected);

        await Promise.all(
          Array.from({ length: writers }, async (_, w) => {
            for (let i = 0; i < appendsPerWriter; i++) {
              const target = stream(`load${(w * appendsPerWriter + i) % streams}`);
              await store.appendToStream(target, [event('Load', { w, i, k: 0 }), event('Load', { w, i, k: 1 })], {
                expectedRevision: 'any',
              });
            }
          }),
        );
        await collecting;
        await subscription.unsubscribe();

        expect(received).toHaveLength(expected);
        expect(new Set(received.map((e) => e.id)).size).toBe(expected);
        const lastRevision = new Map<string, bigint>();
        for (const e of received) {
          const previous = lastRevision.get(e.streamName) ?? -1n;
          expect(e.revision).toBe(previous + 1n);
          lastRevision.set(e.streamName, e.revision);
        }
        for (let i = 1; i < received.length; i++) {
          expect(comparePositions(received[i - 1]!.position, received[i]!.position)).toBeLessThan(0);
        }
      });
    });
  });
}

/** The error an operation was refused with (null when it succeeded). */
async function refused(operation: Promise<unknown>): Promise<unknown> {
  return operation.then(
    () => null,
    (error: unknown) => error,
  );
}

async function readWholeLog(store: EventStore, after?: RecordedEvent['position']): Promise<RecordedEvent[]> {
  const all: RecordedEvent[] = [];
  let cursor = after;
  for (;;) {
    const page = await store.readAll({ after: cursor, maxCount: 500 });
    all.push(...page);
    if (page.length < 500) return all;
    cursor = page[page.length - 1]!.position;
  }
}

/** Reads batches into `into` until it holds `count` events. */
async function collect(subscription: AllSubscription, into: RecordedEvent[], count: number, onBatch?: (caughtUp: boolean) => void): Promise<void> {
  const deadline = Date.now() + 30_000;
  for await (const batch of subscription) {
    into.push(...batch.events);
    onBatch?.(batch.caughtUp);
    if (into.length >= count) return;
    if (Date.now() > deadline) throw new Error(`subscription delivered ${into.length} of ${count} events in 30 s`);
  }
}

async function eventually(check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

export async function waitFor(condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}
