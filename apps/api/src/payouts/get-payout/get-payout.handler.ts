import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import type { Payout } from '#domain';
import { PayoutFlow, payoutNotFound } from '#payments/payouts';

/** One payout of the account, from its own stream; unknown, never shown or another account's: 404 not_found. */
export class GetPayout extends Query<Payout> {
  constructor(
    readonly accountId: string,
    readonly payoutId: number,
  ) {
    super();
  }
}

/** GET /v1/payouts?orderId=: the one payout with it, or 404 not_found. */
export class GetPayoutByOrderId extends Query<Payout> {
  constructor(
    readonly accountId: string,
    readonly orderId: string,
  ) {
    super();
  }
}

/**
 * The payout if the merchant account may see it (its own, not refused); otherwise 404
 * not_found. A payout requested and not yet reserved is shown (pending): its request
 * may have been answered 201 before the ledger decided.
 */
async function payoutOfAccount(flow: PayoutFlow, accountId: string, payoutId: number): Promise<Payout> {
  if (!Number.isSafeInteger(payoutId) || payoutId < 1) throw payoutNotFound();
  const payout = await flow.load(payoutId);
  if (payout.status === 'none' || payout.status === 'refused' || payout.requested.accountId !== accountId) throw payoutNotFound();
  return payout;
}

@QueryHandler(GetPayout)
export class GetPayoutHandler implements IQueryHandler<GetPayout> {
  constructor(@Inject(PayoutFlow) private readonly flow: PayoutFlow) {}

  execute(query: GetPayout): Promise<Payout> {
    return payoutOfAccount(this.flow, query.accountId, query.payoutId);
  }
}

@QueryHandler(GetPayoutByOrderId)
export class GetPayoutByOrderIdHandler implements IQueryHandler<GetPayoutByOrderId> {
  constructor(@Inject(PayoutFlow) private readonly flow: PayoutFlow) {}

  async execute({ accountId, orderId }: GetPayoutByOrderId): Promise<Payout> {
    const claimed = await this.flow.pool.query<{ payout_id: string }>('SELECT payout_id FROM payout_order_ids WHERE account_id = $1 AND order_id = $2', [
      accountId,
      orderId,
    ]);
    if (!claimed.rows[0]) throw payoutNotFound();
    return payoutOfAccount(this.flow, accountId, Number(claimed.rows[0].payout_id));
  }
}
