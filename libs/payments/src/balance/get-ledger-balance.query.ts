import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import type { LedgerId, LedgerState } from '#ledger';
import { LedgerBook } from '../ledger';

/** Audit: a ledger's balances now, rebuilt from its event log (snapshot plus the entries after it). */
export class GetLedgerBalance extends Query<LedgerState> {
  constructor(readonly ledger: LedgerId) {
    super();
  }
}

@QueryHandler(GetLedgerBalance)
export class GetLedgerBalanceHandler implements IQueryHandler<GetLedgerBalance> {
  constructor(@Inject(LedgerBook) private readonly ledgers: LedgerBook) {}

  execute(query: GetLedgerBalance): Promise<LedgerState> {
    return this.ledgers.current(query.ledger);
  }
}
