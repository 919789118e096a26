import type { Pool, PoolClient } from 'pg';
import type { Migration } from '../database';
import type { ManualClock } from './clock';

export const manualClockMigration: Migration = {
  id: 'platform:0001_manual_clock',
  sql: `
CREATE TABLE manual_clock (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  offset_ms bigint NOT NULL DEFAULT 0 CHECK (offset_ms >= 0)
);
INSERT INTO manual_clock (singleton, offset_ms) VALUES (true, 0);
`,
};

/**
 * The processes that follow the manual clock: each writes the offset its clock runs on
 * (-1 until it first read one). A process is live while its follower session holds the
 * advisory lock (MANUAL_CLOCK_FOLLOWER_NAMESPACE, id): a dead one's lock goes with its session.
 */
export const manualClockFollowersMigration: Migration = {
  id: 'platform:0002_manual_clock_followers',
  sql: `
CREATE TABLE manual_clock_followers (
  id serial PRIMARY KEY,
  offset_ms bigint NOT NULL,
  confirmed_at timestamptz NOT NULL
);
`,
};

/** Namespace of the two-key advisory locks a follower session holds for its manual_clock_followers row. */
export const MANUAL_CLOCK_FOLLOWER_NAMESPACE = 7_310_452;

/** The notification channel of an advance (its payload: the new offset). */
const CHANNEL = 'manual_clock';

/** Whether the follower `f` is live: its session holds its row's lock. */
const LIVE = `EXISTS (SELECT 1 FROM pg_locks l
  WHERE l.locktype = 'advisory' AND l.granted AND l.classid = ${MANUAL_CLOCK_FOLLOWER_NAMESPACE}::oid AND l.objid = f.id::oid
    AND l.objsubid = 2 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))`;

/** An advance not made: a live process did not answer within the bound (frozen); nothing was written. */
export class ManualClockLagError extends Error {
  constructor(readonly lagging: number) {
    super(`${lagging} process(es) are not following the clock: nothing moved`);
    this.name = 'ManualClockLagError';
  }
}

export interface ManualClockSyncOptions {
  /**
   * A pool (of one session) for the follower session: it listens for advances and
   * records the offset this process runs on, which an advance waits for. Without it
   * (a read-only opening) the offset is only read, every poll.
   */
  readonly followerPool?: Pool;
  readonly pollIntervalMs?: number;
  /** How long an advance waits for every live process to take the new offset (default 5 s). */
  readonly advanceWaitMs?: number;
}

/**
 * Keeps a ManualClock's offset equal to the one stored in the database, so every
 * process (API, projector, workers) agrees on the time. An advance writes the
 * database and notifies every follower, which applies the offset and then records
 * it; the advance answers once every live follower has recorded it (a dead process
 * holds no lock and is not waited for). Followers also poll.
 */
export class ManualClockSync {
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;
  private session: { client: PoolClient; id: number } | null = null;
  private running: Promise<void> | null = null;
  private queued: Promise<void> | null = null;
  private readonly followerPool: Pool | null;
  private readonly pollIntervalMs: number;
  private readonly advanceWaitMs: number;

  constructor(
    private readonly pool: Pool,
    private readonly clock: ManualClock,
    options: ManualClockSyncOptions = {},
  ) {
    this.followerPool = options.followerPool ?? null;
    this.pollIntervalMs = options.pollIntervalMs ?? 200;
    this.advanceWaitMs = options.advanceWaitMs ?? 5_000;
  }

  async start(): Promise<void> {
    await this.refresh();
    const tick = async () => {
      await this.refresh().catch(() => undefined);
      if (this.timer) this.timer = setTimeout(tick, this.pollIntervalMs);
    };
    this.timer = setTimeout(tick, this.pollIntervalMs);
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.dropSession();
  }

  /** Reads the stored offset into the clock, then records it as this process's (one at a time; calls meanwhile share the next). */
  refresh(): Promise<void> {
    if (this.queued) return this.queued;
    if (!this.running) {
      this.running = this.follow().finally(() => (this.running = null));
      return this.running;
    }
    this.queued = this.running
      .catch(() => undefined)
      .then(() => {
        this.queued = null;
        return this.refresh();
      });
    return this.queued;
  }

