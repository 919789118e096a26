import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import type { LedgerId, LedgerState } from '#ledger';
import { LedgerBook } from '../ledger';

/** Audit: a ledger's balances at a past instant, rebuilt from every entry that occurred at or before it. */
export class GetBalanceAsOf extends Query<{ state: LedgerState; lastEntryAt: string | null }> {
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

  execute(query: GetBalanceAsOf): Promise<{ state: LedgerState; lastEntryAt: string | null }> {
    return this.ledgers.asOf(query.ledger, query.instant);
  }
}
