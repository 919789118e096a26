import { Controller, Get, Inject, Query, UseGuards } from '@nestjs/common';
import { QueryBus } from '@nestjs/cqrs';
import { invoiceRowView } from '#payments';
import type { MerchantIdentity } from '#payments/merchants';
import { cursorSeqOf, encodeCursor, pageSizeOf } from '../../http/cursor';
import { rangeBound } from '../../http/period-page.request';
import { PUBLIC_URL } from '../../http/tokens';
import type { PublicUrl } from '../../http/tokens';
import { validRequest } from '../../http/request-pipe';
import { Merchant, MerchantAuthGuard } from '../../http/auth/merchant-auth.guard';
import { ReadsModels } from '../../http/read-models';
import { ListInvoicesQuery } from './list-invoices.request';
import { ListInvoices } from './list-invoices.handler';

@Controller('v1/invoices')
@UseGuards(MerchantAuthGuard)
export class ListInvoicesRoute {
  constructor(
    private readonly queries: QueryBus,
    @Inject(PUBLIC_URL) private readonly publicUrl: PublicUrl,
  ) {}

  /** Invoices of the project and mode, newest first (order of arrival), cursor pages. */
  @ReadsModels('invoices')
  @Get()
  async list(@Merchant() merchant: MerchantIdentity, @Query(validRequest) query: ListInvoicesQuery) {
    const { orderId, status } = query;
    const [from, to] = [rangeBound(query.from), rangeBound(query.to)];
    const page = await this.queries.execute(
      new ListInvoices({
        projectId: merchant.project.id,
        mode: merchant.mode,
        orderId,
        status,
        from,
        to,
        before: cursorSeqOf(query.cursor),
        limit: pageSizeOf(query.limit, 20),
      }),
    );
    return {
      items: page.items.map((row) => invoiceRowView(row, this.publicUrl.value)),
      nextCursor: page.hasMore ? encodeCursor({ seq: page.lastSeq! }) : null,
      hasMore: page.hasMore,
    };
  }
}
