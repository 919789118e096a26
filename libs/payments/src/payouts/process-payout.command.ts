import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { Payout } from '#domain';
import { PayoutService } from './payout-service';

/** The operator starts processing an approved payout (409 conflict when illegal from its status). */
export class ProcessPayout extends Command<Payout> {
  constructor(
    readonly payoutId: number,
    readonly now: Date,
  ) {
    super();
  }
}

@CommandHandler(ProcessPayout)
export class ProcessPayoutHandler implements ICommandHandler<ProcessPayout> {
  constructor(@Inject(PayoutService) private readonly payouts: PayoutService) {}

  execute(command: ProcessPayout): Promise<Payout> {
    return this.payouts.transition(command.payoutId, { type: 'StartProcessing', at: command.now.toISOString() });
  }
}
