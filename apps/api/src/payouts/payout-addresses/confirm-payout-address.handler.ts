import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import { PayoutAddress, PayoutAddresses } from '#payments/merchants';

/** Stands in for the e-mail link that confirms a payout detail; null for an unknown one. */
export class ConfirmPayoutAddress extends Command<PayoutAddress | null> {
  constructor(
    readonly addressId: number,
    readonly now: Date,
  ) {
    super();
  }
}

@CommandHandler(ConfirmPayoutAddress)
export class ConfirmPayoutAddressHandler implements ICommandHandler<ConfirmPayoutAddress> {
  constructor(@Inject(PayoutAddresses) private readonly addresses: PayoutAddresses) {}

  execute(command: ConfirmPayoutAddress): Promise<PayoutAddress | null> {
    return this.addresses.confirm(command.addressId, command.now);
  }
}
