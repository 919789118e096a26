import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import type { Pool } from 'pg';
import { READ_MODELS } from '#payments';
import type { ReadModelPage } from '#payments/invoices';
import { listPayouts, PayoutListFilter, PayoutRow } from '#payments/payouts';

/** The account's payouts, newest first, a page at a time (from the payouts read model). */
export class ListPayouts extends Query<ReadModelPage<PayoutRow>> {
  constructor(readonly filter: PayoutListFilter) {
    super();
  }
}

@QueryHandler(ListPayouts)
export class ListPayoutsHandler implements IQueryHandler<ListPayouts> {
  constructor(@Inject(READ_MODELS) private readonly pool: Pool) {}

  execute(query: ListPayouts): Promise<ReadModelPage<PayoutRow>> {
    return listPayouts(this.pool, query.filter);
  }
}
