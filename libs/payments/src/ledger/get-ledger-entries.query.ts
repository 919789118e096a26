import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import type { Pool } from 'pg';
import type { LedgerId } from '#ledger';
import { ledgerEntriesPage, LedgerEntryRow } from './ledger.read-model';
import { READ_MODELS } from '../payments.tokens';

/** Audit: a ledger's journal entries with their postings, oldest first, a page at a time (from the read model). */
export class GetLedgerEntries extends Query<{ readonly items: readonly LedgerEntryRow[]; readonly hasMore: boolean }> {
  constructor(
    readonly ledger: LedgerId,
    /** The seq of the previous page's last entry, -1 for the first page. */
    readonly afterSeq: number,
    readonly limit: number,
  ) {
    super();
  }
}

@QueryHandler(GetLedgerEntries)
export class GetLedgerEntriesHandler implements IQueryHandler<GetLedgerEntries> {
  constructor(@Inject(READ_MODELS) private readonly pool: Pool) {}

  execute(query: GetLedgerEntries): Promise<{ readonly items: readonly LedgerEntryRow[]; readonly hasMore: boolean }> {
    return ledgerEntriesPage(this.pool, query.ledger, query.afterSeq, query.limit);
  }
}
