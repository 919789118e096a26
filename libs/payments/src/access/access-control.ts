import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Pool } from 'pg';
import { preparedStatement } from '#platform/database';

export const TIMESTAMP_WINDOW_SECONDS = 300;
/**
 * How long a used signature is remembered: a request may be stamped up to the window
 * ahead of the clock, so the window accepts it until about twice the window after its
 * first use; a minute more covers the whole-second rounding and the sweeper's pace.
 */
export const SIGNATURE_REUSE_WINDOW_SECONDS = 2 * TIMESTAMP_WINDOW_SECONDS + 60;

/** hex HMAC-SHA256 of `<timestamp>.<raw body>` keyed with the project's webhook secret. */
export const requestSignature = (secret: string, timestamp: string, rawBody: string | Buffer): string =>
  createHmac('sha256', secret).update(`${timestamp}.`).update(rawBody).digest('hex');

/** Constant-time comparison of two hex signatures (different lengths are simply unequal). */
export function signaturesMatch(expectedHex: string, givenHex: string): boolean {
  if (!/^[0-9a-f]{64}$/i.test(givenHex)) return false;
  const a = Buffer.from(expectedHex, 'hex');
  const b = Buffer.from(givenHex.toLowerCase(), 'hex');
  return a.length === b.length && timingSafeEqual(a, b);
}

export type Refusal = { readonly code: 'rate_limited'; readonly retryAfterSeconds: number };

/**
 * Counts one request of a key in its one-second window and returns the window's
 * `hits`. `rows` gives (key_id, window_second, 1): a VALUES list, or a SELECT when the
 * count shares a round trip with the key's lookup (Registry.identifyBySecretKeyCountingRequest).
 */
export const countRequestInWindow = (rows: string): string =>
  `INSERT INTO rate_limit_windows (key_id, window_second, hits) ${rows}
   ON CONFLICT (key_id, window_second) DO UPDATE SET hits = rate_limit_windows.hits + 1 RETURNING hits`;

/**
 * Takes a key's poll mark of a resource unless it was taken less than the interval ago:
 * one row when taken, none when refused. `rows` gives (key_id, resource, last_at): a
 * VALUES list, or a SELECT when the mark shares the key's lookup; `interval` the
 * parameter holding the interval in seconds.
 */
export const takePollMark = (rows: string, interval: string): string =>
  `INSERT INTO poll_marks (key_id, resource, last_at) ${rows}
   ON CONFLICT (key_id, resource) DO UPDATE SET last_at = EXCLUDED.last_at
   WHERE poll_marks.last_at <= EXCLUDED.last_at - make_interval(secs => ${interval})`;

/** A poll mark to take in the same statement as the key's lookup and count. */
export interface PollMarkRequest {
  readonly resource: string;
  readonly at: Date;
  readonly intervalSeconds: number;
  /** Taken only when the request is within the per-key rate (a refused request marks nothing). */
  readonly countedUpTo: number;
}

/** What taking a poll mark found: taken, or the mark's last moment (null when not seen). */
export interface PollMarkResult {
  readonly taken: boolean;
  readonly lastAt: Date | null;
}

/** The one-second window a request at `now` counts in. */
export const rateWindowOf = (now: Date): number => Math.floor(now.getTime() / 1000);

/**
 * The database-backed parts of request admission, shared by every API process:
 * one use per signature, requests per second per key, and the poll interval of one
 * resource per key. Every decision reads the gateway clock passed in.
 */
export class AccessControl {
  private lastSweep = 0;

  constructor(
    private readonly pool: Pool,
    /** As configured (RATE_LIMIT_PER_SECOND, POLL_INTERVAL_SECONDS): the 429s' messages say them. */
    readonly limits: { readonly perSecond: number; readonly pollIntervalSeconds: number },
  ) {}

  /** Records a signature's first use; false when it was already used (a replay). */
  async firstUseOfSignature(signature: string, now: Date): Promise<boolean> {
    await this.sweep(now);
    const result = await this.pool.query(
      preparedStatement('INSERT INTO used_signatures (signature, used_at) VALUES ($1, $2) ON CONFLICT (signature) DO NOTHING', [signature.toLowerCase(), now]),
    );
    return result.rowCount === 1;
  }

