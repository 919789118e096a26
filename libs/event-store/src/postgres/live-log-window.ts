import type { AllFilter, Position, RecordedEvent } from '../event-store';
import { comparePositions, matchesFilter } from '../event-store';

/** A page of the log for one subscription, cut from the window. */
export interface WindowPage {
  /** The events after the cursor that match the subscription's filter. */
  readonly events: RecordedEvent[];
  /** The position of the last event looked at (matching or not), or null when there was none. */
  readonly last: Position | null;
  /** Whether the page reached what the log shows (nothing more to read now). */
  readonly caughtUp: boolean;
}

export interface LiveLogWindowOptions {
  /** Events fetched at most by one read of the log. */
  readonly fetchSize: number;
  /** Events kept in memory; older ones leave the window (a subscription behind it reads the log itself). */
  readonly keep: number;
  /** A read of the log that found nothing is trusted this long without a wake-up of the tail signal. */
  readonly quietMs: number;
}

/**
 * The newest events of the log, read once for every live subscription of this
 * process. Without it each subscription (ten projections and process managers in the
 * gateway) read every new event from the database with a query of its own; with it
 * one read fetches the new events and each subscription takes its page from memory,
 * filtered there (issue 15, docs/decisions/0098).
 *
 * The window holds every visible event of the log with a position in (from, to]:
 * complete, because the store shows an event only once no transaction that could
 * still commit an earlier position is open (its visibility rule), so nothing can later
 * appear inside a range already read. A subscription whose cursor lies before `from`
 * (catching up, or fallen behind the memory bound) gets null and reads the log itself.
 */
export class LiveLogWindow {
  private events: RecordedEvent[] = [];
  private from: Position | null = null;
  private to: Position | null = null;
  private fetching: Promise<void> | null = null;
  /** The tail signal's generation read before the last fetch began, and when it ended. */
  private fetchedGeneration = -1;
  private fetchedAt = 0;
  private lastFetchFull = false;

  constructor(
    private readonly fetchAfter: (after: Position, maxCount: number) => Promise<RecordedEvent[]>,
    private readonly generation: () => number,
    private readonly options: LiveLogWindowOptions,
  ) {}

  /** Events held now (for tests and metrics). */
  get size(): number {
    return this.events.length;
  }

  /**
   * Up to `maxCount` events after `cursor` (looked at: the matching ones are returned),
   * or null when the cursor lies before the window. A subscription calls it once its
   * own reads have caught up with the log; the first such call opens the window at its cursor.
   */
  async page(cursor: Position, maxCount: number, filter: AllFilter | undefined): Promise<WindowPage | null> {
    if (this.from === null) {
      this.from = cursor;
      this.to = cursor;
    }
    if (comparePositions(cursor, this.from) < 0) return null;
    let page = this.cut(cursor, maxCount, filter);
    if (page.last === null && this.mayHaveGrown(cursor)) {
      await this.fetch();
      if (comparePositions(cursor, this.from) < 0) return null;
      page = this.cut(cursor, maxCount, filter);
    }
    return page;
  }

  /** Nothing after the cursor in memory: is a read of the log worth it? */
  private mayHaveGrown(cursor: Position): boolean {
    return (
      comparePositions(cursor, this.to!) > 0 || // the subscription read past the window itself
      this.lastFetchFull ||
      this.generation() !== this.fetchedGeneration ||
      Date.now() - this.fetchedAt >= this.options.quietMs
    );
  }

  private cut(cursor: Position, maxCount: number, filter: AllFilter | undefined): WindowPage {
    const start = this.firstAfter(cursor);
    const end = Math.min(this.events.length, start + maxCount);
    const events: RecordedEvent[] = [];
    for (let i = start; i < end; i++) if (matchesFilter(filter, this.events[i]!)) events.push(this.events[i]!);
    const last = end > start ? this.events[end - 1]!.position : null;
    return { events, last, caughtUp: end === this.events.length && !this.lastFetchFull };
  }

  /** Index of the first event after `position` (binary search: positions are ordered). */
  private firstAfter(position: Position): number {
    let low = 0;
    let high = this.events.length;
    while (low < high) {
      const mid = (low + high) >>> 1;
      if (comparePositions(this.events[mid]!.position, position) <= 0) low = mid + 1;
      else high = mid;
    }
    return low;
  }

  /** One read of the log after the window's end, shared by every subscription that asks meanwhile. */
  private fetch(): Promise<void> {
    this.fetching ??= (async () => {
      try {
        const generation = this.generation();
        const fetched = await this.fetchAfter(this.to!, this.options.fetchSize);
        this.fetchedGeneration = generation;
        this.fetchedAt = Date.now();
        this.lastFetchFull = fetched.length === this.options.fetchSize;
        if (fetched.length === 0) return;
        this.events.push(...fetched);
        this.to = fetched[fetched.length - 1]!.position;
        const excess = this.events.length - this.options.keep;
        if (excess > 0) {
          this.from = this.events[excess - 1]!.position;
          this.events = this.events.slice(excess);
        }
      } finally {
        this.fetching = null;
      }
    })();
    return this.fetching;
  }
}
