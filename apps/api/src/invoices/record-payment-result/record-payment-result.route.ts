import { Body, Controller, HttpCode, Inject, Param, Post, Query, UseGuards } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import type { Clock } from '#platform/clock';
import { invoiceView } from '#payments';
import { RecordPaymentResult } from './record-payment-result.handler';
import { NoParameters, validRequest } from '../../http/request-pipe';
import { PaymentResultRequest } from './payment-result.request';
import { CLOCK_TOKEN, PUBLIC_URL } from '../../http/tokens';
import type { PublicUrl } from '../../http/tokens';
import { AdminTokenGuard } from '../../http/auth/admin-token.guard';

/** The acquirer's answer for an invoice (what the sandbox payment page does for test invoices). */
@Controller('admin/v1/invoices')
@UseGuards(AdminTokenGuard)
export class RecordPaymentResultRoute {
  constructor(
    private readonly commands: CommandBus,
    @Inject(CLOCK_TOKEN) private readonly clock: Clock,
    @Inject(PUBLIC_URL) private readonly publicUrl: PublicUrl,
  ) {}

  @Post(':id/payment')
  @HttpCode(200)
  async payment(@Param('id') id: string, @Body(validRequest) body: PaymentResultRequest, @Query(validRequest) _query: NoParameters) {
    const invoice = await this.commands.execute(new RecordPaymentResult(id, body.outcome, body.method ?? null, this.clock.now()));
    return invoiceView(invoice, this.publicUrl.value);
  }
}