  private async follow(): Promise<void> {
    if (this.followerPool && !this.session && !this.stopped) await this.attach();
    const session = this.session;
    try {
      const result = await (session?.client ?? this.pool).query<{ offset_ms: string }>('SELECT offset_ms FROM manual_clock');
      if (result.rows[0]) this.clock.setOffset(Number(result.rows[0].offset_ms));
      // Recorded only once applied: a recorded offset is the one this process decides on.
      if (session) {
        await session.client.query('UPDATE manual_clock_followers SET offset_ms = $2, confirmed_at = clock_timestamp() WHERE id = $1', [
          session.id,
          this.clock.offsetMilliseconds,
        ]);
      }
    } catch (error) {
      // A broken session: a new one (a new row, a new lock) on the next call.
      if (session) this.dropSession(session.client);
      throw error;
    }
  }

  /** Takes a follower session: its lock first, then its row (a row without a lock is a dead process's). */
  private async attach(): Promise<void> {
    const client = await this.followerPool!.connect();
    // stop() meanwhile: the session is let go here, or it would keep the follower pool from ending.
    const going = () => {
      if (this.stopped) throw new Error('the manual clock sync is stopped');
    };
    try {
      going();
      const id = Number((await client.query<{ id: string }>(`SELECT nextval('manual_clock_followers_id_seq') AS id`)).rows[0]!.id);
      going();
      await client.query('SELECT pg_advisory_lock($1, $2)', [MANUAL_CLOCK_FOLLOWER_NAMESPACE, id]);
      going();
      await client.query('INSERT INTO manual_clock_followers (id, offset_ms, confirmed_at) VALUES ($1, -1, clock_timestamp())', [id]);
      going();
      await client.query(`LISTEN ${CHANNEL}`);
      going();
      client.on('notification', () => void this.refresh().catch(() => undefined));
      // Its connection lost (its lock gone with it): a new session at once.
      client.on('end', () => {
        this.dropSession(client);
        if (!this.stopped) void this.refresh().catch(() => undefined);
      });
      this.session = { client, id };
    } catch (error) {
      client.release(true);
      throw error;
    }
  }

  /** Lets the follower session go (only `client`'s, when given). */
  private dropSession(client?: PoolClient): void {
    const session = this.session;
    if (!session || (client !== undefined && session.client !== client)) return;
    this.session = null;
    // Destroyed, not returned: its lock and LISTEN go with the connection.
    session.client.release(true);
  }

  /**
   * Moves the shared clock forward by whole seconds (0 just reads it) and answers once
   * every live process decides on the new time, or with how many live processes have not
   * taken it within the bound (one that answered the question, then stopped: rare).
   * ManualClockLagError: a live process did not answer the question: nothing moved.
   */
  async advance(seconds: number): Promise<{ now: Date; lagging: number }> {
    // The rows of dead processes (their lock went with their session).
    await this.pool.query(`DELETE FROM manual_clock_followers f WHERE NOT ${LIVE}`);
    // Nothing is written while a live process does not answer (frozen) or runs behind the stored offset:
    // every follower is asked to confirm, and must, after the question.
    const asked = await this.pool.query<{ offset_ms: string; asked_at: string }>(
      `SELECT offset_ms, clock_timestamp()::text AS asked_at, pg_notify('${CHANNEL}', offset_ms::text) FROM manual_clock`,
    );
    const silent = await this.waitForFollowers(Number(asked.rows[0]!.offset_ms), asked.rows[0]!.asked_at);
    if (silent > 0) throw new ManualClockLagError(silent);
    const result = await this.pool.query<{ offset_ms: string }>(
      `WITH moved AS (UPDATE manual_clock SET offset_ms = offset_ms + $1 RETURNING offset_ms)
       SELECT offset_ms, pg_notify('${CHANNEL}', offset_ms::text) FROM moved`,
      [seconds * 1000],
    );
    const offset = Number(result.rows[0]!.offset_ms);
    this.clock.setOffset(offset);
    void this.refresh().catch(() => undefined);
    // Moved: an answer, not an error, whatever follows; `lagging` counts the live processes not on it yet.
    return { now: this.clock.now(), lagging: await this.waitForFollowers(offset, null) };
  }

  /**
   * Waits (at most advanceWaitMs) until every live follower runs on `offset` or later
   * (and, with `since`, confirmed after that instant); answers how many do not.
   */
  private async waitForFollowers(offset: number, since: string | null): Promise<number> {
    const deadline = Date.now() + this.advanceWaitMs;
    for (let pause = 5; ; pause = Math.min(pause * 2, 50)) {
      const r = await this.pool.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM manual_clock_followers f WHERE ${LIVE}
           AND (f.offset_ms < $1 OR ($2::timestamptz IS NOT NULL AND f.confirmed_at <= $2::timestamptz))`,
        [offset, since],
      );
      const n = r.rows[0]!.n;
      if (n === 0 || Date.now() >= deadline) return n;
      await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }
}
