import { Body, Controller, Inject, Post, Query, Res, UseGuards } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import type { FastifyReply } from 'fastify';
import type { Clock } from '#platform/clock';
import { invoiceCreatedView, invoiceView } from '#payments';
import type { MerchantIdentity } from '#payments/merchants';
import { CLOCK_TOKEN, PUBLIC_URL } from '../../http/tokens';
import type { PublicUrl } from '../../http/tokens';
import { IdempotencyGuard } from '../../http/idempotency';
import { NoParameters, validRequest } from '../../http/request-pipe';
import { Merchant, MerchantAuthGuard } from '../../http/auth/merchant-auth.guard';
import { CreateInvoiceRequest, toInvoiceRequest } from './create-invoice.request';
import { CreateInvoice } from './create-invoice.handler';

@Controller('v1/invoices')
@UseGuards(MerchantAuthGuard)
export class CreateInvoiceRoute {
  constructor(
    private readonly commands: CommandBus,
    @Inject(CLOCK_TOKEN) private readonly clock: Clock,
    @Inject(PUBLIC_URL) private readonly publicUrl: PublicUrl,
  ) {}

  @Post()
  @UseGuards(IdempotencyGuard)
  async create(
    @Merchant() merchant: MerchantIdentity,
    @Body(validRequest) body: CreateInvoiceRequest,
    @Res() reply: FastifyReply,
    @Query(validRequest) _query: NoParameters,
  ) {
    const request = toInvoiceRequest(body);
    const now = this.clock.now();
    const { created, invoice } = await this.commands.execute(new CreateInvoice(merchant.project, merchant.mode, request, now));
    // A repeat of the orderId answers the invoice as it stands: expired past its expiresAt, as GET by id says.
    return reply.status(created ? 201 : 200).send(invoiceCreatedView(invoiceView(invoice, this.publicUrl.value, now.toISOString())));
  }
}
