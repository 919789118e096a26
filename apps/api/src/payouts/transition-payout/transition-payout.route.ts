import { Body, Controller, HttpCode, Inject, Param, Post, Query, Type, UseGuards } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import type { Clock } from '#platform/clock';
import type { Payout, PayoutTransition } from '#domain';
import { payoutView } from '#payments';
import { ApiError } from '../../http/errors/api-error';
import { NoFieldsRequest, NoParameters, readBody, validOptionalBody, validRequest } from '../../http/request-pipe';
import { CLOCK_TOKEN } from '../../http/tokens';
import { AdminTokenGuard } from '../../http/auth/admin-token.guard';
import { payoutIdOf } from '../get-payout/get-payout.route';
import { PayoutReasonRequest, PayPayoutRequest } from './transition-payout.request';
import { ApprovePayout, CancelPayout, PayPayout, ProcessPayout, RejectPayout } from './transition-payout.handler';

/** The back office of payouts: payout details, payout transitions. */
@Controller('admin/v1/payouts')
@UseGuards(AdminTokenGuard)
export class TransitionPayoutRoute {
  constructor(
    private readonly commands: CommandBus,
    @Inject(CLOCK_TOKEN) private readonly clock: Clock,
  ) {}

  /** approve, process, pay {externalId?}, reject {reason}, cancel {reason}: 409 conflict when illegal from the payout's status. */
  @Post(':id/:transition')
  @HttpCode(200)
  async transition(@Param('id') id: string, @Param('transition') transition: string, @Body() body: unknown, @Query(validRequest) _query: NoParameters) {
    const now = this.clock.now();
    // The body is optional; which fields it takes depends on the transition (an unknown one is 404).
    const read = <T extends object>(cls: Type<T>): Promise<T> => readBody(cls, body, validOptionalBody);
    let command: (payoutId: number) => Promise<Payout>;
    switch (transition as PayoutTransition) {
      case 'approve':
        await read(NoFieldsRequest);
        command = (payoutId) => this.commands.execute(new ApprovePayout(payoutId, now));
        break;
      case 'process':
        await read(NoFieldsRequest);
        command = (payoutId) => this.commands.execute(new ProcessPayout(payoutId, now));
        break;
      case 'pay': {
        const externalId = (await read(PayPayoutRequest)).externalId ?? null;
        command = (payoutId) => this.commands.execute(new PayPayout(payoutId, now, externalId));
        break;
      }
      case 'reject': {
        const { reason } = await read(PayoutReasonRequest);
        command = (payoutId) => this.commands.execute(new RejectPayout(payoutId, now, reason));
        break;
      }
      case 'cancel': {
        const { reason } = await read(PayoutReasonRequest);
        command = (payoutId) => this.commands.execute(new CancelPayout(payoutId, now, reason));
        break;
      }
      default:
        throw ApiError.notFound();
    }
    const payoutId = payoutIdOf(id);
    if (payoutId === null) throw ApiError.notFound('not_found', 'Выплата не найдена');
    return payoutView(await command(payoutId));
  }
}
