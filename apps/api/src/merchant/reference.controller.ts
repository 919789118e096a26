import { Controller, Get, Inject, UseGuards } from '@nestjs/common';
import type { Pool } from 'pg';
import { formatMoney, formatPercent } from '../../../../libs/ledger/src/money';
import type { MerchantIdentity } from '../../../../libs/registry/src';
import { methodsOf } from '../../../../libs/registry/src';
import { DATABASE_POOL } from '../tokens';
import { Merchant, MerchantAuthGuard } from './merchant-auth.guard';

@Controller('v1')
@UseGuards(MerchantAuthGuard)
export class ReferenceController {
  constructor(@Inject(DATABASE_POOL) private readonly pool: Pool) {}

  /** The project's payment methods with their limits and the merchant's rates. */
  @Get('methods')
  methods(@Merchant() merchant: MerchantIdentity) {
    return {
      methods: methodsOf(merchant.project).map((m) => ({
        code: m.code,
        title: m.title,
        feePct: formatPercent(m.feePct),
        min: formatMoney(m.min),
        max: formatMoney(m.max),
        currency: 'RUB',
        enabled: m.enabled,
      })),
    };
  }

  /** The merchant account's balance in the key's mode, from the ledger read model. */
  @Get('balance')
  async balance(@Merchant() merchant: MerchantIdentity) {
    const rows = await this.pool.query<{ account: string; balance: string }>(
      `SELECT account, balance FROM ledger_balances WHERE account_id = $1 AND mode = $2 AND account IN ('available', 'pending', 'reserved')`,
      [merchant.project.accountId, merchant.mode],
    );
    const of = (account: string) => Number(rows.rows.find((r) => r.account === account)?.balance ?? 0);
    return {
      available: formatMoney(of('available')),
      pending: formatMoney(of('pending')),
      reserved: formatMoney(of('reserved')),
      currency: 'RUB',
    };
  }
}
