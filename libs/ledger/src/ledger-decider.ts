import type { Decider } from '#domain';
import {
  decide,
  entryViolations,
  evolve,
  foldLedger,
  initialLedgerState,
  LedgerCommand,
  LedgerError,
  LedgerEvent,
  LedgerState,
  stateViolations,
} from './ledger';

/** Thrown when a decision would break an invariant: a bug, never a merchant's error. */
export class LedgerInvariantError extends Error {
  constructor(readonly violations: readonly string[]) {
    super(`ledger invariant broken: ${violations.join('; ')}`);
    this.name = 'LedgerInvariantError';
  }
}

/**
 * The ledger as a decider, with the invariants checked on every decision: an entry
 * that does not balance, or that would leave a merchant account below zero, is
 * never appended.
 */
export const ledgerDecider: Decider<LedgerState, LedgerCommand, LedgerEvent, LedgerError> = {
  initialState: initialLedgerState,
  evolve,
  fold: (state, events) => foldLedger(events, state),
  decide(command, state) {
    const decision = decide(command, state);
    if (!Array.isArray(decision)) return decision;
    let next = state;
    for (const event of decision) {
      const broken = entryViolations(event);
      next = evolve(next, event);
      broken.push(...stateViolations(next, event.data.entryId));
      if (broken.length > 0) throw new LedgerInvariantError(broken.map((v) => `${v.rule}: ${v.detail}`));
    }
    return decision;
  },
};
