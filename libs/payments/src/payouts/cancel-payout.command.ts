import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { Payout } from '#domain';
import { PayoutService } from './payout-service';

/** The payout is cancelled: its reservation goes back to available. */
export class CancelPayout extends Command<Payout> {
  constructor(
    readonly payoutId: number,
    readonly now: Date,
    readonly reason: string,
  ) {
    super();
  }
}

@CommandHandler(CancelPayout)
export class CancelPayoutHandler implements ICommandHandler<CancelPayout> {
  constructor(@Inject(PayoutService) private readonly payouts: PayoutService) {}

  execute(command: CancelPayout): Promise<Payout> {
    return this.payouts.transition(command.payoutId, { type: 'CancelPayout', at: command.now.toISOString(), reason: command.reason });
  }
}
