import { hostname } from 'node:os';
import type { Pool, PoolClient } from 'pg';
import type { Logger } from '#platform/logging';

/** Namespace of the two-key advisory locks that keep one active instance per projection (ProjectionRunner's and a rebuild's). */
export const PROJECTION_LOCK_NAMESPACE = 48_213;

/** How often the active instance renews its lease (real time); also how soon it sees a hand-over asked of it. */
export const PROJECTION_LEASE_RENEW_MS = 2_000;
/** A lease not renewed for this long is stale: a standby ends the holder's session and takes over. */
export const PROJECTION_LEASE_STALE_MS = 10_000;
/** How often a standby instance tries to become the active one. */
export const PROJECTION_STANDBY_RETRY_MS = 2_000;
/** How long a rebuild waits for the active instances to hand their projections over before it gives up (default). */
export const PROJECTION_HANDOVER_WAIT_MS = 15_000;

/** SQL: whether a live session asked for the hand-over of the projection named by `$1`. */
export const HANDOVER_ASKED = `EXISTS (SELECT 1 FROM projection_handovers h JOIN pg_stat_activity a ON a.pid = h.requester_pid
  WHERE h.projection = $1 AND h.requester_pid <> pg_backend_pid())`;

/** Who runs a projection now: the holder of its lease and when it took it, or null when no lease is fresh. */
export async function activeLease(db: Pick<Pool | PoolClient, 'query'>, projection: string): Promise<{ holder: string; acquiredAt: number } | null> {
  const result = await db.query<{ holder: string; acquired_at: Date }>(
    `SELECT holder, acquired_at FROM projection_leases
     WHERE projection = $1 AND renewed_at > clock_timestamp() - make_interval(secs => $2)`,
    [projection, PROJECTION_LEASE_STALE_MS / 1000],
  );
  const row = result.rows[0];
  return row === undefined ? null : { holder: row.holder, acquiredAt: row.acquired_at.getTime() };
}

/** How a rebuild names itself as a projection's holder (its lease), after its host and pid. */
const REBUILD_HOLDER = '(projections:rebuild)';

/** A projection whose active instance did not hand it over in time: nothing was changed. */
export class ProjectionHeldError extends Error {
  constructor(
    readonly projection: string,
    readonly holder: string | null,
    readonly waitedMs: number,
  ) {
    const waited = `${Math.round(waitedMs / 1000)} s`;
    super(
      // Another rebuild hands nothing over: it holds the projection until it ends.
      holder?.endsWith(REBUILD_HOLDER)
        ? `projection ${projection} is being rebuilt by ${holder}, another rebuild, which holds it until it ends (waited ${waited}): ` +
            'wait for that rebuild to end (or stop it: the projectors finish it), then run the command again if still needed; nothing was changed'
        : `projection ${projection} is held by ${holder ?? 'another session'}, which did not hand it over within ${waited}: ` +
            'stop that projector (or let its batch finish) and run the command again; nothing was changed',
    );
    this.name = 'ProjectionHeldError';
  }
}

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
   * Takes the lock of every named projection, asking the active instance of each
   * (a running projector) to hand it over: the runner sees the request at its next
   * lease renewal, finishes its batch, lets the lock go and stands by until this job
   * releases it. Waits at most `waitMs` for each; a projection not handed over by then
   * (a projector that does not answer the request) fails the whole take with
   * ProjectionHeldError naming its holder, and every lock taken is let go.
   */
  static async takeOver(
    pool: Pool,
    names: readonly string[],
    options: { holder?: string; renewMs?: number; waitMs?: number; log?: Logger } = {},
  ): Promise<HeldProjectionLocks> {
    const holder = options.holder ?? `${hostname()}:${process.pid} ${REBUILD_HOLDER}`;
    const waitMs = options.waitMs ?? PROJECTION_HANDOVER_WAIT_MS;
    const client = await pool.connect();
    try {
      await client.query(
        `INSERT INTO projection_handovers (projection, requester, requester_pid, requested_at)
         SELECT projection, $2, pg_backend_pid(), clock_timestamp() FROM unnest($1::text[]) AS p(projection)
         ON CONFLICT (projection) DO UPDATE SET requester = EXCLUDED.requester, requester_pid = EXCLUDED.requester_pid,
           requested_at = EXCLUDED.requested_at
         -- Another job's request stays while its session lives (this one, if it gives up, deletes only its own).
         WHERE NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = projection_handovers.requester_pid)`,
        [names, holder],
      );
      try {
        const started = Date.now();
        for (const name of names) {
          const left = Math.max(1, waitMs - (Date.now() - started));
          try {
            // A waiter in PostgreSQL's queue gets the lock the moment its holder lets it go.
            await client.query(`SET lock_timeout = ${Math.ceil(left)}`);
            await client.query(`SELECT pg_advisory_lock(${PROJECTION_LOCK_NAMESPACE}, hashtext($1))`, [name]);
          } catch (error) {
            if ((error as { code?: string }).code !== '55P03') throw error;
            await client.query('RESET lock_timeout');
            const lease = await client.query<{ holder: string }>('SELECT holder FROM projection_leases WHERE projection = $1', [name]);
            throw new ProjectionHeldError(name, lease.rows[0]?.holder ?? null, waitMs);
          }
        }
        await client.query('RESET lock_timeout');
      } catch (error) {
        await client.query('DELETE FROM projection_handovers WHERE requester_pid = pg_backend_pid()');
        throw error;
      }
      await client.query(
        `INSERT INTO projection_leases (projection, holder, backend_pid, acquired_at, renewed_at)
         SELECT projection, $2, pg_backend_pid(), clock_timestamp(), clock_timestamp() FROM unnest($1::text[]) AS p(projection)
         ON CONFLICT (projection) DO UPDATE SET holder = EXCLUDED.holder, backend_pid = EXCLUDED.backend_pid,
           acquired_at = EXCLUDED.acquired_at, renewed_at = EXCLUDED.renewed_at`,
        [names, holder],
      );
      const locks = new HeldProjectionLocks(client, names, options.renewMs ?? PROJECTION_LEASE_RENEW_MS, options.log);
      client.on('error', locks.onError);
      locks.scheduleHeartbeat();
      return locks;
    } catch (error) {
      // Discarding the connection frees every lock taken on it.
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
      // The requests stay while the job runs (the projectors stand by as `handed_over`, and none takes a projection back early).
      await this.client.query('DELETE FROM projection_handovers WHERE requester_pid = pg_backend_pid()');
      await this.client.query('DELETE FROM projection_leases WHERE projection = ANY($1::text[]) AND backend_pid = pg_backend_pid()', [this.names]);
      await this.client.query(`SELECT pg_advisory_unlock(${PROJECTION_LOCK_NAMESPACE}, hashtext(p)) FROM unnest($1::text[]) AS p`, [this.names]);
      this.client.release();
    } catch (error) {
      this.client.release(error as Error);
    }
  }
}
