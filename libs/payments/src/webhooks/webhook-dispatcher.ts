import type { Pool } from 'pg';
import { inTransaction } from '#platform/database';
import type { Clock } from '#platform/clock';
import type { Registry } from '../merchants';
import { AttemptResult, postWebhook } from './http-delivery';
import { attemptOutcome, WEBHOOK_REPLY_TIMEOUT_MS, webhookSignature } from './webhook-rules';

/** How long a claimed delivery is out of other dispatchers' reach (real time): one attempt (at most 10 s) and a margin. */
export const WEBHOOK_LEASE_SECONDS = 15;

interface ClaimedDelivery {
  id: string;
  event_type: string;
  project_id: string;
  url: string;
  body: string;
  is_test: boolean;
  /** This claim's lease: the attempt's outcome moves the delivery only while the row still carries it. */
  lease_token: string;
}

export interface DispatcherOptions {
  /** Deliveries sent at once by one dispatcher. */
  readonly concurrency: number;
  /**
   * Deliveries to one URL sent at once by one dispatcher (default a quarter of
   * `concurrency`): a receiver that hangs holds only these slots, and the others stay
   * free for everybody else's webhooks.
   */
  readonly perUrlConcurrency?: number;
  /** WEBHOOK_ALLOW_PRIVATE_NETWORKS: deliveries of both modes may go to loopback, private and reserved addresses. */
  readonly allowPrivateNetworks: boolean;
  readonly timeoutMs?: number;
  /** How long a claim keeps other dispatchers away, in real seconds (default WEBHOOK_LEASE_SECONDS; tests shorten it). */
  readonly leaseSeconds?: number;
  /** The poster (tests of the dispatcher itself may pass their own). */
  readonly post?: typeof postWebhook;
  /**
   * Called with each recorded attempt's outcome (metrics): delivered, a retry scheduled,
   * failed for good, or superseded (its lease had been replaced before it came back).
   */
  readonly onAttempt?: (outcome: WebhookAttemptOutcome) => void;
}

export type WebhookAttemptOutcome = 'delivered' | 'retry' | 'failed' | 'superseded';

/**
 * Sends due webhook deliveries. Each tick claims up to `concurrency` due rows (FOR
 * UPDATE SKIP LOCKED, then a lease), posts them at once, and records each attempt:
 * 2xx within 10 s → delivered; otherwise the next attempt is scheduled on the clock
 * (1 min, 5 min, 30 min, 2 h, 12 h, 24 h) and after the last one it has failed. A
 * dispatcher that dies mid-attempt leaves the lease to run out: the attempt is made
 * again (at least once; the receiver deduplicates by the event id).
 *
 * Every claim takes a fresh lease token, and an attempt's outcome moves the delivery
 * only while the row still carries the token of its claim. An attempt that comes back
 * after its lease was taken over (it ran out and another dispatcher claimed the row)
 * or after the operator's resend is recorded in the history, marked superseded, and
 * changes nothing else: it cannot turn a delivered row back to pending. Attempts are
 * numbered in the order they are recorded, under the delivery row's lock.
 */
export class WebhookDispatcher {
  constructor(
    private readonly pool: Pool,
    private readonly registry: Registry,
    private readonly clock: Clock,
    private readonly options: DispatcherOptions,
  ) {}

  private readonly inFlight = new Set<Promise<void>>();
  /** Attempts in flight per URL. */
  private readonly inFlightByUrl = new Map<string, number>();

  /**
   * Claims as many due deliveries as there are free slots and starts them; does not
   * wait for them (a slow receiver holds one slot, not the dispatcher). No URL gets
   * more than `perUrlConcurrency` slots: 100 deliveries to a receiver that never
   * answers would otherwise take every slot for 10 s at a time, and every other
   * project's webhooks would wait behind them. Answers the number started.
   */
  async tick(): Promise<number> {
    const free = this.options.concurrency - this.inFlight.size;
    if (free <= 0) return 0;
    const perUrl = Math.max(1, this.options.perUrlConcurrency ?? Math.floor(this.options.concurrency / 4));
    const busy = [...this.inFlightByUrl];
    const now = this.clock.now();
    // The earliest due rows, the URLs already at their limit left out (so a stuck URL's
    // backlog does not hide the others'), then at most what each URL has left.
    const claimed = await this.pool.query<ClaimedDelivery>(
      `WITH candidates AS (
         SELECT id, url, next_attempt_at, row_number() OVER (PARTITION BY url ORDER BY next_attempt_at, seq) AS nth
         FROM (SELECT id, url, next_attempt_at, seq FROM webhook_deliveries
               WHERE status = 'pending' AND next_attempt_at <= $1 AND (leased_until IS NULL OR leased_until < clock_timestamp())
                 AND NOT (url = ANY($4::text[]))
               ORDER BY next_attempt_at LIMIT $6) AS earliest),
       due AS (
         SELECT d.id FROM webhook_deliveries d
         JOIN candidates c ON c.id = d.id
         LEFT JOIN unnest($7::text[], $8::int[]) AS busy(url, n) ON busy.url = c.url
         WHERE c.nth + coalesce(busy.n, 0) <= $5
           AND d.status = 'pending' AND (d.leased_until IS NULL OR d.leased_until < clock_timestamp())
         ORDER BY c.next_attempt_at LIMIT $2 FOR UPDATE OF d SKIP LOCKED)
       UPDATE webhook_deliveries d SET leased_until = clock_timestamp() + make_interval(secs => $3), lease_token = gen_random_uuid()
       FROM due WHERE d.id = due.id
       RETURNING d.id, d.event_type, d.project_id, d.url, d.body, d.is_test, d.lease_token`,
      [
        now,
        free,
        this.options.leaseSeconds ?? WEBHOOK_LEASE_SECONDS,
        busy.filter(([, n]) => n >= perUrl).map(([url]) => url),
        perUrl,
        free * perUrl,
        busy.map(([url]) => url),
        busy.map(([, n]) => n),
      ],
    );
    for (const d of claimed.rows) {
      this.inFlightByUrl.set(d.url, (this.inFlightByUrl.get(d.url) ?? 0) + 1);
      const running: Promise<void> = this.attempt(d)
        .catch((error: Error) => this.onError?.(error))
        .finally(() => {
          this.inFlight.delete(running);
          const left = (this.inFlightByUrl.get(d.url) ?? 1) - 1;
          if (left > 0) this.inFlightByUrl.set(d.url, left);
          else this.inFlightByUrl.delete(d.url);
        });
      this.inFlight.add(running);
    }
    return claimed.rows.length;
  }

