import { Body, Controller, HttpCode, Inject, Param, Post, Query, UseGuards } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import type { Clock } from '#platform/clock';
import { refundView } from '#payments';
import { NoParameters, validOptionalBody, validRequest } from '../../http/request-pipe';
import { CLOCK_TOKEN } from '../../http/tokens';
import { AdminTokenGuard } from '../../http/auth/admin-token.guard';
import { FailRefundRequest } from './fail-refund.request';
import { FailRefund } from './fail-refund.handler';

@Controller('admin/v1/refunds')
@UseGuards(AdminTokenGuard)
export class FailRefundRoute {
  constructor(
    private readonly commands: CommandBus,
    @Inject(CLOCK_TOKEN) private readonly clock: Clock,
  ) {}

  /** The bank refused the refund: failed, its amount back to available; 409 conflict once it succeeded. */
  @Post(':id/fail')
  @HttpCode(200)
  async fail(@Param('id') id: string, @Body(validOptionalBody) body: FailRefundRequest, @Query(validRequest) _query: NoParameters) {
    return refundView(await this.commands.execute(new FailRefund(id, body.reason ?? 'refused by the bank', this.clock.now())));
  }
}
