import { randomUUID } from 'node:crypto';
import {
  AllSubscription,
  comparePositions,
  EventStore,
  EventToAppend,
  RecordedEvent,
  StreamNotFoundError,
  WrongExpectedRevisionError,
} from '../../libs/event-store/src';

/**
 * The behaviour every event store adapter must have. Each test works in streams of
 * its own category (a random prefix), so the suite also runs against a shared
 * EventStoreDB whose $all holds other events.
 */
export function eventStoreContract(adapterName: string, open: () => Promise<EventStore>, close: () => Promise<void>): void {
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

        await expect(store.appendToStream(stream('a'), [event()], { expectedRevision: 'no_stream' })).rejects.toBeInstanceOf(
          WrongExpectedRevisionError,
        );
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

      it('an exact revision on a stream that does not exist conflicts', async () => {
        await expect(store.appendToStream(stream('missing'), [event()], { expectedRevision: 0n })).rejects.toBeInstanceOf(
          WrongExpectedRevisionError,
        );
        await expect(store.readStream(stream('missing'))).rejects.toBeInstanceOf(StreamNotFoundError);
      });

      it('stream_exists refuses a missing stream and appends to an existing one', async () => {
        await expect(
          store.appendToStream(stream('c'), [event()], { expectedRevision: 'stream_exists' }),
        ).rejects.toBeInstanceOf(WrongExpectedRevisionError);
        await store.appendToStream(stream('c'), [event()], { expectedRevision: 'no_stream' });
        const result = await store.appendToStream(stream('c'), [event()], { expectedRevision: 'stream_exists' });
        expect(result.nextExpectedRevision).toBe(1n);
      });

      it('any appends to a new and to an existing stream', async () => {
        expect((await store.appendToStream(stream('d'), [event()], { expectedRevision: 'any' })).nextExpectedRevision).toBe(0n);
        expect((await store.appendToStream(stream('d'), [event(), event()], { expectedRevision: 'any' })).nextExpectedRevision).toBe(
          2n,
        );
      });

      it('concurrent appends with the same exact revision: exactly one wins', async () => {
        await store.appendToStream(stream('race'), [event()], { expectedRevision: 'no_stream' });
        const outcomes = await Promise.allSettled(
          Array.from({ length: 10 }, () => store.appendToStream(stream('race'), [event()], { expectedRevision: 0n })),
        );
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
async function collect(
  subscription: AllSubscription,
  into: RecordedEvent[],
  count: number,
  onBatch?: (caughtUp: boolean) => void,
): Promise<void> {
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
