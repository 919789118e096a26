import { Body, Controller, Get, HttpCode, Inject, Param, Post, Query, Res, UseGuards } from '@nestjs/common';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import type { FastifyReply } from 'fastify';
import type { Clock } from '#platform/clock';
import { isUuid, maskPayoutAccount } from '#domain';
import { GetAccount } from '#payments/merchants';
import type { MerchantIdentity, PayoutAddress } from '#payments/merchants';
import { ApiError } from '../../http/errors/api-error';
import { NoFieldsRequest, NoParameters, validOptionalBody, validRequest } from '../../http/request-pipe';
import { CLOCK_TOKEN } from '../../http/tokens';
import { AdminTokenGuard } from '../../http/auth/admin-token.guard';
import { Merchant, MerchantAuthGuard } from '../../http/auth/merchant-auth.guard';
import { payoutIdOf } from '../get-payout/get-payout.route';
import { AddPayoutAddressRequest } from './add-payout-address.request';
import { AddPayoutAddress } from './add-payout-address.handler';
import { ConfirmPayoutAddress } from './confirm-payout-address.handler';
import { ListPayoutAddresses } from './list-payout-addresses.handler';

/** The spec's PayoutAddress: a confirmed detail, its account masked. */
export const payoutAddressView = (a: PayoutAddress) => ({
  id: a.id,
  method: a.method,
  label: a.label,
  account: maskPayoutAccount(a.method, a.account),
  bank: a.bank,
  status: 'confirmed' as const,
  confirmedAt: a.confirmedAt?.toISOString() ?? null,
  createdAt: a.createdAt.toISOString(),
});

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

/** The merchant's confirmed payout details, account masked. */
@Controller('v1/payout-addresses')
@UseGuards(MerchantAuthGuard)
export class ListPayoutAddressesRoute {
  constructor(private readonly queries: QueryBus) {}

  @Get()
  async listAddresses(@Merchant() merchant: MerchantIdentity, @Query(validRequest) _query: NoParameters) {
    const confirmed = await this.queries.execute(new ListPayoutAddresses(merchant.project.accountId));
    return { items: confirmed.map(payoutAddressView) };
  }
}

/** The operator adds and confirms payout details. */
@Controller('admin/v1')
@UseGuards(AdminTokenGuard)
export class PayoutAddressesAdminRoute {
  constructor(
    private readonly commands: CommandBus,
    private readonly queries: QueryBus,
    @Inject(CLOCK_TOKEN) private readonly clock: Clock,
  ) {}

  /**
   * A payout detail of the account, unconfirmed until confirmed (201; 200 when it was added
   * before with the same bank and label; with others 409, nothing changed: no route changes a detail).
   */
  @Post('accounts/:id/payout-addresses')
  async addAddress(
    @Param('id') accountId: string,
    @Body(validRequest) body: AddPayoutAddressRequest,
    @Res() reply: FastifyReply,
    @Query(validRequest) _query: NoParameters,
  ) {
    const { method, account, bank, label } = body;
    if (!isUuid(accountId) || !(await this.queries.execute(new GetAccount(accountId)))) throw ApiError.notFound('not_found', 'Аккаунт не найден');
    const { address, created, differs } = await this.commands.execute(
      new AddPayoutAddress(accountId, { method, account, bank: bank ?? null, label: label ?? null }, this.clock.now()),
    );
    if (differs) {
      throw new ApiError(
        409,
        'conflict',
        `Реквизит уже добавлен (id ${address.id}) с другим банком или подписью: bank ${JSON.stringify(address.bank)}, label ${JSON.stringify(address.label)}; изменить их нельзя (такого маршрута нет): повторите запрос с этими bank и label, чтобы получить его`,
      );
    }
    return reply.status(created ? 201 : 200).send(addressView(address));
  }

  /** Stands in for the e-mail link that confirms a payout detail. */
  @Post('payout-addresses/:id/confirm')
  @HttpCode(200)
  async confirmAddress(@Param('id') id: string, @Query(validRequest) _query: NoParameters, @Body(validOptionalBody) _body: NoFieldsRequest) {
    const addressId = payoutIdOf(id);
    const address = addressId === null ? null : await this.commands.execute(new ConfirmPayoutAddress(addressId, this.clock.now()));
    if (!address) throw ApiError.notFound('not_found', 'Реквизит не найден');
    return addressView(address);
  }
}
