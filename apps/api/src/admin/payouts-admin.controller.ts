import { Body, Controller, HttpCode, Inject, Param, Post, Res, UseGuards } from '@nestjs/common';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import type { FastifyReply } from 'fastify';
import type { Clock } from '../../../../libs/clock/src';
import { canonicalPayoutAccount, Payout, PAYOUT_METHODS, PayoutTransition } from '../../../../libs/domain/src';
import { payoutView, refundView } from '../../../../libs/payments/src';
import { GetAccount } from '../../../../libs/payments/src/merchants/get-account.query';
import { AddPayoutAddress } from '../../../../libs/payments/src/payouts/add-payout-address.command';
import { ApprovePayout } from '../../../../libs/payments/src/payouts/approve-payout.command';
import { CancelPayout } from '../../../../libs/payments/src/payouts/cancel-payout.command';
import { ConfirmPayoutAddress } from '../../../../libs/payments/src/payouts/confirm-payout-address.command';
import { PayPayout } from '../../../../libs/payments/src/payouts/pay-payout.command';
import { ProcessPayout } from '../../../../libs/payments/src/payouts/process-payout.command';
import { RejectPayout } from '../../../../libs/payments/src/payouts/reject-payout.command';
import { FailRefund } from '../../../../libs/payments/src/refunds/fail-refund.command';
import type { PayoutAddress } from '../../../../libs/registry/src';
import { ApiError } from '../errors/api-error';
import { Fields, isUuid } from '../http/validation';
import { payoutIdOf } from '../merchant/payouts.controller';
import { CLOCK_TOKEN } from '../tokens';
import { AdminTokenGuard } from './admin-token.guard';

/** The operator sees the full account. */
const addressView = (a: PayoutAddress) => ({
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

/** The back office of the money going out: payout details, payout transitions, refunds the bank refused. */
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
  async addAddress(@Param('id') accountId: string, @Body() body: unknown, @Res() reply: FastifyReply) {
    const f = Fields.ofBody(body);
    const method = f.enumOf('method', PAYOUT_METHODS, { required: true });
    const account = f.string('account', { required: true, min: 1, max: 128 });
    const bank = f.string('bank', { max: 255, nullable: true });
    const label = f.string('label', { max: 255, nullable: true });
    if (method !== undefined && account !== undefined && canonicalPayoutAccount(method, account) === null) {
      f.fail(
        'account',
        'invalid_format',
        method === 'sbp' ? 'телефон +7 и 10 цифр' : method === 'usdt_trc20' ? 'адрес TRON: T и 33 символа base58' : 'адрес BEP-20: 0x и 40 шестнадцатеричных цифр',
      );
    }
    f.done();
    if (!isUuid(accountId) || !(await this.queries.execute(new GetAccount(accountId)))) throw ApiError.notFound('not_found', 'Аккаунт не найден');
    const { address, created } = await this.commands.execute(
      new AddPayoutAddress(accountId, { method: method!, account: account!, bank: bank ?? null, label: label ?? null }, this.clock.now()),
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
    const f = Fields.ofBody(body === undefined ? {} : body);
    let command: (payoutId: number) => Promise<Payout>;
    switch (transition as PayoutTransition) {
      case 'approve':
        command = (payoutId) => this.commands.execute(new ApprovePayout(payoutId, now));
        break;
      case 'process':
        command = (payoutId) => this.commands.execute(new ProcessPayout(payoutId, now));
        break;
      case 'pay': {
        const externalId = f.string('externalId', { max: 256, nullable: true }) ?? null;
        command = (payoutId) => this.commands.execute(new PayPayout(payoutId, now, externalId));
        break;
      }
      case 'reject': {
        const reason = f.string('reason', { required: true, min: 1, max: 500 })!;
        command = (payoutId) => this.commands.execute(new RejectPayout(payoutId, now, reason));
        break;
      }
      case 'cancel': {
        const reason = f.string('reason', { required: true, min: 1, max: 500 })!;
        command = (payoutId) => this.commands.execute(new CancelPayout(payoutId, now, reason));
        break;
      }
      default:
        throw ApiError.notFound();
    }
    f.done();
    const payoutId = payoutIdOf(id);
    if (payoutId === null) throw ApiError.notFound('not_found', 'Выплата не найдена');
    return payoutView(await command(payoutId));
  }

  /** The bank refused the refund: failed, its amount back to available; 409 conflict once it succeeded. */
  @Post('refunds/:id/fail')
  @HttpCode(200)
  async failRefund(@Param('id') id: string, @Body() body: unknown) {
    const f = Fields.ofBody(body === undefined ? {} : body);
    const reason = f.string('reason', { min: 1, max: 500 });
    f.done();
    return refundView(await this.commands.execute(new FailRefund(id, reason ?? 'refused by the bank', this.clock.now())));
  }
}
