import { decide, foldLedger, initialLedgerState, LEDGER_ACCOUNTS, LedgerCommand, LedgerEvent, LedgerState } from './ledger';
import { ledgerDecider } from './ledger-decider';
import {
  balanceMovementsOf,
  EntryFact,
  HOLD_RELEASE_GRACE_MS,
  PaidInvoiceFact,
  PaidPayoutFact,
  reconcile,
  ReconciliationInput,
  StatementBalances,
  SucceededRefundFact,
  TrialBalanceFold,
  zeroAccountBalances,
} from './finance-reports';
import { seededRandom } from '../../../test/support/test-seed';

/** A random but valid ledger history: payments (some held), releases, refunds and payouts reserved, settled or released. */
function randomHistory(testName: string, length: number): LedgerEvent[] {
  const random = seededRandom(testName);
  let state: LedgerState = initialLedgerState();
  const events: LedgerEvent[] = [];
  let t = Date.parse('2031-01-01T00:00:00Z');
  for (let i = 0; events.length < length; i++) {
    t += random.int(1, 60_000);
    const at = new Date(t).toISOString();
    const holds = Object.keys(state.holds.toRecord());
    const reservations = Object.entries(state.reservations);
    const choice = random.int(0, 5);
    let command: LedgerCommand;
    if (choice === 0 || (holds.length === 0 && reservations.length === 0 && state.balances.available === 0)) {
      command = {
        type: 'RecordPayment',
        entryId: `e${i}`,
        at,
        invoiceId: `inv-${i}`,
        netAmount: random.int(0, 500_000),
        feeAmount: random.int(0, 20_000) + 1,
        releaseAt: random.chance(0.5) ? at : null,
      };
    } else if (choice === 1 && holds.length > 0) {
      command = { type: 'ReleaseHold', entryId: `e${i}`, at, invoiceId: random.pick(holds) };
    } else if (choice <= 3 && state.balances.available > 0) {
      const purpose = random.chance(0.5) ? 'refund' : 'payout';
      command = { type: 'ReserveFunds', entryId: `e${i}`, at, reservationId: `r${i}`, purpose, amount: random.int(1, state.balances.available) };
    } else if (reservations.length > 0) {
      const [id, r] = random.pick(reservations);
      command = random.chance(0.7)
        ? { type: 'SettleReservation', entryId: `e${i}`, at, reservationId: id, feeAmount: r.purpose === 'payout' ? random.int(0, r.amount) : 0 }
        : { type: 'ReleaseReservation', entryId: `e${i}`, at, reservationId: id };
    } else continue;
    const decided = ledgerDecider.decide(command, state);
    if (!Array.isArray(decided)) continue;
    for (const e of decided) {
      events.push(e);
      state = foldLedger([e], state);
    }
  }
  return events;
}

describe('StatementBalances', () => {
  it('opening + movements = closing, and each entry’s running balances are the fold up to it (seeded history)', () => {
    const events = randomHistory('statement balances', 400);
    const cut = 150;
    const opening = foldLedger(events.slice(0, cut)).balances;
    const statement = new StatementBalances(opening);
    events.slice(cut).forEach((e, i) => {
      const after = statement.apply(e.data.postings);
      expect(after).toEqual(foldLedger(events.slice(0, cut + i + 1)).balances);
    });
    const closing = statement.closing();
    const movements = statement.movements();
    for (const a of LEDGER_ACCOUNTS) expect(opening[a] + movements[a]).toBe(closing[a]);
    expect(closing).toEqual(foldLedger(events).balances);
    expect(statement.entries()).toBe(events.length - cut);
  });

  it('refuses a posting to an account the ledger does not have', () => {
    expect(() => new StatementBalances(zeroAccountBalances()).apply([{ account: 'cash', amount: 1 }])).toThrow(/unknown account cash/);
  });
});

describe('balanceMovementsOf', () => {
  it("gives an entry's postings to the merchant's buckets, in order, and leaves the system accounts out", () => {
    const entry = { entryId: 'e1', kind: 'payment_recorded', cause: 'payment:i1', occurredAt: '2026-01-01T00:00:00.000Z' };
    const postings = [
      { account: 'acquiring_clearing', amount: -10_000 },
      { account: 'pending', amount: 9_700 },
      { account: 'fees', amount: 300 },
      { account: 'available', amount: 0 },
    ];
    expect(balanceMovementsOf({ ...entry, postings })).toEqual([
      { ...entry, bucket: 'pending', amount: 9_700 },
      { ...entry, bucket: 'available', amount: 0 },
    ]);
  });
});

