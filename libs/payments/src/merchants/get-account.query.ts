import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import type { Pool } from 'pg';
import { READ_MODELS } from '../payments.tokens';
import type { Account } from './registry';
import { AccountRow, toAccount } from './project-rows';

/** A merchant account, or null. */
export class GetAccount extends Query<Account | null> {
  constructor(readonly accountId: string) {
    super();
  }
}

@QueryHandler(GetAccount)
export class GetAccountHandler implements IQueryHandler<GetAccount> {
  constructor(@Inject(READ_MODELS) private readonly pool: Pool) {}

  async execute(query: GetAccount): Promise<Account | null> {
    const row = (await this.pool.query<AccountRow>('SELECT * FROM accounts WHERE id = $1', [query.accountId])).rows[0];
    return row ? toAccount(row) : null;
  }
}
