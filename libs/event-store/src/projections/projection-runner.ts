import { hostname } from 'node:os';
import type { Pool, PoolClient, QueryResult } from 'pg';
import type { AllSubscription, EventStore, Position } from '..';
import { comparePositions } from '..';
import { DatabaseOutageLog } from '#platform/database';
import type { Logger } from '#platform/logging';
import { silentLogger } from '#platform/logging';
import { commitBatch, prepareBatch } from './apply-batch';
import { advanceCheckpoint, CheckpointMovedError, ensureCheckpoint, readCheckpoint } from './checkpoints';
import { restoreDeferredIndexes } from './deferred-indexes';
import type { LogSubscriber } from './reactor';
import {
  HANDOVER_ASKED,
  PROJECTION_LEASE_RENEW_MS,
  PROJECTION_LEASE_STALE_MS,
  PROJECTION_LOCK_NAMESPACE,
  PROJECTION_STANDBY_RETRY_MS,
} from './projection-locks';
/**
 * How long the checkpoint row may trail over events the projection's filter skipped
 * (the batch had nothing to apply): one statement at most this often instead of a
 * transaction per batch.
 */
export const CHECKPOINT_DEFER_MS = 200;

const QUIET = Symbol('quiet');
const quiet = (ms: number): Promise<typeof QUIET> => new Promise((resolve) => setTimeout(() => resolve(QUIET), ms).unref());
/**
 * A standby takes over a projection whose active instance stopped answering (host
 * gone, process frozen) at most this long after the holder's last renewal: the lease
 * goes stale, and the standby's next try finds it so.
 */
export const PROJECTION_TAKEOVER_BOUND_MS = PROJECTION_LEASE_STALE_MS + PROJECTION_STANDBY_RETRY_MS;

export interface ProjectionStatus {
  readonly projection: string;
  /** `handed_over`: a rebuild asked for the projection; the runner stands by until it is let go. */
  readonly state: 'standby' | 'handed_over' | 'catching_up' | 'live' | 'stopped' | 'failing';
  readonly checkpoint: Position | null;
  readonly lastError: string | null;
}

export interface ProjectionRunnerOptions {
  readonly batchSize?: number;
  /** How often a standby instance tries to become the active one (default PROJECTION_STANDBY_RETRY_MS). */
  readonly standbyRetryMs?: number;
  /** How often the active instance renews its lease (default PROJECTION_LEASE_RENEW_MS). */
  readonly leaseRenewMs?: number;
  /** How old a lease may get before a standby ends its holder's session (default PROJECTION_LEASE_STALE_MS). */
  readonly leaseStaleMs?: number;
  /** Who this instance is, in the lease row (default `<host name>:<process id>`). */
  readonly holder?: string;
  /** How long the checkpoint may trail over skipped events (default CHECKPOINT_DEFER_MS). */
  readonly checkpointDeferMs?: number;
  /** Called after every committed batch (progress bars, metrics). */
  readonly onBatch?: (info: { projection: string; applied: number; checkpoint: Position; caughtUp: boolean }) => void;
  /** Called when a batch failed and will be retried (metrics). */
  readonly onError?: (info: { projection: string; error: Error }) => void;
  readonly log?: Logger;
}

/**
 * Runs one projection or reactor (a LogSubscriber; "the projection" below stands for
 * either): becomes its single active instance (session advisory lock), follows the
 * global log from the stored checkpoint, and for every batch applies the events and
 * moves the checkpoint in one transaction (compare-and-set), a reactor reacting before
 * that transaction opens (prepareBatch, then commitBatch). If the
 * checkpoint was moved by someone else (a rebuild reset it, or another instance
 * took over), the batch is rolled back and the runner starts again from the stored
 * checkpoint. A failing batch is retried with back-off, never skipped: a read model
 * of money must not silently miss an event.
 *
 * The lock lives as long as the session that took it, and a host that vanishes
 * without closing TCP leaves that session open on the server. So the active instance
 * also renews a lease row (its host, process and lock session) every
 * PROJECTION_LEASE_RENEW_MS from the lock's own session; a standby that finds the
 * lease older than PROJECTION_LEASE_STALE_MS while that session still holds the lock
 * ends the session (pg_terminate_backend) and takes the lock. An old holder that
 * comes back finds its session gone and its next compare-and-set refused, so nothing
 * is applied twice.
 *
 * A rebuild asks for the projection (a row of projection_handovers, live while its
 * session is): the active runner sees the request at its next lease renewal (within
 * PROJECTION_LEASE_RENEW_MS, whether or not events arrive), finishes its batch, lets
 * the lock go and stands by; no standby takes a projection someone asked for. When the
 * rebuild lets it go (or dies), the runner takes it back and goes on from the stored
 * checkpoint; a rebuild that was interrupted is finished so, and the runner clears
 * its mark (rebuild_started_at) once it has caught up with the log.
 */
