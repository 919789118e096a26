import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import type { Pool } from 'pg';
import type { LedgerId } from '#ledger';
import { merchantBalance } from '../ledger/ledger.read-model';
import { READ_MODELS } from '../payments.tokens';

/** GET /v1/balance: the merchant's available, pending and reserved kopecks in the key's mode, from the ledger read model. */
export class GetBalance extends Query<{ readonly available: number; readonly pending: number; readonly reserved: number }> {
  constructor(readonly ledger: LedgerId) {
    super();
  }
}

@QueryHandler(GetBalance)
export class GetBalanceHandler implements IQueryHandler<GetBalance> {
  constructor(@Inject(READ_MODELS) private readonly pool: Pool) {}

  execute(query: GetBalance): Promise<{ readonly available: number; readonly pending: number; readonly reserved: number }> {
    return merchantBalance(this.pool, query.ledger.accountId, query.ledger.mode);
  }
}
