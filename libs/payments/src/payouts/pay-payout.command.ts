import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { Payout } from '#domain';
import { PayoutService } from './payout-service';

/** The payout was paid (the bank's id, if any): its reservation settles, the net amount out and the fee to fees. */
export class PayPayout extends Command<Payout> {
  constructor(
    readonly payoutId: number,
    readonly now: Date,
    readonly externalId: string | null,
  ) {
    super();
  }
}

@CommandHandler(PayPayout)
export class PayPayoutHandler implements ICommandHandler<PayPayout> {
  constructor(@Inject(PayoutService) private readonly payouts: PayoutService) {}

  execute(command: PayPayout): Promise<Payout> {
    return this.payouts.transition(command.payoutId, { type: 'PayPayout', at: command.now.toISOString(), externalId: command.externalId });
  }
}
