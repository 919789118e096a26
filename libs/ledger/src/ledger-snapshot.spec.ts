/**
 * Ledger snapshots are checked, not trusted: a stored snapshot is used only if it
 * is what this fold wrote (version and digest), agrees with its stream (entry count,
 * the entry at its revision) and keeps the ledger's invariants.
 */
import { evolve, foldLedger, LedgerEvent, LedgerState } from './ledger';
import { checkLedgerSnapshot, currentLedgerFoldVersion, ledgerFoldVersion, ledgerSnapshotOf } from './ledger-snapshot';

const T0 = Date.parse('2025-05-01T00:00:00.000Z');
const at = (i: number) => new Date(T0 + i * 60_000).toISOString();

/** Payments (every third one held), a refund reserved and one settled: an ordinary ledger. */
function history(n: number): LedgerEvent[] {
  const events: LedgerEvent[] = [];
  for (let i = 0; i < n; i++) {
    const held = i % 3 === 0;
    events.push({
      type: 'LedgerEntryPosted',
      data: {
        entryId: `e${i}`,
        kind: 'payment_recorded',
        cause: `payment:inv_${i}`,
        postings: [
          { account: 'acquiring_clearing', amount: -(10_000 + i) },
          { account: held ? 'pending' : 'available', amount: 9_800 + i },
          { account: 'fees', amount: 200 },
        ],
        occurredAt: at(i),
        invoiceId: `inv_${i}`,
        ...(held ? { hold: { invoiceId: `inv_${i}`, amount: 9_800 + i, releaseAt: at(i + 600) } } : {}),
      },
    });
  }
  events.push({
    type: 'LedgerEntryPosted',
    data: {
      entryId: 'r1',
      kind: 'funds_reserved',
      cause: 'reserve:rf_1',
      postings: [
        { account: 'available', amount: -5_000 },
        { account: 'reserved', amount: 5_000 },
      ],
      occurredAt: at(n),
      reservation: { id: 'rf_1', purpose: 'refund', amount: 5_000 },
    },
  });
  return events;
}

/** As jsonb gives it back: the same data, the keys of every object in another order. */
function throughJsonb(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(throughJsonb);
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(
      Object.entries(value)
        .reverse()
        .map(([k, v]) => [k, throughJsonb(v)]),
    );
  }
  return value;
}

const events = history(40);
const state = foldLedger(events);
const revision = BigInt(events.length - 1);
const last = events[events.length - 1]!;
const stored = () => throughJsonb(JSON.parse(JSON.stringify(ledgerSnapshotOf(state)))) as { state: LedgerState; digest: string };
const problemsOf = (result: ReturnType<typeof checkLedgerSnapshot>) => ('problems' in result ? result.problems : []);

describe('ledger snapshots: checked before use', () => {
  it('a snapshot this fold wrote, checked against the entry at its revision, gives the state back (whatever the key order)', () => {
    const result = checkLedgerSnapshot(stored(), revision, last);
    expect(result).toEqual({ state });
    expect(foldLedger([], (result as { state: LedgerState }).state)).toEqual(state);
  });

  it('BUG: balances changed after it was written, still summing to zero, are refused (the digest)', () => {
    const corrupted = stored() as { state: { balances: LedgerState['balances'] }; digest: string };
    // Money that is not there, moved in from a system account: every invariant still holds.
    corrupted.state.balances = {
      ...corrupted.state.balances,
      available: corrupted.state.balances.available + 1_000_000,
      fees: corrupted.state.balances.fees - 1_000_000,
    };
    expect(problemsOf(checkLedgerSnapshot(corrupted, revision, last))).toEqual([expect.stringContaining('digest')]);
  });

  it('a state written wrong by the fold itself (digest of the wrong state) is refused when it breaks an invariant', () => {
    const wrong: LedgerState = { ...state, balances: { ...state.balances, pending: state.balances.pending - 7, available: state.balances.available + 7 } };
    expect(problemsOf(checkLedgerSnapshot(ledgerSnapshotOf(wrong), revision, last))).toEqual([expect.stringContaining('hold_mismatch')]);
    const overdrawn: LedgerState = { ...state, balances: { ...state.balances, reserved: -1, available: state.balances.available + 1 } };
    expect(problemsOf(checkLedgerSnapshot(ledgerSnapshotOf(overdrawn), revision, last))).toEqual(
      expect.arrayContaining([expect.stringContaining('negative_merchant_account'), expect.stringContaining('reservation_mismatch')]),
    );
  });

  it('must agree with its stream: entry count = revision + 1, and the entry at its revision is its last cause', () => {
    expect(problemsOf(checkLedgerSnapshot(stored(), revision + 1n, last))).toEqual([
      `it counts ${events.length} entries at revision ${revision + 1n} (expected ${revision + 2n})`,
    ]);
    expect(problemsOf(checkLedgerSnapshot(stored(), revision, null))).toEqual([`the stream has no entry at revision ${revision}`]);
    expect(problemsOf(checkLedgerSnapshot(stored(), revision, events[0]!))).toEqual([
      expect.stringContaining("its last cause is reserve:rf_1, the stream's entry at revision 40 is of payment:inv_0"),
    ]);
  });

  it('refuses what is not a checked ledger snapshot: a bare state, a malformed one', () => {
    expect(problemsOf(checkLedgerSnapshot(JSON.parse(JSON.stringify(state)), revision, last))).toEqual(['not a checked ledger snapshot (no digest)']);
    const malformed = stored() as unknown as { state: Record<string, unknown>; digest: string };
    malformed.state.balances = { available: '12.00' };
    malformed.state.recentCauses = 'payment:inv_1';
    expect(problemsOf(checkLedgerSnapshot(malformed, revision, last))).toEqual([
      'balances are not whole kopecks for every account',
      'the window of recent causes is malformed',
    ]);
  });

  it('the version is derived from the fold: a fold that computes anything differently has another version', () => {
    expect(ledgerFoldVersion()).toBe(currentLedgerFoldVersion());
    expect(Number.isInteger(currentLedgerFoldVersion()) && currentLedgerFoldVersion() > 0 && currentLedgerFoldVersion() < 2 ** 31).toBe(true);
    // The same behaviour, written another way: the same version.
    expect(ledgerFoldVersion((entries) => entries.reduce(evolve, foldLedger([])), evolve)).toBe(currentLedgerFoldVersion());
    // A bug: fees forgotten by the fold.
    const withoutFees = (entries: readonly LedgerEvent[]) =>
      foldLedger(entries.map((e) => ({ ...e, data: { ...e.data, postings: e.data.postings.filter((p) => p.account !== 'fees') } })));
    expect(ledgerFoldVersion(withoutFees, evolve)).not.toBe(currentLedgerFoldVersion());
    // A bug: a hold never released by evolve.
    const keepsHolds = (s: LedgerState, e: LedgerEvent) => (e.data.kind === 'hold_released' ? { ...evolve(s, e), holds: s.holds } : evolve(s, e));
    expect(ledgerFoldVersion(foldLedger, keepsHolds)).not.toBe(currentLedgerFoldVersion());
  });
});
