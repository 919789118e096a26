import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import type { Payout } from '#domain';
import { PayoutFlow, payoutNotFound } from '#payments/payouts';

/**
 * One payout of the account, from its own stream; unknown, refused unseen or another
 * account's: 404 not_found. One still requested (its request may have been answered 201
 * before the ledger decided) is shown only once the ledger has decided: the read takes
 * it through that decision first, as an operator transition does (PayoutFlow.decided),
 * so that a payout shown pending is never refused unseen afterwards. Refused, it is
 * shown rejected with its reason (payout.rejected), and its request, if still running,
 * answers it so (201). The ledger busy: 503, and the read wrote nothing.
 */
export class GetPayout extends Query<Payout> {
  constructor(
    readonly accountId: string,
    readonly payoutId: number,
    /** The gateway clock when the request came: the time of the ledger's decision, should this read record it. */
    readonly now: Date,
  ) {
    super();
  }
}

/** GET /v1/payouts?orderId=: the one payout with it (as GetPayout), or 404 not_found. */
export class GetPayoutByOrderId extends Query<Payout> {
  constructor(
    readonly accountId: string,
    readonly orderId: string,
    readonly now: Date,
  ) {
    super();
  }
}

@QueryHandler(GetPayout)
export class GetPayoutHandler implements IQueryHandler<GetPayout> {
  constructor(@Inject(PayoutFlow) private readonly flow: PayoutFlow) {}

  execute({ accountId, payoutId, now }: GetPayout): Promise<Payout> {
    return this.flow.decided(payoutId, now, accountId);
  }
}

@QueryHandler(GetPayoutByOrderId)
export class GetPayoutByOrderIdHandler implements IQueryHandler<GetPayoutByOrderId> {
  constructor(@Inject(PayoutFlow) private readonly flow: PayoutFlow) {}

  async execute({ accountId, orderId, now }: GetPayoutByOrderId): Promise<Payout> {
    const claimed = await this.flow.pool.query<{ payout_id: string }>('SELECT payout_id FROM payout_order_ids WHERE account_id = $1 AND order_id = $2', [
      accountId,
      orderId,
    ]);
    if (!claimed.rows[0]) throw payoutNotFound();
    return this.flow.decided(Number(claimed.rows[0].payout_id), now, accountId);
  }
}
