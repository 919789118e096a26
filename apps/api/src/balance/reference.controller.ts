import { Controller, Get, Query, UseGuards } from '@nestjs/common';
import { NoParameters, validRequest } from '../http/request-pipe';
import { QueryBus } from '@nestjs/cqrs';
import type { MethodTerms } from '#domain';
import { formatMoney, formatPercent } from '#ledger';
import type { Kopecks } from '#ledger';
import type { MerchantIdentity } from '#payments/merchants';
import { methodsOf } from '#payments/merchants';
import { GetBalance } from '#payments/balance';
import { Merchant, MerchantAuthGuard } from '../http/auth/merchant-auth.guard';
import { ReadsModels } from '../http/read-models';

/** The spec's Method. */
export const methodView = (m: MethodTerms) => ({
  code: m.code,
  title: m.title,
  feePct: formatPercent(m.feePct),
  min: formatMoney(m.min),
  max: formatMoney(m.max),
  currency: 'RUB' as const,
  enabled: m.enabled,
});

/** The spec's Balance. */
export const balanceView = (balance: { readonly available: Kopecks; readonly pending: Kopecks; readonly reserved: Kopecks }) => ({
  available: formatMoney(balance.available),
  pending: formatMoney(balance.pending),
  reserved: formatMoney(balance.reserved),
  currency: 'RUB' as const,
});

@Controller('v1')
@UseGuards(MerchantAuthGuard)
export class ReferenceController {
  constructor(private readonly queries: QueryBus) {}

  /** The project's payment methods with their limits and the merchant's rates. */
  @Get('methods')
  methods(@Merchant() merchant: MerchantIdentity, @Query(validRequest) _query: NoParameters) {
    return { methods: methodsOf(merchant.project).map(methodView) };
  }

  /** The merchant account's balance in the key's mode: the ledger read model and the entries past it (merchantBalance). */
  @ReadsModels('ledger')
  @Get('balance')
  async balance(@Merchant() merchant: MerchantIdentity, @Query(validRequest) _query: NoParameters) {
    const balance = await this.queries.execute(new GetBalance({ accountId: merchant.project.accountId, mode: merchant.mode }));
    return balanceView(balance);
  }
}
