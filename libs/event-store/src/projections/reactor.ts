import type { AllFilter, RecordedEvent } from '..';
import type { Projection } from './projection';

/**
 * A reactor: follows the global log from a checkpoint of its own and acts on what it
 * reads (sends commands), as process managers do. It owns no table and writes no read
 * model: `react` runs outside any transaction, and only once it has returned does the
 * runner move the checkpoint past the batch. A batch whose checkpoint did not move (a
 * crash, a restart, a takeover by a standby) is handed over again, so a reaction must
 * decide once per cause (the ledger's causes, the streams' own records): then a crash,
 * a restart or a replay from zero neither misses nor doubles one. A rebuild never
 * touches a reactor.
 */
export interface Reactor {
  /** Stable name: the checkpoint row and the advisory lock are keyed by it. */
  readonly name: string;
  /** Only events that match reach `react` (the checkpoint still moves past the others). */
  readonly filter?: AllFilter;
  react(events: readonly RecordedEvent[]): Promise<void>;
}

/** What follows the log from a checkpoint of its own, one runner each: a projection (its tables) or a reactor (its commands). */
export type LogSubscriber = Projection | Reactor;

export const isReactor = (subscriber: LogSubscriber): subscriber is Reactor => 'react' in subscriber;
