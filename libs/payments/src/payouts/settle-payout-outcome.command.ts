import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { PayoutEvent } from '#domain';
import { LedgerBook } from '../ledger';
import { applyPayoutOutcome } from '../flows/outcomes';

/** What a finished payout moves (paid: its reservation settles; rejected, cancelled: it returns): sent by the payout_outcomes process manager. Idempotent. */
export class SettlePayoutOutcome extends Command<void> {
  constructor(readonly event: PayoutEvent) {
    super();
  }
}

@CommandHandler(SettlePayoutOutcome)
export class SettlePayoutOutcomeHandler implements ICommandHandler<SettlePayoutOutcome> {
  constructor(@Inject(LedgerBook) private readonly ledgers: LedgerBook) {}

  execute(command: SettlePayoutOutcome): Promise<void> {
    return applyPayoutOutcome(this.ledgers, command.event);
  }
}
