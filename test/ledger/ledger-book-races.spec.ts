/**
 * A stale ledger decision that loses a race, on PostgreSQL with writers on pools of
 * their own. Writer A loads the ledger and decides an entry; before its append lands,
 * other writers post another cause and then the same cause. A's append is refused by
 * the store's unique entry id (the entry is not where A expected to put it). That is
 * ordinary concurrency: the book re-reads the ledger, finds the entry of that cause
 * with the same content, and it is logged at info with a metric, not as an error. Error
 * level stays for a refused entry whose cause the log holds with other content (money
 * could be wrong); a repeat the book's own check missed is a warning. The lines are
 * what GatewayMetrics' ledger observer logs, recorded from its logger.
 */
import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { EventStore, EventToAppend, AppendResult, ExpectedRevision, PostgresEventStore, PostgresSnapshotStore } from '#event-store';
import { foldLedger, LedgerEvent, LedgerId, ledgerStreamName, RECENT_CAUSES_KEPT, hasRecentCause } from '#ledger';
import { LedgerBook, LedgerCauseIndex, LedgerRequest } from '#payments/ledger';
import { GatewayMetrics } from '#payments/observability';
import { createPool } from '#platform/database';
import type { Pool } from 'pg';
import { appendLedgerHistory, freshPayments } from '../support/ledger-history';
import { createTestDatabase, TestDatabase } from '../support/test-database';

interface LogLine {
  readonly level: number;
  readonly msg: string;
  readonly [field: string]: unknown;
}
const INFO = 30;
const WARN = 40;
const ERROR = 50;

/** A PostgreSQL store whose next append waits, once asked, until released: the moment between a decision and its append. */
class HeldAppends extends PostgresEventStore {
  private held: { reached: () => void; release: Promise<void> } | null = null;

  /** The next append waits for `release`; the answer resolves once an append is waiting. */
  holdNextAppend(release: Promise<void>): Promise<void> {
    return new Promise((reached) => (this.held = { reached, release }));
  }

  override async appendToStream(
    streamName: string,
    events: readonly EventToAppend[],
    options: { expectedRevision?: ExpectedRevision } = {},
  ): Promise<AppendResult> {
    const held = this.held;
    this.held = null;
    if (held) {
      held.reached();
      await held.release;
    }
    return super.appendToStream(streamName, events, options);
  }
}

let db: TestDatabase;
const pools: Pool[] = [];
const stores: EventStore[] = [];

beforeAll(async () => {
  db = await createTestDatabase({ poolSize: 4 });
});
afterAll(async () => {
  for (const store of stores) await store.close();
  for (const pool of pools) await pool.end();
  await db.drop();
});

/** A writer of its own: a pool (its own connections), a store and a book, as another process has. */
function writer<S extends PostgresEventStore>(
  makeStore: (pool: Pool) => S,
  options: { causes?: LedgerCauseIndex } = {},
): { store: S; book: LedgerBook; lines: LogLine[]; metrics: GatewayMetrics } {
  const pool = createPool(db.url, { max: 4, applicationName: 'ledger-race-test' });
  pools.push(pool);
  const store = makeStore(pool);
  stores.push(store);
  const lines: LogLine[] = [];
  const log = pino({ level: 'debug' }, { write: (line: string) => void lines.push(JSON.parse(line) as LogLine) });
  const metrics = new GatewayMetrics({ defaultMetrics: false }, log);
  const book = new LedgerBook(store, new PostgresSnapshotStore(pool), { causes: options.causes, observer: metrics.ledgerObserver });
  return { store, book, lines, metrics };
}

const newLedger = (): LedgerId => ({ accountId: randomUUID(), mode: 'live' });
let tick = Date.parse('2026-02-01T00:00:00Z');
const at = () => new Date((tick += 1000)).toISOString();
const payment = (invoiceId: string, netAmount: number): LedgerRequest => ({
  type: 'RecordPayment',
  invoiceId,
  netAmount,
  feeAmount: 10,
  releaseAt: null,
  at: at(),
});

async function entriesOf(ledger: LedgerId): Promise<LedgerEvent[]> {
  const reader = new PostgresEventStore(db.pool);
  try {
    return (await reader.readStream(ledgerStreamName(ledger))).map((e) => ({ type: 'LedgerEntryPosted', data: e.data }) as LedgerEvent);
  } finally {
    await reader.close();
  }
}

/** The value of a counter of the metrics' text exposition, with its labels as written. */
async function counter(metrics: GatewayMetrics, series: string): Promise<number> {
  const text = await metrics.registry.metrics();
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? NaN : Number(line.slice(series.length + 1));
}

/**
 * A posts `stale` on a ledger as it stands; while its append waits, `others` post in
 * turn (each on a writer of its own); then A's append goes on. A's answer.
 */
async function loseARace(a: ReturnType<typeof writer<HeldAppends>>, stale: (book: LedgerBook) => Promise<unknown>, others: (() => Promise<unknown>)[]) {
  let release!: () => void;
  const reached = a.store.holdNextAppend(new Promise<void>((r) => (release = r)));
  const answer = stale(a.book);
  await reached;
  for (const other of others) await other();
  release();
  return answer;
}

