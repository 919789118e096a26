import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { Payout } from '#domain';
import { PayoutService } from './payout-service';

/** Takes a payout left requested (its API process died before the ledger's answer) through the ledger's decision: pending, or its refusal. */
export class AdvancePayout extends Command<Payout> {
  constructor(
    readonly payoutId: number,
    readonly now: Date,
  ) {
    super();
  }
}

@CommandHandler(AdvancePayout)
export class AdvancePayoutHandler implements ICommandHandler<AdvancePayout> {
  constructor(@Inject(PayoutService) private readonly payouts: PayoutService) {}

  execute(command: AdvancePayout): Promise<Payout> {
    return this.payouts.advance(command.payoutId, command.now);
  }
}
