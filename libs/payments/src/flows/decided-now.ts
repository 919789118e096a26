import type { DatedByDecision } from '#event-store';
import type { Clock } from '#platform/clock';

/** An entry is decided before it is appended: one dated at or before an instant is in the log by this much after it. */
export const POSTING_MARGIN_MS = 1_000;

/**
 * How soon after its date an entry dated by its decision must be in the log (its append's
 * transaction begun): half the margin, the other half for the clocks of the gateway's and
 * the database's hosts. Later, it is decided again, dated then (handleCommand's `dated`).
 */
export const DECIDED_TO_LOGGED_MS = POSTING_MARGIN_MS / 2;

/** handleCommand's `dated` for commands whose `at` is `clock`'s time when they are decided (one without `at` is not dated). */
export function decidedNow<Command>(clock: Clock): DatedByDecision<Command> {
  return {
    at: (command) => {
      const at = (command as { readonly at?: unknown }).at;
      return typeof at === 'string' ? at : undefined;
    },
    redate: (command, at) => ({ ...command, at }),
    now: () => clock.now(),
    withinMs: DECIDED_TO_LOGGED_MS,
  };
}