  /**
   * Undoes the first use recorded at `now` (firstUseOfSignature) of a request then
   * refused 429, so that it can be sent again as it was after Retry-After.
   */
  async releaseSignature(signature: string, now: Date): Promise<void> {
    await this.pool.query(preparedStatement('DELETE FROM used_signatures WHERE signature = $1 AND used_at = $2', [signature.toLowerCase(), now]));
  }

  /** Counts the request in its one-second window; refuses beyond the per-key limit. */
  async admit(keyId: string, now: Date): Promise<Refusal | null> {
    const result = await this.pool.query<{ hits: number }>(
      preparedStatement(countRequestInWindow('VALUES ($1::uuid, $2::bigint, 1)'), [keyId, rateWindowOf(now)]),
    );
    return this.admitCounted(result.rows[0]!.hits, now);
  }

  /** The same rule for a request already counted (`countRequestInWindow`) with the key's lookup. */
  async admitCounted(hits: number, now: Date): Promise<Refusal | null> {
    await this.sweep(now);
    if (hits <= this.limits.perSecond) return null;
    return { code: 'rate_limited', retryAfterSeconds: 1 };
  }

  /** One read of one invoice or payout per key per poll interval. */
  async admitPoll(keyId: string, resource: string, now: Date): Promise<Refusal | null> {
    const mark = this.pollMarkOf(resource, now);
    if (!mark) return null;
    const result = await this.pool.query(
      preparedStatement(takePollMark('VALUES ($1::uuid, $2, $3::timestamptz)', '$4'), [keyId, resource, now, mark.intervalSeconds]),
    );
    if (result.rowCount === 1) return null;
    const last = await this.pool.query<{ last_at: Date }>('SELECT last_at FROM poll_marks WHERE key_id = $1 AND resource = $2', [keyId, resource]);
    return this.pollVerdict({ taken: false, lastAt: last.rows[0]?.last_at ?? null }, now);
  }

  /**
   * What a key's lookup needs to take the poll mark of `resource` in its own statement
   * (Registry.identifyBySecretKeyCountingRequest), or null when polls are not limited.
   */
  pollMarkOf(resource: string, now: Date): PollMarkRequest | null {
    const interval = this.limits.pollIntervalSeconds;
    return interval === 0 ? null : { resource, at: now, intervalSeconds: interval, countedUpTo: this.limits.perSecond };
  }

  /** The poll rule's answer: taken, or refused until one interval after the mark's last moment. */
  pollVerdict(mark: PollMarkResult, now: Date): Refusal | null {
    if (mark.taken) return null;
    const interval = this.limits.pollIntervalSeconds;
    // A concurrent reader may have stamped a moment a little after our own `now` (or its
    // mark was not yet visible to the statement that met it): the wait is never longer
    // than one interval.
    const waitMs = (mark.lastAt?.getTime() ?? now.getTime()) + interval * 1000 - now.getTime();
    return { code: 'rate_limited', retryAfterSeconds: Math.min(interval, Math.max(1, Math.ceil(waitMs / 1000))) };
  }

  /** Forgets what no rule can need any more, at most once a minute per process. */
  private async sweep(now: Date): Promise<void> {
    if (now.getTime() - this.lastSweep < 60_000) return;
    this.lastSweep = now.getTime();
    await sweepAccessMarks(this.pool, now);
  }
}

/**
 * Retention of the access marks: a used signature and a poll mark are kept for 11
 * minutes (a signature longer than any moment the timestamp window accepts it), a
 * rate window for a minute; older ones no rule can need. Run by the API on its request path (once a minute per process) and by the
 * projector's retention worker (so they go also when no request comes). Answers the
 * rows deleted.
 */
export async function sweepAccessMarks(pool: Pool, now: Date): Promise<number> {
  const horizon = new Date(now.getTime() - SIGNATURE_REUSE_WINDOW_SECONDS * 1000);
  const signatures = await pool.query('DELETE FROM used_signatures WHERE used_at < $1', [horizon]);
  const windows = await pool.query('DELETE FROM rate_limit_windows WHERE window_second < $1', [Math.floor(now.getTime() / 1000) - 60]);
  const marks = await pool.query('DELETE FROM poll_marks WHERE last_at < $1', [horizon]);
  return (signatures.rowCount ?? 0) + (windows.rowCount ?? 0) + (marks.rowCount ?? 0);
}
