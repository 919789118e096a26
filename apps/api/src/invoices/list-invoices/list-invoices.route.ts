import { Controller, Get, Inject, Query, UseGuards } from '@nestjs/common';
import { QueryBus } from '@nestjs/cqrs';
import { invoiceRowViewAt } from '#payments';
import { invoiceIdFor } from '#payments/invoices';
import type { Clock } from '#platform/clock';
import type { MerchantIdentity } from '#payments/merchants';
import { cursorAnchorOf, encodeCursor, pageSizeOf } from '../../http/cursor';
import { rangeOf } from '../../http/period-page.request';
import { CLOCK_TOKEN, PUBLIC_URL } from '../../http/tokens';
import type { PublicUrl } from '../../http/tokens';
import { validRequest } from '../../http/request-pipe';
import { FOLLOWED, postedThrough } from '../../audit/report-instants';
import { Merchant, MerchantAuthGuard } from '../../http/auth/merchant-auth.guard';
import { ReadsModels } from '../../http/read-models';
import { ListInvoicesQuery } from './list-invoices.request';
import { ListInvoices } from './list-invoices.handler';

/** An invoice id as a cursor carries it. */
const UUID_TEXT = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

@Controller('v1/invoices')
@UseGuards(MerchantAuthGuard)
export class ListInvoicesRoute {
  constructor(
    private readonly queries: QueryBus,
    @Inject(CLOCK_TOKEN) private readonly clock: Clock,
    @Inject(PUBLIC_URL) private readonly publicUrl: PublicUrl,
  ) {}

  /** Invoices of the project and mode, newest first (order of arrival), cursor pages; by orderId, from its stream. */
  @ReadsModels('invoices')
  @Get()
  async list(@Merchant() merchant: MerchantIdentity, @Query(validRequest) query: ListInvoicesQuery) {
    const { orderId, status } = query;
    const { from, to } = rangeOf(query);
    const anchor = cursorAnchorOf(query.cursor, UUID_TEXT);
    const now = this.clock.now();
    // A period that has ended is listed once final (every invoice created in it in the read model), as the balance
    // transactions are: an invoice projected after page 1 was read would land above it, skipped for good.
    if (orderId === undefined && to !== undefined && to.getTime() <= now.getTime()) await postedThrough(this.queries, to, now, FOLLOWED.invoices);
    const page = await this.queries.execute(
      new ListInvoices(
        {
          projectId: merchant.project.id,
          mode: merchant.mode,
          orderId,
          status,
          from,
          to,
          before: anchor?.seq ?? null,
          beforeId: anchor?.id ?? null,
          limit: pageSizeOf(query.limit, 20),
          at: now,
        },
        orderId === undefined ? null : invoiceIdFor(merchant.project.idNamespace, merchant.mode, orderId),
      ),
    );
    return {
      // Each as its GET shows it now: an open invoice past its expiresAt is expired before the expiry worker records it.
      items: page.items.map((row) => invoiceRowViewAt(row, this.publicUrl.value, now.toISOString())),
      nextCursor: page.hasMore ? encodeCursor({ seq: page.lastSeq!, id: page.items[page.items.length - 1]!.id }) : null,
      hasMore: page.hasMore,
    };
  }
}
