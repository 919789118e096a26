import { Body, Controller, Get, HttpCode, Inject, Param, Post, UseGuards, UseInterceptors } from '@nestjs/common';
import type { Clock } from '../../../../libs/clock/src';
import type { RefundService } from '../../../../libs/payments/src';
import { refundView } from '../../../../libs/payments/src';
import type { MerchantIdentity } from '../../../../libs/registry/src';
import type { KeyedRequest } from '../../../../libs/idempotency/src';
import { IdempotencyInterceptor, Keyed } from '../http/idempotency';
import { RawBody } from '../http/raw-body';
import { Fields } from '../http/validation';
import { CLOCK_TOKEN, REFUND_SERVICE } from '../tokens';
import { Merchant, MerchantAuthGuard } from './merchant-auth.guard';

@Controller('v1')
@UseGuards(MerchantAuthGuard)
export class RefundsController {
  constructor(
    @Inject(REFUND_SERVICE) private readonly refunds: RefundService,
    @Inject(CLOCK_TOKEN) private readonly clock: Clock,
  ) {}

  /**
   * A full (no amount) or partial refund of a paid invoice: 202 with the refund,
   * pending; the amount is reserved on the balance at once and the result comes by
   * webhook (refund.succeeded or refund.failed).
   */
  @Post('invoices/:id/refund')
  @HttpCode(202)
  @UseInterceptors(IdempotencyInterceptor)
  async refund(
    @Merchant() merchant: MerchantIdentity,
    @Param('id') invoiceId: string,
    @Body() body: unknown,
    @RawBody() rawBody: Buffer | undefined,
    @Keyed() keyed: KeyedRequest | null,
  ) {
    // The body is optional: none at all is a full refund. A JSON `null` is a body, and not an object.
    const f = Fields.ofBody(body === undefined ? {} : body, rawBody);
    const amount = f.money('amount');
    if (amount === 0) f.fail('amount', 'out_of_range', 'сумма возврата должна быть больше нуля');
    f.done();
    const refund = await this.refunds.request(merchant.project, merchant.mode, invoiceId, amount ?? null, this.clock.now(), keyed);
    return refundView(refund);
  }

  /** One refund, from its own stream; unknown or another project's: 404 invoice_not_found (as the spec says). */
  @Get('refunds/:id')
  async get(@Merchant() merchant: MerchantIdentity, @Param('id') id: string) {
    return refundView(await this.refunds.getFor(merchant.project, merchant.mode, id));
  }
}
