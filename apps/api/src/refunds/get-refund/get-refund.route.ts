import { Controller, Get, Param, Query, UseGuards } from '@nestjs/common';
import { NoParameters, validRequest } from '../../http/request-pipe';
import { QueryBus } from '@nestjs/cqrs';
import { refundView } from '#payments';
import type { MerchantIdentity } from '#payments/merchants';
import { Merchant, MerchantAuthGuard } from '../../http/auth/merchant-auth.guard';
import { GetRefund } from './get-refund.handler';

@Controller('v1/refunds')
@UseGuards(MerchantAuthGuard)
export class GetRefundRoute {
  constructor(private readonly queries: QueryBus) {}

  /** One refund, from its own stream; unknown or another project's: 404 invoice_not_found (as the spec says). */
  @Get(':id')
  async get(@Merchant() merchant: MerchantIdentity, @Param('id') id: string, @Query(validRequest) _query: NoParameters) {
    return refundView(await this.queries.execute(new GetRefund(merchant.project, merchant.mode, id)));
  }
}
