import { Body, Controller, HttpCode, Inject, Param, Post, Res, UseGuards } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import type { Clock } from '../../../../libs/clock/src';
import { PayoutTransition } from '../../../../libs/domain/src';
import type { PayoutService, RefundService } from '../../../../libs/payments/src';
import { payoutView, refundView } from '../../../../libs/payments/src';
import type { PayoutAddress, PayoutAddresses, Registry } from '../../../../libs/registry/src';
import { ApiError } from '../errors/api-error';
import { isUuid } from '../http/validation';
import { readRequest, RequestClass, ValidBody } from '../http/request-validation';
import { AddPayoutAddressRequest, FailRefundRequest, NoFieldsRequest, PayoutReasonRequest, PayPayoutRequest } from '../payouts/payout-operations.request';
import { payoutIdOf } from '../merchant/payouts.controller';
import { CLOCK_TOKEN, PAYOUT_ADDRESSES, PAYOUT_SERVICE, REFUND_SERVICE, REGISTRY } from '../tokens';
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
    @Inject(REGISTRY) private readonly registry: Registry,
    @Inject(PAYOUT_ADDRESSES) private readonly addresses: PayoutAddresses,
    @Inject(PAYOUT_SERVICE) private readonly payouts: PayoutService,
    @Inject(REFUND_SERVICE) private readonly refunds: RefundService,
    @Inject(CLOCK_TOKEN) private readonly clock: Clock,
  ) {}

  /** A payout detail of the account, unconfirmed until confirmed (201; 200 when it was added before). */
  @Post('accounts/:id/payout-addresses')
  async addAddress(@Param('id') accountId: string, @ValidBody(AddPayoutAddressRequest) body: AddPayoutAddressRequest, @Res() reply: FastifyReply) {
    const { method, account, bank, label } = body;
    if (!isUuid(accountId) || !(await this.registry.account(accountId))) throw ApiError.notFound('not_found', 'Аккаунт не найден');
    const { address, created } = await this.addresses.add(accountId, { method, account, bank: bank ?? null, label: label ?? null }, this.clock.now());
    return reply.status(created ? 201 : 200).send(addressView(address));
  }

  /** Stands in for the e-mail link that confirms a payout detail. */
  @Post('payout-addresses/:id/confirm')
  @HttpCode(200)
  async confirmAddress(@Param('id') id: string) {
    const addressId = payoutIdOf(id);
    const address = addressId === null ? null : await this.addresses.confirm(addressId, this.clock.now());
    if (!address) throw ApiError.notFound('not_found', 'Реквизит не найден');
    return addressView(address);
  }

  /** approve, process, pay {externalId?}, reject {reason}, cancel {reason}: 409 conflict when illegal from the payout's status. */
  @Post('payouts/:id/:transition')
  @HttpCode(200)
  async transition(@Param('id') id: string, @Param('transition') transition: string, @Body() body: unknown) {
    const at = this.clock.now().toISOString();
    // The body is optional; which fields it takes depends on the transition (an unknown one is 404).
    const read = <T extends object>(cls: RequestClass<T>): T => readRequest(cls, body, undefined, { absentIsEmpty: true });
    let command: Parameters<PayoutService['transition']>[1];
    switch (transition as PayoutTransition) {
      case 'approve':
        read(NoFieldsRequest);
        command = { type: 'ApprovePayout', at };
        break;
      case 'process':
        read(NoFieldsRequest);
        command = { type: 'StartProcessing', at };
        break;
      case 'pay':
        command = { type: 'PayPayout', at, externalId: read(PayPayoutRequest).externalId ?? null };
        break;
      case 'reject':
        command = { type: 'RejectPayout', at, reason: read(PayoutReasonRequest).reason };
        break;
      case 'cancel':
        command = { type: 'CancelPayout', at, reason: read(PayoutReasonRequest).reason };
        break;
      default:
        throw ApiError.notFound();
    }
    const payoutId = payoutIdOf(id);
    if (payoutId === null) throw ApiError.notFound('not_found', 'Выплата не найдена');
    return payoutView(await this.payouts.transition(payoutId, command));
  }

  /** The bank refused the refund: failed, its amount back to available; 409 conflict once it succeeded. */
  @Post('refunds/:id/fail')
  @HttpCode(200)
  async failRefund(@Param('id') id: string, @ValidBody(FailRefundRequest, { absentIsEmpty: true }) body: FailRefundRequest) {
    return refundView(await this.refunds.fail(id, body.reason ?? 'refused by the bank', this.clock.now()));
  }
}
