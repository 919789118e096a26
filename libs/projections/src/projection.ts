import type { PoolClient } from 'pg';
import type { AllFilter, RecordedEvent } from '../../event-store/src';

/**
 * A read model built from the global log. `apply` runs inside the transaction that
 * also moves the projection's checkpoint, so a batch is applied exactly once or not
 * at all; handlers are still written to be idempotent (upserts keyed by ids), so
 * applying an event twice changes nothing.
 */
export interface Projection {
  /** Stable name: the checkpoint row and the advisory lock are keyed by it. */
  readonly name: string;
  /** The tables this projection alone writes; a rebuild empties them. */
  readonly tables: readonly string[];
  /** Only events that match reach `apply` (the checkpoint still moves past the others). */
  readonly filter?: AllFilter;
  apply(tx: PoolClient, events: readonly RecordedEvent[]): Promise<void>;
}
