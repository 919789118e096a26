import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import type { Payout } from '#domain';
import { PayoutService } from './payout-service';

/** One payout of the account, from its own stream; unknown, never shown or another account's: 404 not_found. */
export class GetPayout extends Query<Payout> {
  constructor(
    readonly accountId: string,
    readonly payoutId: number,
  ) {
    super();
  }
}

@QueryHandler(GetPayout)
export class GetPayoutHandler implements IQueryHandler<GetPayout> {
  constructor(@Inject(PayoutService) private readonly payouts: PayoutService) {}

  execute(query: GetPayout): Promise<Payout> {
    return this.payouts.getFor(query.accountId, query.payoutId);
  }
}
