import { Body, Controller, Inject, Post, Query, Res, UseGuards } from '@nestjs/common';
import { CommandBus } from '@nestjs/cqrs';
import type { FastifyReply } from 'fastify';
import type { Clock } from '#platform/clock';
import { payoutView } from '#payments';
import type { MerchantIdentity } from '#payments/merchants';
import type { KeyedRequest } from '#payments/idempotency';
import { ApiError } from '../../http/errors/api-error';
import { NoParameters, readBody, validRequest } from '../../http/request-pipe';
import { moneyAsSent } from '../../http/request-rules';
import { IdempotencyGuard, Keyed } from '../../http/idempotency';
import { CLOCK_TOKEN } from '../../http/tokens';
import { Merchant, MerchantAuthGuard } from '../../http/auth/merchant-auth.guard';
import { CreatePayoutRequest } from './create-payout.request';
import { CreatePayout } from './create-payout.handler';

@Controller('v1')
@UseGuards(MerchantAuthGuard)
export class CreatePayoutRoute {
  constructor(
    private readonly commands: CommandBus,
    @Inject(CLOCK_TOKEN) private readonly clock: Clock,
  ) {}

  @Post('payouts')
  @UseGuards(IdempotencyGuard)
  async create(
    @Merchant() merchant: MerchantIdentity,
    @Body() body: unknown,
    @Keyed() keyed: KeyedRequest | null,
    @Res() reply: FastifyReply,
    @Query(validRequest) _query: NoParameters,
  ) {
    if (merchant.mode !== 'live') throw new ApiError(403, 'test_mode', 'Выплаты создаются только боевым ключом (sk_live_)');
    // Read after the key's mode is checked: a test key is refused whatever it sends.
    const request = await readBody(CreatePayoutRequest, body);
    const { addressId, method, account, orderId, comment } = request;
    const { created, payout } = await this.commands.execute(
      new CreatePayout(
        merchant.project.accountId,
        merchant.project.id,
        { amount: moneyAsSent(request, 'amount'), addressId, method, account, orderId: orderId ?? null, comment: comment ?? null },
        this.clock,
        keyed,
      ),
    );
    return reply.status(created ? 201 : 200).send(payoutView(payout));
  }
}
