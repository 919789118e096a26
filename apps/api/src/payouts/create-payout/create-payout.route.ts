import { Body, Controller, Get, Inject, Param, Post, Query, Res, UseGuards, UseInterceptors } from '@nestjs/common';
import { CommandBus, QueryBus } from '@nestjs/cqrs';
import type { FastifyReply } from 'fastify';
import type { AccessControl } from '#payments/access';
import type { Clock } from '#platform/clock';
import { maskPayoutAccount, PAYOUT_STATUSES } from '#domain';
import { payoutView } from '#payments';
import { CreatePayout } from '#payments/payouts';
import { GetPayoutByOrderId } from '#payments/payouts';
import { GetPayout } from '#payments/payouts';
import { ListPayoutAddresses } from '#payments/payouts';
import { ListPayouts } from '#payments/payouts';
import type { MerchantIdentity, PayoutAddress } from '#payments/merchants';
import { ApiError } from '../http/errors/api-error';
import { cursorSeqOf, encodeCursor, pageSizeOf } from '../http/cursor';
import { parseMoney } from '#ledger';
import { readBody, validRequest } from '../http/request-pipe';
import { CreatePayoutRequest } from './create-payout.request';
import { ListPayoutsQuery } from './list-payouts.request';
import type { KeyedRequest } from '#payments/idempotency';
import { IdempotencyInterceptor, Keyed } from '../http/idempotency';
import { ACCESS_CONTROL, CLOCK_TOKEN } from '../http/tokens';
import { Merchant, MerchantAuthGuard, PollMark, PollMarked, PollMarkTaken, rateLimited } from '../http/auth/merchant-auth.guard';
import { ReadsModels } from '../http/read-models';

/** A payout id in a path: a positive integer in its plain spelling, or nothing. */
export const payoutIdOf = (raw: string): number | null => (/^[1-9]\d{0,15}$/.test(raw) && Number.isSafeInteger(Number(raw)) ? Number(raw) : null);

const notFound = () => ApiError.notFound('not_found', 'Выплата не найдена');

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

/** The poll mark of one payout; none for what is not a payout id. */
const payoutPollResource = (params: { id?: string }): string | null => {
  const payoutId = params.id === undefined ? null : payoutIdOf(params.id);
  return payoutId === null ? null : `payout:${payoutId}`;
};

@Controller('v1')
@UseGuards(MerchantAuthGuard)
export class PayoutsController {
  constructor(
    private readonly commands: CommandBus,
    private readonly queries: QueryBus,
    @Inject(CLOCK_TOKEN) private readonly clock: Clock,
    @Inject(ACCESS_CONTROL) private readonly access: AccessControl,
  ) {}

  /** The account's confirmed payout details, account masked. */
  @Get('payout-addresses')
  async listAddresses(@Merchant() merchant: MerchantIdentity) {
    const confirmed = await this.queries.execute(new ListPayoutAddresses(merchant.project.accountId));
    return { items: confirmed.map(payoutAddressView) };
  }

  @Post('payouts')
  @UseInterceptors(IdempotencyInterceptor)
  async create(@Merchant() merchant: MerchantIdentity, @Body() body: unknown, @Keyed() keyed: KeyedRequest | null, @Res() reply: FastifyReply) {
    if (merchant.mode !== 'live') throw new ApiError(403, 'test_mode', 'Выплаты создаются только боевым ключом (sk_live_)');
    // Read after the key's mode is checked: a test key is refused whatever it sends.
    const { amount, addressId, method, account, orderId, comment } = await readBody(CreatePayoutRequest, body);
    const { created, payout } = await this.commands.execute(
      new CreatePayout(
        merchant.project.accountId,
        merchant.project.id,
        { amount: parseMoney(amount), addressId, method, account, orderId: orderId ?? null, comment: comment ?? null },
        this.clock.now(),
        keyed,
      ),
    );
    return reply.status(created ? 201 : 200).send(payoutView(payout));
  }

  /** The account's payouts, newest first; with orderId, the one payout (not a list) or 404 not_found. */
  @ReadsModels('payouts')
  @Get('payouts')
  async list(@Merchant() merchant: MerchantIdentity, @Query(validRequest) query: ListPayoutsQuery) {
    const { orderId, status } = query;
    const limit = pageSizeOf(query.limit, 20);
    const before = cursorSeqOf(query.cursor);
    // Payouts are made with live keys only: a test key has none.
    const live = merchant.mode === 'live';
    if (orderId !== undefined) {
      if (!live) throw notFound();
      return payoutView(await this.queries.execute(new GetPayoutByOrderId(merchant.project.accountId, orderId)));
    }
    if (!live) return { items: [], nextCursor: null, hasMore: false };
    const page = await this.queries.execute(
      new ListPayouts({ accountId: merchant.project.accountId, statuses: status !== undefined ? [status] : PAYOUT_STATUSES, before, limit }),
    );
    return {
      items: page.items.map((payout) => payoutView(payout)),
      nextCursor: page.hasMore ? encodeCursor({ seq: page.lastSeq! }) : null,
      hasMore: page.hasMore,
    };
  }

  /** One payout, from its own stream; polled at most once per 3 seconds. */
  @Get('payouts/:id')
  @PollMarked(payoutPollResource)
  async get(@Merchant() merchant: MerchantIdentity, @Param('id') id: string, @PollMark() taken: PollMarkTaken | undefined) {
    // Not a payout id (a NUL, another shape): no payout, and nothing of it reaches the database.
    const payoutId = payoutIdOf(id);
    if (payoutId === null) throw notFound();
    const refusal = taken ? taken.refusal : await this.access.admitPoll(merchant.keyId, payoutPollResource({ id })!, this.clock.now());
    if (refusal) throw rateLimited(refusal.retryAfterSeconds, 'Одну выплату можно запрашивать не чаще раза в 3 секунды: ждите вебхук');
    if (merchant.mode !== 'live') throw notFound();
    return payoutView(await this.queries.execute(new GetPayout(merchant.project.accountId, payoutId)));
  }
}
