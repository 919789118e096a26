import { BalanceHistory, DailyVolumes } from './balance-history';
import { evolve, initialLedgerState } from './ledger';
import type { LedgerEntryPostedData, Posting } from './ledger';

let n = 0;
function entry(kind: LedgerEntryPostedData['kind'], occurredAt: string, postings: Posting[]): LedgerEntryPostedData {
  n += 1;
  return { entryId: `e-${n}`, kind, cause: `cause:${n}`, postings, occurredAt };
}
const payment = (at: string, net: number, fee: number) =>
  entry('payment_recorded', at, [
    { account: 'acquiring_clearing', amount: -(net + fee) },
    { account: 'pending', amount: net },
    { account: 'fees', amount: fee },
  ]);
const release = (at: string, amount: number) =>
  entry('hold_released', at, [
    { account: 'pending', amount: -amount },
    { account: 'available', amount },
  ]);
const reserve = (at: string, amount: number) =>
  entry('funds_reserved', at, [
    { account: 'available', amount: -amount },
    { account: 'reserved', amount },
  ]);

describe('BalanceHistory (the console plot, folded from the ledger entries)', () => {
  it('an empty ledger has no points', () => {
    const history = new BalanceHistory();
    expect(history.points()).toEqual([]);
    expect(history.entries).toBe(0);
  });

  it('one entry gives one point with the balances after it', () => {
    const history = new BalanceHistory();
    history.add(payment('2026-11-20T10:00:00.000Z', 97_000, 3_000));
    expect(history.points()).toEqual([{ at: '2026-11-20T10:00:00.000Z', entry: 1, pending: 97_000, available: 0, reserved: 0 }]);
  });

  it('a few entries are all kept, each with the exact balances after it (zeros included)', () => {
    const history = new BalanceHistory();
    history.add(payment('2026-11-20T10:00:00.000Z', 1_000, 1));
    history.add(release('2026-11-21T10:00:00.000Z', 1_000));
    history.add(reserve('2026-11-21T11:00:00.000Z', 1_000));
    expect(history.points().map((p) => [p.entry, p.pending, p.available, p.reserved])).toEqual([
      [1, 1_000, 0, 0],
      [2, 0, 1_000, 0],
      [3, 0, 0, 1_000],
    ]);
  });

  it("holds nothing per open hold: 20,000 payments held at once leave it as small as one (the balances are the ledger's own)", () => {
    // A merchant with a day's hold has every payment of the day open at once: a fold that kept the
    // ledger's open holds copied them at each entry (the console page froze the gateway for seconds).
    const held = (i: number): LedgerEntryPostedData => ({
      ...payment('2026-11-20T10:00:00.000Z', 1_000 + i, 10),
      hold: { invoiceId: `inv-${i}`, amount: 1_000 + i, releaseAt: '2026-11-21T10:00:00.000Z' },
    });
    const one = new BalanceHistory();
    one.add(held(0));
    const many = new BalanceHistory();
    let state = initialLedgerState();
    for (let i = 0; i < 20_000; i++) {
      many.add(held(i));
      if (i < 300) state = evolve(state, { type: 'LedgerEntryPosted', data: held(i) });
    }
    // Its kept points only (at most 400 of about 70 characters); the open holds alone would be 20,000 × 80.
    expect(JSON.stringify(many).length).toBeLessThan(JSON.stringify(one).length + 100_000);
    const check = new BalanceHistory();
    for (let i = 0; i < 300; i++) check.add(held(i));
    const last = check.points().at(-1)!;
    expect({ pending: last.pending, available: last.available, reserved: last.reserved }).toEqual({
      pending: state.balances.pending,
      available: state.balances.available,
      reserved: state.balances.reserved,
    });
  });

  it('negative balances (the fold does not judge them) are kept as they are', () => {
    const history = new BalanceHistory();
    history.add(
      entry('reservation_released', '2026-11-20T10:00:00.000Z', [
        { account: 'reserved', amount: -5 },
        { account: 'available', amount: 5 },
      ]),
    );
    expect(history.points()).toEqual([{ at: '2026-11-20T10:00:00.000Z', entry: 1, pending: 0, available: 5, reserved: -5 }]);
  });

  it.each([4, 5, 10, 400])('many entries (10 000) keep at most %i points: the first, the last, and exact balances in between', (maxPoints) => {
    const history = new BalanceHistory(maxPoints);
    const start = Date.parse('2026-01-01T00:00:00.000Z');
    const total = 10_000;
    for (let i = 0; i < total; i += 1) history.add(payment(new Date(start + i * 60_000).toISOString(), 100, 0));
    const points = history.points();
    expect(points.length).toBeLessThanOrEqual(maxPoints);
    expect(points.length).toBeGreaterThanOrEqual(Math.min(maxPoints, 3) - 1);
    expect(points[0]!.entry).toBe(1);
    expect(points[points.length - 1]!.entry).toBe(total);
    // Each kept point is the balance after its entry: entry k → k × 100 kopecks pending.
    for (const p of points) expect(p.pending).toBe(p.entry * 100);
    const entries = points.map((p) => p.entry);
    expect([...entries].sort((a, b) => a - b)).toEqual(entries);
    expect(new Set(entries).size).toBe(entries.length);
  });

  it('refuses a bound too small to hold the first and the last point', () => {
    expect(() => new BalanceHistory(3)).toThrow(RangeError);
  });
});

describe('DailyVolumes (payments per UTC day)', () => {
  it('counts payment_recorded entries and what they brought in (net + fee), per UTC day, newest first', () => {
    const volumes = new DailyVolumes();
    volumes.add(payment('2026-11-20T23:59:59.999Z', 97_000, 3_000));
    volumes.add(payment('2026-11-21T00:00:00.000Z', 485, 15));
    volumes.add(payment('2026-11-21T20:59:00.000Z', 1, 0));
    volumes.add(release('2026-11-21T21:00:00.000Z', 97_000));
    expect(volumes.newestFirst()).toEqual([
      { day: '2026-11-21', count: 2, amount: 501 },
      { day: '2026-11-20', count: 1, amount: 100_000 },
    ]);
  });

  it('no payments: no days', () => {
    const volumes = new DailyVolumes();
    volumes.add(reserve('2026-11-21T00:00:00.000Z', 5));
    expect(volumes.newestFirst()).toEqual([]);
  });
});
