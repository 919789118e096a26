import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import type { Pool } from 'pg';
import { READ_MODELS } from '../payments.tokens';
import { Account, Project, Registry } from './registry';
import { AccountRow, ProjectRow, toAccount, toProject } from './project-rows';

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
  constructor(@Inject(READ_MODELS) private readonly pool: Pool) {}

  async execute({ after, limit }: ListAccounts): Promise<{ readonly items: readonly AccountWithProjects[]; readonly hasMore: boolean }> {
    const r = await this.pool.query<AccountRow>(
      `SELECT * FROM accounts
       WHERE $1::uuid IS NULL OR (created_at, id) > (SELECT created_at, id FROM accounts WHERE id = $1::uuid)
       ORDER BY created_at, id LIMIT $2`,
      [after, limit + 1],
    );
    const accounts = r.rows.slice(0, limit).map(toAccount);
    const projects =
      accounts.length === 0
        ? []
        : (
            await this.pool.query<ProjectRow>('SELECT * FROM projects WHERE account_id = ANY($1::uuid[]) ORDER BY created_at, id', [accounts.map((a) => a.id)])
          ).rows.map(toProject);
    return {
      items: accounts.map((account) => ({ account, projects: projects.filter((p) => p.accountId === account.id) })),
      hasMore: r.rows.length > limit,
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
