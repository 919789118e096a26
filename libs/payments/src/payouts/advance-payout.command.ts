import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { Payout } from '#domain';
import { PayoutFlow } from './payout-flow';

/** Takes a payout left requested (its API process died, or a later step failed after the 201) through the ledger's decision: pending, or rejected when refused. */
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
  constructor(@Inject(PayoutFlow) private readonly flow: PayoutFlow) {}

  execute(command: AdvancePayout): Promise<Payout> {
    return this.flow.advance(command.payoutId, command.now);
  }
}
