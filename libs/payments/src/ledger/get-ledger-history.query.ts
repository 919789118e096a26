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
 * The console's plot and daily volumes of one ledger: the entries of its stream in the
 * event store (not the read model), folded with the ledger's own `evolve`; memory bounded
 * by the points kept and the days with payments. The folds of the last ledgers viewed are
 * kept, so a view folds only the entries appended since the one before (the stream is
 * append-only): a merchant of 100,000 entries took seconds per view, on the serving process.
 */
export class GetLedgerHistory extends Query<LedgerHistory> {
  constructor(
    readonly ledger: LedgerId,
    readonly maxPoints?: number,
  ) {
    super();
  }
}

/** Ledgers whose folds a process keeps (the least recently viewed dropped first). */
export const LEDGER_HISTORIES_KEPT = 8;

interface Fold {
  readonly history: BalanceHistory;
  readonly days: DailyVolumes;
}

@QueryHandler(GetLedgerHistory)
export class GetLedgerHistoryHandler implements IQueryHandler<GetLedgerHistory> {
  /** By ledger and maxPoints, in order of last view: the fold, as of its last view (views of one ledger take turns). */
  private readonly folds = new Map<string, Promise<Fold>>();

  constructor(@Inject(LedgerBook) private readonly ledgers: LedgerBook) {}

  async execute(query: GetLedgerHistory): Promise<LedgerHistory> {
    const key = `${query.ledger.mode}:${query.ledger.accountId}:${query.maxPoints ?? ''}`;
    const before = this.folds.get(key);
    const fold = (async (): Promise<Fold> => {
      const fold = (await before?.catch(() => null)) ?? { history: new BalanceHistory(query.maxPoints), days: new DailyVolumes() };
      await this.ledgers.forEachEntry(
        query.ledger,
        (entry) => {
          fold.history.add(entry);
          fold.days.add(entry);
          return true;
        },
        BigInt(fold.history.entries),
      );
      return fold;
    })();
    this.folds.delete(key);
    this.folds.set(key, fold);
    while (this.folds.size > LEDGER_HISTORIES_KEPT) this.folds.delete(this.folds.keys().next().value!);
    try {
      const { history, days } = await fold;
      return { entries: history.entries, points: history.points(), days: days.newestFirst() };
    } catch (error) {
      // Part of it may be folded: the next view starts again from the first entry.
      if (this.folds.get(key) === fold) this.folds.delete(key);
      throw error;
    }
  }
}
