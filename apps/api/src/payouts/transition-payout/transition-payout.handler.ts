import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { Payout } from '#domain';
import { PayoutService } from './payout-service';

/** The operator approves a pending payout (409 conflict when illegal from its status, 404 for an unknown payout). */
export class ApprovePayout extends Command<Payout> {
  constructor(
    readonly payoutId: number,
    readonly now: Date,
  ) {
    super();
  }
}

@CommandHandler(ApprovePayout)
export class ApprovePayoutHandler implements ICommandHandler<ApprovePayout> {
  constructor(@Inject(PayoutService) private readonly payouts: PayoutService) {}

  execute(command: ApprovePayout): Promise<Payout> {
    return this.payouts.transition(command.payoutId, { type: 'ApprovePayout', at: command.now.toISOString() });
  }
}
