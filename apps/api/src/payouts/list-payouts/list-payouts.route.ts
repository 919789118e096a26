import { Controller, Get, Inject, Query, UseGuards } from '@nestjs/common';
import { QueryBus } from '@nestjs/cqrs';
import { PAYOUT_STATUSES } from '#domain';
import { payoutRowView, payoutView } from '#payments';
import type { MerchantIdentity } from '#payments/merchants';
import type { Clock } from '#platform/clock';
import { cursorAnchorOf, encodeCursor, pageSizeOf } from '../../http/cursor';
import { validRequest } from '../../http/request-pipe';
import { Merchant, MerchantAuthGuard } from '../../http/auth/merchant-auth.guard';
import { ReadsModels } from '../../http/read-models';
import { CLOCK_TOKEN } from '../../http/tokens';
import { notFound } from '../get-payout/get-payout.route';
import { GetPayoutByOrderId } from '../get-payout/get-payout.handler';
import { ListPayoutsQuery } from './list-payouts.request';
import { ListPayouts } from './list-payouts.handler';

@Controller('v1')
@UseGuards(MerchantAuthGuard)
export class ListPayoutsRoute {
  constructor(
    private readonly queries: QueryBus,
    @Inject(CLOCK_TOKEN) private readonly clock: Clock,
  ) {}

  /**
   * The account's payouts, newest first; with orderId, the one payout (not a list) or 404
   * not_found, and a status given with it must be that payout's (as on the invoice list,
   * the filters hold together): `?orderId=…&status=paid` never answers a pending payout.
   */
  @ReadsModels('payouts')
  @Get('payouts')
  async list(@Merchant() merchant: MerchantIdentity, @Query(validRequest) query: ListPayoutsQuery) {
    const { orderId, status } = query;
    const limit = pageSizeOf(query.limit, 20);
    const anchor = cursorAnchorOf(query.cursor, /^\d{1,18}$/);
    // Payouts are made with live keys only: a test key has none.
    const live = merchant.mode === 'live';
    if (orderId !== undefined) {
      if (!live) throw notFound();
      const payout = payoutView(await this.queries.execute(new GetPayoutByOrderId(merchant.project.accountId, orderId, this.clock.now())));
      if (status !== undefined && payout.status !== status) throw notFound();
      return payout;
    }
    if (!live) return { items: [], nextCursor: null, hasMore: false };
    const page = await this.queries.execute(
      new ListPayouts({
        accountId: merchant.project.accountId,
        statuses: status !== undefined ? [status] : PAYOUT_STATUSES,
        before: anchor?.seq ?? null,
        beforeId: anchor?.id ?? null,
        limit,
      }),
    );
    return {
      items: page.items.map((row) => payoutRowView(row)),
      nextCursor: page.hasMore ? encodeCursor({ seq: page.lastSeq!, id: String(page.items[page.items.length - 1]!.id) }) : null,
      hasMore: page.hasMore,
    };
  }
}
