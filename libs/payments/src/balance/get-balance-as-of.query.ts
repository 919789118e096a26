import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import type { BalancesAsOf, LedgerId } from '#ledger';
import { LedgerBook } from '../ledger';

/** Audit: a ledger's balances at a past instant, summed from every entry of its stream that occurred at or before it. */
export class GetBalanceAsOf extends Query<BalancesAsOf> {
  constructor(
    readonly ledger: LedgerId,
    readonly instant: Date,
  ) {
    super();
  }
}

@QueryHandler(GetBalanceAsOf)
export class GetBalanceAsOfHandler implements IQueryHandler<GetBalanceAsOf> {
  constructor(@Inject(LedgerBook) private readonly ledgers: LedgerBook) {}

  execute(query: GetBalanceAsOf): Promise<BalancesAsOf> {
    return this.ledgers.balancesAsOf(query.ledger, query.instant);
  }
}
