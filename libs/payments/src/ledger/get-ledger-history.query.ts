import { Inject } from '@nestjs/common';
import { IQueryHandler, Query, QueryHandler } from '@nestjs/cqrs';
import { BalanceHistory, DailyVolumes } from '#ledger';
import type { BalancePoint, DailyVolume, LedgerId } from '#ledger';
import { LedgerBook } from './ledger-book';

/** A ledger's history as the operator console shows it, folded from the log. */
export interface LedgerHistory {
  /** Entries in the ledger. */
  readonly entries: number;
  /** The merchant balances after its entries, downsampled (BalanceHistory). */
  readonly points: readonly BalancePoint[];
  /** Payments recorded per UTC day, newest first. */
  readonly days: readonly DailyVolume[];
}

/**
 * The console's plot and daily volumes of one ledger: every entry of its stream in
 * the event store (not the read model), folded with the ledger's own `evolve` in one
 * pass; memory bounded by the points kept and the days with payments.
 */
export class GetLedgerHistory extends Query<LedgerHistory> {
  constructor(
    readonly ledger: LedgerId,
    readonly maxPoints?: number,
  ) {
    super();
  }
}

@QueryHandler(GetLedgerHistory)
export class GetLedgerHistoryHandler implements IQueryHandler<GetLedgerHistory> {
  constructor(@Inject(LedgerBook) private readonly ledgers: LedgerBook) {}

  async execute(query: GetLedgerHistory): Promise<LedgerHistory> {
    const history = new BalanceHistory(query.maxPoints);
    const days = new DailyVolumes();
    await this.ledgers.forEachEntry(query.ledger, (entry) => {
      history.add(entry);
      days.add(entry);
      return true;
    });
    return { entries: history.entries, points: history.points(), days: days.newestFirst() };
  }
}
