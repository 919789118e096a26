import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import type { Pool } from 'pg';
import { AllFilter, comparePositions, LiveLogWindow, matchesFilter, PostgresEventStore, Position, RecordedEvent } from '#event-store';
import { createTestDatabase, TestDatabase } from '../support/test-database';
import { visibleHead } from '../support/project-to-head';
import { fastCheckSeed } from '../support/test-seed';

const at = (n: number): Position => ({ commit: BigInt(n), prepare: BigInt(n) });
const event = (n: number, streamName: string, type = 'Happened'): RecordedEvent => ({
  id: `e${n}`,
  type,
  streamName,
  revision: 0n,
  data: { n },
  metadata: {},
  position: at(n),
  createdAt: new Date(0),
});

/** A log in memory: `visible` events can be fetched; the generation moves when the test says the log grew. */
function fakeLog() {
  const log: RecordedEvent[] = [];
  let generation = 0;
  let fetches = 0;
  return {
    log,
    grow(...events: RecordedEvent[]) {
      log.push(...events);
      generation++;
    },
    get fetches() {
      return fetches;
    },
    generation: () => generation,
    fetchAfter: async (after: Position, maxCount: number) => {
      fetches++;
      await new Promise((r) => setImmediate(r));
      return log.filter((e) => comparePositions(e.position, after) > 0).slice(0, maxCount);
    },
  };
}

describe('LiveLogWindow: one read of the log for every live subscription', () => {
  it('serves concurrent subscriptions from one fetch, each filtered, in log order', async () => {
    const source = fakeLog();
    const window = new LiveLogWindow(source.fetchAfter, source.generation, { fetchSize: 100, keep: 1000, quietMs: 60_000 });
    const start = at(0);
    expect(await window.page(start, 10, undefined)).toEqual({ events: [], last: null, caughtUp: true }); // opens the window at 0
    const fetchesBefore = source.fetches;
    source.grow(event(1, 'invoice-a'), event(2, 'payout-b'), event(3, 'invoice-c', 'Paid'));
    const filters: (AllFilter | undefined)[] = [
      undefined,
      { streamNamePrefixes: ['invoice-'] },
      { eventTypePrefixes: ['Paid'] },
      { streamNamePrefixes: ['refund-'] },
    ];
    const pages = await Promise.all(filters.map((f) => window.page(start, 10, f)));
    expect(source.fetches - fetchesBefore).toBe(1);
    expect(pages.map((p) => p!.events.map((e) => e.id))).toEqual([['e1', 'e2', 'e3'], ['e1', 'e3'], ['e3'], []]);
    // Every subscription moves past what it looked at, matching or not.
    for (const p of pages) expect(p).toMatchObject({ last: at(3), caughtUp: true });
    // Nothing new and no wake-up: answered from memory.
    expect(await window.page(at(3), 10, undefined)).toEqual({ events: [], last: null, caughtUp: true });
    expect(source.fetches - fetchesBefore).toBe(1);
  });

  it('pages by maxCount, says more follows when a fetch came back full, and leaves a cursor behind its memory to the caller', async () => {
    const source = fakeLog();
    const window = new LiveLogWindow(source.fetchAfter, source.generation, { fetchSize: 4, keep: 6, quietMs: 60_000 });
    await window.page(at(0), 10, undefined);
    source.grow(...Array.from({ length: 10 }, (_, i) => event(i + 1, 'invoice-x')));
    const first = await window.page(at(0), 3, undefined);
    expect(first).toMatchObject({ last: at(3), caughtUp: false });
    const second = await window.page(at(3), 3, undefined);
    expect(second!.events.map((e) => e.id)).toEqual(['e4']);
    expect(second!.caughtUp).toBe(false); // the fetch was full: more may follow
    const third = await window.page(at(4), 10, undefined);
    expect(third!.events.map((e) => e.id)).toEqual(['e5', 'e6', 'e7', 'e8']);
    await window.page(at(8), 10, undefined); // fetches 9, 10
    expect(window.size).toBe(6);
    expect(await window.page(at(2), 10, undefined)).toBeNull(); // before the window: read the log yourself
    expect((await window.page(at(4), 10, undefined))!.events.map((e) => e.id)).toEqual(['e5', 'e6', 'e7', 'e8', 'e9', 'e10']);
  });

  it('random logs and subscriptions: every subscription sees exactly its events, in order, once (seed printed)', async () => {
    const seed = fastCheckSeed('live-log-window');
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.tuple(fc.constantFrom('invoice-', 'payout-', 'refund-'), fc.constantFrom('Created', 'Paid')), { minLength: 1, maxLength: 120 }),
        fc.array(fc.integer({ min: 1, max: 30 }), { minLength: 1, maxLength: 12 }),
        fc.integer({ min: 1, max: 20 }),
        fc.integer({ min: 5, max: 60 }),
        async (shapes, growth, batch, keep) => {
          const source = fakeLog();
          const window = new LiveLogWindow(source.fetchAfter, source.generation, { fetchSize: 7, keep, quietMs: 60_000 });
          const filters: (AllFilter | undefined)[] = [undefined, { streamNamePrefixes: ['invoice-'] }, { eventTypePrefixes: ['Paid'] }];
          const cursors = filters.map(() => at(0));
          const received = filters.map(() => [] as string[]);
          let n = 0;
          const drain = async (i: number) => {
            for (;;) {
              const page = await window.page(cursors[i]!, batch, filters[i]);
              const got = page ?? readItself(source.log, cursors[i]!, batch, filters[i]);
              received[i]!.push(...got.events.map((e) => e.id));
              if (got.last) cursors[i] = got.last;
              if (got.caughtUp && !got.last) return;
            }
          };
          for (const size of growth) {
            source.grow(...shapes.slice(n, n + size).map(([stream, type], k) => event(n + k + 1, `${stream}${k}`, type)));
            n = Math.min(shapes.length, n + size);
            await Promise.all(filters.map((_, i) => drain(i)));
          }
          filters.forEach((filter, i) => expect(received[i]).toEqual(source.log.filter((e) => matchesFilter(filter, e)).map((e) => e.id)));
        },
      ),
      { seed, numRuns: 150 },
    );
  });
});