describe('a stale ledger decision that loses a race', () => {
  it('to a concurrent post of the same cause: re-read, logged at info with a metric, balances right', async () => {
    const a = writer((pool) => new HeldAppends(pool));
    const b = writer((pool) => new PostgresEventStore(pool));
    const ledger = newLedger();
    await b.book.post(ledger, payment('opening', 5_000));

    const answer = (await loseARace(a, (book) => book.post(ledger, payment('race', 1_000)), [
      () => b.book.post(ledger, payment('other', 2_000)),
      () => b.book.post(ledger, payment('race', 1_000)),
    ])) as Awaited<ReturnType<LedgerBook['post']>>;

    // A is answered as a repeat, with the ledger as it now is.
    expect(answer.entry).toBeNull();
    expect(hasRecentCause(answer.state, 'payment:race')).toBe(true);
    expect(answer.state.balances.available).toBe(8_000);

    const entries = await entriesOf(ledger);
    expect(entries.map((e) => e.data.cause)).toEqual(['payment:opening', 'payment:other', 'payment:race']);
    expect(foldLedger(entries).balances).toMatchObject({ available: 8_000, fees: 30, acquiring_clearing: -8_030 });

    expect(a.lines.filter((l) => l.level >= WARN)).toEqual([]);
    expect(a.lines).toContainEqual(
      expect.objectContaining({ level: INFO, cause: 'payment:race', msg: expect.stringContaining('already posted by a concurrent writer') }),
    );
    expect(await counter(a.metrics, 'ledger_duplicates_stopped_by_store_total{outcome="concurrent"}')).toBe(1);
    expect(await counter(a.metrics, 'ledger_duplicates_stopped_by_store_total{outcome="differs"}')).toBe(0);
  });

  it('a reservation decided on a stale state is answered from the log, at info', async () => {
    const a = writer((pool) => new HeldAppends(pool));
    const b = writer((pool) => new PostgresEventStore(pool));
    const ledger = newLedger();
    await b.book.post(ledger, payment('funds', 10_000));
    const reserve = (book: LedgerBook) => book.reserve(ledger, { type: 'ReserveFunds', reservationId: 'refund-1', purpose: 'refund', amount: 4_000, at: at() });

    const answer = await loseARace(a, reserve, [() => b.book.post(ledger, payment('more', 1_000)), () => reserve(b.book)]);

    expect(answer).toEqual({ outcome: 'reserved' });
    const entries = await entriesOf(ledger);
    expect(entries.filter((e) => e.data.cause === 'reserve:refund-1')).toHaveLength(1);
    expect(foldLedger(entries).balances).toMatchObject({ available: 7_000, reserved: 4_000 });
    expect(a.lines.filter((l) => l.level >= WARN)).toEqual([]);
    expect(a.lines).toContainEqual(expect.objectContaining({ level: INFO, cause: 'reserve:refund-1' }));
  });

  it('the same cause posted with other content: logged at error, money could be wrong', async () => {
    const a = writer((pool) => new HeldAppends(pool));
    const b = writer((pool) => new PostgresEventStore(pool));
    const ledger = newLedger();
    await b.book.post(ledger, payment('opening', 5_000));

    const answer = (await loseARace(a, (book) => book.post(ledger, payment('race', 1_000)), [
      () => b.book.post(ledger, payment('other', 2_000)),
      () => b.book.post(ledger, payment('race', 1_500)),
    ])) as Awaited<ReturnType<LedgerBook['post']>>;

    expect(answer.entry).toBeNull();
    const errors = a.lines.filter((l) => l.level >= ERROR);
    expect(errors).toEqual([expect.objectContaining({ cause: 'payment:race', msg: expect.stringContaining('money could be wrong') })]);
    expect(await counter(a.metrics, 'ledger_duplicates_stopped_by_store_total{outcome="differs"}')).toBe(1);
    // The log holds the one entry of the cause, as the other writer posted it.
    expect(foldLedger(await entriesOf(ledger)).balances.available).toBe(8_500);
  });

  it("a repeat the book's own check missed (an index that lies) is a warning, not a concurrent post", async () => {
    /** Claims to hold every entry of every ledger and to know no cause. */
    const lying: LedgerCauseIndex = { find: async () => ({ revision: null, completeThrough: 1_000_000n }) };
    const a = writer((pool) => new HeldAppends(pool), { causes: lying });
    const ledger = newLedger();
    const first = payment('first', 100);
    await a.book.post(ledger, first);
    await appendLedgerHistory(a.store, ledger, freshPayments('later', RECENT_CAUSES_KEPT + 100, at), await entriesOf(ledger));

    expect((await a.book.post(ledger, first)).entry).toBeNull();
    expect(a.lines.filter((l) => l.level >= ERROR)).toEqual([]);
    expect(a.lines).toContainEqual(expect.objectContaining({ level: WARN, cause: 'payment:first' }));
    expect(await counter(a.metrics, 'ledger_duplicates_stopped_by_store_total{outcome="missed"}')).toBe(1);
    expect((await entriesOf(ledger)).filter((e) => e.data.cause === 'payment:first')).toHaveLength(1);
  });

  it('many writers posting the same causes at once: no error or warning, every cause once, balances right', async () => {
    const writers = Array.from({ length: 4 }, () => writer((pool) => new PostgresEventStore(pool)));
    const ledger = newLedger();
    const expected = new Map<string, number>();
    for (let round = 0; round < 15; round++) {
      const posts: Promise<unknown>[] = [];
      for (let i = 0; i < 3; i++) {
        const invoice = `r${round}-${i}`;
        const amount = 100 * (round + 1) + i;
        expected.set(`payment:${invoice}`, amount);
        // Each cause from every writer, the writers' posts interleaved.
        for (const w of writers) posts.push(w.book.post(ledger, payment(invoice, amount)));
      }
      await Promise.all(posts);
    }
    const entries = await entriesOf(ledger);
    expect(entries.map((e) => e.data.cause).sort()).toEqual([...expected.keys()].sort());
    const total = [...expected.values()].reduce((s, v) => s + v, 0);
    expect(foldLedger(entries).balances).toMatchObject({ available: total, fees: 10 * expected.size });
    expect(writers.flatMap((w) => w.lines).filter((l) => l.level >= WARN)).toEqual([]);
  });
});
