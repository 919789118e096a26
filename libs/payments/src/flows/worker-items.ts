import type { Clock } from '#platform/clock';
import { isDatabaseAway } from '#platform/database';
import type { Logger } from '#platform/logging';

export interface ItemBackoff {
  /** Wait after an item's first failure; doubled after each further one. */
  readonly firstDelayMs: number;
  /** The longest wait between two attempts of one item. */
  readonly maxDelayMs: number;
}

/** 1 s, 2 s, 4 s… up to 5 minutes. */
export const DEFAULT_ITEM_BACKOFF: ItemBackoff = { firstDelayMs: 1_000, maxDelayMs: 300_000 };

interface Failing {
  failures: number;
  /** Gateway clock, ms: not tried again before. */
  retryAt: number;
}

/**
 * How a periodic worker processes its items so that each fails alone. An item
 * whose processing throws is logged with its id and the error, counted
 * (`worker_item_failures_total{worker}`), and left out of the worker's selection
 * until its back-off has passed (on the gateway clock: 1 s, doubling, at most 5
 * minutes); the other items of the tick go on, and the next ticks select others in
 * its place. Back-off is kept per process (a restart tries every item again at once).
 *
 * What counts as "done" (e.g. a refusal, which is an outcome) is for the worker's
 * `process` to decide: it returns normally; anything it throws is a failure, but the
 * database away (isDatabaseAway), which is no item's: it ends the tick, thrown to the
 * worker, whose outage log tells it once (not a stack for each item left).
 */
export class WorkerItems {
  private readonly failing = new Map<string, Failing>();

  constructor(
    readonly worker: string,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly onFailure: (worker: string) => void = () => undefined,
    private readonly backoff: ItemBackoff = DEFAULT_ITEM_BACKOFF,
  ) {}

  /**
   * The ids whose retry is not due yet: the worker leaves them out of its selection,
   * so that a failing item never takes the place of one that can be processed.
   */
  backingOff(): string[] {
    const now = this.clock.now().getTime();
    const waiting: string[] = [];
    for (const [id, f] of this.failing) {
      if (f.retryAt > now) waiting.push(id);
      // Due long ago and not seen failing since: done elsewhere, or no longer selected.
      else if (now - f.retryAt > this.backoff.maxDelayMs) this.failing.delete(id);
    }
    return waiting;
  }

  /** How often the item has failed in a row (0: not failing). */
  failuresOf(id: string): number {
    return this.failing.get(id)?.failures ?? 0;
  }

  /**
   * Runs `process` on each item in turn; one that throws fails alone. Returns how
   * many items were tried (a full selection suggests more is waiting).
   */
  async each<T>(items: readonly T[], idOf: (item: T) => string, process: (item: T) => Promise<void>): Promise<number> {
    for (const item of items) {
      const id = idOf(item);
      try {
        await process(item);
        const failed = this.failing.get(id);
        if (failed) {
          this.failing.delete(id);
          this.log.info({ worker: this.worker, item: id, failures: failed.failures }, 'worker item processed after failing');
        }
      } catch (error) {
        if (isDatabaseAway(error)) throw error;
        const failures = (this.failing.get(id)?.failures ?? 0) + 1;
        const delay = Math.min(this.backoff.maxDelayMs, this.backoff.firstDelayMs * 2 ** Math.min(failures - 1, 30));
        const retryAt = this.clock.now().getTime() + delay;
        this.failing.set(id, { failures, retryAt });
        try {
          this.onFailure(this.worker);
        } catch {
          /* a metric never stops the worker */
        }
        this.log.error(
          { err: error, worker: this.worker, item: id, failures, retryAt: new Date(retryAt).toISOString() },
          'worker item failed; the others go on, it is retried after a back-off',
        );
      }
    }
    return items.length;
  }
}