export class ProjectionRunner {
  private state: ProjectionStatus['state'] = 'stopped';
  private checkpoint: Position | null = null;
  private lastError: string | null = null;
  private running = false;
  private lockClient: PoolClient | null = null;
  private heartbeat: NodeJS.Timeout | null = null;
  private readonly holder: string;
  private readonly onLockConnectionError = (error: Error) => {
    if (this.lockClient) this.loseLock(this.lockClient, error);
  };
  private subscription: AllSubscription | null = null;
  private loop: Promise<void> | null = null;
  private wakeStandby: (() => void) | null = null;
  /** A rebuild asked for the projection: seen by the lease renewal of the active instance. */
  private handoverAsked = false;
  /** A rebuild wanted the projection when this standby last tried to take it. */
  private askedFor = false;
  private readonly log: Logger;
  /** The database away: told once per outage (and once a minute), not a stack per retry. */
  private readonly outage: DatabaseOutageLog;

  constructor(
    private readonly pool: Pool,
    private readonly store: EventStore,
    readonly subscriber: LogSubscriber,
    private readonly options: ProjectionRunnerOptions = {},
  ) {
    this.log = (options.log ?? silentLogger).child({ projection: subscriber.name });
    this.outage = new DatabaseOutageLog(this.log, `projection ${subscriber.name}`);
    this.holder = options.holder ?? `${hostname()}:${process.pid}`;
  }

