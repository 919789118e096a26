import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import { Account, Registry } from '.';

/** A merchant account, or null. */
export class GetAccount extends Query<Account | null> {
  constructor(readonly accountId: string) {
    super();
  }
}

@QueryHandler(GetAccount)
export class GetAccountHandler implements IQueryHandler<GetAccount> {
  constructor(@Inject(Registry) private readonly registry: Registry) {}

  execute(query: GetAccount): Promise<Account | null> {
    return this.registry.account(query.accountId);
  }
}
