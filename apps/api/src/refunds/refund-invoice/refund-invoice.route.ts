import { Body, Controller, HttpCode, Inject, Param, Post, Query, UseGuards } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import type { Clock } from '#platform/clock';
import { refundView } from '#payments';
import type { MerchantIdentity } from '#payments/merchants';
import type { KeyedRequest } from '#payments/idempotency';
import { IdempotencyGuard, Keyed } from '../../http/idempotency';
import { NoParameters, validOptionalBody, validRequest } from '../../http/request-pipe';
import { moneyAsSent } from '../../http/request-rules';
import { RefundInvoiceRequest } from './refund-invoice.request';
import { RefundInvoice } from './refund-invoice.handler';
import { CLOCK_TOKEN } from '../../http/tokens';
import { Merchant, MerchantAuthGuard } from '../../http/auth/merchant-auth.guard';

@Controller('v1')
@UseGuards(MerchantAuthGuard)
export class RefundInvoiceRoute {
  constructor(
    private readonly commands: CommandBus,
    @Inject(CLOCK_TOKEN) private readonly clock: Clock,
  ) {}

  /**
   * A full (no amount) or partial refund of a paid invoice: 202 with the refund,
   * pending; the amount is reserved on the balance at once and the result comes by
   * webhook (refund.succeeded or refund.failed).
   */
  @Post('invoices/:id/refund')
  @HttpCode(202)
  @UseGuards(IdempotencyGuard)
  async refund(
    @Merchant() merchant: MerchantIdentity,
    @Param('id') invoiceId: string,
    // The body is optional: none at all is a full refund. A JSON `null` is a body, and not an object.
    @Body(validOptionalBody) body: RefundInvoiceRequest,
    @Query(validRequest) _query: NoParameters,
    @Keyed() keyed: KeyedRequest | null,
  ) {
    const amount = body.amount === undefined ? null : moneyAsSent(body, 'amount');
    const refund = await this.commands.execute(new RefundInvoice(merchant.project, merchant.mode, invoiceId, amount, this.clock.now(), keyed));
    return refundView(refund);
  }
}