describe('TrialBalanceFold', () => {
  it('per ledger and overall debits equal credits, and each account’s balance is the ledger’s fold', () => {
    const a = randomHistory('trial balance a', 300);
    const b = randomHistory('trial balance b', 200);
    const fold = new TrialBalanceFold();
    for (const e of a) fold.apply({ accountId: 'acc-a', mode: 'live' }, e.data.postings);
    for (const e of b) fold.apply({ accountId: 'acc-b', mode: 'test' }, e.data.postings);
    const tb = fold.result();
    expect(tb.ledgers.map((l) => `${l.mode}/${l.accountId}`)).toEqual(['live/acc-a', 'test/acc-b']);
    expect(tb.balanced).toBe(true);
    expect(tb.debits).toBe(tb.credits);
    expect(tb.balance).toBe(0);
    expect(tb.entries).toBe(500);
    for (const [ledger, events] of [
      [tb.ledgers[0]!, a],
      [tb.ledgers[1]!, b],
    ] as const) {
      const balances = foldLedger(events).balances;
      expect(ledger.debits).toBe(ledger.credits);
      expect(ledger.debits).toBeGreaterThan(0);
      for (const row of ledger.accounts) expect(row.balance).toBe(balances[row.account]);
    }
  });

  it('shows an unbalanced entry (a corrupted log) as a ledger whose debits and credits differ', () => {
    const fold = new TrialBalanceFold();
    fold.apply({ accountId: 'x', mode: 'live' }, [
      { account: 'acquiring_clearing', amount: -100 },
      { account: 'pending', amount: 90 },
    ]);
    const tb = fold.result();
    expect(tb.balanced).toBe(false);
    expect(tb.ledgers[0]).toMatchObject({ debits: 100, credits: 90, balance: -10 });
  });
});

