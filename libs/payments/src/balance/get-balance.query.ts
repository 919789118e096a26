import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import type { Pool } from 'pg';
import type { EventStore } from '#event-store';
import type { LedgerId } from '#ledger';
import { LedgerBook } from '../ledger';
import { merchantBalance } from '../ledger/ledger.read-model';
import { EVENT_STORE, READ_MODELS } from '../payments.tokens';

/** GET /v1/balance: the merchant's available, pending and reserved kopecks in the key's mode, current (merchantBalance). */
export class GetBalance extends Query<{ readonly available: number; readonly pending: number; readonly reserved: number }> {
  constructor(readonly ledger: LedgerId) {
    super();
  }
}

@QueryHandler(GetBalance)
export class GetBalanceHandler implements IQueryHandler<GetBalance> {
  constructor(
    @Inject(READ_MODELS) private readonly pool: Pool,
    @Inject(EVENT_STORE) private readonly store: EventStore,
    @Inject(LedgerBook) private readonly ledgers: LedgerBook,
  ) {}

  async execute(query: GetBalance): Promise<{ readonly available: number; readonly pending: number; readonly reserved: number }> {
    const balance = await merchantBalance(this.pool, this.store, query.ledger);
    if (balance !== null) return balance;
    // The read model more than BALANCE_TAIL_MAX entries behind: the ledger's own state (its snapshot and the entries after it).
    const { available, pending, reserved } = (await this.ledgers.current(query.ledger)).balances;
    return { available, pending, reserved };
  }
}
