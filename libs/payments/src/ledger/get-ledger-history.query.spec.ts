import type { LedgerEntryPostedData, LedgerId } from '#ledger';
import { GetLedgerHistory, GetLedgerHistoryHandler, LEDGER_HISTORIES_KEPT } from './get-ledger-history.query';
import type { LedgerBook } from './ledger-book';

/** A ledger stream in memory, as LedgerBook.forEachEntry reads it; how many entries each read handed over. */
function streams() {
  const entries = new Map<string, LedgerEntryPostedData[]>();
  const read: number[] = [];
  /** The next read fails after handing over this many entries (0: before the first). */
  let failAfter: number | null = null;
  const book = {
    async forEachEntry(ledger: LedgerId, visit: (entry: LedgerEntryPostedData) => boolean, from = 0n) {
      await Promise.resolve();
      const failsAt = failAfter;
      failAfter = null;
      if (failsAt === 0) throw new Error('the store went away');
      const stream = entries.get(`${ledger.mode}_${ledger.accountId}`) ?? [];
      let n = 0;
      for (const entry of stream.slice(Number(from))) {
        if (n === failsAt) throw new Error('the store went away');
        n++;
        if (!visit(entry)) break;
      }
      read.push(n);
    },
  };
  const append = (ledger: LedgerId, count: number) => {
    const stream = entries.get(`${ledger.mode}_${ledger.accountId}`) ?? [];
    entries.set(`${ledger.mode}_${ledger.accountId}`, stream);
    for (let i = 0; i < count; i++) {
      const n = stream.length;
      // A payment a day, some reservations: pending, available and reserved all move; days across a month.
      const paid = n % 3 !== 2;
      stream.push({
        entryId: `e${n}`,
        kind: paid ? 'payment_recorded' : 'funds_reserved',
        cause: `c${n}`,
        occurredAt: new Date(Date.UTC(2026, 0, 1) + n * 6 * 3_600_000).toISOString(),
        postings: paid
          ? [
              { account: 'acquiring_clearing', amount: -(1000 + n) },
              { account: n % 2 ? 'pending' : 'available', amount: 1000 + n },
            ]
          : [
              { account: 'available', amount: -(50 + n) },
              { account: 'reserved', amount: 50 + n },
            ],
      } as unknown as LedgerEntryPostedData);
    }
  };
  return { book: book as unknown as LedgerBook, append, read, failNextRead: (after = 0) => (failAfter = after) };
}

const merchant: LedgerId = { accountId: '6b0f7f4e-1f1c-4d5e-9a3c-0b8f3f1a2c11', mode: 'live' };

describe('GetLedgerHistory', () => {
  // Every view of the console folded the whole stream: seconds per view at 100,000 entries, on the serving process.
  it('a later view folds only the entries appended since, and answers as a fold of every entry does, thinning included', async () => {
    const { book, append, read } = streams();
    const handler = new GetLedgerHistoryHandler(book);
    append(merchant, 37);
    const first = await handler.execute(new GetLedgerHistory(merchant, 8));
    append(merchant, 45);
    const second = await handler.execute(new GetLedgerHistory(merchant, 8));
    const third = await handler.execute(new GetLedgerHistory(merchant, 8));
    expect(read).toEqual([37, 45, 0]);
    expect(first.entries).toBe(37);
    expect(second).toEqual(await new GetLedgerHistoryHandler(book).execute(new GetLedgerHistory(merchant, 8)));
    expect(third).toEqual(second);
    expect(second.entries).toBe(82);
    expect(second.points.length).toBeLessThanOrEqual(8);
  });

  it('views at once take turns on one fold; a fold that failed is started again; few ledgers are kept', async () => {
    const { book, append, read, failNextRead } = streams();
    const handler = new GetLedgerHistoryHandler(book);
    append(merchant, 20);
    const [a, b] = await Promise.all([handler.execute(new GetLedgerHistory(merchant)), handler.execute(new GetLedgerHistory(merchant))]);
    expect(read).toEqual([20, 0]);
    expect(b).toEqual(a);

    failNextRead();
    append(merchant, 5);
    await expect(handler.execute(new GetLedgerHistory(merchant))).rejects.toThrow('the store went away');
    expect((await handler.execute(new GetLedgerHistory(merchant))).entries).toBe(25);
    expect(read.slice(2)).toEqual([25]);

    const others = Array.from({ length: LEDGER_HISTORIES_KEPT }, (_, i): LedgerId => ({ accountId: `other-${i}`, mode: 'test' }));
    for (const other of others) await handler.execute(new GetLedgerHistory(other));
    read.length = 0;
    await handler.execute(new GetLedgerHistory(merchant));
    expect(read).toEqual([25]);
  });

  it('a fold that failed part-way is not kept; the test and live ledgers of one account are folded apart', async () => {
    const { book, append, failNextRead } = streams();
    const handler = new GetLedgerHistoryHandler(book);
    const sandbox: LedgerId = { ...merchant, mode: 'test' };
    const whole = async (ledger: LedgerId) => new GetLedgerHistoryHandler(book).execute(new GetLedgerHistory(ledger, 8));
    append(merchant, 10);
    append(sandbox, 3);
    await handler.execute(new GetLedgerHistory(merchant, 8));
    append(merchant, 10);
    // Four of the ten new entries folded, then the read fails: the next view must not add to that half-advanced fold.
    failNextRead(4);
    await expect(handler.execute(new GetLedgerHistory(merchant, 8))).rejects.toThrow('the store went away');
    const live = await handler.execute(new GetLedgerHistory(merchant, 8));
    expect(live.entries).toBe(20);
    expect(live).toEqual(await whole(merchant));
    const test = await handler.execute(new GetLedgerHistory(sandbox, 8));
    expect(test.entries).toBe(3);
    expect(test).toEqual(await whole(sandbox));
  });
});
