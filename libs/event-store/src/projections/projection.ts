import type { PoolClient } from 'pg';
import type { AllFilter, Position, RecordedEvent } from '..';

/**
 * A read model built from the global log (what only acts on the log, sending commands,
 * is a Reactor; both run on ProjectionRunner). `apply` runs inside the transaction that
 * also moves the projection's checkpoint, so a batch is applied exactly once or not
 * at all; handlers are still written to be idempotent (upserts keyed by ids), so
 * applying an event twice changes nothing.
 *
 * That transaction does database writes only: everything that waits on something
 * else (reading other streams, registry lookups, commands appended through the
 * pool) belongs in `prepare`, which runs before the transaction opens. A write
 * transaction holds a transaction id, and while it is open no event appended after
 * it becomes visible to any subscriber of the cluster; the gateway's sessions are
 * also cut after a few seconds idle inside a transaction (see libs/platform/src/database/pool.ts).
 */
export interface Projection<Prepared = unknown> {
  /** Stable name: the checkpoint row and the advisory lock are keyed by it. */
  readonly name: string;
  /**
   * The tables this projection alone writes; a rebuild empties them. The webhook outbox
   * names none: its queue is never emptied (that would resend history).
   */
  readonly tables: readonly string[];
  /**
   * Tables of `tables` whose primary key `apply` never relies on (no ON CONFLICT on it,
   * no lookup by it): a one-pass rebuild drops that key with the secondary indexes and
   * makes it again when its pass ends (decision 0095). Other primary keys stay.
   */
  readonly primaryKeyBuiltAfterRebuild?: readonly string[];
  /** Only events that match reach `prepare` and `apply` (the checkpoint still moves past the others). */
  readonly filter?: AllFilter;
  /**
   * False when `prepare` and `apply` never look at an event's data, only at its stream,
   * type, revision, position and time: a one-pass rebuild may then read the log without
   * the data of the events that no other projection of its pass wants (decision 0095).
   */
  readonly readsEventData?: boolean;
  /**
   * Optional: the read model's rows up to `upTo` (a head) computed in SQL from the
   * log's own table (see streamSummariesThrough), inside the transaction given, into
   * tables a rebuild has just emptied; answers how many events of the log it took in.
   * A rebuild uses it in place of applying the events when the store keeps the log in
   * the same database (EventStore.keepsLogIn) and the projection starts from zero. It
   * must give the rows `apply` gives for the same events, whatever their batches.
   */
  rebuildInDatabase?(tx: PoolClient, upTo: Position): Promise<number>;
  /**
   * Optional: the batch's reads and side work, before its transaction opens; the
   * result is handed to `apply`. Runs again whenever the batch is retried (after a
   * failure, or when the checkpoint's compare-and-set found it moved), so it must be
   * idempotent like `apply`.
   */
  prepare?(events: readonly RecordedEvent[]): Promise<Prepared>;
  apply(tx: PoolClient, events: readonly RecordedEvent[], prepared: Prepared): Promise<void>;
}
