import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import { PayoutAddress, PayoutAddresses } from '#payments/merchants';

/** The account's confirmed payout details. */
export class ListPayoutAddresses extends Query<PayoutAddress[]> {
  constructor(readonly accountId: string) {
    super();
  }
}

@QueryHandler(ListPayoutAddresses)
export class ListPayoutAddressesHandler implements IQueryHandler<ListPayoutAddresses> {
  constructor(@Inject(PayoutAddresses) private readonly addresses: PayoutAddresses) {}

  execute(query: ListPayoutAddresses): Promise<PayoutAddress[]> {
    return this.addresses.confirmedOf(query.accountId);
  }
}
