import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import type { Pool } from 'pg';
import type { EventStore, Position } from '#event-store';
import type { LedgerId, TrialBalance } from '#ledger';
import { EVENT_STORE, READ_MODELS } from '../payments.tokens';
import { LedgerBook } from '../ledger';
import { refuseRebuilt } from '#event-store/projections';
import { LEDGER_MODEL } from '../ledger/ledger.read-model';
import { AccountStatementReader, accountKnown, openAccountStatement } from './account-statement';
import { reconcilePeriod, ReconciliationReport } from './reconciliation';
import { trialBalanceFromLog } from './trial-balance';
import { awaitPostedThrough, Follower, ReportedLedger } from './posted-through';

/**
 * Audit: a ledger's statement over (from, to], as of one instant of the read model (the
 * caller streams its pages); null for an unknown account.
 */
export class GetAccountStatement extends Query<AccountStatementReader | null> {
  constructor(
    readonly ledger: LedgerId,
    readonly from: Date,
    readonly to: Date,
  ) {
    super();
  }
}

@QueryHandler(GetAccountStatement)
export class GetAccountStatementHandler implements IQueryHandler<GetAccountStatement> {
  constructor(@Inject(READ_MODELS) private readonly pool: Pool) {}

  async execute(query: GetAccountStatement): Promise<AccountStatementReader | null> {
    const account = await accountKnown(this.pool, query.ledger.accountId);
    refuseRebuilt(LEDGER_MODEL, account.rebuild);
    if (!account.known) return null;
    return openAccountStatement(this.pool, query.ledger, query.from, query.to);
  }
}

/**
 * Audit: whether an account is known: of the registry or a ledger with entries (accountKnown),
 * or this ledger's entries in the log (not projected yet).
 */
export class IsAccountKnown extends Query<boolean> {
  constructor(readonly ledger: LedgerId) {
    super();
  }
}

@QueryHandler(IsAccountKnown)
export class IsAccountKnownHandler implements IQueryHandler<IsAccountKnown> {
  constructor(
    @Inject(READ_MODELS) private readonly pool: Pool,
    @Inject(LedgerBook) private readonly ledgers: LedgerBook,
  ) {}

  async execute(query: IsAccountKnown): Promise<boolean> {
    // Not refused while the ledger is rebuilt: the log answers for a ledger the emptied read model does not know.
    return (await accountKnown(this.pool, query.ledger.accountId)).known || (await this.ledgers.hasEntries(query.ledger));
  }
}

/** Audit: every ledger's accounts as of an instant, folded from the event log. */
export class GetTrialBalance extends Query<TrialBalance & { readonly logPosition: Position | null }> {
  constructor(readonly asOf: Date) {
    super();
  }
}

@QueryHandler(GetTrialBalance)
export class GetTrialBalanceHandler implements IQueryHandler<GetTrialBalance> {
  constructor(@Inject(EVENT_STORE) private readonly store: EventStore) {}

  execute(query: GetTrialBalance): Promise<TrialBalance & { readonly logPosition: Position | null }> {
    return trialBalanceFromLog(this.store, query.asOf);
  }
}

/** Audit: flows of (from, to] against their ledger entries, every difference with its ids. */
export class GetReconciliation extends Query<ReconciliationReport> {
  constructor(
    readonly from: Date,
    readonly to: Date,
  ) {
    super();
  }
}

@QueryHandler(GetReconciliation)
export class GetReconciliationHandler implements IQueryHandler<GetReconciliation> {
  constructor(@Inject(READ_MODELS) private readonly pool: Pool) {}

  execute(query: GetReconciliation): Promise<ReconciliationReport> {
    return reconcilePeriod(this.pool, query.from, query.to);
  }
}

/** Audit: waits until the figures as of `at` are final (awaitPostedThrough); false when they were not in time. */
export class AwaitPostedThrough extends Query<boolean> {
  constructor(
    readonly at: Date,
    readonly now: Date,
    readonly readers: readonly Follower[],
    readonly ledger?: ReportedLedger,
  ) {
    super();
  }
}

@QueryHandler(AwaitPostedThrough)
export class AwaitPostedThroughHandler implements IQueryHandler<AwaitPostedThrough> {
  constructor(
    @Inject(READ_MODELS) private readonly pool: Pool,
    @Inject(EVENT_STORE) private readonly store: EventStore,
  ) {}

  execute(query: AwaitPostedThrough): Promise<boolean> {
    return awaitPostedThrough(this.pool, this.store, query.now, query.at, query.readers, { ledger: query.ledger });
  }
}
