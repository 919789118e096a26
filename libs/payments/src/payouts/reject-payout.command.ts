import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { Payout } from '#domain';
import { PayoutService } from './payout-service';

/** The operator rejects the payout: its reservation goes back to available. */
export class RejectPayout extends Command<Payout> {
  constructor(
    readonly payoutId: number,
    readonly now: Date,
    readonly reason: string,
  ) {
    super();
  }
}

@CommandHandler(RejectPayout)
export class RejectPayoutHandler implements ICommandHandler<RejectPayout> {
  constructor(@Inject(PayoutService) private readonly payouts: PayoutService) {}

  execute(command: RejectPayout): Promise<Payout> {
    return this.payouts.transition(command.payoutId, { type: 'RejectPayout', at: command.now.toISOString(), reason: command.reason });
  }
}
