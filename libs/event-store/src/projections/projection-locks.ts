import { hostname } from 'node:os';
import type { Pool, PoolClient } from 'pg';
import type { Logger } from '#platform/logging';
import { PROJECTION_LEASE_RENEW_MS } from './projection-runner';

/**
 * The namespace of the two-key advisory locks that keep one active instance per
 * projection: the same as ProjectionRunner's (a test holds a projection with a runner
 * and sees a rebuild leave it alone, and the other way round).
 */
export const PROJECTION_LOCK_NAMESPACE = 48_213;

/**
 * The projection locks a batch job (a rebuild) holds on one session of its own, with
 * their lease rows renewed from that session as ProjectionRunner renews its own: a
 * standby projector sees live leases and waits, and takes each projection over from
 * its checkpoint once the job releases it (or dies: its session ends, its locks with it).
 * `lost` is set when the session failed or a lease was taken: the job must stop writing.
 */
export class HeldProjectionLocks {
  private heartbeat: NodeJS.Timeout | null = null;
  private lostReason: string | null = null;
  private readonly onError = (error: Error) => this.lose(`the session holding the projection locks failed: ${error.message}`);

  private constructor(
    private readonly client: PoolClient,
    readonly names: readonly string[],
    private readonly renewMs: number,
    private readonly log: Logger | undefined,
  ) {}

  /**
   * Takes, without waiting, the lock of each named projection that no one holds, and
   * writes their leases; the others are left to whoever holds them.
   */
  static async take(pool: Pool, names: readonly string[], options: { holder?: string; renewMs?: number; log?: Logger } = {}): Promise<HeldProjectionLocks> {
    const client = await pool.connect();
    try {
      const taken = (
        await client.query<{ projection: string }>(
          `SELECT projection FROM unnest($1::text[]) WITH ORDINALITY AS p(projection, ord)
           WHERE pg_try_advisory_lock(${PROJECTION_LOCK_NAMESPACE}, hashtext(projection)) ORDER BY ord`,
          [names],
        )
      ).rows.map((r) => r.projection);
      await client.query(
        `INSERT INTO projection_leases (projection, holder, backend_pid, acquired_at, renewed_at)
         SELECT projection, $2, pg_backend_pid(), clock_timestamp(), clock_timestamp() FROM unnest($1::text[]) AS p(projection)
         ON CONFLICT (projection) DO UPDATE SET holder = EXCLUDED.holder, backend_pid = EXCLUDED.backend_pid,
           acquired_at = EXCLUDED.acquired_at, renewed_at = EXCLUDED.renewed_at`,
        [taken, options.holder ?? `${hostname()}:${process.pid}`],
      );
      const locks = new HeldProjectionLocks(client, taken, options.renewMs ?? PROJECTION_LEASE_RENEW_MS, options.log);
      client.on('error', locks.onError);
      locks.scheduleHeartbeat();
      return locks;
    } catch (error) {
      // Discarding the connection frees any lock taken on it.
      client.release(error as Error);
      throw error;
    }
  }

  /** Why the locks are no longer held, or null while they are. */
  get lost(): string | null {
    return this.lostReason;
  }

  private scheduleHeartbeat(): void {
    this.heartbeat = setTimeout(async () => {
      this.heartbeat = null;
      if (this.lostReason !== null) return;
      try {
        const renewed = await this.client.query(
          'UPDATE projection_leases SET renewed_at = clock_timestamp() WHERE projection = ANY($1::text[]) AND backend_pid = pg_backend_pid()',
          [this.names],
        );
        if (renewed.rowCount !== this.names.length) throw new Error('a projection lease was taken over by another instance');
      } catch (error) {
        this.lose(`the projection leases could not be renewed: ${(error as Error).message}`);
        return;
      }
      this.scheduleHeartbeat();
    }, this.renewMs);
    this.heartbeat.unref();
  }

  private lose(reason: string): void {
    if (this.lostReason !== null) return;
    this.lostReason = reason;
    this.log?.warn({ projections: this.names }, reason);
  }

  /** Deletes the leases and frees the locks (the session goes back to the pool, or is discarded if it failed). */
  async release(): Promise<void> {
    if (this.heartbeat) clearTimeout(this.heartbeat);
    this.heartbeat = null;
    this.client.off('error', this.onError);
    if (this.lostReason !== null) {
      this.client.release(new Error(this.lostReason));
      return;
    }
    this.lostReason = 'released';
    try {
      await this.client.query('DELETE FROM projection_leases WHERE projection = ANY($1::text[]) AND backend_pid = pg_backend_pid()', [this.names]);
      await this.client.query(`SELECT pg_advisory_unlock(${PROJECTION_LOCK_NAMESPACE}, hashtext(p)) FROM unnest($1::text[]) AS p`, [this.names]);
      this.client.release();
    } catch (error) {
      this.client.release(error as Error);
    }
  }
}