describe('reconcile', () => {
  const ledger = { accountId: 'acc-1', mode: 'live' };
  const post = (command: LedgerCommand, state: LedgerState): { entry: EntryFact; state: LedgerState } => {
    const events = decide(command, state) as LedgerEvent[];
    const e = events[0]!.data;
    return {
      entry: { ...ledger, entryId: e.entryId, kind: e.kind, cause: e.cause, occurredAt: e.occurredAt, postings: e.postings },
      state: foldLedger(events, state),
    };
  };

  /** A clean history: a held payment released, a payment without hold, a refund and a payout settled. */
  function clean(): ReconciliationInput {
    let state = initialLedgerState();
    const entries: EntryFact[] = [];
    const run = (command: LedgerCommand) => {
      const r = post(command, state);
      state = r.state;
      entries.push(r.entry);
    };
    run({
      type: 'RecordPayment',
      entryId: 'e1',
      at: '2031-01-01T10:00:00.000Z',
      invoiceId: 'inv-1',
      netAmount: 96_500,
      feeAmount: 3_500,
      releaseAt: '2031-01-02T10:00:00.000Z',
    });
    run({ type: 'RecordPayment', entryId: 'e2', at: '2031-01-01T11:00:00.000Z', invoiceId: 'inv-2', netAmount: 48_000, feeAmount: 2_000, releaseAt: null });
    run({ type: 'ReleaseHold', entryId: 'e3', at: '2031-01-02T10:00:05.000Z', invoiceId: 'inv-1' });
    run({ type: 'ReserveFunds', entryId: 'e4', at: '2031-01-02T11:00:00.000Z', reservationId: 'rf_1', purpose: 'refund', amount: 10_000 });
    run({ type: 'SettleReservation', entryId: 'e5', at: '2031-01-02T11:00:01.000Z', reservationId: 'rf_1' });
    run({ type: 'ReserveFunds', entryId: 'e6', at: '2031-01-02T12:00:00.000Z', reservationId: 'po_7', purpose: 'payout', amount: 50_000 });
    run({ type: 'SettleReservation', entryId: 'e7', at: '2031-01-02T12:30:00.000Z', reservationId: 'po_7', feeAmount: 500 });
    const paidInvoices: PaidInvoiceFact[] = [
      { ...ledger, invoiceId: 'inv-1', netAmount: 96_500, feeAmount: 3_500, paidAt: '2031-01-01T10:00:00.000Z', availableAt: '2031-01-02T10:00:00.000Z' },
      { ...ledger, invoiceId: 'inv-2', netAmount: 48_000, feeAmount: 2_000, paidAt: '2031-01-01T11:00:00.000Z', availableAt: null },
    ];
    const succeededRefunds: SucceededRefundFact[] = [{ ...ledger, refundId: 'rf_1', invoiceId: 'inv-2', amount: 10_000 }];
    const paidPayouts: PaidPayoutFact[] = [{ ...ledger, payoutId: '7', reservationId: 'po_7', amount: 50_000, feeAmount: 500 }];
    // Reservations are not reconciled entries: only the kinds the report reads.
    return { to: '2031-01-03T00:00:00.000Z', paidInvoices, succeededRefunds, paidPayouts, entries: entries.filter((e) => e.kind !== 'funds_reserved') };
  }

  it('finds no difference in a clean history', () => {
    expect(reconcile(clean())).toEqual([]);
  });

  it('lists a paid invoice, a refund and a payout without their entries, with their ids', () => {
    const input = clean();
    const found = reconcile({ ...input, entries: input.entries.filter((e) => !['payment:inv-2', 'settle:rf_1', 'settle:po_7'].includes(e.cause)) });
    expect(found.map((d) => [d.kind, d.flow, d.flowId, d.cause, d.entryId])).toEqual([
      ['missing_entry', 'payout', '7', 'settle:po_7', null],
      ['missing_entry', 'invoice', 'inv-2', 'payment:inv-2', null],
      ['missing_entry', 'refund', 'rf_1', 'settle:rf_1', null],
    ]);
  });

  it('a held payment whose entry is missing is one difference: its release still pairs with the invoice’s hold', () => {
    const input = clean();
    expect(reconcile({ ...input, entries: input.entries.filter((e) => e.cause !== 'payment:inv-1') }).map((d) => [d.kind, d.flowId])).toEqual([
      ['missing_entry', 'inv-1'],
    ]);
  });

  it('finds amounts that differ: payment, refund, payout fee', () => {
    const input = clean();
    const found = reconcile({
      ...input,
      paidInvoices: input.paidInvoices.map((i) => (i.invoiceId === 'inv-2' ? { ...i, feeAmount: 2_001 } : i)),
      succeededRefunds: [{ ...input.succeededRefunds[0]!, amount: 9_999 }],
      paidPayouts: [{ ...input.paidPayouts[0]!, feeAmount: 600 }],
    });
    expect(found.map((d) => [d.kind, d.flowId])).toEqual([
      ['amount_differs', '7'],
      ['amount_differs', 'inv-2'],
      ['amount_differs', 'rf_1'],
    ]);
    expect(found[0]).toMatchObject({ expected: { payouts_sent: 49_400, fees: 600 }, actual: { payouts_sent: 49_500, fees: 500 } });
    expect(found[1]!.entryId).toBe(input.entries.find((e) => e.cause === 'payment:inv-2')!.entryId);
  });

  it('finds entries without their flow: a payment whose invoice is not paid, settles of a refund and a payout that did not succeed', () => {
    const input = clean();
    const found = reconcile({
      ...input,
      paidInvoices: input.paidInvoices.filter((i) => i.invoiceId !== 'inv-2'),
      succeededRefunds: [],
      paidPayouts: [],
      otherReservations: { po_7: 'rejected' },
    });
    expect(found.map((d) => [d.kind, d.flow, d.flowId, d.cause])).toEqual([
      ['entry_without_flow', 'payout', '7', 'settle:po_7'],
      ['entry_without_flow', 'invoice', 'inv-2', 'payment:inv-2'],
      ['entry_without_flow', 'refund', 'rf_1', 'settle:rf_1'],
    ]);
    expect(found[0]!.detail).toContain('rejected');
  });

  it('finds a hold due and not released, a hold released early, and a release without a hold', () => {
    const input = clean();
    const release = input.entries.find((e) => e.cause === 'hold_release:inv-1')!;
    expect(reconcile({ ...input, entries: input.entries.filter((e) => e !== release) }).map((d) => [d.kind, d.flowId, d.entryId])).toEqual([
      ['hold_not_released', 'inv-1', input.entries.find((e) => e.cause === 'payment:inv-1')!.entryId],
    ]);
    // Not yet due at the end of the period: no difference.
    expect(reconcile({ ...input, to: '2031-01-02T09:00:00.000Z', entries: input.entries.filter((e) => e !== release) })).toEqual([]);
    expect(
      reconcile({ ...input, entries: input.entries.map((e) => (e === release ? { ...e, occurredAt: '2031-01-02T09:00:00.000Z' } : e)) }).map((d) => d.kind),
    ).toEqual(['hold_released_early']);
    // Released after the period's end (the worker down or stuck): not released by `to`, whenever asked.
    const lateTo = new Date(Date.parse('2031-01-02T10:00:00.000Z') + HOLD_RELEASE_GRACE_MS).toISOString();
    const late = reconcile({
      ...input,
      to: lateTo,
      entries: input.entries.map((e) => (e === release ? { ...e, occurredAt: '2031-01-02T11:00:00.000Z' } : e)),
    });
    expect(late.map((d) => [d.kind, d.flowId])).toEqual([['hold_not_released', 'inv-1']]);
    // The same answer, detail included, as before the late release came.
    const notYet = reconcile({ ...input, to: lateTo, entries: input.entries.filter((e) => e !== release) });
    expect(late).toEqual(notYet);
    // Due within HOLD_RELEASE_GRACE_MS of the end: the worker's next tick may still be to come, released or not.
    for (const entries of [
      input.entries.filter((e) => e !== release),
      input.entries.map((e) =>
        e === release ? { ...e, occurredAt: new Date(Date.parse('2031-01-02T10:00:00.300Z') + HOLD_RELEASE_GRACE_MS).toISOString() } : e,
      ),
    ]) {
      expect(reconcile({ ...input, to: new Date(Date.parse('2031-01-02T09:59:59.999Z') + HOLD_RELEASE_GRACE_MS).toISOString(), entries })).toEqual([]);
    }
    const stray: EntryFact = { ...release, entryId: 'stray', cause: 'hold_release:inv-9' };
    expect(reconcile({ ...input, entries: [...input.entries, stray] }).map((d) => [d.kind, d.flowId, d.entryId])).toEqual([
      ['release_without_hold', 'inv-9', 'stray'],
    ]);
  });

  it("checks a flow's entries in their own period only: a payment in its paid period, a release in its own", () => {
    const input = clean();
    const release = input.entries.find((e) => e.cause === 'hold_release:inv-1')!;
    // inv-1 paid 2031-01-01T10:00, due 2031-01-02T10:00; its release moved to before it was due, and its payment altered.
    const early = {
      ...input,
      paidInvoices: input.paidInvoices.map((i) => (i.invoiceId === 'inv-1' ? { ...i, feeAmount: i.feeAmount + 1 } : i)),
      entries: input.entries.map((e) => (e === release ? { ...e, occurredAt: '2031-01-01T12:00:00.000Z' } : e)),
    };
    const kinds = (from: string, to: string) =>
      reconcile({ ...early, from, to })
        .filter((d) => d.flowId === 'inv-1')
        .map((d) => d.kind);
    expect(kinds('2031-01-01T09:00:00.000Z', '2031-01-01T11:00:00.000Z')).toEqual(['amount_differs']);
    expect(kinds('2031-01-01T11:00:00.000Z', '2031-01-01T13:00:00.000Z')).toEqual(['hold_released_early']);
    // The period its hold fell due in holds the invoice for that alone: nothing of it is reported twice.
    expect(kinds('2031-01-02T09:00:00.000Z', '2031-01-02T11:00:00.000Z')).toEqual([]);
  });

  it('finds an entry posted in another ledger than its flow’s', () => {
    const input = clean();
    const found = reconcile({ ...input, entries: input.entries.map((e) => (e.cause === 'settle:rf_1' ? { ...e, mode: 'test' } : e)) });
    expect(found.map((d) => [d.kind, d.flowId])).toEqual([['ledger_differs', 'rf_1']]);
  });
});
