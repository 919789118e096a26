import { Inject } from '@nestjs/common';
import { Command, CommandHandler, ICommandHandler } from '@nestjs/cqrs';
import type { PayoutMethod } from '#domain';
import { PayoutAddress, PayoutAddresses } from '#payments/merchants';

/** The operator adds a payout detail to a merchant account, unconfirmed (created false when it was added before). */
export class AddPayoutAddress extends Command<{ address: PayoutAddress; created: boolean; differs: boolean }> {
  constructor(
    readonly accountId: string,
    readonly detail: { method: PayoutMethod; account: string; bank: string | null; label: string | null },
    readonly now: Date,
  ) {
    super();
  }
}

@CommandHandler(AddPayoutAddress)
export class AddPayoutAddressHandler implements ICommandHandler<AddPayoutAddress> {
  constructor(@Inject(PayoutAddresses) private readonly addresses: PayoutAddresses) {}

  execute(command: AddPayoutAddress): Promise<{ address: PayoutAddress; created: boolean; differs: boolean }> {
    return this.addresses.add(command.accountId, command.detail, command.now);
  }
}