  /** Called with an attempt that could not be recorded (its lease runs out and it is made again). */
  onError?: (error: Error) => void;

  /** Waits for the attempts in flight (on shutdown). */
  async drain(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
  }

  private async attempt(d: ClaimedDelivery): Promise<void> {
    const project = await this.registry.project(d.project_id);
    const at = this.clock.now();
    let result: AttemptResult;
    if (!project) result = { statusCode: null, body: null, durationMs: 0, error: 'the project no longer exists' };
    else {
      const headers = {
        'x-service-signature': webhookSignature(d.body, project.webhookSecret),
        'x-service-timestamp': String(Math.floor(at.getTime() / 1000)),
        'x-service-event': d.event_type,
        'x-service-delivery-id': d.id,
        'x-service-test': String(d.is_test),
      };
      const post = this.options.post ?? postWebhook;
      result = await post(d.url, d.body, headers, {
        // One guard for both modes: a sandbox project's URL must not reach into the operator's network either.
        allowPrivateNetworks: this.options.allowPrivateNetworks,
        timeoutMs: this.options.timeoutMs ?? WEBHOOK_REPLY_TIMEOUT_MS,
      }).catch((error: Error) => ({ statusCode: null, body: null, durationMs: 0, error: error.message }));
    }
    const outcome = await this.record(d, at, result);
    this.options.onAttempt?.(outcome);
  }

  /**
   * Records one attempt and, while the delivery still carries this claim's lease
   * token, its outcome: delivered, the next attempt scheduled, or failed for good. The
   * delivery row is locked first, so attempts recorded at once are numbered one after
   * the other and the lease is judged on the row as it is now.
   */
  private async record(d: ClaimedDelivery, at: Date, result: AttemptResult): Promise<WebhookAttemptOutcome> {
    return inTransaction(this.pool, async (client) => {
      const locked = await client.query<{ ours: boolean; attempts_made: number; schedule_base: number }>(
        'SELECT lease_token IS NOT DISTINCT FROM $2::uuid AS ours, attempts_made, schedule_base FROM webhook_deliveries WHERE id = $1 FOR UPDATE',
        [d.id, d.lease_token],
      );
      const row = locked.rows[0];
      const ours = row?.ours === true;
      let outcome: WebhookAttemptOutcome = 'superseded';
      if (row && ours) {
        const attempt = row.attempts_made + 1;
        const { status, nextAttemptAt: next } = attemptOutcome(result.statusCode, attempt, row.schedule_base, this.clock.now());
        await client.query(
          `UPDATE webhook_deliveries SET attempts_made = $2, status = $3, next_attempt_at = $4, leased_until = NULL, lease_token = NULL
           WHERE id = $1`,
          [d.id, attempt, status, next],
        );
        outcome = status === 'pending' ? 'retry' : status;
      }
      await client.query(
        `INSERT INTO webhook_attempts (delivery_id, attempt, at, status_code, body, duration_ms, error, superseded)
         SELECT $1, coalesce(max(attempt), 0) + 1, $2, $3, $4, $5, $6, $7 FROM webhook_attempts WHERE delivery_id = $1`,
        [d.id, at, result.statusCode, result.body === null ? null : stripUnstorable(result.body), result.durationMs, result.error, !ours],
      );
      return outcome;
    });
  }
}

/**
 * The operator's resend: the delivery is due again now with a fresh retry schedule
 * (same id and body). Its lease token is dropped, so an attempt started before the
 * resend cannot overwrite what the resent attempts decide. Null when there is no such delivery.
 */
export async function resendDelivery(pool: Pool, id: string, now: Date): Promise<{ id: string; nextAttemptAt: Date } | null> {
  const updated = await pool.query<{ id: string; next_attempt_at: Date }>(
    `UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = $2, schedule_base = attempts_made, leased_until = NULL, lease_token = NULL
     WHERE id = $1 RETURNING id, next_attempt_at`,
    [id, now],
  );
  const row = updated.rows[0];
  return row ? { id: row.id, nextAttemptAt: row.next_attempt_at } : null;
}

/** PostgreSQL text holds no NUL and no lone surrogate: a receiver's reply may have either. */
const stripUnstorable = (text: string): string =>
  // eslint-disable-next-line no-control-regex -- NUL cannot be stored in a PostgreSQL text column
  text.replace(/\u0000/g, '').replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');
