import { Controller, Get, Inject, Param, Query, UseGuards } from '@nestjs/common';
import { NoParameters, validRequest } from '../../http/request-pipe';
import { QueryBus } from '@nestjs/cqrs';
import type { AccessControl } from '#payments/access';
import type { Clock } from '#platform/clock';
import { payoutView } from '#payments';
import type { MerchantIdentity } from '#payments/merchants';
import { ApiError } from '../../http/errors/api-error';
import { ACCESS_CONTROL, CLOCK_TOKEN } from '../../http/tokens';
import { Merchant, MerchantAuthGuard, PollMark, PollMarked, PollMarkTaken, pollRefused } from '../../http/auth/merchant-auth.guard';
import { GetPayout } from './get-payout.handler';

/** A payout id in a path: a positive integer in its plain spelling, or nothing. */
export const payoutIdOf = (raw: string): number | null => (/^[1-9]\d{0,15}$/.test(raw) && Number.isSafeInteger(Number(raw)) ? Number(raw) : null);

export const notFound = () => ApiError.notFound('not_found', 'Выплата не найдена');

/** The poll mark of one payout; none for what is not a payout id. */
const payoutPollResource = (params: { id?: string }): string | null => {
  const payoutId = params.id === undefined ? null : payoutIdOf(params.id);
  return payoutId === null ? null : `payout:${payoutId}`;
};

@Controller('v1')
@UseGuards(MerchantAuthGuard)
export class GetPayoutRoute {
  constructor(
    private readonly queries: QueryBus,
    @Inject(CLOCK_TOKEN) private readonly clock: Clock,
    @Inject(ACCESS_CONTROL) private readonly access: AccessControl,
  ) {}

  /** One payout, from its own stream; polled at most once per 3 seconds. */
  @Get('payouts/:id')
  @PollMarked(payoutPollResource)
  async get(
    @Merchant() merchant: MerchantIdentity,
    @Param('id') id: string,
    @PollMark() taken: PollMarkTaken | undefined,
    @Query(validRequest) _query: NoParameters,
  ) {
    // Not a payout id (a NUL, another shape): no payout, and nothing of it reaches the database.
    const payoutId = payoutIdOf(id);
    if (payoutId === null) throw notFound();
    const refusal = taken ? taken.refusal : await this.access.admitPoll(merchant.keyId, payoutPollResource({ id })!, this.clock.now());
    if (refusal) throw pollRefused(refusal.retryAfterSeconds, 'Одну выплату', this.access.limits.pollIntervalSeconds);
    if (merchant.mode !== 'live') throw notFound();
    return payoutView(await this.queries.execute(new GetPayout(merchant.project.accountId, payoutId, this.clock.now())));
  }
}
