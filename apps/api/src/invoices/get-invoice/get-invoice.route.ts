import { Controller, Get, Inject, Param, Query, UseGuards } from '@nestjs/common';
import { NoParameters, validRequest } from '../../http/request-pipe';
import { QueryBus } from '@nestjs/cqrs';
import type { Clock } from '#platform/clock';
import { invoiceView } from '#payments';
import type { MerchantIdentity } from '#payments/merchants';
import type { AccessControl } from '#payments/access';
import { isUuid } from '#domain';
import { ApiError } from '../../http/errors/api-error';
import { ACCESS_CONTROL, CLOCK_TOKEN, PUBLIC_URL } from '../../http/tokens';
import type { PublicUrl } from '../../http/tokens';
import { Merchant, MerchantAuthGuard, PollMark, PollMarked, PollMarkTaken, pollRefused } from '../../http/auth/merchant-auth.guard';
import { GetInvoice } from './get-invoice.handler';

/** The poll mark of one invoice: one resource however its id is spelled (UUIDs are case-insensitive); none for what is not an invoice id. */
const invoicePollResource = (params: { id?: string }): string | null => (isUuid(params.id) ? `invoice:${params.id.toLowerCase()}` : null);

@Controller('v1/invoices')
@UseGuards(MerchantAuthGuard)
export class GetInvoiceRoute {
  constructor(
    private readonly queries: QueryBus,
    @Inject(CLOCK_TOKEN) private readonly clock: Clock,
    @Inject(PUBLIC_URL) private readonly publicUrl: PublicUrl,
    @Inject(ACCESS_CONTROL) private readonly access: AccessControl,
  ) {}

  /** One invoice, from its own stream: what the merchant just wrote is always there. */
  @Get(':id')
  @PollMarked(invoicePollResource)
  async get(
    @Merchant() merchant: MerchantIdentity,
    @Param('id') id: string,
    @PollMark() taken: PollMarkTaken | undefined,
    @Query(validRequest) _query: NoParameters,
  ) {
    const resource = invoicePollResource({ id });
    // Not an invoice id (a NUL, another shape): no invoice, and nothing of it reaches the database.
    if (resource === null) throw ApiError.notFound('invoice_not_found', 'Счёт не найден');
    const refusal = taken ? taken.refusal : await this.access.admitPoll(merchant.keyId, resource, this.clock.now());
    if (refusal) throw pollRefused(refusal.retryAfterSeconds, 'Один счёт', this.access.limits.pollIntervalSeconds);
    const invoice = await this.queries.execute(new GetInvoice(merchant.project, merchant.mode, id));
    // Current: past its expiresAt an open invoice is expired (no payment is taken), before the expiry worker records it.
    return invoiceView(invoice, this.publicUrl.value, this.clock.now().toISOString());
  }
}