/** What a subscription behind the window does: its own read of the log. */
function readItself(log: readonly RecordedEvent[], cursor: Position, maxCount: number, filter: AllFilter | undefined) {
  const looked = log.filter((e) => comparePositions(e.position, cursor) > 0).slice(0, maxCount);
  return { events: looked.filter((e) => matchesFilter(filter, e)), last: looked[looked.length - 1]?.position ?? null, caughtUp: looked.length < maxCount };
}

describe('LiveLogWindow in the PostgreSQL store: live subscriptions under concurrent appends', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase({ poolSize: 30 });
  });
  afterAll(async () => {
    await db.drop();
  });

  /** Counts the reads of the global log (not of one stream) the pool is asked for. */
  function countingLogReads(pool: Pool): { pool: Pool; reads: () => number } {
    let reads = 0;
    const original = pool.query.bind(pool) as (...args: unknown[]) => unknown;
    const counting = Object.create(pool) as Pool;
    (counting as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
      const first = args[0] as string | { text?: string };
      const text = typeof first === 'string' ? first : (first?.text ?? '');
      if (/FROM events\s+WHERE \(transaction_id, global_position\) >/.test(text) || /FROM \(SELECT \*,/.test(text)) reads++;
      return original(...args);
    };
    return { pool: counting, reads: () => reads };
  }

  async function run(sharedLiveReads: boolean): Promise<{ reads: number; ok: boolean }> {
    const counted = countingLogReads(db.pool);
    const store = new PostgresEventStore(counted.pool, { pollIntervalMs: 5, sharedLiveReads });
    const run = randomUUID().slice(0, 8);
    const filters: (AllFilter | undefined)[] = [
      undefined,
      { streamNamePrefixes: [`inv${run}-`] },
      { streamNamePrefixes: [`pay${run}-`] },
      { eventTypePrefixes: ['Paid'] },
      { streamNamePrefixes: [`inv${run}-`], eventTypePrefixes: ['Created'] },
      { streamNamePrefixes: [`ref${run}-`] },
      { streamNamePrefixes: [`inv${run}-`, `pay${run}-`] },
      { eventTypePrefixes: ['Nothing'] },
    ];
    const head = await store.headPosition();
    const received = filters.map(() => [] as RecordedEvent[]);
    const subscriptions = filters.map((filter) => store.subscribeToAll({ after: head ?? 'start', filter, maxBatchSize: 50 }));
    const consuming = subscriptions.map(async (subscription, i) => {
      for await (const batch of subscription) {
        received[i]!.push(...batch.events);
        // a consumer that takes its time now and then, as a projection's transaction does
        if (batch.events.length > 0 && i % 3 === 0) await new Promise((r) => setTimeout(r, 2));
      }
    });
    // 4 writers, 150 appends each, across categories and types.
    const prefixes = [`inv${run}-`, `pay${run}-`, `ref${run}-`];
    await Promise.all(
      Array.from({ length: 4 }, async (_, w) => {
        for (let i = 0; i < 150; i++) {
          const stream = `${prefixes[(w + i) % 3]}${w}-${i}`;
          await store.appendToStream(stream, [
            { id: randomUUID(), type: 'Created', data: { w, i } },
            { id: randomUUID(), type: i % 2 ? 'Paid' : 'Expired', data: { w, i } },
          ]);
        }
      }),
    );
    // Another test database's transaction on the shared cluster can hide the newest events for a moment.
    await visibleHead(db.pool, store);
    const all = (await store.readAll({ after: head ?? 'start', maxCount: 100_000 })).filter((e) => prefixes.some((p) => e.streamName.startsWith(p)));
    expect(all).toHaveLength(1200);
    const expected = filters.map((filter) => all.filter((e) => matchesFilter(filter, e)).map((e) => e.id));
    const deadline = Date.now() + 30_000;
    while (received.some((r, i) => r.filter((e) => prefixes.some((p) => e.streamName.startsWith(p))).length < expected[i]!.length) && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
    const reads = counted.reads();
    await store.close();
    await Promise.all(consuming);
    received.forEach((events, i) => expect(events.filter((e) => prefixes.some((p) => e.streamName.startsWith(p))).map((e) => e.id)).toEqual(expected[i]));
    return { reads, ok: true };
  }

  it('every subscription receives exactly its events in log order, with the shared window as without it, and the log is read far less often', async () => {
    const own = await run(false);
    const shared = await run(true);

    console.log(`reads of the log for 8 subscriptions and 1,200 events: ${own.reads} each reading for itself, ${shared.reads} with the shared window`);
    expect(shared.reads * 2).toBeLessThan(own.reads);
  });
});
