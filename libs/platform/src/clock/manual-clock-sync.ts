import type { Pool, PoolClient } from 'pg';
import type { Migration } from '../database';
import { outcomeOf, writeStatement } from '../database/pool';
import type { ManualClock } from './clock';

/**
 * The manual clock's offset, and the processes that follow it: each writes the offset
 * its clock runs on (-1 until it first read one). A process is live while its follower
 * session holds the advisory lock (MANUAL_CLOCK_FOLLOWER_NAMESPACE, id), or while it
 * confirms through its main pool (its follower session lost): a dead one's lock goes
 * with its session, and its row stops being confirmed.
 */
export const manualClockMigration: Migration = {
  id: 'platform:0001_manual_clock',
  sql: `
CREATE TABLE manual_clock (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  offset_ms bigint NOT NULL DEFAULT 0 CHECK (offset_ms >= 0)
);
INSERT INTO manual_clock (singleton, offset_ms) VALUES (true, 0);
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

/**
 * Whether the follower `f` is live: its session holds its row's lock, or it confirmed within
 * the last `$<window>` ms (a process following by polling, its follower session lost: waited for, never dropped silently).
 */
const live = (window: string) => `(EXISTS (SELECT 1 FROM pg_locks l
  WHERE l.locktype = 'advisory' AND l.granted AND l.classid = ${MANUAL_CLOCK_FOLLOWER_NAMESPACE}::oid AND l.objid = f.id::oid
    AND l.objsubid = 2 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))
  OR f.confirmed_at > clock_timestamp() - ${window} * interval '1 millisecond')`;

/** How many poll intervals a row confirmed without its lock counts as a live process's. */
const POLLS_LIVE_WITHOUT_SESSION = 10;

/** How often a lost follower session is reported while it stays lost. */
const WARN_EVERY_MS = 60_000;

/** The manual clock goes no further (advances at once add up: far below year 9999, the last an ISO instant can name). */
export const LATEST_MANUAL_TIME = Date.parse('9000-01-01T00:00:00Z');

/** An advance not made: it would take the clock past LATEST_MANUAL_TIME (the move's statement refused it); nothing was written. */
export class ManualClockBoundError extends Error {
  constructor() {
    super('the manual clock goes no further than LATEST_MANUAL_TIME: nothing moved');
    this.name = 'ManualClockBoundError';
  }
}

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
  /** Where a follower session that cannot be had is reported (once a minute while it lasts). */
  readonly log?: { warn(fields: object, message: string): void; info(fields: object, message: string): void };
}

/**
 * Keeps a ManualClock's offset equal to the one stored in the database, so every
 * process (API, projector, workers) agrees on the time. An advance writes the
 * database and notifies every follower, which applies the offset and then records
 * it; the advance answers once every live follower has recorded it (a dead process
 * is not waited for). Followers also poll; one whose follower session is lost (and
 * cannot be had again) reads and records the offset through its main pool every poll.
 */
export class ManualClockSync {
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;
  /** This process's manual_clock_followers row, the same over its follower sessions. */
  private id: number | null = null;
  private session: PoolClient | null = null;
  /** A follower session being taken (attach), when one is. */
  private attaching: Promise<void> | null = null;
  private running: Promise<void> | null = null;
  private queued: Promise<void> | null = null;
  /** When a missing follower session was last reported (0: it is not missing). */
  private warnedAt = 0;
  private readonly followerPool: Pool | null;
  private readonly pollIntervalMs: number;
  private readonly advanceWaitMs: number;
  private readonly log: ManualClockSyncOptions['log'] | null;

  constructor(
    private readonly pool: Pool,
    private readonly clock: ManualClock,
    options: ManualClockSyncOptions = {},
  ) {
    this.followerPool = options.followerPool ?? null;
    this.pollIntervalMs = options.pollIntervalMs ?? 200;
    this.advanceWaitMs = options.advanceWaitMs ?? 5_000;
    this.log = options.log ?? null;
  }

  async start(): Promise<void> {
    if (this.followerPool) {
      this.id = Number((await this.pool.query<{ id: string }>(`SELECT nextval('manual_clock_followers_id_seq') AS id`)).rows[0]!.id);
    }
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
    const client = this.session;
    this.session = null;
    // Destroyed at once, not returned: its lock and LISTEN go with the connection, and nothing waits for the database.
    client?.release(true);
    // Its row goes with it (a stopped process is not waited for).
    if (this.id !== null) void this.pool.query('DELETE FROM manual_clock_followers WHERE id = $1', [this.id]).catch(() => undefined);
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
    if (this.followerPool && !this.session && !this.stopped && !this.attaching) {
      // Taken in the background, one attempt at a time (a connect may hang up to its timeout): meanwhile the offset is
      // read and recorded through the main pool, so the process follows, and is counted live, all along.
      this.attaching = this.attach()
        .then(
          () => this.reportSession(null),
          (error: unknown) => this.reportSession(error),
        )
        .finally(() => (this.attaching = null));
    }
    const session = this.session;
    try {
      const result = await (session ?? this.pool).query<{ offset_ms: string }>('SELECT offset_ms FROM manual_clock');
      if (result.rows[0]) this.clock.setOffset(Number(result.rows[0].offset_ms));
      // Recorded only once applied: a recorded offset is the one this process decides on.
      if (this.id !== null && !this.stopped) {
        await (session ?? this.pool).query(
          `INSERT INTO manual_clock_followers (id, offset_ms, confirmed_at) VALUES ($1, $2, clock_timestamp())
           ON CONFLICT (id) DO UPDATE SET offset_ms = EXCLUDED.offset_ms, confirmed_at = EXCLUDED.confirmed_at`,
          [this.id, this.clock.offsetMilliseconds],
        );
      }
    } catch (error) {
      // A broken session: a new one (the same row, its lock again) on the next call.
      if (session) this.dropSession(session);
      throw error;
    }
  }

  /** Takes a follower session: the lock of this process's row (a row without it is confirmed through the main pool, or a dead process's). */
  private async attach(): Promise<void> {
    const client = await this.followerPool!.connect();
    // stop() meanwhile: the session is let go here, or it would keep the follower pool from ending.
    const going = () => {
      if (this.stopped) throw new Error('the manual clock sync is stopped');
    };
    try {
      going();
      // Not waited for: a previous session of this process the server has not seen go yet still holds it.
      const locked = await client.query<{ locked: boolean }>('SELECT pg_try_advisory_lock($1, $2) AS locked', [MANUAL_CLOCK_FOLLOWER_NAMESPACE, this.id]);
      going();
      if (!locked.rows[0]!.locked) throw new Error(`the lock of follower ${this.id} is held by a previous session`);
      await client.query('INSERT INTO manual_clock_followers (id, offset_ms, confirmed_at) VALUES ($1, -1, clock_timestamp()) ON CONFLICT (id) DO NOTHING', [
        this.id,
      ]);
      going();
      await client.query(`LISTEN ${CHANNEL}`);
      going();
      client.on('notification', () => void this.refresh().catch(() => undefined));
      // Its connection lost (its lock gone with it): a new session at once.
      client.on('end', () => {
        this.dropSession(client);
        if (!this.stopped) void this.refresh().catch(() => undefined);
      });
      this.session = client;
    } catch (error) {
      client.release(true);
      throw error;
    }
  }

  /** Reports a follower session that could not be had (`error`), at most once a minute, and its return. */
  private reportSession(error: unknown): void {
    if (error === null) {
      if (this.warnedAt !== 0) this.log?.info({}, 'manual clock: the follower session is back');
      this.warnedAt = 0;
    } else if (!this.stopped && Date.now() - this.warnedAt >= WARN_EVERY_MS) {
      this.warnedAt = Date.now();
      const message = `manual clock: no follower session, following by polling every ${this.pollIntervalMs} ms`;
      this.log?.warn({ err: error }, message);
    }
  }

  /** Lets the follower session go (only when it is `client`). */
  private dropSession(client: PoolClient): void {
    if (this.session !== client) return;
    this.session = null;
    // Destroyed, not returned: its lock and LISTEN go with the connection.
    client.release(true);
  }

  /**
   * Moves the shared clock forward by whole seconds (0 just reads it) and answers once
   * every live process decides on the new time, or with how many live processes have not
   * confirmed it within the bound (one that answered the question, then stopped, or the
   * database failed meanwhile: rare).
   * ManualClockLagError: a live process did not answer the question: nothing moved.
   * ManualClockBoundError: the move would pass LATEST_MANUAL_TIME: nothing moved (its
   * statement checks the stored offset, so advances at once never add up past it).
   * WriteOutcomeUnknownError: the move's answer was lost and the offset read after it
   * could not tell (a lost answer is otherwise looked up: moved, or the lost connection).
   */
  async advance(seconds: number): Promise<{ now: Date; lagging: number }> {
    const window = this.pollIntervalMs * POLLS_LIVE_WITHOUT_SESSION;
    // The rows of dead processes (their lock gone with their session, no longer confirmed).
    await this.pool.query(`DELETE FROM manual_clock_followers f WHERE NOT ${live('$1')}`, [window]);
    // Nothing is written while a live process does not answer (frozen) or runs behind the stored offset:
    // every follower is asked to confirm, and must, after the question.
    const asked = await this.pool.query<{ offset_ms: string; asked_at: string }>(
      `SELECT offset_ms, clock_timestamp()::text AS asked_at, pg_notify('${CHANNEL}', offset_ms::text) FROM manual_clock`,
    );
    const question: FollowerCount = { unconfirmed: 0, live: 0 };
    await this.waitForFollowers(Number(asked.rows[0]!.offset_ms), asked.rows[0]!.asked_at, question);
    if (question.unconfirmed > 0) throw new ManualClockLagError(question.unconfirmed);
    const before = Number(asked.rows[0]!.offset_ms);
    // Its answer lost (WriteOutcomeUnknownError): the stored offset tells, the one asked about, or that plus the
    // move (moved); another (an advance of another process meanwhile) leaves it unknown.
    // The bound as an offset of this process's clock (its real time, which the offset is added to).
    const latestOffset = LATEST_MANUAL_TIME - (this.clock.now().getTime() - this.clock.offsetMilliseconds);
    const offset = await outcomeOf(
      async () => {
        const result = await writeStatement<{ offset_ms: string }>(
          this.pool,
          `WITH moved AS (UPDATE manual_clock SET offset_ms = offset_ms + $1::bigint WHERE $1::bigint = 0 OR offset_ms + $1::bigint <= $2::bigint RETURNING offset_ms)
           SELECT offset_ms, pg_notify('${CHANNEL}', offset_ms::text) FROM moved`,
          [seconds * 1000, latestOffset],
        );
        if (result.rowCount === 0) throw new ManualClockBoundError();
        return Number(result.rows[0]!.offset_ms);
      },
      async () => {
        const stored = Number((await this.pool.query<{ offset_ms: string }>('SELECT offset_ms FROM manual_clock')).rows[0]!.offset_ms);
        if (stored === before + seconds * 1000) return stored;
        if (stored === before) return null;
        throw new Error('the manual clock moved by another advance meanwhile');
      },
    );
    this.clock.setOffset(offset);
    void this.refresh().catch(() => undefined);
    // Moved: an answer, not an error, whatever follows; `lagging` counts the live processes not confirmed on it
    // (the database failing meanwhile: those of the last count, or every one asked).
    const moved: FollowerCount = { unconfirmed: question.live, live: question.live };
    await this.waitForFollowers(offset, null, moved).catch((error: unknown) => {
      this.log?.warn({ err: error, lagging: moved.unconfirmed }, 'manual clock: moved, but its followers could not be counted');
    });
    return { now: this.clock.now(), lagging: moved.unconfirmed };
  }

  /**
   * Waits (at most advanceWaitMs) until every live follower runs on `offset` or later
   * (and, with `since`, confirmed after that instant); `count` holds the last count.
   */
  private async waitForFollowers(offset: number, since: string | null, count: FollowerCount): Promise<void> {
    const deadline = Date.now() + this.advanceWaitMs;
    for (let pause = 5; ; pause = Math.min(pause * 2, 50)) {
      const r = await this.pool.query<{ unconfirmed: number; live: number }>(
        `SELECT count(*) FILTER (WHERE f.offset_ms < $1 OR ($2::timestamptz IS NOT NULL AND f.confirmed_at <= $2::timestamptz))::int AS unconfirmed,
                count(*)::int AS live
           FROM manual_clock_followers f WHERE ${live('$3')}`,
        [offset, since, this.pollIntervalMs * POLLS_LIVE_WITHOUT_SESSION],
      );
      Object.assign(count, r.rows[0]!);
      if (count.unconfirmed === 0 || Date.now() >= deadline) return;
      await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }
}

/** The live followers an advance counted last, and how many of them had not confirmed. */
interface FollowerCount {
  unconfirmed: number;
  live: number;
}
