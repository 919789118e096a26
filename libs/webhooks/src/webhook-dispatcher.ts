import type { Pool } from 'pg';
import type { Clock } from '../../clock/src';
import type { Registry } from '../../registry/src';
import { AttemptResult, postWebhook } from './http-delivery';
import { isAcknowledged, retryDelaySeconds, WEBHOOK_REPLY_TIMEOUT_MS, webhookSignature } from './webhook-rules';

/** How long a claimed delivery is out of other dispatchers' reach (real time): one attempt (at most 10 s) and a margin. */
const LEASE_SECONDS = 15;

interface ClaimedDelivery {
  id: string;
  event_type: string;
  project_id: string;
  url: string;
  body: string;
  is_test: boolean;
  attempts_made: number;
  schedule_base: number;
}

export interface DispatcherOptions {
  /** Deliveries sent at once by one dispatcher. */
  readonly concurrency: number;
  /** WEBHOOK_ALLOW_PRIVATE_NETWORKS: live deliveries may go to loopback and private addresses. */
  readonly allowPrivateNetworks: boolean;
  readonly timeoutMs?: number;
  /** The poster (tests of the dispatcher itself may pass their own). */
  readonly post?: typeof postWebhook;
  /** Called with each recorded attempt's outcome (metrics): delivered, a retry scheduled, or failed for good. */
  readonly onAttempt?: (outcome: WebhookAttemptOutcome) => void;
}

export type WebhookAttemptOutcome = 'delivered' | 'retry' | 'failed';

/**
 * Sends due webhook deliveries. Each tick claims up to `concurrency` due rows (FOR
 * UPDATE SKIP LOCKED, then a lease), posts them at once, and records each attempt:
 * 2xx within 10 s → delivered; otherwise the next attempt is scheduled on the clock
 * (1 min, 5 min, 30 min, 2 h, 12 h, 24 h) and after the last one it has failed. A
 * dispatcher that dies mid-attempt leaves the lease to run out: the attempt is made
 * again (at least once; the receiver deduplicates by the event id).
 */
export class WebhookDispatcher {
  constructor(
    private readonly pool: Pool,
    private readonly registry: Registry,
    private readonly clock: Clock,
    private readonly options: DispatcherOptions,
  ) {}

  private readonly inFlight = new Set<Promise<void>>();

  /**
   * Claims as many due deliveries as there are free slots and starts them; does not
   * wait for them (a slow receiver holds one slot, not the dispatcher). Answers the
   * number started.
   */
  async tick(): Promise<number> {
    const free = this.options.concurrency - this.inFlight.size;
    if (free <= 0) return 0;
    const now = this.clock.now();
    const claimed = await this.pool.query<ClaimedDelivery>(
      `WITH due AS (
         SELECT id FROM webhook_deliveries
         WHERE status = 'pending' AND next_attempt_at <= $1 AND (leased_until IS NULL OR leased_until < clock_timestamp())
         ORDER BY next_attempt_at LIMIT $2 FOR UPDATE SKIP LOCKED)
       UPDATE webhook_deliveries d SET leased_until = clock_timestamp() + make_interval(secs => $3)
       FROM due WHERE d.id = due.id
       RETURNING d.id, d.event_type, d.project_id, d.url, d.body, d.is_test, d.attempts_made, d.schedule_base`,
      [now, free, LEASE_SECONDS],
    );
    for (const d of claimed.rows) {
      const running: Promise<void> = this.attempt(d)
        .catch((error: Error) => this.onError?.(error))
        .finally(() => this.inFlight.delete(running));
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
        // Sandbox events may go anywhere (a merchant's laptop); live ones only to public addresses unless allowed.
        allowPrivateNetworks: d.is_test || this.options.allowPrivateNetworks,
        timeoutMs: this.options.timeoutMs ?? WEBHOOK_REPLY_TIMEOUT_MS,
      }).catch((error: Error) => ({ statusCode: null, body: null, durationMs: 0, error: error.message }));
    }
    const attempt = d.attempts_made + 1;
    const delivered = isAcknowledged(result.statusCode);
    const delay = delivered ? null : retryDelaySeconds(attempt - d.schedule_base);
    const status = delivered ? 'delivered' : delay === null ? 'failed' : 'pending';
    const next = delay === null ? null : new Date(this.clock.now().getTime() + delay * 1000);
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query(
        `INSERT INTO webhook_attempts (delivery_id, attempt, at, status_code, body, duration_ms, error)
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`,
        [d.id, attempt, at, result.statusCode, result.body === null ? null : stripUnstorable(result.body), result.durationMs, result.error],
      );
      await client.query(
        `UPDATE webhook_deliveries SET attempts_made = $2, status = $3, next_attempt_at = $4, leased_until = NULL WHERE id = $1`,
        [d.id, attempt, status, next],
      );
      await client.query('COMMIT');
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
    this.options.onAttempt?.(status === 'pending' ? 'retry' : status);
  }
}

/** PostgreSQL text holds no NUL and no lone surrogate: a receiver's reply may have either. */
const stripUnstorable = (text: string): string => text.replace(/\u0000/g, '').replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');

