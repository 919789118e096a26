import type { CommandBus } from '@nestjs/cqrs';
import type { AllFilter, RecordedEvent } from '#event-store';
import { PAYOUT_CATEGORY, PayoutEvent, REFUND_CATEGORY, RefundEvent } from '#domain';
import { SettlePayoutOutcome } from '../payouts/settle-payout-outcome.command';
import { SettleRefundOutcome } from '../refunds/settle-refund-outcome.command';
import type { Reactor } from '#event-store/projections';
import { PAYOUT_OUTCOME_EVENTS, PAYOUT_OUTCOMES, REFUND_OUTCOME_EVENTS, REFUND_OUTCOMES } from '../flows/outcomes';

/**
 * A refund's outcome moves its reserved money (succeeded: out to refunds_paid; failed:
 * back to available) and settles it on the invoice (refunded amount and status, or
 * the amount back in the remainder): the one driver of that step. It follows the log from its own checkpoint, and
 * each step decides once per refund (ledger causes `settle:`/`release:`, the invoice's
 * record of the refund), so a crash, restart or replay neither misses nor doubles one.
 * Sent as the SettleRefundOutcome command.
 */
export const REFUND_OUTCOMES_FILTER: AllFilter = { streamNamePrefixes: [`${REFUND_CATEGORY}-`], eventTypePrefixes: REFUND_OUTCOME_EVENTS };
export const PAYOUT_OUTCOMES_FILTER: AllFilter = { streamNamePrefixes: [`${PAYOUT_CATEGORY}-`], eventTypePrefixes: PAYOUT_OUTCOME_EVENTS };

export function refundOutcomes(commands: CommandBus): Reactor {
  return {
    name: REFUND_OUTCOMES,
    filter: REFUND_OUTCOMES_FILTER,
    async react(events: readonly RecordedEvent[]) {
      for (const recorded of events) {
        await commands.execute(new SettleRefundOutcome({ type: recorded.type, data: recorded.data } as unknown as RefundEvent));
      }
    },
  };
}

/**
 * A finished payout settles its reservation (paid: the net amount to payouts_sent and
 * the fee to fees) or returns it to available (rejected, cancelled). Once per payout,
 * by the ledger's causes. Sent as the SettlePayoutOutcome command.
 */
export function payoutOutcomes(commands: CommandBus): Reactor {
  return {
    name: PAYOUT_OUTCOMES,
    filter: PAYOUT_OUTCOMES_FILTER,
    async react(events: readonly RecordedEvent[]) {
      for (const recorded of events) {
        await commands.execute(new SettlePayoutOutcome({ type: recorded.type, data: recorded.data } as unknown as PayoutEvent));
      }
    },
  };
}
