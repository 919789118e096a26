import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import { Account, Project, Registry } from '.';

/** One merchant account with its projects (oldest first). */
export interface AccountWithProjects {
  readonly account: Account;
  readonly projects: readonly Project[];
}

/** The operator console's merchants: a page of accounts, oldest first, each with its projects. */
export class ListAccounts extends Query<{ readonly items: readonly AccountWithProjects[]; readonly hasMore: boolean }> {
  constructor(
    /** The last account of the previous page, or null for the first page. */
    readonly after: string | null,
    readonly limit: number,
  ) {
    super();
  }
}

@QueryHandler(ListAccounts)
export class ListAccountsHandler implements IQueryHandler<ListAccounts> {
  constructor(@Inject(Registry) private readonly registry: Registry) {}

  async execute(query: ListAccounts): Promise<{ readonly items: readonly AccountWithProjects[]; readonly hasMore: boolean }> {
    const page = await this.registry.accountsPage(query.after, query.limit);
    const projects = page.items.length === 0 ? [] : await this.registry.projectsOfAccounts(page.items.map((a) => a.id));
    return {
      items: page.items.map((account) => ({ account, projects: projects.filter((p) => p.accountId === account.id) })),
      hasMore: page.hasMore,
    };
  }
}

/** Every project of one account, oldest first. */
export class ListProjectsOfAccount extends Query<readonly Project[]> {
  constructor(readonly accountId: string) {
    super();
  }
}

@QueryHandler(ListProjectsOfAccount)
export class ListProjectsOfAccountHandler implements IQueryHandler<ListProjectsOfAccount> {
  constructor(@Inject(Registry) private readonly registry: Registry) {}

  execute(query: ListProjectsOfAccount): Promise<readonly Project[]> {
    return this.registry.projectsOfAccount(query.accountId);
  }
}
