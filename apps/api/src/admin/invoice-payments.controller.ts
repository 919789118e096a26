import { Controller, HttpCode, Inject, Param, Post, UseGuards } from '@nestjs/common';
import type { Clock } from '../../../../libs/clock/src';
import type { InvoiceService } from '../../../../libs/payments/src';
import { invoiceView } from '../../../../libs/payments/src';
import { ValidBody } from '../http/request-validation';
import { PaymentResultRequest } from '../invoices/payment-result.request';
import { CLOCK_TOKEN, INVOICE_SERVICE, PUBLIC_URL } from '../tokens';
import type { PublicUrl } from '../tokens';
import { AdminTokenGuard } from './admin-token.guard';

/** The acquirer's answer for an invoice (what the sandbox payment page does for test invoices). */
@Controller('admin/v1/invoices')
@UseGuards(AdminTokenGuard)
export class InvoicePaymentsController {
  constructor(
    @Inject(INVOICE_SERVICE) private readonly invoices: InvoiceService,
    @Inject(CLOCK_TOKEN) private readonly clock: Clock,
    @Inject(PUBLIC_URL) private readonly publicUrl: PublicUrl,
  ) {}

  @Post(':id/payment')
  @HttpCode(200)
  async payment(@Param('id') id: string, @ValidBody(PaymentResultRequest) body: PaymentResultRequest) {
    const invoice = await this.invoices.recordPaymentResult(id, body.outcome, body.method ?? null, this.clock.now());
    return invoiceView(invoice, this.publicUrl.value);
  }
}