  status(): ProjectionStatus {
    return { projection: this.subscriber.name, state: this.state, checkpoint: this.checkpoint, lastError: this.lastError };
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
        const active = await this.becomeActive();
        this.outage.succeeded();
        if (!active) {
          this.state = this.askedFor ? 'handed_over' : 'standby';
          await this.sleep(this.options.standbyRetryMs ?? PROJECTION_STANDBY_RETRY_MS);
          continue;
        }
        await this.follow();
        backoffMs = 100;
        if (this.handoverAsked) {
          this.handoverAsked = false;
          await this.releaseLock();
          this.state = 'handed_over';
          this.askedFor = true;
          this.log.info('handed the projection over to a rebuild; standing by until it is let go');
          await this.sleep(this.options.standbyRetryMs ?? PROJECTION_STANDBY_RETRY_MS);
        }
      } catch (error) {
        if (!this.running) break;
        if (error instanceof CheckpointMovedError) {
          this.log.info('checkpoint moved by another process; resuming from the stored checkpoint');
          continue;
        }
        this.state = 'failing';
        this.lastError = (error as Error).message;
        if (!this.outage.failed(error)) this.log.error({ err: error }, 'projection batch failed; retrying');
        this.options.onError?.({ projection: this.subscriber.name, error: error as Error });
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
      const locked = (await this.tryLock(client)) || (await this.takeOverStaleHolder(client));
      if (!locked) {
        client.release();
        return false;
      }
      await client.query(
        `INSERT INTO projection_leases (projection, holder, backend_pid, acquired_at, renewed_at)
         VALUES ($1, $2, pg_backend_pid(), clock_timestamp(), clock_timestamp())
         ON CONFLICT (projection) DO UPDATE SET holder = EXCLUDED.holder, backend_pid = EXCLUDED.backend_pid,
           acquired_at = EXCLUDED.acquired_at, renewed_at = EXCLUDED.renewed_at`,
        [this.subscriber.name, this.holder],
      );
      client.on('error', this.onLockConnectionError);
      this.lockClient = client;
      this.scheduleHeartbeat(client);
      this.log.info('active instance of the projection');
      return true;
    } catch (error) {
      // Discarding the connection also frees a lock taken on it.
      client.release(error as Error);
      throw error;
    }
  }

  /** The lock, unless someone asked for the projection (a rebuild waiting for it). */
  private async tryLock(client: PoolClient): Promise<boolean> {
    const result = await client.query<{ asked: boolean; locked: boolean }>(
      // CASE, not AND: only CASE promises the lock is not even tried when someone asked.
      `SELECT asked, CASE WHEN asked THEN false ELSE pg_try_advisory_lock(${PROJECTION_LOCK_NAMESPACE}, hashtext($1)) END AS locked
       FROM (SELECT ${HANDOVER_ASKED} AS asked) q`,
      [this.subscriber.name],
    );
    this.askedFor = result.rows[0]!.asked;
    return result.rows[0]!.locked;
  }

  /**
   * The lock is taken. If its holder's lease is stale and the lease's session is the
   * one holding the lock, end that session and queue for the lock in the same
   * statement: the lock goes to this waiter the moment the old session is gone, so
   * the old holder, were it still alive, cannot take it back in between. Another
   * standby that queued too gives up after 5 s (lock_timeout) and stays a standby. A
   * holder without a lease row, or whose lease is fresh, is left alone.
   */
  private async takeOverStaleHolder(client: PoolClient): Promise<boolean> {
    const name = client.escapeLiteral(this.subscriber.name);
    const staleSeconds = (this.options.leaseStaleMs ?? PROJECTION_LEASE_STALE_MS) / 1000;
    let results: [QueryResult, QueryResult<{ holder: string; pid: number; locked: boolean }>];
    try {
      // One round trip of two statements, in one implicit transaction (so SET LOCAL
      // bounds only this wait); no parameters there: the values are a literal and numbers.
      // CASE evaluates pg_terminate_backend before it asks for the lock.
      results = (await client.query(
        `SET LOCAL lock_timeout = '5s';
         SELECT lease.holder, held.pid,
                CASE WHEN pg_terminate_backend(held.pid)
                     THEN (SELECT count(*) FROM (SELECT pg_advisory_lock(${PROJECTION_LOCK_NAMESPACE}, hashtext(${name}))) taken) = 1
                     ELSE false END AS locked
         FROM projection_leases lease
         JOIN pg_locks held ON held.pid = lease.backend_pid AND held.locktype = 'advisory' AND held.granted
           AND held.database = (SELECT oid FROM pg_database WHERE datname = current_database())
           AND held.classid::text::bigint = ${PROJECTION_LOCK_NAMESPACE} AND held.objid::text::bigint = (hashtext(${name})::bigint & 4294967295)
           AND held.objsubid = 2
         WHERE lease.projection = ${name} AND lease.renewed_at < clock_timestamp() - make_interval(secs => ${staleSeconds})`,
      )) as unknown as typeof results;
    } catch (error) {
      if ((error as { code?: string }).code === '55P03') return false; // another standby took it
      throw error;
    }
    const stale = results[1].rows[0];
    if (!stale) return false;
    this.log.warn(
      { staleHolder: stale.holder, backendPid: stale.pid, locked: stale.locked },
      'the active instance stopped renewing its lease; ended its session to take over',
    );
    return stale.locked;
  }

  /**
   * Renews the lease from the lock's own session; a renewal that fails or finds the
   * lease taken loses the lock. The same statement asks whether a rebuild wants the
   * projection: then the subscription ends, and the runner hands it over (run).
   */
  private scheduleHeartbeat(client: PoolClient): void {
    this.heartbeat = setTimeout(async () => {
      this.heartbeat = null;
      if (this.lockClient !== client) return;
      try {
        const renewed = await client.query<{ renewed: number; asked: boolean }>(
          `WITH renewed AS (
             UPDATE projection_leases SET renewed_at = clock_timestamp() WHERE projection = $1 AND backend_pid = pg_backend_pid() RETURNING 1
           )
           SELECT (SELECT count(*) FROM renewed)::int AS renewed, ${HANDOVER_ASKED} AS asked`,
          [this.subscriber.name],
        );
        if (renewed.rows[0]!.renewed !== 1) throw new Error('the projection lease was taken over by another instance');
        if (renewed.rows[0]!.asked && !this.handoverAsked) {
          this.handoverAsked = true;
          this.log.info('a rebuild asked for the projection; handing it over after the current batch');
          void this.subscription?.unsubscribe();
        }
      } catch (error) {
        if (this.lockClient === client) {
          this.log.warn({ err: error }, 'the projection lease could not be renewed; giving the projection up');
          this.loseLock(client, error as Error);
        }
        return;
      }
      if (this.lockClient === client) this.scheduleHeartbeat(client);
    }, this.options.leaseRenewMs ?? PROJECTION_LEASE_RENEW_MS);
    this.heartbeat.unref();
  }

  /**
   * The session, and the lock with it, is gone (or no longer ours): the client goes
   * back to the pool with the error, which discards it (kept checked out, every
   * projection would leak one connection per database restart, and after one restart
   * the runners alone would hold the whole pool), and the subscription ends, so the
   * runner goes back to taking the lock.
   */
  private loseLock(client: PoolClient, error: Error): void {
    if (this.lockClient !== client) return;
    this.lockClient = null;
    if (this.heartbeat) clearTimeout(this.heartbeat);
    this.heartbeat = null;
    client.off('error', this.onLockConnectionError);
    client.release(error);
    void this.subscription?.unsubscribe();
  }

  private async releaseLock(): Promise<void> {
    const client = this.lockClient;
    this.lockClient = null;
    if (this.heartbeat) clearTimeout(this.heartbeat);
    this.heartbeat = null;
    if (!client) return;
    client.off('error', this.onLockConnectionError);
    try {
      await client.query('DELETE FROM projection_leases WHERE projection = $1 AND backend_pid = pg_backend_pid()', [this.subscriber.name]);
      await client.query('SELECT pg_advisory_unlock($1, hashtext($2))', [PROJECTION_LOCK_NAMESPACE, this.subscriber.name]);
      client.release();
    } catch (error) {
      client.release(error as Error);
    }
  }

  private async follow(): Promise<void> {
    const name = this.subscriber.name;
    // A rebuild that stopped before its end left the projection's secondary indexes dropped: made again before going on.
    const restored = await restoreDeferredIndexes(this.pool, name);
    if (restored > 0) this.log.info({ indexes: restored }, 'made again the indexes an interrupted rebuild had dropped');
    await ensureCheckpoint(this.pool, name);
    const row = (await readCheckpoint(this.pool, name))!;
    let checkpoint = row.position;
    // An interrupted rebuild left its mark: cleared once this runner has caught up with the log.
    let rebuildPending = row.rebuildStartedAt !== null;
    this.checkpoint = checkpoint;
    // A retry after a failed batch stays `failing` with its error until a batch commits or
    // the runner is caught up: a batch that takes 30 s to fail again showed `catching_up`
    // with no error for those 30 s, and `failing` only during the back-off.
    this.state = this.lastError === null ? 'catching_up' : 'failing';

    const subscription = this.store.subscribeToAll({
      after: checkpoint.commit === 0n && checkpoint.prepare === 0n ? 'start' : checkpoint,
      filter: this.subscriber.filter,
      maxBatchSize: this.options.batchSize ?? 500,
    });
    this.subscription = subscription;
    // What the checkpoint row says. A batch with events moves it in its transaction; a
    // batch with none for this projection (the filter skipped them) only moves
    // `checkpoint` in memory, and the row follows at most every CHECKPOINT_DEFER_MS,
    // when the subscription has been quiet that long, or when the runner stops: a
    // checkpoint that trails over skipped events costs nothing but their re-reading.
    let stored = checkpoint;
    let storedAt = Date.now();
    const deferMs = this.options.checkpointDeferMs ?? CHECKPOINT_DEFER_MS;
    const writeSkipped = async () => {
      if (comparePositions(checkpoint, stored) <= 0) return;
      await advanceCheckpoint(this.pool, name, stored, checkpoint, 0);
      stored = checkpoint;
      storedAt = Date.now();
    };
    const iterator = subscription[Symbol.asyncIterator]();
    try {
      for (;;) {
        const next = iterator.next();
        let result = comparePositions(checkpoint, stored) > 0 ? await Promise.race([next, quiet(deferMs)]) : await next;
        if (result === QUIET) {
          if (!this.lockClient) throw new Error('lost the projection lock (database connection dropped)');
          await writeSkipped();
          result = await next;
        }
        if (result.done || !this.running) break;
        const batch = result.value;
        if (!this.lockClient) throw new Error('lost the projection lock (database connection dropped)');
        if (comparePositions(batch.checkpoint, checkpoint) > 0) {
          if (batch.events.length > 0) {
            // Reads, side work and a reactor's commands first, outside the transaction: an
            // open write transaction hides every later event from every subscriber of the cluster.
            const prepared = await prepareBatch(this.subscriber, batch.events);
            if (!this.running) break;
            await commitBatch(this.pool, this.subscriber, { from: stored, to: batch.checkpoint, events: batch.events }, prepared);
            stored = batch.checkpoint;
            storedAt = Date.now();
            checkpoint = batch.checkpoint;
            this.lastError = null;
          } else {
            checkpoint = batch.checkpoint;
            if (Date.now() - storedAt >= deferMs) await writeSkipped();
          }
          this.checkpoint = checkpoint;
        }
        if (batch.caughtUp && rebuildPending) {
          await this.pool.query('UPDATE projection_checkpoints SET rebuild_started_at = NULL WHERE projection = $1', [name]);
          rebuildPending = false;
          this.log.info('finished the rebuild an interrupted projections:rebuild had begun');
        }
        if (batch.caughtUp) this.lastError = null;
        this.state = batch.caughtUp ? 'live' : this.lastError === null ? 'catching_up' : 'failing';
        this.options.onBatch?.({ projection: name, applied: batch.events.length, checkpoint, caughtUp: batch.caughtUp });
      }
      // Stopping: the row keeps what was looked at (a last CAS; a moved checkpoint is left to its mover).
      if (this.lockClient) await writeSkipped().catch((error: unknown) => this.log.warn({ err: error }, 'last checkpoint not written'));
    } finally {
      this.subscription = null;
      await subscription.unsubscribe();
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      // eslint-disable-next-line @typescript-eslint/no-this-alias -- the subscription's callbacks report to the runner
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
