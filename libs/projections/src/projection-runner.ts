import type { Pool, PoolClient } from 'pg';
import type { AllSubscription, EventStore, Position } from '../../event-store/src';
import { comparePositions } from '../../event-store/src';
import type { Logger } from '../../logging/src/logger';
import { silentLogger } from '../../logging/src/logger';
import { advanceCheckpoint, CheckpointMovedError, ensureCheckpoint, readCheckpoint } from './checkpoints';
import type { Projection } from './projection';

/** Namespace of the two-key advisory locks that keep one active instance per projection. */
const PROJECTION_LOCK_NAMESPACE = 48_213;

export interface ProjectionStatus {
  readonly projection: string;
  readonly state: 'standby' | 'catching_up' | 'live' | 'stopped' | 'failing';
  readonly checkpoint: Position | null;
  readonly lastError: string | null;
}

export interface ProjectionRunnerOptions {
  readonly batchSize?: number;
  /** How often a standby instance tries to become the active one. */
  readonly standbyRetryMs?: number;
  /** Called after every committed batch (progress bars, metrics). */
  readonly onBatch?: (info: { projection: string; applied: number; checkpoint: Position; caughtUp: boolean }) => void;
  /** Called when a batch failed and will be retried (metrics). */
  readonly onError?: (info: { projection: string; error: Error }) => void;
  readonly log?: Logger;
}

/**
 * Runs one projection: becomes its single active instance (session advisory lock),
 * follows the global log from the stored checkpoint, and for every batch applies the
 * events and moves the checkpoint in one transaction (compare-and-set). If the
 * checkpoint was moved by someone else (a rebuild reset it, or another instance
 * took over), the batch is rolled back and the runner starts again from the stored
 * checkpoint. A failing batch is retried with back-off, never skipped: a read model
 * of money must not silently miss an event.
 */
export class ProjectionRunner {
  private state: ProjectionStatus['state'] = 'stopped';
  private checkpoint: Position | null = null;
  private lastError: string | null = null;
  private running = false;
  private lockClient: PoolClient | null = null;
  private readonly onLockConnectionError = (error: Error) => {
    // The session, and the lock with it, is gone: the next batch sees it and starts over.
    // The client goes back to the pool with the error, which discards it: kept checked
    // out, every projection would leak one connection per database restart, and after
    // one restart the runners alone would hold the whole pool.
    const client = this.lockClient;
    this.lockClient = null;
    if (!client) return;
    client.off('error', this.onLockConnectionError);
    client.release(error);
  };
  private subscription: AllSubscription | null = null;
  private loop: Promise<void> | null = null;
  private wakeStandby: (() => void) | null = null;
  private readonly log: Logger;

  constructor(
    private readonly pool: Pool,
    private readonly store: EventStore,
    readonly projection: Projection,
    private readonly options: ProjectionRunnerOptions = {},
  ) {
    this.log = (options.log ?? silentLogger).child({ projection: projection.name });
  }

  status(): ProjectionStatus {
    return { projection: this.projection.name, state: this.state, checkpoint: this.checkpoint, lastError: this.lastError };
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.wakeStandby?.();
    await this.subscription?.unsubscribe();
    await this.loop;
    this.state = 'stopped';
  }

  private async run(): Promise<void> {
    let backoffMs = 100;
    while (this.running) {
      try {
        if (!(await this.becomeActive())) {
          this.state = 'standby';
          await this.sleep(this.options.standbyRetryMs ?? 2000);
          continue;
        }
        await this.follow();
        backoffMs = 100;
      } catch (error) {
        if (!this.running) break;
        if (error instanceof CheckpointMovedError) {
          this.log.info('checkpoint moved by another process; resuming from the stored checkpoint');
          continue;
        }
        this.state = 'failing';
        this.lastError = (error as Error).message;
        this.log.error({ err: error }, 'projection batch failed; retrying');
        this.options.onError?.({ projection: this.projection.name, error: error as Error });
        await this.releaseLock();
        await this.sleep(backoffMs);
        backoffMs = Math.min(backoffMs * 2, 10_000);
      }
    }
    await this.releaseLock();
  }

  private async becomeActive(): Promise<boolean> {
    if (this.lockClient) return true;
    const client = await this.pool.connect();
    try {
      const result = await client.query<{ locked: boolean }>('SELECT pg_try_advisory_lock($1, hashtext($2)) AS locked', [
        PROJECTION_LOCK_NAMESPACE,
        this.projection.name,
      ]);
      if (!result.rows[0]!.locked) {
        client.release();
        return false;
      }
      client.on('error', this.onLockConnectionError);
      this.lockClient = client;
      this.log.info('active instance of the projection');
      return true;
    } catch (error) {
      client.release(error as Error);
      throw error;
    }
  }

  private async releaseLock(): Promise<void> {
    const client = this.lockClient;
    this.lockClient = null;
    if (!client) return;
    client.off('error', this.onLockConnectionError);
    try {
      await client.query('SELECT pg_advisory_unlock($1, hashtext($2))', [PROJECTION_LOCK_NAMESPACE, this.projection.name]);
      client.release();
    } catch (error) {
      client.release(error as Error);
    }
  }

  private async follow(): Promise<void> {
    const name = this.projection.name;
    await ensureCheckpoint(this.pool, name);
    const stored = await readCheckpoint(this.pool, name);
    let checkpoint = stored!.position;
    this.checkpoint = checkpoint;
    this.state = 'catching_up';
    this.lastError = null;

    const subscription = this.store.subscribeToAll({
      after: checkpoint.commit === 0n && checkpoint.prepare === 0n ? 'start' : checkpoint,
      filter: this.projection.filter,
      maxBatchSize: this.options.batchSize ?? 500,
    });
    this.subscription = subscription;
    try {
      for await (const batch of subscription) {
        if (!this.running) return;
        if (!this.lockClient) throw new Error('lost the projection lock (database connection dropped)');
        if (comparePositions(batch.checkpoint, checkpoint) > 0) {
          const from = checkpoint;
          // Reads and side work first, outside the transaction: an open write
          // transaction hides every later event from every subscriber of the cluster.
          const prepared = batch.events.length > 0 && this.projection.prepare ? await this.projection.prepare(batch.events) : undefined;
          if (!this.running) return;
          const client = await this.pool.connect();
          try {
            // A batch commits without waiting for its WAL flush: a read model is derived
            // from the log, and its rows commit together with the checkpoint, so a crash of
            // the database can only lose a last batch whole, which is then applied again.
            // (A later commit that depends on it, such as a webhook attempt, flushes it.)
            await client.query('BEGIN; SET LOCAL synchronous_commit = off');
            if (batch.events.length > 0) await this.projection.apply(client, batch.events, prepared);
            await advanceCheckpoint(client, name, from, batch.checkpoint, batch.events.length);
            await client.query('COMMIT');
          } catch (error) {
            await client.query('ROLLBACK').catch(() => undefined);
            throw error;
          } finally {
            client.release();
          }
          checkpoint = batch.checkpoint;
          this.checkpoint = checkpoint;
        }
        this.state = batch.caughtUp ? 'live' : 'catching_up';
        this.options.onBatch?.({ projection: name, applied: batch.events.length, checkpoint, caughtUp: batch.caughtUp });
      }
    } finally {
      this.subscription = null;
      await subscription.unsubscribe();
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      const self = this;
      function done() {
        clearTimeout(timer);
        self.wakeStandby = null;
        resolve();
      }
      this.wakeStandby = done;
    });
  }
}
