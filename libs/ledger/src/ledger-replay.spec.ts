/**
 * LedgerReplay (what ledger:verify replays a ledger with) against its definition:
 * after every entry of a random sequence, its state equals the reduction with `evolve`
 * and its violations equal `stateViolations` of that state. The entries are arbitrary
 * (unbalanced, unknown holds and reservations, the same hold or reservation opened
 * twice, ids such as `__proto__`), so the violations are exercised too.
 */
import fc from 'fast-check';
import { fastCheckSeed } from '../../../test/support/test-seed';
import {
  evolve,
  initialLedgerState,
  LEDGER_ACCOUNTS,
  LedgerEvent,
  LedgerReplay,
  RECENT_CAUSES_KEPT,
  recentCausesFrom,
  recentCausesOf,
  stateViolations,
} from './ledger';

const id = fc.constantFrom('a', 'b', 'c', '__proto__', 'constructor');
const amount = fc.integer({ min: 0, max: 10_000 });
const posting = fc.record({ account: fc.constantFrom(...LEDGER_ACCOUNTS), amount: fc.integer({ min: -10_000, max: 10_000 }) });
const entry: fc.Arbitrary<LedgerEvent> = fc
  .record({
    kind: fc.constantFrom('payment_recorded', 'hold_released', 'funds_reserved', 'reservation_refused', 'reservation_settled', 'reservation_released'),
    postings: fc.array(posting, { maxLength: 4 }),
    id,
    amount,
    releaseAt: fc.option(fc.constant('2026-01-02T00:00:00.000Z'), { nil: null }),
    fingerprint: fc.option(fc.constantFrom('p1', 'p2'), { nil: undefined }),
    cause: fc.string({ maxLength: 6 }),
  })
  .map(({ kind, postings, id: key, amount: a, releaseAt, fingerprint, cause }) => ({
    type: 'LedgerEntryPosted' as const,
    data: {
      entryId: `${kind}-${cause}`,
      kind,
      cause,
      postings,
      occurredAt: '2026-01-01T00:00:00.000Z',
      ...(kind === 'payment_recorded' ? { hold: { invoiceId: key, amount: a, releaseAt } } : {}),
      ...(kind === 'hold_released' ? { invoiceId: key } : {}),
      ...(kind.startsWith('funds') || kind.startsWith('reservation') ? { reservation: { id: key, purpose: 'payout' as const, amount: a } } : {}),
      ...(fingerprint !== undefined && kind === 'funds_reserved' ? { payoutFingerprint: fingerprint } : {}),
    },
  }));

describe('LedgerReplay', () => {
  it('has, after every entry, the state of evolve and the violations of stateViolations', () => {
    fc.assert(
      fc.property(fc.array(entry, { maxLength: 60 }), (entries) => {
        const replay = new LedgerReplay();
        let state = initialLedgerState();
        for (const e of entries) {
          replay.apply(e);
          state = evolve(state, e);
          expect(replay.state()).toEqual(state);
          expect(replay.violations(e.data.entryId)).toEqual(stateViolations(state, e.data.entryId));
          expect(replay.balancesNow()).toEqual(state.balances);
        }
      }),
      { numRuns: 300, seed: fastCheckSeed('LedgerReplay') },
    );
  });

  it('without its window of recent causes, has the same state but for the window, which stays as it started', () => {
    fc.assert(
      fc.property(fc.array(entry, { maxLength: 60 }), (entries) => {
        const replay = new LedgerReplay(undefined, { recentCauses: false });
        let state = initialLedgerState();
        for (const e of entries) {
          replay.apply(e);
          state = evolve(state, e);
          expect(replay.state()).toEqual({ ...state, recentCauses: [] });
          expect(replay.violations(e.data.entryId)).toEqual(stateViolations(state, e.data.entryId));
        }
      }),
      { numRuns: 100, seed: fastCheckSeed('LedgerReplay without recent causes') },
    );
  });
});

describe('the window of recent causes taken from the log', () => {
  it('is, for a ledger of any length, what remembering every cause from the first entry gives (recentCausesFrom, recentCausesOf)', () => {
    // Lengths around the window's size and its chunks' boundaries, and a few at random.
    const lengths = [0, 1, 63, 64, 65, RECENT_CAUSES_KEPT - 1, RECENT_CAUSES_KEPT, RECENT_CAUSES_KEPT + 1, RECENT_CAUSES_KEPT + 63, RECENT_CAUSES_KEPT + 64];
    fc.assert(
      fc.property(fc.oneof(fc.constantFrom(...lengths), fc.integer({ min: 0, max: 3 * RECENT_CAUSES_KEPT })), (length) => {
        const causes = Array.from({ length }, (_, i) => `payment:${i}`);
        let state = initialLedgerState();
        for (const cause of causes) {
          state = evolve(state, {
            type: 'LedgerEntryPosted',
            data: { entryId: cause, kind: 'payment_recorded', cause, postings: [], occurredAt: '2026-01-01T00:00:00.000Z' },
          });
        }
        expect(recentCausesOf(causes.slice(recentCausesFrom(length)))).toEqual(state.recentCauses);
      }),
      { numRuns: 60, seed: fastCheckSeed('recent causes from the log') },
    );
  });
});
