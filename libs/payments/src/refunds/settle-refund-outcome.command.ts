import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { RefundEvent } from '#domain';
import { LedgerBook } from '../ledger';
import type { EventStore } from '#event-store';
import { EVENT_STORE } from '../payments.tokens';
import { applyRefundOutcome } from '../flows/outcomes';

/** What a refund's outcome moves (its reservation settled or released, the invoice's refunded amount): sent by the refund_outcomes process manager for each RefundSucceeded/RefundFailed. Idempotent. */
export class SettleRefundOutcome extends Command<void> {
  constructor(readonly event: RefundEvent) {
    super();
  }
}

@CommandHandler(SettleRefundOutcome)
export class SettleRefundOutcomeHandler implements ICommandHandler<SettleRefundOutcome> {
  constructor(
    @Inject(LedgerBook) private readonly ledgers: LedgerBook,
    @Inject(EVENT_STORE) private readonly store: EventStore,
  ) {}

  execute(command: SettleRefundOutcome): Promise<void> {
    return applyRefundOutcome(this.ledgers, this.store, command.event);
  }
}
