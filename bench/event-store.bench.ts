import { randomUUID } from 'node:crypto';
import { createPool } from '#platform/database';
import { EventStore, EventToAppend, ExpectedRevision, JsonObject, Position, PostgresEventStore, START } from '#event-store';
import type { BenchContext, BenchSection } from './run';
import { nowMs, percentiles, startTimer } from './stats';
import { fixed, integer, Table } from './table';

/**
 * The PostgreSQL event store:
 *   1. single-event appends with an exact expected revision, by 1, 8 and 32
 *      concurrent writers, for a fixed duration after a warm-up; then a bulk load
 *      of 100-event appends (which also seeds the log for part 2);
 *   2. reading the whole log from the start: through a catch-up subscription
 *      (subscribeToAll) and by paging readAll alone.
 */
export const eventStoreBench: BenchSection = {
  name: 'event-store',
  description: 'PostgresEventStore: appends/s and latency by writer count; catch-up subscription and readAll speed',
  run,
};

interface Settings {
  readonly writerCounts: readonly number[];
  readonly warmupMs: number;
  readonly durationMs: number;
  /** Events in the bulk load, in appends of `bulkBatch` events, one new stream each. */
  readonly bulkEvents: number;
  readonly bulkBatch: number;
  readonly bulkWriters: number;
}

const FULL: Settings = {
  writerCounts: [1, 8, 32],
  warmupMs: 1_000,
  durationMs: 5_000,
  bulkEvents: 200_000,
  bulkBatch: 100,
  bulkWriters: 4,
};
const QUICK: Settings = { ...FULL, warmupMs: 500, durationMs: 2_000, bulkEvents: 20_000 };

/** A writer starts a new stream after this many appends (an invoice's life: created, then changes). */
const APPENDS_PER_STREAM = 10;

const APPEND_TITLE = 'Event store (PostgreSQL) appends';
const READ_TITLE = 'Event store (PostgreSQL) reading the whole log from the start';

async function run(context: BenchContext): Promise<Table[]> {
  const settings = context.quick ? QUICK : FULL;
  const appendRows: (string | number)[][] = [];
  for (const writers of settings.writerCounts) {
    context.progress(`event-store: 1-event appends, ${writers} writer(s), ${settings.warmupMs} ms warm-up + ${settings.durationMs} ms`);
    appendRows.push(await measureAppends(context.databaseUrl, writers, settings));
  }
  context.progress(`event-store: bulk load of ${settings.bulkEvents} events, ${settings.bulkBatch} per append, ${settings.bulkWriters} writers`);
  appendRows.push(await bulkLoad(context.databaseUrl, settings));

  const readRows = await measureReads(context.databaseUrl, context.progress);
  return [
    {
      title: APPEND_TITLE,
      headers: ['writers', 'events/append', 'events/s', 'p50 ms', 'p99 ms'],
      rows: appendRows,
      summary: appendRows.map(([writers, perAppend, perSecond, p50, p99]) => ({
        measure: `event store appends: ${writers} writer(s), ${perAppend} event(s) per append`,
        figure: `${perSecond} events/s`,
        p50: String(p50),
        p99: String(p99),
      })),
    },
    { title: READ_TITLE, headers: ['reader', 'batch', 'events', 'seconds', 'events/s'], rows: readRows },
  ];
}

/** Each measurement has its own pool (writers + a few) and store; closing the store ends the pool. */
function openStore(url: string, poolSize: number): { store: EventStore; pool: ReturnType<typeof createPool> } {
  const pool = createPool(url, { max: poolSize, applicationName: 'gateway-bench' });
  return { store: new PostgresEventStore(pool, { ownsPool: true }), pool };
}

const ms = fixed(2);

async function measureAppends(url: string, writers: number, settings: Settings): Promise<(string | number)[]> {
  const { store, pool } = openStore(url, writers + 4);
  try {
    // Start each measurement from a quiet disk; allowed to superusers (and pg_checkpoint) only.
    await pool.query('CHECKPOINT').catch(() => undefined);
    const windowStart = nowMs() + settings.warmupMs;
    const windowEnd = windowStart + settings.durationMs;
    const latencies: number[] = [];

    const writer = async (): Promise<void> => {
      let stream = '';
      let expected: ExpectedRevision = 'no_stream';
      for (let appended = 0; ; appended++) {
        if (appended % APPENDS_PER_STREAM === 0) {
          stream = `benchinvoice-${randomUUID()}`;
          expected = 'no_stream';
        }
        const event = invoiceEvent(stream, appended % APPENDS_PER_STREAM);
        const started = nowMs();
        const result = await store.appendToStream(stream, [event], { expectedRevision: expected });
        const ended = nowMs();
        expected = result.nextExpectedRevision;
        // Count what completes inside the window: throughput is completions per second.
        if (ended >= windowStart && ended < windowEnd) latencies.push(ended - started);
        if (ended >= windowEnd) return;
      }
    };
    await Promise.all(Array.from({ length: writers }, writer));

    const [p50, p99] = percentiles(latencies, [50, 99]);
    return [writers, 1, integer(latencies.length / (settings.durationMs / 1000)), ms(p50!), ms(p99!)];
  } finally {
    await store.close();
  }
}

