import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import type { Payout } from '#domain';
import { PayoutService } from './payout-service';

/** GET /v1/payouts?orderId=: the one payout with it, or 404 not_found. */
export class GetPayoutByOrderId extends Query<Payout> {
  constructor(
    readonly accountId: string,
    readonly orderId: string,
  ) {
    super();
  }
}

@QueryHandler(GetPayoutByOrderId)
export class GetPayoutByOrderIdHandler implements IQueryHandler<GetPayoutByOrderId> {
  constructor(@Inject(PayoutService) private readonly payouts: PayoutService) {}

  execute(query: GetPayoutByOrderId): Promise<Payout> {
    return this.payouts.byOrderId(query.accountId, query.orderId);
  }
}
