import { Body, Controller, HttpCode, Inject, Param, Post, Res, Type, UseGuards } from '@nestjs/common';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import type { FastifyReply } from 'fastify';
import type { Clock } from '#platform/clock';
import { isUuid, Payout, PayoutTransition } from '#domain';
import { payoutView } from '#payments';
import { GetAccount } from '#payments/merchants';
import { AddPayoutAddress } from '#payments/payouts';
import { ApprovePayout } from '#payments/payouts';
import { CancelPayout } from '#payments/payouts';
import { ConfirmPayoutAddress } from '#payments/payouts';
import { PayPayout } from '#payments/payouts';
import { ProcessPayout } from '#payments/payouts';
import { RejectPayout } from '#payments/payouts';
import type { PayoutAddress } from '#payments/merchants';
import { ApiError } from '../http/errors/api-error';
import { readBody, validOptionalBody, validRequest } from '../http/request-pipe';
import { AddPayoutAddressRequest, NoFieldsRequest, PayoutReasonRequest, PayPayoutRequest } from './payout-operations.request';
import { payoutIdOf } from './payouts.controller';
import { CLOCK_TOKEN } from '../http/tokens';
import { AdminTokenGuard } from '../http/auth/admin-token.guard';

/** The operator sees the full account. */
export const addressView = (a: PayoutAddress) => ({
  id: a.id,
  accountId: a.accountId,
  method: a.method,
  account: a.account,
  bank: a.bank,
  label: a.label,
  status: a.status,
  confirmedAt: a.confirmedAt?.toISOString() ?? null,
  createdAt: a.createdAt.toISOString(),
});

/** The back office of payouts: payout details, payout transitions. */
@Controller('admin/v1')
@UseGuards(AdminTokenGuard)
export class PayoutsAdminController {
  constructor(
    private readonly commands: CommandBus,
    private readonly queries: QueryBus,
    @Inject(CLOCK_TOKEN) private readonly clock: Clock,
  ) {}

  /** A payout detail of the account, unconfirmed until confirmed (201; 200 when it was added before). */
  @Post('accounts/:id/payout-addresses')
  async addAddress(@Param('id') accountId: string, @Body(validRequest) body: AddPayoutAddressRequest, @Res() reply: FastifyReply) {
    const { method, account, bank, label } = body;
    if (!isUuid(accountId) || !(await this.queries.execute(new GetAccount(accountId)))) throw ApiError.notFound('not_found', 'Аккаунт не найден');
    const { address, created } = await this.commands.execute(
      new AddPayoutAddress(accountId, { method, account, bank: bank ?? null, label: label ?? null }, this.clock.now()),
    );
    return reply.status(created ? 201 : 200).send(addressView(address));
  }

  /** Stands in for the e-mail link that confirms a payout detail. */
  @Post('payout-addresses/:id/confirm')
  @HttpCode(200)
  async confirmAddress(@Param('id') id: string) {
    const addressId = payoutIdOf(id);
    const address = addressId === null ? null : await this.commands.execute(new ConfirmPayoutAddress(addressId, this.clock.now()));
    if (!address) throw ApiError.notFound('not_found', 'Реквизит не найден');
    return addressView(address);
  }

  /** approve, process, pay {externalId?}, reject {reason}, cancel {reason}: 409 conflict when illegal from the payout's status. */
  @Post('payouts/:id/:transition')
  @HttpCode(200)
  async transition(@Param('id') id: string, @Param('transition') transition: string, @Body() body: unknown) {
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