/** Appends of `bulkBatch` events, each to a new stream; leaves `bulkEvents` more events in the log. */
async function bulkLoad(url: string, settings: Settings): Promise<(string | number)[]> {
  const { store } = openStore(url, settings.bulkWriters + 2);
  try {
    const appends = Math.ceil(settings.bulkEvents / settings.bulkBatch);
    const latencies: number[] = [];
    let next = 0;
    let events = 0;
    const writer = async (): Promise<void> => {
      while (next < appends) {
        next++;
        const stream = `benchinvoice-${randomUUID()}`;
        const batch = Array.from({ length: settings.bulkBatch }, (_, i) => invoiceEvent(stream, i));
        const started = nowMs();
        await store.appendToStream(stream, batch, { expectedRevision: 'no_stream' });
        latencies.push(nowMs() - started);
        events += batch.length;
      }
    };
    const elapsed = startTimer();
    await Promise.all(Array.from({ length: settings.bulkWriters }, writer));
    const seconds = elapsed() / 1000;
    const [p50, p99] = percentiles(latencies, [50, 99]);
    return [settings.bulkWriters, settings.bulkBatch, integer(events / seconds), ms(p50!), ms(p99!)];
  } finally {
    await store.close();
  }
}

async function measureReads(url: string, progress: (message: string) => void): Promise<(string | number)[][]> {
  const { store, pool } = openStore(url, 4);
  try {
    const total = Number((await pool.query<{ n: string }>('SELECT count(*) AS n FROM events')).rows[0]!.n);
    // What autovacuum would have done by now: fresh statistics, hint bits set, so
    // that the first reader does not pay for them and the readers compare fairly.
    await pool.query('VACUUM (ANALYZE) events');
    const rows: (string | number)[][] = [];
    const secs = fixed(2);

    progress(`event-store: catch-up subscription over ${total} events`);
    {
      const batchSize = 500; // the default of subscribeToAll
      const elapsed = startTimer();
      const subscription = store.subscribeToAll({ after: START });
      let seen = 0;
      for await (const batch of subscription) {
        seen += batch.events.length;
        if (seen >= total || batch.caughtUp) break;
      }
      const seconds = elapsed() / 1000;
      await subscription.unsubscribe();
      if (seen !== total) throw new Error(`subscription delivered ${seen} events, the log holds ${total}`);
      rows.push(['subscribeToAll', batchSize, seen, secs(seconds), integer(seen / seconds)]);
    }

    for (const pageSize of [500, 1000]) {
      progress(`event-store: readAll in pages of ${pageSize} over ${total} events`);
      const elapsed = startTimer();
      let after: Position | typeof START = START;
      let seen = 0;
      for (;;) {
        const page = await store.readAll({ after, maxCount: pageSize });
        seen += page.length;
        if (page.length < pageSize) break;
        after = page[page.length - 1]!.position;
      }
      const seconds = elapsed() / 1000;
      if (seen !== total) throw new Error(`readAll returned ${seen} events, the log holds ${total}`);
      rows.push(['readAll', pageSize, seen, secs(seconds), integer(seen / seconds)]);
    }
    return rows;
  } finally {
    await store.close();
  }
}

/**
 * A realistic small event, ~330 bytes of JSON data: an invoice created (the
 * first event of a stream) or changed (the others).
 */
function invoiceEvent(stream: string, revision: number): EventToAppend {
  const invoiceId = stream.slice('invoice-'.length);
  const amount = 2 * (500 + ((revision * 7_919) % 45_000));
  const data: JsonObject = {
    invoiceId,
    merchantId: 'mer_7Hq2Kd9xLmP4',
    amount: { minor: amount, currency: 'EUR' },
    description: `Order #${100_000 + revision} - 3 items`,
    customer: { email: 'jane.doe@example.com', reference: 'cus_0001842' },
    lineItems: [{ sku: 'SKU-10442', quantity: 2, unitMinor: amount / 2 }],
    dueAt: '2025-07-31T00:00:00.000Z',
  };
  return {
    id: randomUUID(),
    type: revision === 0 ? 'InvoiceCreated' : 'InvoiceAmended',
    data,
    metadata: { correlationId: invoiceId },
  };
}
