/**
 * A merchant ledger's history for the operator console, folded from its journal
 * entries (the log): the merchant balances (pending, available, reserved) after each
 * entry, the sums of its postings (as the ledger's `evolve` keeps them, without its
 * open holds and reservations, whose copies made a fold O(entries × open holds)),
 * downsampled to a bounded number of points, and the payments recorded per UTC day.
 *
 * Pure: no I/O, no clock. Memory stays bounded however long the ledger is: the
 * points kept never exceed `maxPoints`, the days one row per day with a payment.
 */
import type { LedgerEntryPostedData } from './ledger';
import type { Kopecks } from './money';

/** The merchant balances right after one entry (kopecks) and the entry's time. */
export interface BalancePoint {
  /** The entry's occurredAt (ISO 8601). */
  readonly at: string;
  /** 1-based number of the entry in the ledger. */
  readonly entry: number;
  readonly pending: Kopecks;
  readonly available: Kopecks;
  readonly reserved: Kopecks;
}

/** Points a plot of the console draws at most. */
export const BALANCE_HISTORY_MAX_POINTS = 400;

/**
 * The balances after each entry, thinned as the ledger grows so that at most
 * `maxPoints` are kept: always the first entry's point and the last one's, and in
 * between the points after every `stride`-th entry, the stride doubling (every other
 * kept point dropped) each time the kept points would exceed the bound. Every point
 * kept is the exact balance after its entry (nothing is averaged or interpolated);
 * what is lost is the detail between two kept points (a balance that rose and fell
 * back between them does not show).
 */
export class BalanceHistory {
  private readonly balances = { pending: 0, available: 0, reserved: 0 };
  private folded = 0;
  private first: BalancePoint | null = null;
  private last: BalancePoint | null = null;
  private kept: BalancePoint[] = [];
  private stride = 1;

  constructor(private readonly maxPoints: number = BALANCE_HISTORY_MAX_POINTS) {
    if (!Number.isSafeInteger(maxPoints) || maxPoints < 4) throw new RangeError(`maxPoints must be an integer of at least 4, got ${maxPoints}`);
  }

  /** Folds the next entry of the ledger (in log order). */
  add(entry: LedgerEntryPostedData): void {
    for (const p of entry.postings) {
      if (p.account === 'pending' || p.account === 'available' || p.account === 'reserved') this.balances[p.account] += p.amount;
    }
    this.folded++;
    const { pending, available, reserved } = this.balances;
    const point: BalancePoint = { at: entry.occurredAt, entry: this.folded, pending, available, reserved };
    if (this.first === null) this.first = point;
    this.last = point;
    if (point.entry % this.stride !== 0 || point.entry === 1) return;
    this.kept.push(point);
    // Room for the first and the last point besides the kept ones.
    if (this.kept.length > this.maxPoints - 2) {
      this.stride *= 2;
      this.kept = this.kept.filter((p) => p.entry % this.stride === 0);
    }
  }

  /** Entries folded so far. */
  get entries(): number {
    return this.folded;
  }

  /** The kept points in entry order: the first entry's, the kept ones, the last entry's (each once). */
  points(): BalancePoint[] {
    if (this.first === null || this.last === null) return [];
    const points = [this.first, ...this.kept];
    if (points[points.length - 1]!.entry !== this.last.entry) points.push(this.last);
    return points;
  }
}

/** Payments recorded on one UTC day. */
export interface DailyVolume {
  /** YYYY-MM-DD: the UTC calendar day of the entries' occurredAt (00:00:00.000Z to 23:59:59.999Z). */
  readonly day: string;
  /** payment_recorded entries that day. */
  readonly count: number;
  /** What those payments brought in (kopecks): the sum of their debits of acquiring_clearing, i.e. net + fee. */
  readonly amount: Kopecks;
}

/** Payments per UTC day, from the ledger's payment_recorded entries. */
export class DailyVolumes {
  private readonly days = new Map<string, { count: number; amount: Kopecks }>();

  add(entry: LedgerEntryPostedData): void {
    if (entry.kind !== 'payment_recorded') return;
    const time = Date.parse(entry.occurredAt);
    if (Number.isNaN(time)) return;
    const day = new Date(time).toISOString().slice(0, 10);
    const paid = entry.postings.filter((p) => p.account === 'acquiring_clearing').reduce((sum, p) => sum - p.amount, 0);
    const row = this.days.get(day) ?? { count: 0, amount: 0 };
    row.count += 1;
    row.amount += paid;
    if (!Number.isSafeInteger(row.amount)) throw new RangeError(`the paid volume of ${day} is beyond a safe integer of kopecks`);
    this.days.set(day, row);
  }

  /** Days with a payment, newest first. */
  newestFirst(): DailyVolume[] {
    return [...this.days.entries()].map(([day, row]) => ({ day, count: row.count, amount: row.amount })).sort((a, b) => (a.day < b.day ? 1 : -1));
  }
}
